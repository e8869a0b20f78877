//! The inputs and outputs of one run, and the handle to control it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime};

use cronbox_net_policy::OriginPattern;
use cronbox_protocol::{Digest, HttpLimits, LogLine, Outcome, StateChanges, Trigger};
use tokio_util::sync::CancellationToken;

use crate::config::RunLimits;
use crate::log::{LogPage, RunLog};

/// A job's durable state as handed to a run (shared, never copied per run).
pub type StateSnapshot = Arc<HashMap<String, String>>;

/// Everything a run needs besides the module.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The run as the guest sees it (`context.current`).
    pub trigger: Trigger,
    /// Deadline, fuel, memory and log limits.
    pub limits: RunLimits,
    /// The job's durable state before the run.
    pub state: StateSnapshot,
    /// The job's configuration, read by the guest through
    /// `wasi:config/store`.
    pub config: BTreeMap<String, String>,
    /// The origins the run may call over HTTP; none: no network.
    pub http_allow: Arc<[OriginPattern]>,
    /// The limits of its outbound HTTP (each lowered to the runtime's
    /// maximum).
    pub http_limits: HttpLimits,
    /// The job's secrets by name, read by the guest through
    /// `wasi:config/store` like its configuration; every value is masked
    /// in the run's log and outcome message.
    pub secrets: BTreeMap<String, String>,
}

impl RunRequest {
    /// A request with default limits and empty state.
    pub fn new(trigger: Trigger) -> Self {
        RunRequest {
            trigger,
            limits: RunLimits::default(),
            state: StateSnapshot::default(),
            config: BTreeMap::new(),
            http_allow: Arc::new([]),
            http_limits: HttpLimits::default(),
            secrets: BTreeMap::new(),
        }
    }
}

/// How a run ended, and what it did.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The typed outcome.
    pub outcome: Outcome,
    /// When the run started (wall clock).
    pub started_at: SystemTime,
    /// How long it took, instantiation and `init` included when the run
    /// created its instance.
    pub duration: Duration,
    /// Fuel consumed, when fuel metering is on and the guest call returned
    /// (a run dropped on kill or timeout has no settled count).
    pub fuel_consumed: Option<u64>,
    /// The instance's largest linear memory so far, in bytes.
    pub peak_memory_bytes: u64,
    /// The captured log (stdout, stderr, `context.log`), size-capped.
    pub log: Vec<LogLine>,
    /// Whether the log hit its cap (a marker line says how much was dropped).
    pub log_truncated: bool,
    /// The run's state writes. Empty unless the run succeeded: only a
    /// successful run's changes may be committed.
    pub state_changes: StateChanges,
    /// The keys the run read from its state snapshot (those it wrote first
    /// excluded). Empty unless the run succeeded.
    pub state_reads: std::collections::BTreeSet<String>,
    /// The sha256 digest of the module that ran.
    pub module_digest: Digest,
    /// Whether this run created its instance (and ran `init`).
    pub new_instance: bool,
    /// The run's outbound HTTP: requests answered, failed, denied, bytes.
    pub http: crate::HttpStatsSnapshot,
}

impl RunReport {
    /// The report of a run that ended before the guest was called (killed
    /// or out of time while it waited to start).
    pub fn unstarted(outcome: Outcome, module_digest: &Digest) -> RunReport {
        RunReport {
            outcome,
            started_at: SystemTime::now(),
            duration: Duration::ZERO,
            fuel_consumed: None,
            peak_memory_bytes: 0,
            log: Vec::new(),
            log_truncated: false,
            state_changes: StateChanges::new(),
            state_reads: Default::default(),
            module_digest: module_digest.clone(),
            new_instance: false,
            http: crate::HttpStatsSnapshot::default(),
        }
    }
}

const ACTIVE: u8 = 0;
const KILLED: u8 = 1;
const COVERED: u8 = 2;

/// Controls one run from outside: kill it, or read its log while it runs.
///
/// Cheap to clone; all clones refer to the same run. Create one per run and
/// pass it to [`JobWorker::run`](crate::JobWorker::run).
#[derive(Debug, Clone)]
pub struct RunHandle {
    inner: Arc<HandleInner>,
}

#[derive(Debug)]
struct HandleInner {
    cancel: CancellationToken,
    reason: AtomicU8,
    log: Arc<RunLog>,
    /// When the run began executing (ms since the epoch); 0 until then.
    started_at_ms: std::sync::atomic::AtomicI64,
}

impl Default for RunHandle {
    fn default() -> Self {
        Self::new()
    }
}

impl RunHandle {
    /// A handle for a run that has not started.
    pub fn new() -> Self {
        RunHandle {
            inner: Arc::new(HandleInner {
                cancel: CancellationToken::new(),
                reason: AtomicU8::new(ACTIVE),
                log: Arc::new(RunLog::with_cap(RunLimits::default().log_bytes)),
                started_at_ms: std::sync::atomic::AtomicI64::new(0),
            }),
        }
    }

    /// Stops the run (outcome `killed`): a guest in a CPU loop within one
    /// epoch tick, a guest blocked in a host call at once. A run that has not
    /// started yet will not start.
    pub fn kill(&self) {
        self.stop(KILLED);
    }

    /// Stops the run because a newer run replaces it (outcome `covered`).
    pub fn cover(&self) {
        self.stop(COVERED);
    }

    fn stop(&self, reason: u8) {
        let _ =
            self.inner
                .reason
                .compare_exchange(ACTIVE, reason, Ordering::SeqCst, Ordering::SeqCst);
        self.inner.cancel.cancel();
    }

    /// Whether [`kill`](Self::kill) or [`cover`](Self::cover) was called.
    pub fn is_killed(&self) -> bool {
        self.inner.reason.load(Ordering::Relaxed) != ACTIVE
    }

    /// How the run was stopped (killed or covered), if it was.
    pub fn stopped_outcome(&self) -> Option<Outcome> {
        match self.inner.reason.load(Ordering::SeqCst) {
            KILLED => Some(Outcome::Killed),
            COVERED => Some(Outcome::Covered),
            _ => None,
        }
    }

    /// Completes when the run is killed or covered.
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.inner.cancel.cancelled()
    }

    /// When the run began executing (ms since the epoch), once it has:
    /// what an executor tells whoever asks about a run still going.
    pub fn started_at_ms(&self) -> Option<i64> {
        match self.inner.started_at_ms.load(Ordering::Relaxed) {
            0 => None,
            at => Some(at),
        }
    }

    /// Records that the run began executing at `at`.
    pub(crate) fn mark_started(&self, at: std::time::SystemTime) {
        let ms = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |since| since.as_millis().max(1) as i64);
        self.inner.started_at_ms.store(ms, Ordering::Relaxed);
    }

    /// The run's log.
    pub fn log(&self) -> &RunLog {
        &self.inner.log
    }

    pub(crate) fn log_arc(&self) -> Arc<RunLog> {
        self.inner.log.clone()
    }

    /// Reads the run's log from a line offset (live while the run goes on).
    pub fn read_log(&self, offset: usize, max_lines: usize) -> LogPage {
        self.inner.log.read(offset, max_lines)
    }
}
