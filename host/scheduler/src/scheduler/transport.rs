//! How runs reach executors: one [`Transport`] per kind of executor —
//! cronbox's own (`cronbox_executors.rs`: run commands in batches, the
//! admin's bearer) and xxl-job's (`legacy.rs`: xxl-job's wire protocol and
//! the group's access token) — and the one place that says which a job's
//! runs take ([`Scheduler::executors_of`]). Routing, sending, kills, live
//! logs and start times go through it and never ask which kind it is.

use super::*;

use cronbox_protocol::LogResponse;

use super::cronbox_executors::CronboxExecutors;
use super::legacy::XxlJobExecutors;

/// What an executor said to a run sent to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Delivery {
    /// Accepted (or already held): its result will come back.
    Accepted,
    /// Not taken, with the run's message saying why.
    Failed(String),
}

/// Requests to one kind of executor. Its probes answer FAILOVER and
/// BUSYOVER routing.
pub(super) trait Transport: Probe {
    /// Sends `run` of `job` (whose state is `state`) to `address`.
    async fn deliver(
        &self,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
    ) -> Result<Delivery, StoreError>;

    /// Whether a killed run's result says it was killed. xxl-job's report
    /// it failed (code 500), so the admin marks the kill before asking and
    /// ends the run as killed itself.
    fn results_name_kills(&self) -> bool;

    /// Asks `address` to kill `run`: whether it did.
    async fn kill_run(&self, run: &RunRow, address: &str) -> Result<bool, String>;

    /// Asks `address` to kill every run of `job` it holds: the ids of the
    /// runs it killed, where it says.
    async fn kill_job(&self, job: &JobRow, address: &str) -> Result<Vec<u64>, String>;

    /// A page of `run`'s log from `address`, by line offset, within
    /// `timeout` (default: the dispatch timeout).
    async fn live_log(
        &self,
        run: &RunRow,
        address: &str,
        offset: usize,
        limit: usize,
        timeout: Option<Duration>,
    ) -> Result<LogResponse, String>;

    /// When `run` started on `address`, if the executor says (asked
    /// within a second).
    async fn started_at(&self, run: &RunRow, address: &str) -> Option<i64>;
}

/// The transport of one job's executors.
pub(super) enum Executors<'a> {
    Cronbox(CronboxExecutors<'a>),
    XxlJob(XxlJobExecutors<'a>),
}

/// Forwards a [`Transport`] call to the transport at hand.
macro_rules! forward {
    ($executors:expr, $transport:ident => $call:expr) => {
        match $executors {
            Executors::Cronbox($transport) => $call,
            Executors::XxlJob($transport) => $call,
        }
    };
}

impl Probe for Executors<'_> {
    async fn beat(&self, address: &str) -> bool {
        forward!(self, transport => transport.beat(address).await)
    }

    async fn idle(&self, address: &str, job_id: u64) -> bool {
        forward!(self, transport => transport.idle(address, job_id).await)
    }
}

impl Transport for Executors<'_> {
    async fn deliver(
        &self,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
    ) -> Result<Delivery, StoreError> {
        forward!(self, transport => transport.deliver(job, run, address, state).await)
    }

    fn results_name_kills(&self) -> bool {
        forward!(self, transport => transport.results_name_kills())
    }

    async fn kill_run(&self, run: &RunRow, address: &str) -> Result<bool, String> {
        forward!(self, transport => transport.kill_run(run, address).await)
    }

    async fn kill_job(&self, job: &JobRow, address: &str) -> Result<Vec<u64>, String> {
        forward!(self, transport => transport.kill_job(job, address).await)
    }

    async fn live_log(
        &self,
        run: &RunRow,
        address: &str,
        offset: usize,
        limit: usize,
        timeout: Option<Duration>,
    ) -> Result<LogResponse, String> {
        forward!(self, transport => transport.live_log(run, address, offset, limit, timeout).await)
    }

    async fn started_at(&self, run: &RunRow, address: &str) -> Option<i64> {
        forward!(self, transport => transport.started_at(run, address).await)
    }
}

impl Scheduler {
    /// The transport of `job`'s executors: xxl-job's for a legacy job (one
    /// naming an `executor_handler`; its group as read in the last
    /// second), cronbox's for every other. `Err` names why a legacy job's
    /// runs cannot go anywhere (its group is no longer a legacy group).
    pub(super) async fn executors_of(
        self: &Arc<Self>,
        job: &JobRow,
    ) -> Result<Result<Executors<'_>, String>, StoreError> {
        if job.executor_handler.is_none() {
            return Ok(Ok(Executors::Cronbox(CronboxExecutors { scheduler: self })));
        }
        Ok(match self.legacy_group(&job.group_name).await? {
            Some(group) => Ok(Executors::XxlJob(XxlJobExecutors {
                http: &self.dispatcher.http,
                clock: self.config.clock.as_ref(),
                group_name: job.group_name.clone(),
                group,
            })),
            None => Err(format!(
                "group {:?} is no longer a legacy group",
                job.group_name
            )),
        })
    }

    /// The transport of the executor `run` was sent to, and its address,
    /// for what is asked of it afterwards (a legacy run's job is read for
    /// its group).
    pub(super) async fn executors_of_run(
        self: &Arc<Self>,
        run: &RunRow,
    ) -> Result<(Executors<'_>, String), String> {
        let Some(address) = run.executor.clone() else {
            return Err("the run was not dispatched to an executor".to_owned());
        };
        if !run.is_legacy() {
            return Ok((
                Executors::Cronbox(CronboxExecutors { scheduler: self }),
                address,
            ));
        }
        let job = self
            .store
            .job(run.job_id)
            .await
            .map_err(|error| error.to_string())?
            .ok_or_else(|| "the run's job no longer exists".to_owned())?;
        let executors = self
            .executors_of(&job)
            .await
            .map_err(|error| error.to_string())??;
        Ok((executors, address))
    }
}
