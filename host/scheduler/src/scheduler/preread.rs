//! The pre-read: every pass claims the fires due within the window and
//! writes them as pending runs, a second of scheduled time at a time
//! (nearest first) and in batches of jobs (with `FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so several admins share the due jobs), then hands them to
//! dispatch.

use super::*;

/// Scheduled time the pre-read claims fires over in one step: every job's
/// fires within a step are written before any fire of the next.
pub(super) const CLAIM_STEP_MS: i64 = 1_000;

/// Scheduled time past the pass's horizon that a job claimed in the pass's
/// last step has its fires written for too. A claim's cost is mostly per
/// job (its row read, its next fire planned and moved, its share of the
/// commit), so a job firing every second claimed for two of its fires at
/// once costs the single writer about two thirds of what two claims did.
/// Only the last step, the one a pass that keeps up makes, reaches
/// further: a pass catching up claims each job's nearest fires first.
pub const CLAIM_PAST_HORIZON_MS: i64 = 1_000;

/// Where the pre-read's next step of claims ends (inclusive): a step's
/// length of scheduled time from the earliest job due (or from where the
/// last step ended, whichever is later, so that steps always advance),
/// never past the pass's horizon. Fires already overdue are all claimed in
/// the first step.
pub(super) fn step_end(earliest_due: i64, claimed_until: i64, horizon: i64) -> i64 {
    (earliest_due.max(claimed_until) + CLAIM_STEP_MS - 1).min(horizon)
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
    /// Fires are claimed in steps of [`CLAIM_STEP_MS`] of scheduled time,
    /// nearest first: a pass that claimed each job's whole window in turn
    /// wrote the last jobs' next-second fires after their dispatch time
    /// whenever it had seconds of fires to catch up on (its first pass, or
    /// after a slow one), so those runs started seconds late while fires
    /// four seconds away were already written.
    pub(super) async fn pre_read(self: &Arc<Self>) -> Result<(), StoreError> {
        self.refresh_stale_calendars().await?;
        // Run ends, marks and the checkpoint wait for the pass's claims at
        // SQLite's writer (bounded: `ends::ENDS_YIELD_MOST`).
        let _first = self.store.urgent_writes();
        let batch = self.store.claim_batch();
        let now = self.now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        let mut claimed_until = now;
        while claimed_until < horizon {
            let Some(earliest_due) = self.store.earliest_due().await? else {
                return Ok(());
            };
            if earliest_due > horizon {
                return Ok(());
            }
            let until = step_end(earliest_due, claimed_until, horizon);
            loop {
                if self.metrics.dispatch_backlog.get() >= self.config.max_backlog as i64 {
                    // Claimed fires would only wait in memory: leave them in
                    // their jobs until the backlog drains.
                    self.metrics.pre_reads_held.inc();
                    tracing::debug!("dispatch backlog full; pre-read held");
                    return Ok(());
                }
                let plan_until = planned_until(until, horizon);
                let claim = self.store.claim_due(until, batch as i64).await?;
                let plans = claim
                    .jobs()
                    .iter()
                    .map(|job| plan_job(job, &self.rules_of_due(job), now, plan_until))
                    .collect();
                let claimed = claim.write(plans, now).await?;
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
            claimed_until = until;
        }
        Ok(())
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
    fn steps_start_at_the_earliest_due_and_always_advance() {
        let now = 100_000;
        let horizon = now + 5_000;
        // Overdue jobs and the next second's go in the first step.
        assert_eq!(step_end(now - 60_000, now, horizon), now + 999);
        // A second's fires of an every-second job are one step, not two.
        assert_eq!(step_end(now + 1_000, now + 999, horizon), now + 1_999);
        // A quiet stretch is skipped: the step starts at the earliest due.
        assert_eq!(step_end(now + 3_200, now, horizon), now + 4_199);
        // A job still due before the last step's end (one another admin
        // holds) does not hold the steps back.
        assert_eq!(step_end(now + 500, now + 2_000, horizon), now + 2_999);
        // Never past the horizon.
        assert_eq!(step_end(now + 4_800, now, horizon), horizon);
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
