//! Workflows: a definition checked (its graph, then each node's job among
//! the tenant's) before it is saved as the next version, the jobs its
//! module nodes run as made or brought up to date; a run's input checked
//! before the run starts.

use cronbox_api::{Workflow, WorkflowRunRequest, WorkflowSchedule, WorkflowSpec};

use super::ServiceError;
use super::Services;
use crate::jobs::JobSpec;
use crate::store::Store;
use crate::workflow::Graph;
use crate::workflow::definition::{owned_job_name, valid_name};

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ServiceError {
    ServiceError::InvalidWorkflow {
        field: field.into(),
        message: message.into(),
    }
}

/// Saves `spec` as workflow `name` of `tenant` (the next version if it
/// exists), refusing a bad graph or a node whose job is not exactly one
/// of the tenant's jobs, naming the node; the job each module node runs
/// as is made, or updated to the node's settings.
pub async fn save(
    services: &Services,
    tenant: &str,
    name: &str,
    spec: &WorkflowSpec,
) -> Result<Workflow, ServiceError> {
    let store = services.store();
    let now_ms = services.now_ms();
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
        Some(schedule) => first_fire(services, tenant, schedule, now_ms).await?,
    };
    let module_nodes = module_node_jobs(name, spec)?;
    // The jobs this workflow owns already: those of the module nodes it
    // was saved with. Any other job with a module node's job name is
    // someone else's, never taken over.
    let owned: std::collections::HashSet<String> = store
        .workflow(tenant, name)
        .await?
        .map(|saved| {
            saved
                .definition
                .nodes
                .iter()
                .filter(|node| node.module.is_some())
                .map(|node| owned_job_name(name, &node.name))
                .collect()
        })
        .unwrap_or_default();
    for (i, node) in spec.nodes.iter().enumerate() {
        if node.module.is_some() {
            continue;
        }
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
    for (i, job) in &module_nodes {
        let refused = |error: ServiceError| match error {
            // The module is the node's own field; the rest are settings.
            ServiceError::InvalidJob {
                field: "module" | "module_digest",
                message,
            } => invalid(format!("nodes[{i}].module"), message),
            ServiceError::InvalidJob { field, message } => {
                invalid(format!("nodes[{i}].settings.{field}"), message)
            }
            other => other,
        };
        match &store.jobs_named(tenant, &job.name).await?[..] {
            [] => super::jobs::create(services, tenant, job)
                .await
                .map(drop)
                .map_err(refused)?,
            [current] if owned.contains(&job.name) => {
                super::jobs::update(services, current, job)
                    .await
                    .map(drop)
                    .map_err(refused)?;
            }
            [current] => {
                return Err(invalid(
                    format!("nodes[{i}].name"),
                    format!(
                        "node {:?} runs as job {:?}, and job {} of that name exists that \
                         this workflow does not own; rename the node or that job",
                        spec.nodes[*i].name, job.name, current.id
                    ),
                ));
            }
            _ => {
                return Err(invalid(
                    format!("nodes[{i}].module"),
                    format!(
                        "several jobs are named {:?}, the name of the job this node runs as; \
                         rename all but one",
                        job.name
                    ),
                ));
            }
        }
    }
    let saved = store
        .save_workflow(tenant, name, spec, next_fire_at_ms, now_ms)
        .await?;
    // A module node removed: the job it ran as goes, as with the
    // workflow (runs stay as history), unless another job names it as a
    // child.
    let kept: std::collections::HashSet<&str> = module_nodes
        .iter()
        .map(|(_, job)| job.name.as_str())
        .collect();
    for removed in owned.iter().filter(|job| !kept.contains(job.as_str())) {
        for job in store.jobs_named(tenant, removed).await? {
            match super::jobs::delete(store, &job).await {
                Ok(()) | Err(ServiceError::JobInUse { .. }) => {}
                Err(other) => return Err(other),
            }
        }
    }
    Ok(saved)
}

/// Settings a module node may not give: the job the workflow owns has its
/// name, runs the node's module, never fires by itself and reads no
/// secrets (a job node, which an admin saves, may).
const SETTINGS_NOT_GIVEN: [&str; 8] = [
    "name",
    "module",
    "module_digest",
    "schedule_type",
    "schedule_conf",
    "children",
    "secrets",
    "schedule_rules",
];

/// The job each module node of workflow `workflow` runs as, by node
/// index: its settings, the module and the owned name, never scheduled.
fn module_node_jobs(
    workflow: &str,
    spec: &WorkflowSpec,
) -> Result<Vec<(usize, JobSpec)>, ServiceError> {
    let mut jobs = Vec::new();
    for (i, node) in spec.nodes.iter().enumerate() {
        let Some(module) = &node.module else { continue };
        let mut fields = node.settings.clone().unwrap_or_default();
        if let Some(key) = SETTINGS_NOT_GIVEN
            .iter()
            .find(|key| fields.contains_key(**key))
        {
            return Err(invalid(
                format!("nodes[{i}].settings.{key}"),
                format!(
                    "node {:?}: a module node's job takes no {key} (use a job node for that)",
                    node.name
                ),
            ));
        }
        let owned = owned_job_name(workflow, &node.name);
        fields.insert("name".to_owned(), owned.clone().into());
        fields.insert("module".to_owned(), module.clone().into());
        fields.insert("schedule_type".to_owned(), "NONE".into());
        let job = serde_json::from_value(serde_json::Value::Object(fields)).map_err(|error| {
            invalid(
                format!("nodes[{i}].settings"),
                format!("node {:?}: {error}", node.name),
            )
        })?;
        jobs.push((i, job));
    }
    Ok(jobs)
}

/// Deletes workflow `name` of `tenant` and the jobs its module nodes run
/// as, cancelling its runs in progress first (their runs killed); its runs
/// stay as history. The workflow as it was.
pub async fn delete(
    services: &Services,
    tenant: &str,
    name: &str,
) -> Result<Workflow, ServiceError> {
    let store = services.store();
    let workflow = named(store, tenant, name).await?;
    for run in store.running_runs_of_workflow(workflow.id).await? {
        services.firing().cancel_workflow(run).await?;
    }
    if !store.delete_workflow(tenant, name).await? {
        return Err(ServiceError::UnknownWorkflow(name.to_owned()));
    }
    for node in &workflow.definition.nodes {
        if node.module.is_none() {
            continue;
        }
        for job in store
            .jobs_named(tenant, &owned_job_name(name, &node.name))
            .await?
        {
            super::jobs::delete(store, &job).await?;
        }
    }
    Ok(workflow)
}

/// The first fire of a workflow's schedule saved at `now_ms`, refusing
/// what a job's schedule refuses (naming the field); the calendars it
/// names must be the tenant's.
async fn first_fire(
    services: &Services,
    tenant: &str,
    schedule: &WorkflowSchedule,
    now_ms: i64,
) -> Result<Option<i64>, ServiceError> {
    let timetable = crate::workflow::firing::Timetable::parse(schedule, 0)
        .map_err(|refused| invalid(refused.field, refused.message))?;
    if let Some(input) = &schedule.input {
        checked_input(input, "schedule.input")?;
    }
    let calendars = schedule
        .rules
        .as_ref()
        .map(|rules| rules.calendars.clone())
        .unwrap_or_default();
    if calendars.len() > super::jobs::MAX_JOB_CALENDARS {
        return Err(invalid(
            "schedule.rules.calendars",
            format!(
                "{} calendars; a schedule names at most {}",
                calendars.len(),
                super::jobs::MAX_JOB_CALENDARS
            ),
        ));
    }
    if !calendars.is_empty() {
        let existing: Vec<String> = services
            .store()
            .calendars(Some(tenant))
            .await?
            .into_iter()
            .map(|calendar| calendar.name)
            .collect();
        if let Some(missing) = calendars.iter().find(|name| !existing.contains(name)) {
            return Err(invalid(
                "schedule.rules.calendars",
                format!(
                    "no calendar {missing:?} in this tenant (`cronbox calendar set {missing} \
                     DATE...` makes one)"
                ),
            ));
        }
    }
    let timetable =
        timetable.map_rules(|rules| services.firing().with_calendars(rules, tenant, &calendars));
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

/// `workflow` with when its next fire starts its run (its jitter added).
pub fn with_next_run(services: &Services, mut workflow: Workflow) -> Workflow {
    workflow.next_run_at_ms = workflow.next_fire_at_ms.map(|next| {
        next + services
            .firing()
            .timetable_of(&workflow)
            .map_or(0, |timetable| timetable.jitter(next))
    });
    workflow
}

/// The workflows of `tenant` (none: every tenant's), each with its next
/// run.
pub async fn list(
    services: &Services,
    tenant: Option<&str>,
) -> Result<Vec<Workflow>, ServiceError> {
    let listed = services.store().workflows(tenant).await?;
    Ok(listed
        .into_iter()
        .map(|workflow| with_next_run(services, workflow))
        .collect())
}

/// Most runs of a workflow one list holds.
pub const MAX_RUNS_LISTED: i64 = 100;

/// `workflow`'s newest runs, newest first (without their nodes).
pub async fn runs_of(
    store: &Store,
    workflow: &Workflow,
) -> Result<Vec<cronbox_api::WorkflowRun>, ServiceError> {
    Ok(store.workflow_runs(workflow.id, MAX_RUNS_LISTED).await?)
}

/// The elements of fanned-out node `node` of workflow run `run`, by
/// index ([`ServiceError::UnknownWorkflowNode`] for a node it lacks).
pub async fn node_items(
    store: &Store,
    run: &cronbox_api::WorkflowRun,
    node: &str,
) -> Result<Vec<cronbox_api::ItemRun>, ServiceError> {
    if !run.nodes.iter().any(|n| n.node == node) {
        return Err(ServiceError::UnknownWorkflowNode {
            run: run.id,
            node: node.to_owned(),
        });
    }
    Ok(store.workflow_items(run.id, node).await?)
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
    services: &Services,
    workflow: &Workflow,
    request: &WorkflowRunRequest,
) -> Result<i64, ServiceError> {
    let input = request.input.as_deref().unwrap_or("{}");
    checked_input(input, "input")?;
    services
        .quotas()
        .check_one_more(
            services.store(),
            &workflow.tenant,
            cronbox_api::Quota::WorkflowRuns,
            services.now_ms(),
        )
        .await??;
    Ok(services
        .firing()
        .start_workflow(workflow, input, cronbox_protocol::TriggerKind::Api)
        .await?)
}

/// Cancels workflow run `id` (in `scope`), refused unless it is running.
pub async fn cancel(
    services: &Services,
    scope: &super::scope::Scope,
    id: i64,
) -> Result<(), ServiceError> {
    scope.workflow_run(services.store(), id).await?;
    if !services.firing().cancel_workflow(id).await? {
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
    services: &Services,
    scope: &super::scope::Scope,
    id: i64,
) -> Result<(), ServiceError> {
    scope.workflow_run(services.store(), id).await?;
    if !services.firing().retry_workflow(id).await? {
        return Err(ServiceError::WorkflowRunState {
            id,
            message: "neither failed nor was cancelled, so there is nothing to retry".to_owned(),
        });
    }
    Ok(())
}

/// Backfills `workflow`: a run (kind `backfill`) for each instant of its
/// schedule in the request's range that no backfill ran before, refused
/// (naming the field) for a range that is empty, in the future or holds
/// more instants than one backfill starts, and for a workflow without a
/// schedule or with FIX_DELAY.
pub async fn backfill(
    services: &Services,
    workflow: &Workflow,
    request: &cronbox_api::WorkflowBackfillRequest,
) -> Result<cronbox_api::WorkflowBackfill, ServiceError> {
    use super::context::WorkflowBackfillOutcome as Outcome;
    let now = services.now_ms();
    if request.to_ms <= request.from_ms {
        return Err(invalid(
            "to_ms",
            format!(
                "the range ({}, {}] is empty: to_ms must be after from_ms",
                request.from_ms, request.to_ms
            ),
        ));
    }
    if request.to_ms > now {
        return Err(invalid(
            "to_ms",
            "a backfill runs past instants: to_ms is in the future",
        ));
    }
    match services
        .firing()
        .backfill_workflow(workflow, request.from_ms, request.to_ms)
        .await?
    {
        Outcome::Started(backfill) => Ok(backfill),
        Outcome::NoSchedule => Err(invalid(
            "schedule",
            format!("workflow {:?} has no schedule to backfill", workflow.name),
        )),
        Outcome::FollowsRuns => Err(invalid(
            "schedule.schedule_type",
            "a FIX_DELAY schedule follows its runs' ends: it has no instants to run again",
        )),
        Outcome::TooMany(max) => Err(invalid(
            "to_ms",
            format!("more than {max} instants in the range; backfill a shorter one at a time"),
        )),
        Outcome::OverQuota(over) => Err(over.into()),
    }
}
