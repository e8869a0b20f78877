//! The pre-read: every pass claims the fires due within the window and
//! writes them as pending runs (per job on SQLite, in batches with `FOR
//! UPDATE SKIP LOCKED` on PostgreSQL), then hands them to dispatch.

use super::*;

impl Scheduler {
    /// One pass: claim every fire due within the pre-read window.
    pub(super) async fn pre_read(self: &Arc<Self>) -> Result<(), StoreError> {
        self.refresh_stale_calendars().await?;
        if self.store.backend() == crate::store::Backend::Postgres {
            return self.pre_read_shared().await;
        }
        let now = self.now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        let mut written = Vec::new();
        for job in self.store.due_jobs(horizon, 5_000).await? {
            let Some(expected) = job.next_fire_at_ms else {
                continue;
            };
            let Some((runs, next)) = plan_job(&job, &self.rules_of(&job), now, horizon) else {
                self.store.set_enabled(job.id, false, None, now).await?;
                continue;
            };
            if let Some(ids) = self
                .store
                .claim_fires(job.id, expected, next, &runs, now)
                .await?
            {
                let fires: Vec<(Option<RunId>, NewRun)> = ids.into_iter().zip(runs).collect();
                self.collect_written(&job, &fires, now, &mut written);
            }
        }
        self.clone().dispatch_all_at(written);
        Ok(())
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

    /// The pre-read on PostgreSQL, where several admins may share the
    /// database: due jobs are claimed in batches with `FOR UPDATE SKIP
    /// LOCKED`, so each admin takes jobs no other admin holds, instead of
    /// every admin trying every job.
    pub(super) async fn pre_read_shared(self: &Arc<Self>) -> Result<(), StoreError> {
        /// Jobs claimed per transaction.
        const BATCH: i64 = 200;
        let now = self.now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        loop {
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
}
