//! Workflows: a definition checked (its graph, then each node's job among
//! the tenant's) before it is saved as the next version; a run's input
//! checked before the run starts.

use cronbox_api::{Workflow, WorkflowRunRequest, WorkflowSchedule, WorkflowSpec};

use super::ServiceError;
use crate::scheduler::Scheduler;
use crate::store::Store;
use crate::workflow::Graph;
use crate::workflow::definition::valid_name;

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ServiceError {
    ServiceError::InvalidWorkflow {
        field: field.into(),
        message: message.into(),
    }
}

/// Saves `spec` as workflow `name` of `tenant` (the next version if it
/// exists), refusing a bad graph or a node whose job is not exactly one
/// of the tenant's jobs, naming the node.
pub async fn save(
    store: &Store,
    tenant: &str,
    name: &str,
    spec: &WorkflowSpec,
    now_ms: i64,
) -> Result<Workflow, ServiceError> {
    if !valid_name(name) {
        return Err(invalid(
            "name",
            format!("workflow name {name:?} must be 1 to 64 letters, digits, '-' or '_'"),
        ));
    }
    Graph::check(spec).map_err(|error| invalid(error.field, error.message))?;
    if let Some(deadline) = spec.deadline_ms
        && !(1_000..=WorkflowSpec::MAX_DEADLINE_MS).contains(&deadline)
    {
        return Err(invalid(
            "deadline_ms",
            format!(
                "a deadline is 1,000 ms to {} ms (7 days), not {deadline}",
                WorkflowSpec::MAX_DEADLINE_MS
            ),
        ));
    }
    let next_fire_at_ms = match &spec.schedule {
        None => None,
        Some(schedule) => first_fire(schedule, now_ms)?,
    };
    for (i, node) in spec.nodes.iter().enumerate() {
        match store.jobs_named(tenant, &node.job).await?.len() {
            1 => {}
            0 => {
                return Err(invalid(
                    format!("nodes[{i}].job"),
                    format!(
                        "node {:?}: no job {:?} (`cronbox job list` lists this tenant's jobs)",
                        node.name, node.job
                    ),
                ));
            }
            _ => {
                return Err(invalid(
                    format!("nodes[{i}].job"),
                    format!(
                        "node {:?}: several jobs are named {:?}; rename all but one",
                        node.name, node.job
                    ),
                ));
            }
        }
    }
    Ok(store
        .save_workflow(tenant, name, spec, next_fire_at_ms, now_ms)
        .await?)
}

/// The first fire of a workflow's schedule saved at `now_ms`, refusing
/// what a job's schedule refuses and what only jobs have (naming the
/// field).
fn first_fire(schedule: &WorkflowSchedule, now_ms: i64) -> Result<Option<i64>, ServiceError> {
    let timetable = crate::workflow::firing::Timetable::parse(schedule)
        .map_err(|refused| invalid(refused.field, refused.message))?;
    if let Some(input) = &schedule.input {
        checked_input(input, "schedule.input")?;
    }
    Ok(timetable.first_fire(now_ms))
}

/// `input` if it is JSON text within the bound; refused naming `field`.
fn checked_input(input: &str, field: &str) -> Result<(), ServiceError> {
    if input.len() > WorkflowSpec::MAX_INPUT_BYTES {
        return Err(invalid(
            field,
            format!("the input is over {} bytes", WorkflowSpec::MAX_INPUT_BYTES),
        ));
    }
    if let Err(error) = serde_json::from_str::<serde_json::Value>(input) {
        return Err(invalid(field, format!("the input is not JSON: {error}")));
    }
    Ok(())
}

/// Workflow `name` of `tenant`, or [`ServiceError::UnknownWorkflow`].
pub async fn named(store: &Store, tenant: &str, name: &str) -> Result<Workflow, ServiceError> {
    store
        .workflow(tenant, name)
        .await?
        .ok_or_else(|| ServiceError::UnknownWorkflow(name.to_owned()))
}

/// Starts a run of `workflow` with the request's input (JSON text of at
/// most 64 KiB; `{}` if absent); the run's id.
pub async fn start(
    scheduler: &std::sync::Arc<Scheduler>,
    workflow: &Workflow,
    request: &WorkflowRunRequest,
) -> Result<i64, ServiceError> {
    let input = request.input.as_deref().unwrap_or("{}");
    checked_input(input, "input")?;
    Ok(scheduler
        .start_workflow(workflow, input, cronbox_protocol::TriggerKind::Api)
        .await?)
}

/// Cancels workflow run `id` (in `scope`), refused unless it is running.
pub async fn cancel(
    scheduler: &std::sync::Arc<Scheduler>,
    scope: &super::scope::Scope,
    id: i64,
) -> Result<(), ServiceError> {
    scope.workflow_run(scheduler.store(), id).await?;
    if !scheduler.cancel_workflow(id).await? {
        return Err(ServiceError::WorkflowRunState {
            id,
            message: "is not running, so it cannot be cancelled".to_owned(),
        });
    }
    Ok(())
}

/// Retries workflow run `id` (in `scope`) from its nodes that did not
/// succeed, refused unless it failed or was cancelled.
pub async fn retry(
    scheduler: &std::sync::Arc<Scheduler>,
    scope: &super::scope::Scope,
    id: i64,
) -> Result<(), ServiceError> {
    scope.workflow_run(scheduler.store(), id).await?;
    if !scheduler.retry_workflow(id).await? {
        return Err(ServiceError::WorkflowRunState {
            id,
            message: "neither failed nor was cancelled, so there is nothing to retry".to_owned(),
        });
    }
    Ok(())
}
