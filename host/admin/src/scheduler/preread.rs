//! The pre-read: every pass claims the fires due within the window and
//! writes them as pending runs, those of the next two seconds a second at
//! a time and then the rest of the window at once, in batches of jobs (with `FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so several admins share the due jobs), then hands them to
//! dispatch.

use super::*;

/// Scheduled time a step of the pre-read claims fires over while they are
/// near (see [`CLAIM_IN_STEPS_MS`]): every job's fires within it are
/// written before any later fire.
pub(super) const CLAIM_STEP_MS: i64 = 1_000;

/// Scheduled time past the pass's horizon that a job claimed in the pass's
/// last step has its fires written for too. A claim's cost is mostly per
/// job (its row read, its next fire planned and moved, its share of the
/// commit), so a job firing every second claimed for two of its fires at
/// once costs the single writer about two thirds of what two claims did.
/// Only the last step reaches further: a pass catching up claims each
/// job's nearest fires first.
pub const CLAIM_PAST_HORIZON_MS: i64 = 1_000;

/// Scheduled time from now within which the pre-read claims fires a step
/// ([`CLAIM_STEP_MS`]) at a time; past it, the rest of the window goes in
/// one step.
pub(super) const CLAIM_IN_STEPS_MS: i64 = 2_000;

/// Where the pre-read's next step of claims ends (inclusive). A step that
/// starts within [`CLAIM_IN_STEPS_MS`] of `now` claims [`CLAIM_STEP_MS`]
/// of scheduled time from the earliest job due, or from where the last
/// step ended (`claimed_until`), whichever is later (fires already overdue
/// all go in the first): the fires about to be sent, every job's written
/// before any later fire. A step that starts past it claims the rest of
/// the window at once: a claim's cost is mostly per job, and a pass
/// catching up on five seconds in one-second steps claimed every job five
/// times, so a slow pass made the next one as slow. Never past the
/// horizon.
pub(super) fn step_end(earliest_due: i64, claimed_until: i64, now: i64, horizon: i64) -> i64 {
    let from = earliest_due.max(claimed_until);
    if from < now + CLAIM_IN_STEPS_MS {
        (from + CLAIM_STEP_MS - 1).min(horizon)
    } else {
        horizon
    }
}

/// How far the fires of a job claimed in a step ending at `until` are
/// planned: [`CLAIM_PAST_HORIZON_MS`] past the pass's `horizon` in its last
/// step, the step's end in the others.
pub(super) fn planned_until(until: i64, horizon: i64) -> i64 {
    if until >= horizon {
        horizon + CLAIM_PAST_HORIZON_MS
    } else {
        until
    }
}

impl Scheduler {
    /// One pass: claim every fire due within the pre-read window, in
    /// batches of jobs, one transaction each (a transaction per job cost a
    /// commit per fire: at thousands of fires a second the commits were the
    /// admin's largest cost on SQLite).
    ///
    /// Fires are claimed nearest first (see [`step_end`]):
    /// a pass that claimed each job's whole window in turn wrote the last
    /// jobs' next-second fires after their dispatch time whenever it had
    /// seconds of fires to catch up on (its first pass, or after a slow
    /// one), so those runs started seconds late while fires four seconds
    /// away were already written.
    pub(super) async fn pre_read(self: &Arc<Self>) -> Result<(), StoreError> {
        self.refresh_stale_calendars().await?;
        let batch = self.store.claim_batch();
        let now = self.now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        let mut claimed_until = now;
        loop {
            let Some(earliest_due) = self.store.earliest_due().await? else {
                return Ok(());
            };
            if earliest_due > horizon {
                return Ok(());
            }
            let until = step_end(earliest_due, claimed_until, now, horizon);
            loop {
                if self.metrics.dispatch_backlog.get() >= self.config.max_backlog as i64 {
                    // Claimed fires would only wait in memory: leave them in
                    // their jobs until the backlog drains.
                    self.metrics.pre_reads_held.inc();
                    tracing::debug!("dispatch backlog full; pre-read held");
                    return Ok(());
                }
                let plan_until = planned_until(until, horizon);
                let claimed = self
                    .store
                    .claim_due_batch(until, batch as i64, now, |job| {
                        plan_job(job, &self.rules_of_due(job), now, plan_until)
                    })
                    .await?;
                let count = claimed.len();
                let mut written = Vec::new();
                for claim in &claimed {
                    self.collect_written(&claim.job.tenant, &claim.written, now, &mut written);
                }
                self.clone().dispatch_all_at(written, Lease::Written);
                if count < batch {
                    break;
                }
            }
            if until >= horizon {
                return Ok(());
            }
            claimed_until = until;
        }
    }

    /// The rows of the fires just written for a job of `tenant` (counted),
    /// to dispatch.
    pub(super) fn collect_written(
        &self,
        tenant: &str,
        fires: &[(Option<RunId>, NewRun)],
        now: i64,
        written: &mut Vec<RunRow>,
    ) {
        for (id, fire) in fires {
            if let Some(id) = id {
                self.metrics.fires.inc();
                written.push(written_run(*id, tenant, fire, now));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_fires_are_claimed_a_second_at_a_time_and_the_rest_at_once() {
        let now = 100_000;
        let horizon = now + 5_000;
        // Overdue jobs and the next second's go in the first step.
        assert_eq!(step_end(now - 60_000, now, now, horizon), now + 999);
        // The second after it is a step of its own.
        assert_eq!(step_end(now + 1_000, now + 999, now, horizon), now + 1_999);
        // A job still due before the last step's end (one another admin
        // holds) does not hold the steps back.
        assert_eq!(step_end(now + 500, now + 999, now, horizon), now + 1_998);
        // Past the first seconds, the rest of the window in one step: a
        // pass catching up on five seconds claims each job three times,
        // not five.
        assert_eq!(step_end(now + 2_000, now + 1_999, now, horizon), horizon);
        // A quiet stretch is skipped: the rest from the earliest due.
        assert_eq!(step_end(now + 3_200, now, now, horizon), horizon);
        // A pass that keeps up claims the second its horizon moved on by,
        // in one step.
        assert_eq!(step_end(now + 4_500, now, now, horizon), horizon);
    }

    #[test]
    fn only_the_last_step_plans_past_the_horizon() {
        let horizon = 105_000;
        assert_eq!(planned_until(101_999, horizon), 101_999);
        assert_eq!(
            planned_until(horizon, horizon),
            horizon + CLAIM_PAST_HORIZON_MS
        );
    }
}
