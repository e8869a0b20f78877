//! What the services use of the admin, each part named: [`Services`]
//! holds the store, the clock, the tenants' quotas, the limits a change is
//! checked against, and [`Firing`], the narrow handle on the firing engine
//! that a change needs (wake it, compile a module ahead, start, cancel,
//! retry or backfill a workflow run, a job's or a workflow's rules with
//! their calendars, an executor registered, a job triggered, killed or
//! backfilled and where its runs may go, a run killed, its live log, its
//! events). A service never holds the scheduler itself: what it may ask
//! of the engine is this file's list.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronbox_protocol::TriggerKind;

use crate::clock::Clock;
use crate::model::{Digest, RunId};
use crate::quotas::Quotas;
use crate::schedule::Rules;
pub use crate::scheduler::{BackfillError, WorkflowBackfillOutcome};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::secrets::SecretBox;
use crate::store::{JobRow, RunRow, Store, StoreError};
use crate::workflow::firing::{InvalidSchedule, Timetable};
use cronbox_api::JobKill;

/// The limits and policies a job definition is checked against.
#[derive(Debug, Clone)]
pub struct ChangeLimits {
    /// The most a job may ask for (timeout, concurrency, memory).
    pub job_maxima: crate::jobs::JobMaxima,
    /// Where alarm webhooks may point.
    pub alarm_nets: cronbox_net_policy::NetPolicy,
    /// The key secrets are sealed under; none: secrets cannot be set.
    pub secrets: Option<Arc<SecretBox>>,
}

/// The services' context (cheap to clone).
#[derive(Debug, Clone)]
pub struct Services {
    store: Store,
    clock: Arc<dyn Clock>,
    quotas: Arc<Quotas>,
    limits: Arc<ChangeLimits>,
    /// The operator's trace viewer, `{trace_id}` in it (`--trace-url`).
    trace_url: Option<Arc<str>>,
    /// An executor is dead after this long without a heartbeat.
    dead_after: std::time::Duration,
    firing: Firing,
}

impl Services {
    /// The context of an admin over `store`, configured by `config`,
    /// enforcing `quotas`, whose firing engine is `scheduler` (of which
    /// the services hold only [`Firing`]).
    pub fn new(
        store: Store,
        config: &SchedulerConfig,
        quotas: Arc<Quotas>,
        scheduler: &Arc<Scheduler>,
    ) -> Services {
        Services {
            store,
            clock: config.clock.clone(),
            quotas,
            limits: Arc::new(ChangeLimits {
                job_maxima: config.job_maxima,
                alarm_nets: config.alarm_nets.clone(),
                secrets: config.secrets.clone(),
            }),
            trace_url: config.trace_url.as_deref().map(Arc::from),
            dead_after: config.dead_after,
            firing: Firing(scheduler.clone()),
        }
    }

    /// Links `run`'s trace to the operator's trace viewer, when both are
    /// known.
    pub fn link_trace(&self, run: &mut RunRow) {
        if let (Some(template), Some(trace_id)) = (&self.trace_url, &run.trace_id) {
            run.trace_url = Some(template.replace("{trace_id}", trace_id));
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Tenants' quotas as this admin enforces them.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    pub fn limits(&self) -> &ChangeLimits {
        &self.limits
    }

    pub fn firing(&self) -> &Firing {
        &self.firing
    }

    /// Milliseconds since the epoch, now, by this admin's clock.
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Executors that beat since the returned instant are alive now.
    pub async fn alive_since_now(&self) -> Result<i64, StoreError> {
        crate::scheduler::alive_since(&self.store, self.now_ms(), self.dead_after).await
    }

    /// [`Services::now_ms`] as a time.
    pub fn now(&self) -> DateTime<Utc> {
        crate::scheduler::instant(self.now_ms())
    }
}

/// What a change may ask of the firing engine, and nothing else.
#[derive(Debug, Clone)]
pub struct Firing(Arc<Scheduler>);

impl Firing {
    /// Looks for due fires now: a job was started or changed.
    pub fn wake(&self) {
        self.0.wake();
    }

    /// Compiles `digest` ahead on the executors of `groups` (`from`: the
    /// version it replaces, whose functions it may reuse).
    pub fn prepare_module(&self, groups: Vec<String>, digest: Digest, from: Option<Digest>) {
        self.0.prepare_module(groups, digest, from);
    }

    /// Triggers `job` now as `kind` (its parameter replaced by `param`,
    /// sent to one of `addresses` when given): the run's id.
    pub async fn trigger(
        &self,
        job: JobRow,
        kind: TriggerKind,
        param: Option<String>,
        addresses: Option<Vec<String>>,
    ) -> Result<RunId, StoreError> {
        self.0.trigger(job, kind, param, addresses).await
    }

    /// Kills every run of `job`: waiting ones cancelled, running ones
    /// killed on their executors.
    pub async fn kill_job(&self, job: &JobRow) -> Result<JobKill, StoreError> {
        self.0.kill_job(job).await
    }

    /// Starts a backfill of `job` (see [`Scheduler::start_backfill`]).
    pub async fn start_backfill(
        &self,
        job: &JobRow,
        request: &cronbox_api::BackfillRequest,
        by: &str,
    ) -> Result<cronbox_api::Backfill, BackfillError> {
        self.0.start_backfill(job, request, by).await
    }

    /// Kills `run` on the executor running it: whether it was killed
    /// (the error: why the executor could not be asked).
    pub async fn kill_run(&self, run: &RunRow) -> Result<bool, String> {
        self.0.kill(run).await
    }

    /// A running run's log from its executor, by line offset (a legacy
    /// run's from its xxl-job executor, running or ended).
    pub async fn live_log(
        &self,
        run: &RunRow,
        offset: usize,
        limit: usize,
    ) -> Result<cronbox_protocol::LogResponse, String> {
        self.0.live_log(run, offset, limit).await
    }

    /// `run` with its start time, asked of its executor while it runs (see
    /// [`Scheduler::with_start`]).
    pub async fn with_start(&self, run: RunRow) -> RunRow {
        self.0.with_start(run).await
    }

    /// `run` as read from the database, as this admin knows it now (see
    /// [`Scheduler::as_known`]).
    pub fn as_known(&self, run: RunRow) -> RunRow {
        self.0.as_known(run)
    }

    /// Run lifecycle events from now on.
    pub fn run_events(&self) -> tokio::sync::broadcast::Receiver<crate::scheduler::RunEvent> {
        self.0.run_events()
    }

    /// Forgets the executors' cached addresses and credentials: the next
    /// dispatch reads them again (an enrolled executor was revoked).
    pub fn forget_executors(&self) {
        self.0.forget_executors();
    }

    /// The live executors of `group` now: where its runs may go.
    pub async fn group_addresses_now(&self, group: &str) -> Result<Vec<String>, StoreError> {
        self.0.group_addresses_now(group).await
    }

    /// An executor at `address` registered: runs sent to it carry `proof`
    /// (an enrolled executor's admin proof).
    pub fn executor_registered(&self, address: &str, proof: Option<String>) {
        self.0.executor_registered(address, proof);
    }

    /// A job's rules with its tenant's calendars.
    pub fn rules_of(&self, job: &JobRow) -> Rules {
        self.0.rules_of(job)
    }

    /// Reads the tenants' calendars again (one was set or deleted).
    pub async fn refresh_calendars(&self) -> Result<(), StoreError> {
        self.0.refresh_calendars().await
    }

    /// `rules` with the tenant's calendars `names`.
    pub fn with_calendars(&self, rules: Rules, tenant: &str, names: &[String]) -> Rules {
        self.0.with_calendars(rules, tenant, names)
    }

    /// A workflow's timetable (its schedule, rules and calendars).
    pub fn timetable_of(
        &self,
        workflow: &cronbox_api::Workflow,
    ) -> Result<Timetable, InvalidSchedule> {
        self.0.timetable_of(workflow)
    }

    /// Starts a run of `workflow` with `input`: the run's id.
    pub async fn start_workflow(
        &self,
        workflow: &cronbox_api::Workflow,
        input: &str,
        kind: TriggerKind,
    ) -> Result<i64, StoreError> {
        self.0.start_workflow(workflow, input, kind).await
    }

    /// Cancels workflow run `id` (its running nodes killed): whether it
    /// was running.
    pub async fn cancel_workflow(&self, id: i64) -> Result<bool, StoreError> {
        self.0.cancel_workflow(id).await
    }

    /// Runs again what did not succeed of workflow run `id`: whether it
    /// had ended so.
    pub async fn retry_workflow(&self, id: i64) -> Result<bool, StoreError> {
        self.0.retry_workflow(id).await
    }

    /// Starts the runs of `workflow`'s instants in (from_ms, to_ms].
    pub async fn backfill_workflow(
        &self,
        workflow: &cronbox_api::Workflow,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<WorkflowBackfillOutcome, StoreError> {
        self.0.backfill_workflow(workflow, from_ms, to_ms).await
    }
}
