//! A job's life after its definition: listed with its last run, started
//! at its first fire by its rules, stopped, paused with a note (resuming
//! by itself when the note says until when).

use cronbox_api::{JobListed, Pause, PauseRequest};

use super::{ServiceError, Services};
use crate::jobs::schedule_of;
use crate::model::JobId;
use crate::store::{JobFilter, JobRow, Store};

/// Longest note a pause keeps.
pub const MAX_PAUSE_NOTE_BYTES: usize = 1024;

/// A page of jobs as `filter` narrows them, each with its last run.
pub async fn list(services: &Services, filter: &JobFilter) -> Result<Vec<JobListed>, ServiceError> {
    let store = services.store();
    let jobs = store.list_jobs(filter).await?;
    let ids: Vec<JobId> = jobs.iter().map(|job| job.id).collect();
    let mut last = store.last_runs(&ids, services.now_ms()).await?;
    Ok(jobs
        .into_iter()
        .map(|job| JobListed {
            last_run: last.remove(&job.id),
            job,
        })
        .collect())
}

/// Starts `job` at its first fire from now: refused for a schedule that
/// has none (NONE, a one-shot in the past). The job as it is now.
pub async fn start(services: &Services, job: &JobRow) -> Result<JobRow, ServiceError> {
    let schedule =
        schedule_of(job).map_err(|error| ServiceError::StoredScheduleInvalid(error.to_string()))?;
    let now = services.now();
    let Some(first) = services.firing().rules_of(job).first_fire(&schedule, now) else {
        return Err(ServiceError::CannotStart);
    };
    services
        .store()
        .set_enabled(
            job.id,
            true,
            Some(first.timestamp_millis()),
            now.timestamp_millis(),
        )
        .await?;
    // Its first fire may come before the next pre-read pass.
    services.firing().wake();
    current(services.store(), job.id).await
}

/// Stops job `id`, its waiting runs cancelled. The job as it is now.
pub async fn stop(services: &Services, id: JobId) -> Result<JobRow, ServiceError> {
    let store = services.store();
    let cancelled = store
        .stop_job(id, services.now_ms())
        .await?
        .ok_or(ServiceError::UnknownJob(id))?;
    if !cancelled.is_empty() {
        tracing::info!(
            job = %id,
            count = cancelled.len(),
            "stopped: waiting runs cancelled"
        );
    }
    current(store, id).await
}

/// Pauses `job` as `by` asks in `request`: no fire until then (waiting
/// fires cancelled, as a stop does); with `until_ms` it resumes by itself
/// at its first fire after that instant, without one it waits for a
/// start. The job as it is now.
pub async fn pause(
    services: &Services,
    job: &JobRow,
    request: PauseRequest,
    by: String,
) -> Result<JobRow, ServiceError> {
    if request.note.len() > MAX_PAUSE_NOTE_BYTES {
        return Err(ServiceError::invalid(
            "note",
            format!(
                "the note is {} bytes; at most {MAX_PAUSE_NOTE_BYTES}",
                request.note.len()
            ),
        ));
    }
    let now = services.now();
    let resume = match request.until_ms {
        None => None,
        Some(until) if until <= now.timestamp_millis() => {
            return Err(ServiceError::invalid(
                "until_ms",
                format!("{until} is not in the future"),
            ));
        }
        Some(until) => {
            let until = chrono::DateTime::from_timestamp_millis(until).ok_or_else(|| {
                ServiceError::invalid("until_ms", format!("{until} is not an instant"))
            })?;
            schedule_of(job)
                .ok()
                .and_then(|schedule| services.firing().rules_of(job).first_fire(&schedule, until))
                .map(|at| at.timestamp_millis())
        }
    };
    let pause = Pause {
        by,
        note: request.note,
        paused_at_ms: now.timestamp_millis(),
        until_ms: request.until_ms,
    };
    let store = services.store();
    store
        .pause_job(job.id, Some(&pause), resume, now.timestamp_millis())
        .await?
        .ok_or(ServiceError::UnknownJob(job.id))?;
    services.firing().wake();
    current(store, job.id).await
}

/// Job `id` as it is after a change (gone: deleted meanwhile).
async fn current(store: &Store, id: JobId) -> Result<JobRow, ServiceError> {
    store.job(id).await?.ok_or(ServiceError::UnknownJob(id))
}
