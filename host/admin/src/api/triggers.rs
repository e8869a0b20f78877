//! A job's runs: triggering one now, killing its running ones, listing
//! its runs.

use super::*;
use bodies::TriggerRequest;
use cronbox_api::TriggerSource;

/// Kills a whole job: its running, queued and held runs on executors, and
/// its runs waiting to be dispatched (pending retries included), which end
/// as cancelled.
pub(super) async fn kill_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    let outcome = service::triggers::kill_job(&state.services, &job).await?;
    Ok(Json(bodies::JobKilled {
        job_id: id,
        outcome,
    }))
}

pub(super) async fn trigger_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let request: TriggerRequest = optional_json(&body)?;
    let job = visible_job(&state, &caller, id).await?;
    let param = request.param.as_deref().unwrap_or_default();
    if crate::jobs::sends_code_to_secrets(&job, param) {
        super::jobs::require_secret_manager(
            &caller,
            "param",
            "sending `cronbox dev` sources to a job that reads secrets",
        )?;
    }
    if request.addresses.is_some() {
        // The admin sends the executor token with every run: only to
        // executors the operator runs, never to an address a tenant names.
        caller.require_operator_for("addresses", "choosing executor addresses for a run")?;
    }
    let kind = match request.kind {
        TriggerSource::Api => cronbox_protocol::TriggerKind::Api,
        TriggerSource::Manual => cronbox_protocol::TriggerKind::Manual,
    };
    // A dev run's sources are summed up, not kept in the audit log.
    let audited = match &request.param {
        Some(param) if cronbox_api::carries_dev_sources(param) => {
            json!(format!("(cronbox dev sources, {} bytes)", param.len()))
        }
        param => json!(param),
    };
    let note = AuditNote::detail(json!({ "param": audited, "kind": kind.as_str() }));
    let run_id =
        service::triggers::trigger(&state.services, job, kind, request.param, request.addresses)
            .await?;
    Ok((
        StatusCode::ACCEPTED,
        note,
        Json(bodies::Triggered { run_id }),
    ))
}

/// A page of `GET /api/v1/jobs/{id}/runs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct JobRunsQuery {
    /// Runs with a larger id: the last id of the previous page
    #[param(inline)]
    after: Option<Integer>,
    /// Runs per page (default and most 1000)
    #[param(inline)]
    limit: Option<Bounded<1, { MAX_JOB_RUNS_PAGE }>>,
}

/// A page of a job's runs, oldest first: `after` (the last id of the
/// previous page) and `limit` (default and most 1000).
pub(super) async fn job_runs(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    Params(query): Params<JobRunsQuery>,
) -> Result<impl IntoResponse, Failure> {
    visible_job(&state, &caller, id).await?;
    let runs = service::triggers::runs_of_job(
        state.services.store(),
        id,
        query.after.map(|id| RunId(id.get())),
        query.limit.map_or(MAX_JOB_RUNS_PAGE, Bounded::get),
    )
    .await?;
    Ok(Json(runs))
}

/// Most runs in one page of `GET /api/v1/jobs/{id}/runs`.
const MAX_JOB_RUNS_PAGE: i64 = 1000;

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
            "post",
            "/api/v1/jobs/{id}/trigger",
            "jobs",
            "Run now, with an optional parameter; kind `api` (default) or `manual` (a person, through the CLI or console); addresses (operator only, executors of the job's group only)",
            Some(schema("TriggerRequest")),
            "202",
            schema("Triggered"),
        )
        .body_optional();
    table.route(operation, DEVELOPER, trigger_job);
    let operation = op(
        "post",
        "/api/v1/jobs/{id}/kill",
        "jobs",
        "Kill every run of the job: running, queued and held runs on executors are stopped, runs waiting to be dispatched (retries included) end as cancelled",
        None,
        "200",
        schema("JobKilled"),
    );
    table.route(operation, DEVELOPER, kill_job);
    let operation = Operation {
        query: parameters_of::<JobRunsQuery>(),
        ..op(
            "get",
            "/api/v1/jobs/{id}/runs",
            "runs",
            "A page of a job's runs, oldest first",
            None,
            "200",
            array_of(schema("Run")),
        )
    };
    table.route(operation, VIEWER, job_runs);
}
