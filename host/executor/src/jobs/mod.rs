//! Jobs on this executor: one queue and one task per job, honouring the
//! trigger's block strategy, with warm workers that hot-swap versions and
//! retire when idle.
//!
//! All bookkeeping lives in one table behind a std mutex that is never held
//! across an await. A job's task starts runs from its queue while fewer than
//! the job's limit are running (1, or N under CONCURRENT), keeps the workers
//! between runs, and removes the job from the table (retiring its workers,
//! which calls the guests' `destroy`) after `idle_retire` without work.
//!
//! `admission` takes a run in (checks, block strategy), `job_loop` is a
//! job's task, `slots` each tenant's share of the instance slots. Every
//! task is tracked: shutdown waits for them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use cronbox_protocol::{
    BlockStrategy, HttpLimits, IdleBeatResponse, KillCommand, LogQuery, LogResponse, Outcome,
    PrepareCommand, PrepareResponse, RunCommand, RunResponse, RunResult,
};
use cronbox_runtime::{
    InstanceMode, JobWorker, RunHandle, RunLimits, RunReport, RunRequest, Runtime,
};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::Metrics;
use crate::modules::{ModuleStore, is_digest};
use crate::spool::Spool;

mod admission;
mod job_loop;
mod slots;
mod state_view;

use admission::*;
use job_loop::*;
use slots::*;
use state_view::{RecentChanges, StartState};

/// Why a `run` was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SubmitError {
    #[error("run {0} was already received by this executor")]
    Duplicate(u64),
    #[error("the executor is shutting down")]
    Closing,
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

pub(crate) struct Jobs {
    shared: Arc<Shared>,
}

struct Shared {
    table: Mutex<Table>,
    modules: ModuleStore,
    runtime: Runtime,
    spool: Arc<Spool>,
    metrics: Arc<Metrics>,
    address: String,
    idle_retire: Duration,
    retained: Retention,
    closing: AtomicBool,
    /// Every task of the job table (each job's loop, each held run's
    /// timer): shutdown waits for them.
    tasks: TaskTracker,
    /// Cancelled at shutdown: held runs stop waiting for their start.
    stopping: CancellationToken,
    /// Each tenant's share of the instance slots: the runs it may have
    /// executing at once.
    tenant_slots: TenantSlots,
}

/// How the job table treats runs and instances.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JobSettings {
    /// An idle job's workers are retired after this long.
    pub(crate) idle_retire: Duration,
    pub(crate) retained: Retention,
    /// Runs of one tenant executing at once.
    pub(crate) tenant_share: usize,
}

/// How many finished runs keep their logs readable, and how much log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retention {
    pub(crate) runs: usize,
    pub(crate) log_bytes: usize,
}

#[derive(Default)]
struct Table {
    jobs: HashMap<u64, JobEntry>,
    /// Queued and running runs.
    active: HashMap<u64, RunHandle>,
    /// Recently finished runs, whose logs stay readable, with the bytes
    /// charged for each log.
    finished: VecDeque<(u64, RunHandle, usize)>,
    finished_log_bytes: usize,
    /// Runs received ahead of their instant (`start_in_ms`), not yet
    /// applied to their job's queue.
    held: HashMap<u64, Pending>,
    /// Every run id received lately (duplicate detection).
    seen: HashSet<u64>,
    seen_order: VecDeque<u64>,
}

/// Run ids remembered for duplicate detection.
const SEEN_CAPACITY: usize = 100_000;

struct JobEntry {
    queue: VecDeque<Pending>,
    running: HashMap<u64, RunHandle>,
    limit: usize,
    wake: Arc<Notify>,
    /// State changes of this job's successful runs here, laid over later
    /// runs' snapshots where those miss them.
    recent_changes: RecentChanges,
}

struct Pending {
    command: RunCommand,
    handle: RunHandle,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Reports a run that ended without executing (covered or killed in the
    /// queue, refused at load, dropped at shutdown).
    fn report_unstarted(&self, pending: Pending, outcome: Outcome) {
        let run_id = pending.command.trigger.run_id;
        {
            let mut table = self.lock();
            table.active.remove(&run_id);
            table.remember_finished(run_id, pending.handle.clone(), self.retained);
            self.metrics
                .retained_log_bytes
                .set(table.finished_log_bytes as i64);
        }
        self.metrics.run_ended(outcome.kind(), 0.0);
        self.spool.submit(&RunResult {
            run_id,
            job_id: pending.command.trigger.job_id,
            scheduled_at_ms: Some(pending.command.trigger.scheduled_at_ms),
            code: outcome.code(),
            outcome,
            started_at_ms: 0,
            duration_ms: 0,
            fuel_consumed: None,
            peak_memory_bytes: 0,
            module_digest: pending.command.module_digest,
            log: Vec::new(),
            log_truncated: false,
            state_changes: Default::default(),
            traceparent: None,
            state_base: Default::default(),
            executor: self.address.clone(),
            receipt: pending.command.receipt,
        });
    }

    fn report_finished(&self, command: &RunCommand, report: RunReport, start: &StartState) {
        self.metrics.run_http(
            &command.tenant,
            command.metrics_job.as_deref(),
            &report.http,
        );
        if report.new_instance {
            self.metrics.instances_created.inc();
        }
        let result = RunResult {
            state_base: start.base_of(&report),
            receipt: command.receipt.clone(),
            run_id: command.trigger.run_id,
            job_id: command.trigger.job_id,
            scheduled_at_ms: Some(command.trigger.scheduled_at_ms),
            code: report.outcome.code(),
            started_at_ms: report
                .started_at
                .duration_since(UNIX_EPOCH)
                .map(|at| at.as_millis() as i64)
                .unwrap_or(0),
            duration_ms: report.duration.as_millis() as u64,
            fuel_consumed: report.fuel_consumed,
            peak_memory_bytes: report.peak_memory_bytes,
            module_digest: report.module_digest,
            log: report.log,
            log_truncated: report.log_truncated,
            state_changes: report.state_changes,
            traceparent: command.traceparent.clone(),
            executor: self.address.clone(),
            outcome: report.outcome,
        };
        self.metrics
            .run_ended(result.outcome.kind(), report.duration.as_secs_f64());
        self.spool.submit(&result);
    }
}

impl Table {
    /// Keeps a finished run's log readable, forgetting the oldest ones past
    /// the retention's count or bytes.
    fn remember_finished(&mut self, run_id: u64, handle: RunHandle, retained: Retention) {
        let bytes = handle.log().charged_bytes();
        self.finished.push_back((run_id, handle, bytes));
        self.finished_log_bytes += bytes;
        while self.finished.len() > retained.runs || self.finished_log_bytes > retained.log_bytes {
            let Some((_, _, bytes)) = self.finished.pop_front() else {
                break;
            };
            self.finished_log_bytes -= bytes;
        }
    }

    fn remember_seen(&mut self, run_id: u64) {
        self.seen.insert(run_id);
        self.seen_order.push_back(run_id);
        while self.seen_order.len() > SEEN_CAPACITY {
            if let Some(old) = self.seen_order.pop_front() {
                self.seen.remove(&old);
            }
        }
    }

    fn handle(&self, run_id: u64) -> Option<RunHandle> {
        self.active.get(&run_id).cloned().or_else(|| {
            self.finished
                .iter()
                .rev()
                .find(|(id, ..)| *id == run_id)
                .map(|(_, handle, _)| handle.clone())
        })
    }
}

impl Jobs {
    pub(crate) fn new(
        runtime: Runtime,
        modules: ModuleStore,
        spool: Arc<Spool>,
        metrics: Arc<Metrics>,
        address: String,
        settings: JobSettings,
    ) -> Self {
        Jobs {
            shared: Arc::new(Shared {
                table: Mutex::new(Table::default()),
                modules,
                runtime,
                spool,
                metrics,
                address,
                idle_retire: settings.idle_retire,
                retained: settings.retained,
                closing: AtomicBool::new(false),
                tasks: TaskTracker::new(),
                stopping: CancellationToken::new(),
                tenant_slots: TenantSlots::new(settings.tenant_share),
            }),
        }
    }

    /// Takes a trigger: queues it, runs it, or refuses it per its strategy;
    /// a trigger with `start_in_ms` is held until then and applied then.
    /// Whether a shutdown has begun: runs are no longer taken.
    pub(crate) fn is_closing(&self) -> bool {
        self.shared.closing.load(Ordering::SeqCst)
    }

    pub(crate) fn submit(&self, command: RunCommand) -> Result<RunResponse, SubmitError> {
        validate(&command)?;
        let shared = &self.shared;
        let run_id = command.trigger.run_id;
        let mut table = shared.lock();
        if shared.closing.load(Ordering::SeqCst) {
            return Err(SubmitError::Closing);
        }
        if table.seen.contains(&run_id) {
            return Err(SubmitError::Duplicate(run_id));
        }
        table.remember_seen(run_id);
        let handle = RunHandle::new();
        if command.start_in_ms > 0 {
            let delay = Duration::from_millis(command.start_in_ms);
            table.active.insert(run_id, handle.clone());
            table.held.insert(run_id, Pending { command, handle });
            drop(table);
            let stopping = shared.stopping.clone();
            let tasks = shared.tasks.clone();
            let shared = shared.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    // Shutdown reports held runs itself.
                    () = stopping.cancelled() => return,
                }
                let Some(pending) = shared.lock().held.remove(&run_id) else {
                    return; // killed, or dropped at shutdown
                };
                if let Err(refused) = apply(&shared, pending) {
                    let Refused { pending, outcome } = *refused;
                    shared.report_unstarted(pending, outcome);
                }
            });
            return Ok(RunResponse {
                run_id,
                accepted: true,
                refused: None,
            });
        }
        drop(table);
        let pending = Pending { command, handle };
        match apply(shared, pending) {
            Ok(()) => Ok(RunResponse {
                run_id,
                accepted: true,
                refused: None,
            }),
            Err(refused) => Ok(RunResponse {
                run_id,
                accepted: false,
                refused: Some(refused.outcome),
            }),
        }
    }

    /// Fetches and compiles a module ahead of its runs (the admin asks
    /// when jobs move to a new version); answers once it is loaded or
    /// refused. Concurrent prepares and runs of one digest share one load.
    pub(crate) async fn prepare(&self, command: &PrepareCommand) -> PrepareResponse {
        let digest = command.module_digest.as_str();
        if !is_digest(digest) {
            return PrepareResponse {
                ready: false,
                error: Some(format!(
                    "module_digest must be a sha256 in lowercase hex (64 characters), got {digest:?}"
                )),
                took_ms: 0,
            };
        }
        let started = std::time::Instant::now();
        let loaded = self.shared.modules.get(&command.module_digest).await;
        PrepareResponse {
            ready: loaded.is_ok(),
            error: loaded.err(),
            took_ms: started.elapsed().as_millis() as u64,
        }
    }

    /// Stops a run, or every run of a job; queued runs end as killed
    /// without starting.
    pub(crate) fn kill(&self, command: KillCommand) -> Vec<u64> {
        let mut dequeued = Vec::new();
        let mut killed = Vec::new();
        // Held runs were never queued (no queue gauge to move).
        let mut unstarted = Vec::new();
        {
            let mut table = self.shared.lock();
            let held: Vec<u64> = table
                .held
                .iter()
                .filter(|(run_id, pending)| match command {
                    KillCommand::Run { run_id: id } => id == **run_id,
                    KillCommand::Job { job_id } => job_id == pending.command.trigger.job_id,
                })
                .map(|(run_id, _)| *run_id)
                .collect();
            for run_id in held {
                if let Some(pending) = table.held.remove(&run_id) {
                    killed.push(run_id);
                    pending.handle.kill();
                    unstarted.push(pending);
                }
            }
            for (job_id, entry) in table.jobs.iter_mut() {
                let matches_job =
                    matches!(command, KillCommand::Job { job_id: id } if id == *job_id);
                let wanted = |run_id: u64| {
                    matches_job
                        || matches!(command, KillCommand::Run { run_id: id } if id == run_id)
                };
                for (run_id, handle) in &entry.running {
                    if wanted(*run_id) {
                        handle.kill();
                        killed.push(*run_id);
                    }
                }
                let (out, keep): (Vec<Pending>, Vec<Pending>) = entry
                    .queue
                    .drain(..)
                    .partition(|pending| wanted(pending.command.trigger.run_id));
                entry.queue = keep.into();
                dequeued.extend(out);
            }
        }
        for pending in dequeued {
            self.shared.metrics.queued.dec();
            killed.push(pending.command.trigger.run_id);
            pending.handle.kill();
            self.shared.report_unstarted(pending, Outcome::Killed);
        }
        for pending in unstarted {
            self.shared.report_unstarted(pending, Outcome::Killed);
        }
        killed
    }

    pub(crate) fn idle_beat(&self, job_id: u64) -> IdleBeatResponse {
        let table = self.shared.lock();
        let (running, queued) = table.jobs.get(&job_id).map_or((0, 0), |entry| {
            (entry.running.len() as u32, entry.queue.len() as u32)
        });
        IdleBeatResponse {
            idle: running == 0 && queued == 0,
            running,
            queued,
        }
    }

    pub(crate) fn log(&self, query: LogQuery, max_page: usize) -> Option<LogResponse> {
        let handle = self.shared.lock().handle(query.run_id)?;
        let page = handle.read_log(query.offset, query.limit.min(max_page));
        Some(LogResponse {
            run_id: query.run_id,
            lines: page.lines,
            next_offset: page.next_offset,
            finished: page.finished,
            started_at_ms: handle.started_at_ms(),
        })
    }

    /// The sandbox runtime, for its pool figures.
    pub(crate) fn runtime(&self) -> &cronbox_runtime::Runtime {
        &self.shared.runtime
    }

    /// Results in the spool that no admin has taken yet.
    pub(crate) fn spooled_results(&self) -> usize {
        self.shared.spool.pending()
    }

    /// Stops taking runs, reports queued runs as not executed, lets running
    /// runs finish within `grace`, kills the rest, and waits for every job
    /// task to retire its workers.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        let shared = &self.shared;
        shared.closing.store(true, Ordering::SeqCst);
        shared.stopping.cancel();
        let mut held: Vec<Pending>;
        let dropped: Vec<Pending> = {
            let mut table = shared.lock();
            let mut dropped = Vec::new();
            for entry in table.jobs.values_mut() {
                dropped.extend(entry.queue.drain(..));
                entry.wake.notify_one();
            }
            held = table.held.drain().map(|(_, pending)| pending).collect();
            dropped
        };
        for pending in held.drain(..) {
            shared.report_unstarted(
                pending,
                Outcome::Rejected {
                    reason: "the executor shut down before the run started".to_owned(),
                },
            );
        }
        for pending in dropped {
            shared.metrics.queued.dec();
            shared.report_unstarted(
                pending,
                Outcome::Rejected {
                    reason: "the executor shut down before the run started".to_owned(),
                },
            );
        }
        let deadline = tokio::time::Instant::now() + grace;
        let running = self.running_handles().len();
        if running > 0 {
            tracing::info!(
                running,
                ?grace,
                "waiting for the running runs to finish; those still running at the end of the \
                 grace are killed"
            );
        }
        while !self.running_handles().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = self.running_handles();
        if !left.is_empty() {
            tracing::warn!(
                runs = left.len(),
                "the shutdown grace is over: killing the runs still running"
            );
        }
        for handle in left {
            handle.kill();
        }
        // Job tasks notice `closing`, retire their workers and leave.
        for entry in shared.lock().jobs.values() {
            entry.wake.notify_one();
        }
        shared.tasks.close();
        if tokio::time::timeout(Duration::from_secs(10), shared.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("job tasks still running 10 s after the executor began to stop");
        }
        shared.modules.finish_loads(Duration::from_secs(30)).await;
    }

    fn running_handles(&self) -> Vec<RunHandle> {
        self.shared
            .lock()
            .jobs
            .values()
            .flat_map(|entry| entry.running.values().cloned())
            .collect()
    }
}
