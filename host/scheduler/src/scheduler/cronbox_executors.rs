//! The [`Transport`] of cronbox executors: run commands (built by
//! `command.rs`) sent in batches (`batching.rs`), kills, live logs and
//! probes over cronbox's executor protocol, each request with what this
//! admin presents to that executor (`sending.rs`'s bearer).

use super::*;

use cronbox_protocol::{KillCommand, KillResponse, LogQuery, LogResponse};

use super::transport::{Delivery, Transport};

/// Cronbox executors, reached through the scheduler's client, bearers and
/// command queues.
pub(super) struct CronboxExecutors<'a> {
    pub(super) scheduler: &'a Arc<Scheduler>,
}

impl Probe for CronboxExecutors<'_> {
    async fn beat(&self, address: &str) -> bool {
        let bearer = self.scheduler.executor_bearer(address).await;
        self.scheduler
            .dispatcher
            .http
            .post(format!("{address}{}", executor_paths::BEAT))
            .bearer_auth(bearer)
            .send()
            .await
            .is_ok_and(|response| response.status().is_success())
    }

    async fn idle(&self, address: &str, job_id: u64) -> bool {
        let bearer = self.scheduler.executor_bearer(address).await;
        let response = self
            .scheduler
            .dispatcher
            .http
            .post(format!("{address}{}", executor_paths::IDLE_BEAT))
            .bearer_auth(bearer)
            .json(&IdleBeatRequest { job_id })
            .send()
            .await;
        match response {
            Ok(response) if response.status().is_success() => response
                .json::<IdleBeatResponse>()
                .await
                .is_ok_and(|beat| beat.idle),
            _ => false,
        }
    }
}

impl CronboxExecutors<'_> {
    /// Sends `command` to `address`: the ids of the runs it killed.
    async fn kill(&self, address: &str, command: KillCommand) -> Result<Vec<u64>, String> {
        let answer: KillResponse = self
            .scheduler
            .post_within(address, executor_paths::KILL, &command, None)
            .await?;
        Ok(answer.killed)
    }
}

impl Transport for CronboxExecutors<'_> {
    async fn deliver(
        &self,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
    ) -> Result<Delivery, StoreError> {
        let scheduler = self.scheduler;
        let body = match scheduler
            .commands
            .build(job, run, address, state, scheduler.now_ms())
            .await?
        {
            Ok(body) => body,
            Err(why) => return Ok(Delivery::Failed(why)),
        };
        Ok(match scheduler.send_command(address, body).await {
            Answer::Response(answer) if answer.accepted => Delivery::Accepted,
            Answer::Response(answer) => {
                let reason = answer
                    .refused
                    .map(|outcome| outcome.message())
                    .unwrap_or_else(|| "refused".to_owned());
                Delivery::Failed(format!("{address} refused the run: {reason}"))
            }
            // The executor already has this run: an earlier dispatch
            // reached it but the admin died before recording it. Its
            // result will come by callback.
            Answer::Refused { status: 409, .. } => Delivery::Accepted,
            Answer::Refused { status, message } => {
                // The executor's answer stays in the operator's log; the
                // run's message (a tenant reads it) gets the status only.
                let status = reqwest::StatusCode::from_u16(status)
                    .map_or_else(|_| status.to_string(), |status| status.to_string());
                tracing::warn!(run = %run.id, %address, %status, message, "executor refused a trigger");
                Delivery::Failed(format!("trigger failed: {address} answered {status}"))
            }
            Answer::Failed(message) => Delivery::Failed(message),
        })
    }

    fn results_name_kills(&self) -> bool {
        true
    }

    async fn kill_run(&self, run: &RunRow, address: &str) -> Result<bool, String> {
        let run_id = run.id.wire();
        let killed = self.kill(address, KillCommand::Run { run_id }).await?;
        Ok(killed.contains(&run_id))
    }

    async fn kill_job(&self, job: &JobRow, address: &str) -> Result<Vec<u64>, String> {
        let job_id = job.id.wire();
        self.kill(address, KillCommand::Job { job_id }).await
    }

    async fn live_log(
        &self,
        run: &RunRow,
        address: &str,
        offset: usize,
        limit: usize,
        timeout: Option<Duration>,
    ) -> Result<LogResponse, String> {
        let query = LogQuery {
            run_id: run.id.wire(),
            offset,
            limit,
        };
        self.scheduler
            .post_within(address, executor_paths::LOG, &query, timeout)
            .await
    }

    async fn started_at(&self, run: &RunRow, address: &str) -> Option<i64> {
        let asked = self
            .live_log(run, address, 0, 0, Some(Duration::from_secs(1)))
            .await;
        asked.ok().and_then(|answer| answer.started_at_ms)
    }
}

impl Scheduler {
    /// POSTs `body` to cronbox executor `executor` (an address the admin
    /// routed to) with what this admin presents to it, within `timeout`
    /// (default: the dispatch timeout), and decodes its answer.
    pub(super) async fn post_within<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        executor: &str,
        path: &str,
        body: &B,
        timeout: Option<Duration>,
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
}
