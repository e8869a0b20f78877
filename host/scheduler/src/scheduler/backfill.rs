//! Backfills: a job's schedule run over a past range on request. The
//! instants are computed up front (the job's schedule and rules, no
//! jitter), bounded, and written as runs of kind `backfill` a second's
//! worth at a time on the admin's clock, each dispatched at once (through
//! the job's overlap policy, like a scheduled fire). A cancel stops the
//! writing; runs already written go on. An instant of a job is backfilled
//! once, however many backfills cover it.

use cronbox_api::{Backfill, BackfillRequest};

use super::*;

/// Most instants one backfill writes.
pub const MAX_BACKFILL_FIRES: usize = 10_000;
/// Runs written per second unless asked otherwise.
pub const DEFAULT_PER_SECOND: i64 = 10;
/// Most runs written per second.
pub const MAX_PER_SECOND: i64 = 1_000;

/// Why a backfill was refused.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    /// The request says something the job's schedule cannot do; `field`
    /// names the part.
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// The tenant's backfills would have more runs to write than its
    /// quota.
    #[error(transparent)]
    Quota(#[from] crate::quotas::QuotaExceeded),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: &'static str, message: impl Into<String>) -> BackfillError {
    BackfillError::Invalid {
        field,
        message: message.into(),
    }
}

/// The instants of `job`'s schedule (with its window and excluded dates)
/// in (`from_ms`, `to_ms`].
fn instants(
    job: &JobRow,
    rules: &Rules,
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<i64>, BackfillError> {
    let schedule = schedule_of(job).map_err(|error| invalid("schedule_conf", error.to_string()))?;
    let instant = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let mut next = match &schedule {
        Schedule::Cron { .. } | Schedule::FixRate(_) => {
            rules.next_after(&schedule, instant(from_ms))
        }
        Schedule::OneShot(at) => Some(*at).filter(|at| at.timestamp_millis() > from_ms),
        Schedule::FixDelay(_) | Schedule::None => {
            return Err(invalid(
                "job",
                format!(
                    "a {} schedule has no instants to backfill (its fires follow its runs, or \
                     it has none)",
                    job.schedule_type
                ),
            ));
        }
    };
    let mut found = Vec::new();
    while let Some(at) = next {
        let ms = at.timestamp_millis();
        if ms > to_ms {
            break;
        }
        if found.len() == MAX_BACKFILL_FIRES {
            return Err(invalid(
                "to_ms",
                format!(
                    "the range holds more than {MAX_BACKFILL_FIRES} fires; backfill it in parts"
                ),
            ));
        }
        found.push(ms);
        next = match &schedule {
            Schedule::OneShot(_) => None,
            _ => rules.next_after(&schedule, at),
        };
    }
    Ok(found)
}

impl Scheduler {
    /// Starts a backfill of `job` (the caller may see it) by `by`: checks
    /// the range, records the backfill and starts writing its runs.
    pub async fn start_backfill(
        self: &Arc<Self>,
        job: &JobRow,
        request: &BackfillRequest,
        by: &str,
    ) -> Result<Backfill, BackfillError> {
        let now = self.now_ms();
        if request.from_ms >= request.to_ms {
            return Err(invalid("to_ms", "to_ms must be after from_ms"));
        }
        if request.to_ms > now {
            return Err(invalid(
                "to_ms",
                "a backfill covers the past: to_ms is in the future",
            ));
        }
        let per_second = request.per_second.unwrap_or(DEFAULT_PER_SECOND);
        if !(1..=MAX_PER_SECOND).contains(&per_second) {
            return Err(invalid(
                "per_second",
                format!("per_second must be 1 to {MAX_PER_SECOND}"),
            ));
        }
        let instants = instants(job, &self.rules_of(job), request.from_ms, request.to_ms)?;
        if instants.is_empty() {
            return Err(invalid(
                "from_ms",
                "the job's schedule has no fire in the range",
            ));
        }
        let backfill_runs = cronbox_api::Quota::BackfillRuns;
        let adding = instants.len() as u64;
        self.quotas
            .check_more(&self.store, &job.tenant, backfill_runs, adding, now)
            .await??;
        let backfill = self
            .store
            .create_backfill(&Backfill {
                id: 0,
                tenant: job.tenant.clone(),
                job_id: job.id,
                from_ms: request.from_ms,
                to_ms: request.to_ms,
                per_second,
                planned: instants.len() as i64,
                written: 0,
                status: "running".to_owned(),
                created_by: by.to_owned(),
                created_at_ms: now,
            })
            .await?;
        let scheduler = self.clone();
        let (id, job) = (backfill.id, job.clone());
        self.tasks.spawn(async move {
            if let Err(error) = scheduler
                .write_backfill(id, &job, &instants, per_second)
                .await
            {
                tracing::error!(backfill = id, %error, "backfill stopped");
            }
        });
        Ok(backfill)
    }

    /// Writes and dispatches a backfill's runs, `per_second` a second, until
    /// done or cancelled.
    async fn write_backfill(
        self: &Arc<Self>,
        id: i64,
        job: &JobRow,
        instants: &[i64],
        per_second: i64,
    ) -> Result<(), StoreError> {
        let mut tick = self.now_ms();
        let chunks = instants.chunks(per_second as usize);
        let last_chunk = chunks.len() - 1;
        for (index, chunk) in chunks.enumerate() {
            let running = self
                .store
                .backfill(id)
                .await?
                .is_some_and(|backfill| backfill.status == "running");
            if !running {
                return Ok(());
            }
            let mut written = 0;
            for at in chunk {
                let run = NewRun::of_job(job, TriggerKind::Backfill, *at);
                let now = self.now_ms();
                if let Some(run_id) = self.store.insert_backfill_run(&run, now).await? {
                    written += 1;
                    let row = planner::written_run(run_id, &job.tenant, &run, now);
                    let leased_until = self.store.leases().write_until(row.scheduled_at_ms, now);
                    self.clone()
                        .dispatch_now(row, leased_until, Known::Nothing, None);
                }
            }
            let next = chunk.last().copied().unwrap_or_default();
            if !self
                .store
                .advance_backfill(id, next, written, index == last_chunk)
                .await?
            {
                return Ok(());
            }
            tick += 1_000;
            if index != last_chunk {
                self.config.clock.sleep_until(tick).await;
            }
        }
        Ok(())
    }
}
