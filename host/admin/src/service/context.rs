//! What the services use of the admin, each part named: [`Services`]
//! holds the store, the clock, the tenants' quotas, the limits a change is
//! checked against, and [`Firing`], the narrow handle on the firing engine
//! that a change needs (wake it, compile a module ahead, start, cancel,
//! retry or backfill a workflow run, a job's or a workflow's rules with
//! their calendars, an executor registered and which are alive). A
//! service never holds the scheduler itself: what it
//! may ask of the engine is this file's list.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronbox_protocol::TriggerKind;

use crate::clock::Clock;
use crate::model::Digest;
use crate::quotas::Quotas;
use crate::schedule::Rules;
use crate::scheduler::Scheduler;
pub use crate::scheduler::WorkflowBackfillOutcome;
use crate::secrets::SecretBox;
use crate::store::{JobRow, Store, StoreError};
use crate::workflow::firing::{InvalidSchedule, Timetable};

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
    firing: Firing,
}

impl Services {
    /// The context of an admin whose firing engine is `scheduler`.
    pub fn of(scheduler: &Arc<Scheduler>) -> Services {
        let config = scheduler.config();
        Services {
            store: scheduler.store().clone(),
            clock: config.clock.clone(),
            quotas: scheduler.shared_quotas(),
            limits: Arc::new(ChangeLimits {
                job_maxima: config.job_maxima,
                alarm_nets: config.alarm_nets.clone(),
                secrets: config.secrets.clone(),
            }),
            firing: Firing(scheduler.clone()),
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

    /// Executors that beat since this instant are alive.
    pub async fn alive_since_now(&self) -> Result<i64, StoreError> {
        self.0.alive_since_now().await
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
