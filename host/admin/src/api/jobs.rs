//! Jobs: create, read, update, delete; start, stop, trigger and kill;
//! schedule previews; durable state.

use super::*;
use bodies::{StateEdit, TriggerRequest};
use cronbox_api::{JobBatch, TriggerSource};

pub(super) async fn create_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    if !spec.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "a job that reads secrets")?;
    }
    let job = service::jobs::create(&state.scheduler, &caller.tenant, &spec).await?;
    Ok((StatusCode::CREATED, Json(job)))
}

/// Creates many jobs at once, all or none (see
/// [`service::jobs::create_many`]).
pub(super) async fn create_jobs(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(batch): ApiJson<JobBatch>,
) -> Result<impl IntoResponse, Failure> {
    if let Some(index) = batch.jobs.iter().position(|spec| !spec.secrets.is_empty()) {
        require_secret_manager(
            &caller,
            &format!("jobs[{index}].secrets"),
            "a job that reads secrets",
        )?;
    }
    let created = service::jobs::create_many(&state.scheduler, &caller.tenant, &batch).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Replaces a job's definition (see [`service::jobs::update`]).
pub(super) async fn update_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    let current = visible_job(&state, &caller, id).await?;
    if !current.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "changing a job that reads secrets")?;
    } else if !spec.secrets.is_empty() {
        require_secret_manager(&caller, "secrets", "a job that reads secrets")?;
    }
    Ok(Json(
        service::jobs::update(&state.scheduler, &current, &spec).await?,
    ))
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

/// A page of jobs in id order, filtered by `group`, `name` (exact) and
/// `enabled`; `after` is the last id of the previous page, `limit` at most
/// 1000 (the default). The answer is the page, an array.
pub(super) async fn list_jobs(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Query(params): Query<std::collections::HashMap<String, String>>,
) -> Result<impl IntoResponse, Failure> {
    let query = ListQuery::new(
        params,
        &[
            "group",
            "name",
            "search",
            "module",
            "schedule_type",
            "enabled",
            "after",
            "limit",
        ],
    )?;
    let schedule_type = match query.text("schedule_type") {
        None => None,
        Some(text) => Some(cronbox_api::parse_ignoring_case(&text).map_err(|_| {
            ListQuery::invalid(
                "schedule_type",
                format!(
                    "unknown schedule type {text:?}: use CRON, FIX_RATE, FIX_DELAY, ONE_SHOT or NONE"
                ),
            )
        })?),
    };
    let enabled = match query.text("enabled").as_deref() {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            return Err(ListQuery::invalid(
                "enabled",
                format!("enabled must be true or false, got {other:?}"),
            ));
        }
    };
    let filter = crate::store::JobFilter {
        tenant: caller.only_tenant(),
        group: query.text("group"),
        name: query.text("name"),
        search: query.text("search").filter(|text| !text.is_empty()),
        module: query.text("module"),
        schedule_type,
        enabled,
        after_id: query.number("after")?,
        limit: query.limit(MAX_JOBS_PAGE, MAX_JOBS_PAGE)?,
    };
    Ok(Json(state.scheduler.store().list_jobs(&filter).await?))
}

pub(super) async fn get_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
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
    match state.scheduler.store().job(id).await? {
        Some(job) if caller.sees(&job.tenant) => Ok(job),
        _ => Err(unknown_job(id)),
    }
}

pub(super) fn unknown_job(id: JobId) -> Failure {
    Failure::new(
        StatusCode::NOT_FOUND,
        ErrorCode::UnknownJob,
        format!("no job {id}"),
    )
}

pub(super) async fn start_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let job = visible_job(&state, &caller, id).await?;
    let schedule = schedule_of(&job).map_err(|error| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            error.to_string(),
        )
    })?;
    let now = state.scheduler.now();
    let Some(first) = state.scheduler.rules_of(&job).first_fire(&schedule, now) else {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            ErrorCode::CannotStart,
            "a job with schedule NONE (or a one-shot in the past) cannot be started; trigger it instead",
        ));
    };
    store
        .set_enabled(
            id,
            true,
            Some(first.timestamp_millis()),
            state.scheduler.now_ms(),
        )
        .await?;
    // Its first fire may come before the next pre-read pass.
    state.scheduler.wake();
    Ok(Json(store.job(id).await?))
}

pub(super) async fn stop_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
    let Some(cancelled) = store.stop_job(id, state.scheduler.now_ms()).await? else {
        return Err(unknown_job(id));
    };
    if !cancelled.is_empty() {
        tracing::info!(
            job = %id,
            count = cancelled.len(),
            "stopped: waiting runs cancelled"
        );
    }
    Ok(Json(store.job(id).await?))
}

/// Longest note a pause keeps.
const MAX_PAUSE_NOTE_BYTES: usize = 1024;

/// Pauses a job with a note (who, why, until when): no fire until then
/// (waiting fires cancelled, as a stop does); with `until_ms` it resumes by
/// itself at its first fire after that instant, without one it waits for a
/// start.
pub(super) async fn pause_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let request: cronbox_api::PauseRequest = optional_json(&body)?;
    let job = visible_job(&state, &caller, id).await?;
    let refuse = |field: &str, message: String| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            message,
        )
        .field(field)
    };
    if request.note.len() > MAX_PAUSE_NOTE_BYTES {
        return Err(refuse(
            "note",
            format!(
                "the note is {} bytes; at most {MAX_PAUSE_NOTE_BYTES}",
                request.note.len()
            ),
        ));
    }
    let now = state.scheduler.now();
    let resume = match request.until_ms {
        None => None,
        Some(until) if until <= now.timestamp_millis() => {
            return Err(refuse("until_ms", format!("{until} is not in the future")));
        }
        Some(until) => {
            let until = chrono::DateTime::from_timestamp_millis(until)
                .ok_or_else(|| refuse("until_ms", format!("{until} is not an instant")))?;
            schedule_of(&job)
                .ok()
                .and_then(|schedule| state.scheduler.rules_of(&job).first_fire(&schedule, until))
                .map(|at| at.timestamp_millis())
        }
    };
    let pause = cronbox_api::Pause {
        by: caller.who(),
        note: request.note,
        paused_at_ms: now.timestamp_millis(),
        until_ms: request.until_ms,
    };
    state
        .scheduler
        .store()
        .pause_job(id, Some(&pause), resume, now.timestamp_millis())
        .await?
        .ok_or_else(|| unknown_job(id))?;
    state.scheduler.wake();
    Ok(Json(state.scheduler.store().job(id).await?))
}

/// Kills a whole job: its running, queued and held runs on executors, and
/// its runs waiting to be dispatched (pending retries included), which end
/// as cancelled.
pub(super) async fn kill_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    let outcome = state.scheduler.kill_job(&job).await?;
    Ok(Json(bodies::JobKilled {
        job_id: id,
        outcome,
    }))
}

pub(super) async fn trigger_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let request: TriggerRequest = optional_json(&body)?;
    if request
        .param
        .as_ref()
        .is_some_and(|param| param.len() > crate::jobs::MAX_PARAM_BYTES)
    {
        return Err(Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidRequest,
            "param is too long",
        )
        .field("param"));
    }
    let job = visible_job(&state, &caller, id).await?;
    if let Some(addresses) = &request.addresses {
        // The admin sends the executor token with every run: only to
        // executors the operator runs, never to an address a tenant names.
        caller.require_operator_for("addresses", "choosing executor addresses for a run")?;
        let allowed = state.scheduler.group_addresses_now(&job.group_name).await?;
        if addresses.is_empty() {
            return Err(Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidRequest,
                "addresses, when given, must name at least one executor",
            )
            .field("addresses"));
        }
        if let Some(outside) = addresses.iter().find(|a| !allowed.contains(a)) {
            return Err(Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidRequest,
                format!(
                    "address {outside:?} is not a live executor of group {:?}; a run may only \
                     go to its job's group (live now: {})",
                    job.group_name,
                    if allowed.is_empty() {
                        "none".to_owned()
                    } else {
                        allowed.join(", ")
                    }
                ),
            )
            .field("addresses"));
        }
    }
    let kind = match request.kind {
        TriggerSource::Api => cronbox_protocol::TriggerKind::Api,
        TriggerSource::Manual => cronbox_protocol::TriggerKind::Manual,
    };
    let run_id = state
        .scheduler
        .trigger(id, kind, request.param, request.addresses)
        .await?;
    Ok((StatusCode::ACCEPTED, Json(bodies::Triggered { run_id })))
}

/// Most fire times one `next-fires` request may ask for.
pub(crate) const MAX_NEXT_FIRES: i64 = 100;

pub(super) async fn next_fires(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
    Query(params): Query<std::collections::HashMap<String, String>>,
) -> Result<impl IntoResponse, Failure> {
    let query = ListQuery::new(params, &["count"])?;
    let count = query.bounded("count", 5, 1, MAX_NEXT_FIRES)? as usize;
    let job = visible_job(&state, &caller, id).await?;
    let schedule = schedule_of(&job).map_err(|error| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            error.to_string(),
        )
    })?;
    // A paused job fires from the end of its pause, or not at all.
    let from = match &job.pause {
        Some(pause) => pause
            .until_ms
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map(|until| until.max(state.scheduler.now())),
        None => Some(state.scheduler.now()),
    };
    let fires: Vec<String> = from
        .map(|from| {
            state
                .scheduler
                .rules_of(&job)
                .preview(&schedule, from, count)
        })
        .unwrap_or_default()
        .into_iter()
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .collect();
    Ok(Json(fires))
}

/// The items of a comma-separated query parameter, trimmed, empty ones
/// dropped.
fn comma_list(text: Option<String>) -> Vec<String> {
    text.map(|text| {
        text.split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(str::to_owned)
            .collect()
    })
    .unwrap_or_default()
}

/// The next fires of a schedule not yet saved (`schedule_type`,
/// `schedule_conf`, `time_zone` as a job definition writes them; `count`
/// of them): what a job form shows as its author types. Refused as a job
/// with that schedule would be, naming the field.
pub(super) async fn schedule_preview(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Query(params): Query<std::collections::HashMap<String, String>>,
) -> Result<impl IntoResponse, Failure> {
    let query = ListQuery::new(
        params,
        &[
            "schedule_type",
            "schedule_conf",
            "time_zone",
            "count",
            "starts_at_ms",
            "ends_at_ms",
            "exclude_dates",
            "jitter_ms",
            "calendars",
        ],
    )?;
    let count = query.bounded("count", 5, 1, MAX_NEXT_FIRES)? as usize;
    let schedule_type = query
        .text("schedule_type")
        .unwrap_or_else(|| "CRON".to_owned());
    let conf = query.text("schedule_conf").unwrap_or_default();
    let time_zone = query.text("time_zone").unwrap_or_else(|| "UTC".to_owned());
    for (field, text, most) in [
        ("schedule_conf", &conf, crate::jobs::MAX_SCHEDULE_CONF_BYTES),
        ("time_zone", &time_zone, crate::jobs::MAX_TIME_ZONE_BYTES),
    ] {
        let length = text.chars().count();
        if length > most {
            return Err(ListQuery::invalid(
                field,
                format!("{length} characters; at most {most}"),
            ));
        }
    }
    let (_, schedule) =
        crate::jobs::checked_schedule(&schedule_type, &conf, &time_zone).map_err(|invalid| {
            Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidJob,
                invalid.message,
            )
            .field(invalid.field)
        })?;
    let zone: chrono_tz::Tz = time_zone
        .parse()
        .map_err(|_| ListQuery::invalid("time_zone", format!("unknown time zone {time_zone:?}")))?;
    let written = cronbox_api::ScheduleRules {
        starts_at_ms: query.number("starts_at_ms")?,
        ends_at_ms: query.number("ends_at_ms")?,
        exclude_dates: comma_list(query.text("exclude_dates")),
        jitter_ms: query.bounded("jitter_ms", 0, 0, crate::schedule::MAX_JITTER_MS)?,
        // Overlap decides at dispatch, not when a fire is.
        overlap: cronbox_api::OverlapPolicy::Allow,
        calendars: comma_list(query.text("calendars")),
    };
    // A job not yet saved has no id: its jitter is shown as job 0's.
    let rules = crate::schedule::Rules::parse(&written, zone, 0).map_err(|refused| {
        Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidJob,
            refused.message,
        )
        .field(refused.field)
    })?;
    let rules = state
        .scheduler
        .with_calendars(rules, &caller.tenant, &written.calendars);
    let fires = rules.preview(&schedule, state.scheduler.now(), count);
    Ok(Json(cronbox_api::SchedulePreview {
        fires: fires
            .iter()
            .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .collect(),
        local: fires
            .iter()
            .map(|at| {
                at.with_timezone(&zone)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, false)
            })
            .collect(),
        time_zone: zone.name().to_owned(),
    }))
}

/// A page of a job's runs, oldest first: `after` (the last id of the
/// previous page) and `limit` (default and most 1000).
pub(super) async fn job_runs(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
    Query(params): Query<std::collections::HashMap<String, String>>,
) -> Result<impl IntoResponse, Failure> {
    let query = ListQuery::new(params, &["after", "limit"])?;
    visible_job(&state, &caller, id).await?;
    let runs = state
        .scheduler
        .store()
        .runs_of_job_page(
            id,
            query.number("after")?,
            query.limit(MAX_JOB_RUNS_PAGE, MAX_JOB_RUNS_PAGE)?,
        )
        .await?;
    Ok(Json(runs))
}

/// Most runs in one page of `GET /api/v1/jobs/{id}/runs`.
const MAX_JOB_RUNS_PAGE: i64 = 1000;

/// Deletes a job (its runs stay as history). Refused while another job
/// names it as a child.
pub(super) async fn delete_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    service::jobs::delete(state.scheduler.store(), &job).await?;
    Ok(Json(bodies::Deleted { deleted: id }))
}

pub(super) async fn get_state(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
    let values = store.job_state(id).await?.values;
    Ok(Json(bodies::JobStateBody::new(id, values)))
}

/// Replaces a job's durable state: what its next run will see.
pub(super) async fn put_state(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<JobId>,
    ApiJson(edit): ApiJson<StateEdit>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
    caller.require(Role::Developer, "editing a job's state")?;
    service::jobs::replace_state(store, id, &edit.state, state.scheduler.now_ms()).await?;
    Ok(Json(bodies::JobStateBody::new(id, edit.state)))
}
