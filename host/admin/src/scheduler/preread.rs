//! The pre-read: every pass claims the fires due within the window and
//! writes them as pending runs, in batches of jobs (with `FOR UPDATE SKIP
//! LOCKED` on PostgreSQL, so several admins share the due jobs), then
//! hands them to dispatch.

use super::*;

impl Scheduler {
    /// One pass: claim every fire due within the pre-read window, in
    /// batches of jobs, one transaction each (a transaction per job cost a
    /// commit per fire: at thousands of fires a second the commits were the
    /// admin's largest cost on SQLite).
    pub(super) async fn pre_read(self: &Arc<Self>) -> Result<(), StoreError> {
        /// Jobs claimed per transaction.
        const BATCH: i64 = 200;
        self.refresh_stale_calendars().await?;
        let now = self.now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        loop {
            if self.metrics.dispatch_backlog.get() >= self.config.max_backlog as i64 {
                // Claimed fires would only wait in memory: leave them in
                // their jobs until the backlog drains.
                self.metrics.pre_reads_held.inc();
                tracing::debug!("dispatch backlog full; pre-read held");
                return Ok(());
            }
            let claimed = self
                .store
                .claim_due_batch(horizon, BATCH, now, |job| {
                    plan_job(job, &self.rules_of(job), now, horizon)
                })
                .await?;
            let count = claimed.len();
            let mut written = Vec::new();
            for claim in &claimed {
                self.collect_written(&claim.job, &claim.written, now, &mut written);
            }
            self.clone().dispatch_all_at(written);
            if (count as i64) < BATCH {
                return Ok(());
            }
        }
    }

    /// The rows of the fires just written for `job` (counted), to dispatch.
    pub(super) fn collect_written(
        &self,
        job: &JobRow,
        fires: &[(Option<RunId>, NewRun)],
        now: i64,
        written: &mut Vec<RunRow>,
    ) {
        for (id, fire) in fires {
            if let Some(id) = id {
                self.metrics.fires.inc();
                written.push(written_run(*id, &job.tenant, fire, now));
            }
        }
    }
}
