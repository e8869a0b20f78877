//! The overlap policy: what a scheduled fire does while other runs of its
//! job are in progress anywhere (ALLOW, SKIP, CANCEL_OTHER, BUFFER_ONE),
//! and the hold a BUFFER_ONE fire waits in.

use super::*;

/// How often a fire held by BUFFER_ONE looks whether its job's runs in
/// progress have ended (and renews its lease).
const HOLD_CHECK_MS: i64 = 250;

impl Scheduler {
    /// The job's overlap policy for a scheduled fire while other runs of
    /// the job are in progress anywhere: SKIP ends the fire as a cancelled
    /// run saying so (false: do not send it); CANCEL_OTHER kills them first.
    pub(super) async fn overlap_allows(
        self: &Arc<Self>,
        job: &JobRow,
        run: &RunRow,
        now: i64,
    ) -> Result<bool, StoreError> {
        use cronbox_api::OverlapPolicy;
        let policy = job.schedule_rules.overlap;
        if policy == OverlapPolicy::Allow {
            return Ok(true);
        }
        let running: Vec<RunRow> = self
            .store
            .running_runs(job.id)
            .await?
            .into_iter()
            .filter(|other| other.id != run.id)
            .collect();
        let skip = |why: String| async move {
            let end = RunEnd::cancelled(run.id, &format!("skipped: {why}"), now);
            if let Some(ended) = self.store.finish_run(&end).await? {
                self.metrics
                    .run_ended(&ended.tenant, ended.job_id, RunStatus::Cancelled.as_str());
                self.sink.events.send(|| RunEvent::ended(&ended));
            }
            Ok::<bool, StoreError>(false)
        };
        let ids: Vec<String> = running.iter().map(|other| other.id.to_string()).collect();
        if policy == OverlapPolicy::BufferOne {
            // An earlier fire held already goes first; this one is skipped.
            let waiting = self.store.earlier_waiting_fires(run).await?;
            if waiting > 0 {
                return skip(
                    "an earlier fire of the job waits to run (overlap BUFFER_ONE)".to_owned(),
                )
                .await;
            }
            if running.is_empty() {
                return Ok(true);
            }
            // Held, pending, until the runs in progress end.
            let scheduler = self.clone();
            let held = run.clone();
            self.tasks
                .spawn(async move { scheduler.hold_until_alone(held).await });
            return Ok(false);
        }
        if running.is_empty() {
            return Ok(true);
        }
        if policy == OverlapPolicy::Skip {
            return skip(format!(
                "run {} of the job was in progress (overlap SKIP)",
                ids.join(", ")
            ))
            .await;
        }
        for other in &running {
            if let Err(error) = self.kill(other).await {
                tracing::warn!(run = %other.id, %error, "overlap CANCEL_OTHER: cannot kill");
            }
        }
        Ok(true)
    }

    /// Holds a fire (BUFFER_ONE) until no other run of its job is in
    /// progress, keeping its lease, then dispatches it; gives up if the
    /// run stops being pending (its job stopped, killed or deleted).
    async fn hold_until_alone(self: Arc<Self>, run: RunRow) {
        let leased_until = loop {
            self.config
                .clock
                .sleep_until(self.now_ms() + HOLD_CHECK_MS)
                .await;
            let now = self.now_ms();
            match self
                .store
                .take_leases(&[(run.id, run.scheduled_at_ms)], now)
                .await
            {
                Ok(taken) if taken == [run.id] => {}
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(run = %run.id, %error, "cannot keep a held run's lease");
                    return;
                }
            }
            match self.store.running_runs(run.job_id).await {
                Ok(running) if running.is_empty() => break now + self.store.leases().dispatch_ms(),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(run = %run.id, %error, "cannot read a held run's job");
                    return;
                }
            }
        };
        self.dispatch_now(run, leased_until, Known::Nothing, None);
    }
}
