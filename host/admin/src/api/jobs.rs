//! Jobs: create, read, update, delete; start, stop and pause; durable
//! state. Triggers and kills are `triggers`', previews `schedules`'.

use super::*;
use bodies::StateEdit;
use cronbox_api::JobBatch;

pub(super) async fn create_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    if !spec.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "a job that reads secrets")?;
    }
    let job = service::jobs::create(&state.services, &caller.tenant, &spec).await?;
    let note = AuditNote::detail(json!({ "job": job.id, "name": job.name }));
    Ok((StatusCode::CREATED, note, Json(job)))
}

/// Creates many jobs at once, all or none (see
/// [`service::jobs::create_many`]).
pub(super) async fn create_jobs(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    ApiJson(batch): ApiJson<JobBatch>,
) -> Result<impl IntoResponse, Failure> {
    if let Some(index) = batch.jobs.iter().position(|spec| !spec.secrets.is_empty()) {
        require_secret_manager(
            &caller,
            &format!("jobs[{index}].secrets"),
            "a job that reads secrets",
        )?;
    }
    let created = service::jobs::create_many(&state.services, &caller.tenant, &batch).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Replaces a job's definition (see [`service::jobs::update`]).
pub(super) async fn update_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    let current = visible_job(&state, &caller, id).await?;
    if !current.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "changing a job that reads secrets")?;
    } else if !spec.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "a job that reads secrets")?;
    }
    let updated = service::jobs::update(&state.services, &current, &spec).await?;
    let note = AuditNote::detail(audit::changed_fields(&current, &updated));
    Ok((note, Json(updated)))
}

/// The role that manages secrets ([`Role::Admin`]) is the role that may
/// have code read them: a job's code reads every secret the job names, so
/// naming one, or changing a job that names some (its module, its
/// parameters), is reading them. A developer still starts, stops, pauses
/// and triggers such a job.
pub(super) fn require_secret_manager(
    caller: &Caller,
    field: &str,
    what: &str,
) -> Result<(), Failure> {
    caller
        .require(Role::Admin, what)
        .map_err(|failure| failure.field(field))
}

/// Most jobs in one page of `GET /api/v1/jobs`.
const MAX_JOBS_PAGE: i64 = 1000;

/// The filters and page of `GET /api/v1/jobs`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub(super) struct JobsQuery {
    /// Jobs of this executor group
    group: Option<String>,
    /// Jobs with exactly this name
    name: Option<String>,
    /// Jobs whose name contains this text, in any letter case
    search: Option<String>,
    /// Jobs following or pinned to this named module
    module: Option<String>,
    /// Jobs of this schedule type (in any letter case)
    #[param(value_type = Option<cronbox_api::ScheduleType>)]
    schedule_type: Option<AnyCase<cronbox_api::ScheduleType>>,
    /// Started (true) or stopped (false) jobs
    enabled: Option<bool>,
    /// Ids above this one: the last id of the previous page
    #[param(inline)]
    after: Option<Integer>,
    /// Jobs per page (default and most 1000)
    #[param(inline)]
    limit: Option<Bounded<1, { MAX_JOBS_PAGE }>>,
}

/// A page of jobs in id order, filtered by `group`, `name` (exact) and
/// `enabled`; `after` is the last id of the previous page, `limit` at most
/// 1000 (the default). The answer is the page, an array.
pub(super) async fn list_jobs(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Params(query): Params<JobsQuery>,
) -> Result<impl IntoResponse, Failure> {
    let filter = crate::store::JobFilter {
        tenant: caller.only_tenant(),
        group: query.group,
        name: query.name,
        search: query.search.filter(|text| !text.is_empty()),
        module: query.module,
        schedule_type: query.schedule_type.map(|name| name.0),
        enabled: query.enabled,
        after_id: query.after.map(|id| JobId(id.get())),
        limit: query.limit.map_or(MAX_JOBS_PAGE, Bounded::get),
    };
    Ok(Json(
        service::job_lifecycle::list(&state.services, &filter).await?,
    ))
}

pub(super) async fn get_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(visible_job(&state, &caller, id).await?))
}

/// Job `id` if the caller may see it; 404 otherwise, whether it exists or
/// belongs to another tenant.
pub(super) async fn visible_job(
    state: &AdminState,
    caller: &Caller,
    id: JobId,
) -> Result<JobRow, Failure> {
    Ok(caller.scope().job(state.services.store(), id).await?)
}

pub(super) async fn start_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    Ok(Json(
        service::job_lifecycle::start(&state.services, &job).await?,
    ))
}

pub(super) async fn stop_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    visible_job(&state, &caller, id).await?;
    Ok(Json(
        service::job_lifecycle::stop(&state.services, id).await?,
    ))
}

/// Pauses a job with a note (who, why, until when): see
/// [`service::job_lifecycle::pause`].
pub(super) async fn pause_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let request: cronbox_api::PauseRequest = optional_json(&body)?;
    let job = visible_job(&state, &caller, id).await?;
    Ok(Json(
        service::job_lifecycle::pause(&state.services, &job, request, caller.who()).await?,
    ))
}

/// Deletes a job (its runs stay as history). Refused while another job
/// names it as a child.
pub(super) async fn delete_job(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    // A job that reads secrets is an admin's: it is deleted by the role
    // that made it (a developer may stop it).
    if !job.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "a job that reads secrets")?;
    }
    service::jobs::delete(state.services.store(), &job).await?;
    Ok(Json(bodies::Deleted { deleted: id }))
}

pub(super) async fn get_state(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    visible_job(&state, &caller, id).await?;
    let values = service::jobs::state(state.services.store(), id).await?;
    Ok(Json(bodies::JobStateBody::new(id, values)))
}

/// Replaces a job's durable state: what its next run will see.
pub(super) async fn put_state(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<JobId>,
    ApiJson(edit): ApiJson<StateEdit>,
) -> Result<impl IntoResponse, Failure> {
    visible_job(&state, &caller, id).await?;
    caller.require(Role::Developer, "editing a job's state")?;
    service::jobs::replace_state(
        state.services.store(),
        id,
        &edit.state,
        state.services.now_ms(),
    )
    .await?;
    Ok(Json(bodies::JobStateBody::new(id, edit.state)))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "post",
        "/api/v1/jobs",
        "jobs",
        "Create a job (stopped)",
        Some(schema("JobSpec")),
        "201",
        schema("Job"),
    );
    table.route(operation, DEVELOPER, create_job);
    let operation = op(
        "post",
        "/api/v1/jobs/batch",
        "jobs",
        "Create up to 1,000 jobs at once, all or none (an import); a refusal names the job's place, as field jobs[N].FIELD",
        Some(schema("JobBatch")),
        "201",
        schema("JobsCreated"),
    );
    table.route(
        operation,
        DEVELOPER,
        create_jobs.layer(DefaultBodyLimit::max(JOB_BATCH_BODY_BYTES)),
    );
    let operation = Operation {
        query: parameters_of::<JobsQuery>(),
        ..op(
            "get",
            "/api/v1/jobs",
            "jobs",
            "A page of the caller's jobs in id order, filtered, each with its last run that was due",
            None,
            "200",
            array_of(schema("JobListed")),
        )
    };
    table.route(operation, VIEWER, list_jobs);
    let operation = op(
        "get",
        "/api/v1/jobs/{id}",
        "jobs",
        "A job",
        None,
        "200",
        schema("Job"),
    );
    table.route(operation, VIEWER, get_job);
    let operation = op(
        "put",
        "/api/v1/jobs/{id}",
        "jobs",
        "Replace a job's definition",
        Some(schema("JobSpec")),
        "200",
        schema("Job"),
    );
    table.route(operation, DEVELOPER, update_job);
    let operation = op(
        "delete",
        "/api/v1/jobs/{id}",
        "jobs",
        "Delete a job (its runs stay); refused while it is another job's child",
        None,
        "200",
        schema("Deleted"),
    );
    table.route(operation, DEVELOPER, delete_job);
    let operation = op(
        "post",
        "/api/v1/jobs/{id}/start",
        "jobs",
        "Start firing on schedule",
        None,
        "200",
        schema("Job"),
    );
    table.route(operation, DEVELOPER, start_job);
    let operation = op(
        "post",
        "/api/v1/jobs/{id}/stop",
        "jobs",
        "Stop firing; runs waiting to be dispatched (fires written ahead, retries) end as cancelled",
        None,
        "200",
        schema("Job"),
    );
    table.route(operation, DEVELOPER, stop_job);
    let operation = op(
            "post",
            "/api/v1/jobs/{id}/pause",
            "jobs",
            "Pause with a note: as a stop, recording who, why and until when; with until_ms it resumes by itself at its first fire after it",
            Some(schema("PauseRequest")),
            "200",
            schema("Job"),
        )
        .body_optional();
    table.route(operation, DEVELOPER, pause_job);
    let operation = op(
        "get",
        "/api/v1/jobs/{id}/state",
        "jobs",
        "A job's durable state",
        None,
        "200",
        schema("JobStateBody"),
    );
    table.route(operation, VIEWER, get_state);
    let operation = op(
        "put",
        "/api/v1/jobs/{id}/state",
        "jobs",
        "Replace a job's durable state (operator)",
        Some(schema("StateEdit")),
        "200",
        schema("JobStateBody"),
    );
    table.route(operation, DEVELOPER, put_state);
}
