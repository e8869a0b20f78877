//! Triggers: a job run now (manual, API, a parent's success), written
//! then dispatched at once.

use super::*;

impl Scheduler {
    /// Triggers a job now (manual, API, parent): writes the run, then
    /// dispatches it. `param` overrides the job's parameter.
    pub async fn trigger(
        self: &Arc<Self>,
        job_id: JobId,
        kind: TriggerKind,
        param: Option<String>,
        addresses: Option<Vec<String>>,
    ) -> Result<RunId, StoreError> {
        let Some(job) = self.store.job(job_id).await? else {
            return Err(StoreError::Database(sqlx::Error::RowNotFound));
        };
        let now = self.now_ms();
        let id = self
            .store
            .insert_run(
                &NewRun {
                    param: param.unwrap_or_else(|| job.param.clone()),
                    ..NewRun::of_job(&job, kind, now)
                },
                now,
            )
            .await?;
        if let Some(run) = self.store.run(id).await? {
            // Written with this admin's lease, so no other admin sends it.
            let leased_until = write_lease_until(run.scheduled_at_ms, run.created_at_ms);
            self.clone().dispatch_now(run, leased_until, addresses);
        }
        Ok(id)
    }

    /// Dispatches `run` at once in its pool, to `addresses` if given.
    /// (A plain function: a trigger dispatches, and a dispatch can end a
    /// run and trigger children, so an async one would contain itself.)
    pub(super) fn dispatch_now(
        self: Arc<Self>,
        run: RunRow,
        leased_until: i64,
        addresses: Option<Vec<String>>,
    ) {
        let scheduler = self.clone();
        self.tasks.spawn(async move {
            scheduler
                .dispatch_in_pool(&run, leased_until, None, addresses)
                .await
        });
    }
}
