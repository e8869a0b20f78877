//! Requests to executors on behalf of users: kill a run or a whole job,
//! read a running run's log, a running run's start. Each goes through the
//! transport of the run's executor (`transport.rs`).

use super::*;

use std::collections::HashMap;

pub use cronbox_api::JobKill;

use super::transport::Transport;

impl Scheduler {
    /// Asks the executor running `run` to kill it: whether it did. Where
    /// the executor's results do not say a run was killed (xxl-job's), the
    /// kill is marked in the database first — not in this admin's memory:
    /// the run's failure may reach another admin before the kill is
    /// answered, and must end it as killed there too — and the run is
    /// ended as killed here once the executor has killed it.
    pub async fn kill(self: &Arc<Self>, run: &RunRow) -> Result<bool, String> {
        let (executors, address) = self.executors_of_run(run).await?;
        if executors.results_name_kills() {
            return executors.kill_run(run, &address).await;
        }
        self.store
            .mark_legacy_kill(run.id, self.now_ms())
            .await
            .map_err(|error| error.to_string())?;
        let ended = match executors.kill_run(run, &address).await {
            Ok(_) => {
                let end = RunEnd {
                    executor: Some(address),
                    ..RunEnd::failed(run.id, RunOutcome::Killed, "killed", self.now_ms())
                };
                self.end_runs(vec![end], &HashMap::new())
                    .await
                    .map_err(|error| error.to_string())
            }
            Err(why) => Err(why),
        };
        let forgotten = self.store.forget_legacy_kill(run.id).await;
        ended?;
        forgotten.map_err(|error| error.to_string())?;
        Ok(true)
    }

    /// A running run's log from its executor, by line offset (a legacy
    /// run's from its xxl-job executor, which keeps it, running or ended).
    pub async fn live_log(
        self: &Arc<Self>,
        run: &RunRow,
        offset: usize,
        limit: usize,
    ) -> Result<cronbox_protocol::LogResponse, String> {
        let (executors, address) = self.executors_of_run(run).await?;
        executors.live_log(run, &address, offset, limit, None).await
    }

    /// `run` with its start time, asked of its executor when it is
    /// dispatched and its row does not have it yet (the start is written
    /// with the run's end, so as not to cost the firing path a write per
    /// run): a person looking at a running run sees it running. Asked
    /// within a second; unknown if the executor does not answer.
    pub async fn with_start(self: &Arc<Self>, mut run: RunRow) -> RunRow {
        if run.status != RunStatus::Dispatched || run.started_at_ms.is_some() {
            return run;
        }
        if let Ok((executors, address)) = self.executors_of_run(&run).await {
            run.started_at_ms = executors.started_at(&run, &address).await;
        }
        run
    }

    /// Kills a whole job: its runs waiting to be dispatched end as
    /// cancelled (pending retries included), and every executor that may
    /// hold one of its runs (running, queued or held until its instant) is
    /// told to kill them all. Returns the cancelled run ids, the killed
    /// ones, and the executors that could not be reached.
    pub async fn kill_job(self: &Arc<Self>, job: &JobRow) -> Result<JobKill, StoreError> {
        let now = self.now_ms();
        let cancelled = self
            .store
            .cancel_waiting_runs(job.id, "cancelled: the job was killed", now)
            .await?;
        for run_id in &cancelled {
            self.metrics
                .run_ended(&job.tenant, job.id, RunStatus::Cancelled.as_str());
            self.sink.events.send(|| RunEvent::Ended {
                run_id: *run_id,
                job_id: job.id,
                status: RunStatus::Cancelled,
                outcome: None,
            });
        }
        let mut addresses = self.store.executors_of_running(job.id).await?;
        // Runs sent ahead whose dispatch is not recorded yet are on one of
        // the group's executors.
        addresses.extend(self.live_addresses(&job.group_name, now).await?);
        addresses.sort();
        addresses.dedup();
        let mut killed = Vec::new();
        let mut unreachable = Vec::new();
        match self.executors_of(job).await? {
            Ok(executors) => {
                for address in addresses {
                    match executors.kill_job(job, &address).await {
                        Ok(answer) => killed.extend(answer),
                        Err(error) => unreachable.push(error),
                    }
                }
            }
            Err(why) => unreachable.push(why),
        }
        killed.sort_unstable();
        Ok(JobKill {
            cancelled,
            killed,
            unreachable,
        })
    }
}
