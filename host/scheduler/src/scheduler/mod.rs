//! Firing and dispatch: the pre-read loop that turns due jobs into run rows
//! before anything is sent, millisecond timers that dispatch each run at its
//! instant, routing, and what happens when results come back (state commit,
//! retries, child jobs, FIX_DELAY).
//!
//! Every fire is written as a `pending` run before it is dispatched; on
//! start, pending runs left by a crash are dispatched (late ones at once).
//! Due jobs are claimed in batches: each job's `next_fire_at_ms` moves in
//! the same transaction that writes its runs (the jobs read under `FOR
//! UPDATE SKIP LOCKED` on PostgreSQL, behind SQLite's single writer), and
//! the unique key on (job, scheduled time, shard) makes a double fire
//! impossible. Past `max_backlog` runs waiting to be sent, nothing new is
//! claimed until they drain.
//!
//! Laid out by part and step: `planner` (pure: fires, misfire, catch-up),
//! `preread` (claims and written fires), `dispatch` (the [`Dispatcher`]:
//! timers, send windows, leases, pools), `overlap` (the overlap policy),
//! `sending` (routing and the send), `transport` (how a run reaches its
//! executor: `cronbox_executors` or xxl-job's in `legacy`), `batching`
//! (commands to one executor together), `command` (the run-command builder
//! and receipts), `sink`
//! (the result sink: marks, ends and events), `ends` (their writer),
//! `results` (what follows a run's end), `triggers` and `backfill` (runs on
//! request), `executors` (kill and log requests), `legacy` (xxl-job
//! executors and their results), `warming` (compile-ahead of new module versions) and
//! `calendars`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use cronbox_protocol::{IdleBeatRequest, IdleBeatResponse, RunResult, TriggerKind, executor_paths};
use tokio::sync::Semaphore;

use crate::clock::{Clock, SystemClock};
use crate::jobs::{children_of, schedule_of};
use crate::metrics::Metrics;
use crate::model::{JobId, MisfirePolicy, RunId, RunOutcome};
use crate::routing::{Probe, Route, RouteStrategy, Router};
use crate::schedule::{Rules, Schedule};
use crate::store::{
    DueJob, JobRow, JobState, NewRun, RunEnd, RunRow, RunStatus, Store, StoreError,
};
use crate::tasks::Tasks;

mod backfill;
mod batching;
mod calendars;
mod command;
mod cronbox_executors;
mod dispatch;
mod ends;
mod events;
mod executors;
mod intake;
mod legacy;
mod overlap;
mod planner;
mod preread;
mod results;
mod scrape;
mod sending;
mod sink;
mod slow_jobs;
mod transport;
mod triggers;
mod warming;
mod workflow_fan_out;
mod workflow_fires;
pub use workflow_fires::WorkflowBackfillOutcome;
mod workflows;
pub use workflows::WORKFLOW_SWEEP_AFTER;

pub use backfill::{BackfillError, DEFAULT_PER_SECOND, MAX_BACKFILL_FIRES, MAX_PER_SECOND};
use batching::{Answer, Batches};
pub use calendars::CALENDARS_FRESH;
use command::RunCommands;
use dispatch::*;
pub use events::RunEvent;
pub use executors::JobKill;
pub use intake::Intake;
pub use planner::plan_fires;
use planner::*;
pub use preread::CLAIM_PAST_HORIZON_MS;
pub use results::alive_since;
pub use scrape::MetricsScrape;
use sending::*;
use sink::ResultSink;
use slow_jobs::*;

/// Timing settings of the scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// How far ahead due jobs are read and their runs written (a job read
    /// has its fires in the second after that written too).
    pub pre_read: Duration,
    /// An executor is dead after this long without a heartbeat.
    pub dead_after: Duration,
    /// Dispatches in flight at once (back-pressure beyond). Each is a
    /// task waiting for its executor's answer; at 10,000 runs/s a few
    /// thousand are needed for an admin that fell behind to catch up.
    pub max_dispatches: usize,
    /// Runs whose time to be sent has come but whose dispatch has not ended
    /// (waiting for a slot, the database or an executor) beyond which the
    /// pre-read claims no new fire. The fires wait in their jobs and are
    /// claimed once the backlog drains, late (caught up within the misfire
    /// threshold, past it by the misfire policy), so an admin given more
    /// than it can send keeps its memory bounded instead of queueing every
    /// fire in memory.
    pub max_backlog: usize,
    /// Timeout of one dispatch request.
    pub dispatch_timeout: Duration,
    /// How long a dispatch holds its run, and (5 s more) a written fire
    /// past its instant: how soon another admin takes over the runs of one
    /// that died. At least the dispatch timeout and a second more.
    pub dispatch_lease: Duration,
    /// A dispatched run whose executor is dead and that has had no result
    /// for this long is marked lost (failed), then retried if it may be.
    pub lost_after: Duration,
    /// Token the admin presents to executors.
    pub executor_token: String,
    /// A PEM file of CA certificates trusted, besides the system's roots,
    /// for executors that serve TLS (`https://` addresses).
    pub ca_file: Option<std::path::PathBuf>,
    /// How long before its instant a fire is sent; the executor holds it
    /// until then, so a burst of fires due together still starts on time.
    /// Zero sends each fire at its instant.
    pub dispatch_ahead: Duration,
    /// Ended runs older than this are deleted (xxl-job's log retention).
    pub run_retention: Duration,
    /// Successful runs older than this are deleted (`None`: the
    /// `run_retention` of every run), so that failures may be kept longer.
    pub success_retention: Option<Duration>,
    /// Audit log entries older than this are deleted.
    pub audit_retention: Duration,
    /// How often the daily reports are brought up to date and old rows
    /// cleaned.
    pub housekeeping_interval: Duration,
    /// The time every scheduling decision reads, and its timers wait on.
    pub clock: Arc<dyn Clock>,
    /// Where tenants' alarm webhooks may point: the public internet, and
    /// the networks the operator allows.
    pub alarm_nets: cronbox_net_policy::NetPolicy,
    /// The most a job may ask for (timeout, concurrency, memory).
    pub job_maxima: crate::jobs::JobMaxima,
    /// Each tenant's quotas unless the operator set its own.
    pub quota_defaults: crate::quotas::QuotaDefaults,
    /// The key tenants' secrets are sealed under; none: secrets cannot be
    /// set, and a job referencing one cannot be saved.
    pub secrets: Option<Arc<crate::secrets::SecretBox>>,
    /// The operator's trace viewer, with `{trace_id}` where a run's trace
    /// id goes: a run's page links its trace there.
    pub trace_url: Option<String>,
    /// Jobs given series of their own in the metrics (`cronbox_admin_job_*`).
    pub job_metrics: Vec<crate::metrics::JobMark>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            pre_read: Duration::from_secs(5),
            dead_after: Duration::from_secs(90),
            max_dispatches: 2048,
            max_backlog: 10_000,
            dispatch_timeout: Duration::from_secs(3),
            dispatch_lease: crate::store::DEFAULT_DISPATCH_LEASE,
            lost_after: Duration::from_secs(600),
            executor_token: String::new(),
            ca_file: None,
            dispatch_ahead: Duration::from_millis(300),
            run_retention: Duration::from_secs(30 * 24 * 3600),
            audit_retention: Duration::from_secs(365 * 24 * 3600),
            success_retention: None,
            housekeeping_interval: Duration::from_secs(60),
            clock: Arc::new(SystemClock::default()),
            alarm_nets: cronbox_net_policy::NetPolicy::public_only(),
            job_maxima: crate::jobs::JobMaxima::default(),
            quota_defaults: crate::quotas::QuotaDefaults::default(),
            secrets: None,
            trace_url: None,
            job_metrics: Vec::new(),
        }
    }
}

pub fn instant(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// The scheduler of one admin process: a shared context (the store, the
/// configuration and clock, metrics, quotas, tasks) and its parts, each
/// with one job — the [`Dispatcher`] (when and where runs go), the
/// [`RunCommands`] builder (what they are sent with), the [`ResultSink`]
/// (what happens to them after) — which the pre-read, the triggers and the
/// result handling drive.
#[derive(Debug)]
pub struct Scheduler {
    store: Store,
    router: Router,
    config: SchedulerConfig,
    metrics: Arc<Metrics>,
    /// Every task the scheduler spawns (timers, dispatches, the mark
    /// writer), ended and awaited when the admin stops.
    tasks: Tasks,
    quotas: Arc<crate::quotas::Quotas>,
    /// Tenants' shared calendars, read every few seconds.
    calendars: std::sync::Mutex<calendars::CalendarCache>,
    /// Starts a pre-read pass now (a job was started or changed).
    wake: tokio::sync::Notify,
    dispatcher: Dispatcher,
    commands: RunCommands,
    sink: ResultSink,
    /// Legacy runs this admin is killing (see `legacy.rs`).
    legacy: legacy::Legacy,
    /// Cancelled when the admin stops firing (the first step of its
    /// shutdown, or all of it): no more claims, and runs claimed but not
    /// yet sent stay pending for the next start (or another admin).
    firing: tokio_util::sync::CancellationToken,
}

impl Scheduler {
    /// A scheduler over `store`, enforcing `quotas` (which the services
    /// share); `receipt_key` signs run receipts (see
    /// [`Store::receipt_key`]); runs go to executors through a client from
    /// `executor_http` (trusting what the operator trusts for them).
    pub fn new(
        store: Store,
        config: SchedulerConfig,
        quotas: Arc<crate::quotas::Quotas>,
        receipt_key: Vec<u8>,
        executor_http: reqwest::ClientBuilder,
        tasks: Tasks,
    ) -> Arc<Self> {
        let metrics = Arc::new(Metrics::new(config.job_metrics.clone()));
        Arc::new(Scheduler {
            dispatcher: Dispatcher::new(&config, executor_http),
            commands: RunCommands::new(
                store.clone(),
                quotas.clone(),
                config.secrets.clone(),
                receipt_key,
                metrics.clone(),
            ),
            sink: ResultSink::start(store.clone(), quotas.clone(), &metrics, &tasks),
            wake: tokio::sync::Notify::new(),
            metrics,
            store,
            router: Router::default(),
            quotas,
            config,
            calendars: std::sync::Mutex::new(calendars::CalendarCache::default()),
            legacy: legacy::Legacy::default(),
            firing: tasks.stopping().child_token(),
            tasks,
        })
    }

    /// `run` (as read from the database) as this admin knows it now: a
    /// run an executor accepted shows as dispatched before its dispatch
    /// mark is written (it waits for the run's end, up to two seconds).
    pub fn as_known(&self, run: RunRow) -> RunRow {
        self.sink.as_known(run)
    }

    /// Run lifecycle events from now on (see [`RunEvent`]).
    pub fn run_events(&self) -> tokio::sync::broadcast::Receiver<RunEvent> {
        self.sink.events.subscribe()
    }

    /// What stops the firing alone (see [`Scheduler::firing`]): the
    /// admin's shutdown cancels it first, so that the executors drain while
    /// results are still taken.
    pub fn firing_stop(&self) -> tokio_util::sync::CancellationToken {
        self.firing.clone()
    }

    /// Runs the pre-read loop until the admin stops firing. First recovers
    /// runs written but not dispatched by an earlier process.
    pub async fn run(self: Arc<Self>) {
        let stop = self.firing.clone();
        match self.store.pending_runs().await {
            Ok(pending) => {
                if !pending.is_empty() {
                    tracing::info!(
                        count = pending.len(),
                        "recovering runs written but not dispatched"
                    );
                }
                self.clone().dispatch_all_at(pending, Lease::ToTake);
            }
            Err(error) => tracing::error!(%error, "cannot read pending runs"),
        }
        let mut last_lost_check = std::time::Instant::now();
        // The first sweep at the first check: what a stopped admin left.
        let mut last_workflow_sweep: Option<std::time::Instant> = None;
        loop {
            if let Err(error) = self.pre_read().await {
                tracing::warn!(%error, "pre-read failed; retrying");
            }
            if let Err(error) = self.fire_due_workflows().await {
                tracing::warn!(%error, "firing due workflows failed; retrying");
            }
            if last_lost_check.elapsed() >= Duration::from_secs(1) {
                last_lost_check = std::time::Instant::now();
                if let Err(error) = self.reap_lost_runs().await {
                    tracing::warn!(%error, "lost-run check failed");
                }
                if let Err(error) = self.fail_overdue_workflows().await {
                    tracing::warn!(%error, "workflow deadline check failed");
                }
                if last_workflow_sweep
                    .is_none_or(|at| at.elapsed() >= workflows::WORKFLOW_SWEEP_AFTER)
                {
                    last_workflow_sweep = Some(std::time::Instant::now());
                    if let Err(error) = self.follow_stalled_workflows().await {
                        tracing::warn!(%error, "workflow sweep failed");
                    }
                }
                match self.store.orphaned_runs(self.now_ms(), 5_000).await {
                    Ok(orphans) if !orphans.is_empty() => {
                        // After a restart these are the admin's own from
                        // before it (or, in a cluster, a stopped admin's):
                        // nothing to warn of.
                        tracing::info!(
                            count = orphans.len(),
                            "dispatching runs left undispatched by an admin that stopped (this \
                             one before a restart, or another)"
                        );
                        self.clone().dispatch_all_at(orphans, Lease::ToTake);
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "orphaned-run check failed"),
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    /// Milliseconds since the epoch, now, by this admin's clock.
    pub(crate) fn now_ms(&self) -> i64 {
        self.config.clock.now_ms()
    }

    /// Runs a pre-read pass now instead of at the next tick: a job just
    /// started or changed may be due sooner.
    pub fn wake(&self) {
        self.wake.notify_one();
    }
}

/// Starts the engine on `tasks`: the firing loop, housekeeping, alarms
/// and, when the operator asks, the metrics sent by OTLP.
pub async fn run_engine(
    scheduler: Arc<Scheduler>,
    tasks: &Tasks,
    metrics_export: Option<cronbox_telemetry::MetricsExporter>,
) {
    if let Err(error) = scheduler.metrics.find_marked_jobs(&scheduler.store).await {
        tracing::warn!(%error, "the jobs marked for metrics were not looked up");
    }
    if let Some(exporter) = metrics_export {
        let scrape = MetricsScrape::of(&scheduler);
        let stop = tasks.stopping();
        tasks.spawn_loop(exporter.push_until(
            move || {
                let scrape = scrape.clone();
                async move { scrape.metrics_text().await }
            },
            stop.cancelled_owned(),
        ));
    }
    tasks.spawn(crate::housekeeping::run(
        scheduler.store.clone(),
        scheduler.config.clone(),
    ));
    tasks.spawn_loop(crate::alarms::run(
        scheduler.store.clone(),
        scheduler.metrics.clone(),
        scheduler.config.clock.clone(),
        scheduler.config.alarm_nets.clone(),
        tasks.clone(),
    ));
    tasks.spawn_loop(scheduler.run());
}
