//! Requests to executors on behalf of users: kill a run or a whole job,
//! read a running run's log.

use super::*;

pub use cronbox_api::JobKill;

impl Scheduler {
    /// Forwards a kill to the executor running `run`.
    pub async fn kill(self: &Arc<Self>, run: &RunRow) -> Result<bool, String> {
        if run.is_legacy() {
            return self.kill_legacy(run).await;
        }
        let command = cronbox_protocol::KillCommand::Run {
            run_id: run.id.wire(),
        };
        let answer: cronbox_protocol::KillResponse = self
            .ask_executor(run, executor_paths::KILL, &command)
            .await?;
        Ok(answer.killed.contains(&(run.id.wire())))
    }

    /// A running run's log from its executor, by line offset.
    pub async fn live_log(
        &self,
        run: &RunRow,
        offset: usize,
        limit: usize,
    ) -> Result<cronbox_protocol::LogResponse, String> {
        self.live_log_within(run, offset, limit, None).await
    }

    /// [`live_log`](Self::live_log) within `timeout` (default: the
    /// dispatch timeout).
    async fn live_log_within(
        &self,
        run: &RunRow,
        offset: usize,
        limit: usize,
        timeout: Option<Duration>,
    ) -> Result<cronbox_protocol::LogResponse, String> {
        if run.is_legacy() {
            return self.legacy_log(run, offset, limit).await;
        }
        let query = cronbox_protocol::LogQuery {
            run_id: run.id.wire(),
            offset,
            limit,
        };
        self.ask_executor_within(run, executor_paths::LOG, &query, timeout)
            .await
    }

    /// `run` with its start time, asked of its executor when it is
    /// dispatched and its row does not have it yet (the start is written
    /// with the run's end, so as not to cost the firing path a write per
    /// run): a person looking at a running run sees it running. Asked
    /// within a second; unknown if the executor does not answer.
    pub async fn with_start(&self, mut run: RunRow) -> RunRow {
        if run.status != RunStatus::Dispatched || run.started_at_ms.is_some() || run.is_legacy() {
            return run;
        }
        let asked = self
            .live_log_within(&run, 0, 0, Some(Duration::from_secs(1)))
            .await;
        if let Ok(answer) = asked {
            run.started_at_ms = answer.started_at_ms;
        }
        run
    }

    /// POSTs `body` to the executor that holds `run` and decodes its answer.
    pub(super) async fn ask_executor<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        run: &RunRow,
        path: &str,
        body: &B,
    ) -> Result<R, String> {
        self.ask_executor_within(run, path, body, None).await
    }

    /// [`ask_executor`](Self::ask_executor) within `timeout` (default: the
    /// dispatch timeout).
    async fn ask_executor_within<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        run: &RunRow,
        path: &str,
        body: &B,
        timeout: Option<Duration>,
    ) -> Result<R, String> {
        let Some(executor) = &run.executor else {
            return Err("the run was not dispatched to an executor".to_owned());
        };
        self.post_within(executor, path, body, timeout).await
    }

    /// POSTs `body` to `executor` (an address the admin routed to) with the
    /// executor token and decodes its answer.
    pub(super) async fn post<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        executor: &str,
        path: &str,
        body: &B,
    ) -> Result<R, String> {
        self.post_within(executor, path, body, None).await
    }

    /// [`post`](Self::post) with its own time limit instead of the
    /// dispatch timeout, when given.
    pub(super) async fn post_within<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        executor: &str,
        path: &str,
        body: &B,
        timeout: Option<std::time::Duration>,
    ) -> Result<R, String> {
        let bearer = self.executor_bearer(executor).await;
        let mut request = self
            .dispatcher
            .http
            .post(format!("{executor}{path}"))
            .bearer_auth(bearer)
            .json(body);
        if let Some(timeout) = timeout {
            request = request.timeout(timeout);
        }
        let response = request
            .send()
            .await
            .map_err(|error| format!("{executor}: {error}"))?;
        if !response.status().is_success() {
            return Err(format!("{executor} answered {}", response.status()));
        }
        response
            .json()
            .await
            .map_err(|error| format!("{executor} answered badly: {error}"))
    }

    /// Kills a whole job: its runs waiting to be dispatched end as
    /// cancelled (pending retries included), and every executor that may
    /// hold one of its runs (running, queued or held until its instant) is
    /// told to kill them all. Returns the cancelled run ids, the killed
    /// ones, and the executors that could not be reached.
    pub async fn kill_job(&self, job: &JobRow) -> Result<JobKill, StoreError> {
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
        let mut executors = self.store.executors_of_running(job.id).await?;
        // Runs sent ahead whose dispatch is not recorded yet are on one of
        // the group's executors.
        executors.extend(self.live_addresses(&job.group_name, now).await?);
        executors.sort();
        executors.dedup();
        let mut killed = Vec::new();
        let mut unreachable = Vec::new();
        let legacy = match job.executor_handler {
            Some(_) => self.legacy_group(&job.group_name).await?,
            None => None,
        };
        for executor in executors {
            if let Some(group) = &legacy {
                match self.kill_legacy_job(job, group, &executor).await {
                    Ok(()) => {}
                    Err(error) => unreachable.push(error),
                }
                continue;
            }
            let command = cronbox_protocol::KillCommand::Job {
                job_id: job.id.wire(),
            };
            match self
                .post::<_, cronbox_protocol::KillResponse>(
                    &executor,
                    executor_paths::KILL,
                    &command,
                )
                .await
            {
                Ok(answer) => killed.extend(answer.killed),
                Err(error) => unreachable.push(error),
            }
        }
        killed.sort_unstable();
        Ok(JobKill {
            cancelled,
            killed,
            unreachable,
        })
    }
}
