//! Triggers: a job run now (manual, API, a parent's success), written
//! then dispatched at once.

use super::*;

impl Scheduler {
    /// Triggers `job` now (manual, API, parent): writes the run, then
    /// dispatches it with the job as read here (a trigger reads its job
    /// once). `param` overrides the job's parameter.
    pub async fn trigger(
        self: &Arc<Self>,
        job: JobRow,
        kind: TriggerKind,
        param: Option<String>,
        addresses: Option<Vec<String>>,
    ) -> Result<RunId, StoreError> {
        let now = self.now_ms();
        let run = NewRun {
            param: param.unwrap_or_else(|| job.param.clone()),
            ..NewRun::of_job(&job, kind, now)
        };
        let id = self.store.insert_run(&run, now).await?;
        let row = planner::written_run(id, &job.tenant, &run, now);
        // Written with this admin's lease, so no other admin sends it.
        let leased_until = self.store.leases().write_until(row.scheduled_at_ms, now);
        self.clone()
            .dispatch_now(row, leased_until, Known::Job(Box::new(job)), addresses);
        Ok(id)
    }

    /// Triggers the job `id` if it still exists (a child of a run that
    /// succeeded); `false` if it does not.
    pub(super) async fn trigger_child(self: &Arc<Self>, id: JobId) -> Result<bool, StoreError> {
        let Some(job) = self.store.job(id).await? else {
            return Ok(false);
        };
        self.trigger(job, TriggerKind::Parent, None, None).await?;
        Ok(true)
    }

    /// Dispatches `run` at once in its pool, to `addresses` if given.
    /// (A plain function: a trigger dispatches, and a dispatch can end a
    /// run and trigger children, so an async one would contain itself.)
    pub(super) fn dispatch_now(
        self: Arc<Self>,
        run: RunRow,
        leased_until: i64,
        known: Known,
        addresses: Option<Vec<String>>,
    ) {
        let scheduler = self.clone();
        // In the trace of whatever asked for it (a parent run's end).
        let span = tracing::Span::current();
        self.tasks.spawn(tracing::Instrument::instrument(
            async move {
                scheduler
                    .dispatch_in_pool(&run, leased_until, known, addresses)
                    .await
            },
            span,
        ));
    }
}
