//! Requests and responses between the admin and its executors, and the
//! paths they are served at.
//!
//! The operations are xxl-job's (`beat`, `idle-beat`, `run`, `kill`, `log` on
//! the executor; `registry`, `registry-remove`, `callback` on the admin) in a
//! JSON shape of our own, so that a compatibility adapter for legacy xxl-job
//! executors stays thin. Every request carries `Authorization: Bearer TOKEN`.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::{ApiError, Digest, HttpLimits, LogLine, Outcome, StateChanges, Trigger};

/// Paths served by an executor.
pub mod executor_paths {
    /// `POST`: liveness (FAILOVER routing).
    pub const BEAT: &str = "/api/v1/beat";
    /// `POST` [`IdleBeatRequest`](super::IdleBeatRequest): is a job idle here
    /// (BUSYOVER routing)?
    pub const IDLE_BEAT: &str = "/api/v1/idle-beat";
    /// `POST` [`RunCommand`](super::RunCommand).
    pub const RUN: &str = "/api/v1/run";
    /// `POST` [`RunBatch`](super::RunBatch): several run commands, each
    /// answered apart, in order ([`RunBatchResponse`](super::RunBatchResponse)).
    pub const RUN_BATCH: &str = "/api/v1/run-batch";
    /// `POST` [`KillCommand`](super::KillCommand).
    pub const KILL: &str = "/api/v1/kill";
    /// `POST` [`LogQuery`](super::LogQuery).
    pub const LOG: &str = "/api/v1/log";
    /// `POST` [`PrepareCommand`](super::PrepareCommand): fetch and compile
    /// a module now, ahead of its runs; answers when it is ready.
    pub const PREPARE: &str = "/api/v1/prepare";
    /// `GET`: Prometheus metrics (no token needed).
    pub const METRICS: &str = "/metrics";
    /// `GET`: liveness, 200 while the process serves (no token).
    pub const LIVEZ: &str = "/livez";
    /// `GET`: the same liveness under the name many probes use.
    pub const HEALTHZ: &str = "/healthz";
    /// `GET`: readiness, 503 once a shutdown has begun (no token).
    pub const READYZ: &str = "/readyz";
}

/// Paths served by the admin for executors.
pub mod admin_paths {
    /// `POST` [`Registration`](super::Registration): heartbeat and register.
    pub const REGISTRY: &str = "/api/v1/registry";
    /// `POST` [`Registration`](super::Registration): deregister.
    pub const REGISTRY_REMOVE: &str = "/api/v1/registry-remove";
    /// `POST` [`CallbackBatch`](super::CallbackBatch): run results.
    pub const CALLBACK: &str = "/api/v1/callback";
    /// `GET /api/v1/modules/{digest}/content`: a module's bytes by digest.
    pub fn module_content(digest: &crate::Digest) -> String {
        format!("/api/v1/modules/{digest}/content")
    }
}

/// What an executor does with a trigger for a job that is already running
/// or has runs queued (xxl-job's block strategies, plus CONCURRENT).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BlockStrategy {
    /// Queue it; runs execute one at a time in arrival order.
    #[default]
    SerialExecution,
    /// Refuse it (outcome `rejected`, answered at once).
    DiscardLater,
    /// Stop the running run and drop the queued ones (outcome `covered`),
    /// then run it.
    CoverEarly,
    /// Run up to `max_concurrency` runs of the job at once; queue the rest.
    Concurrent,
}

impl BlockStrategy {
    /// The wire name (`SERIAL_EXECUTION`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            BlockStrategy::SerialExecution => "SERIAL_EXECUTION",
            BlockStrategy::DiscardLater => "DISCARD_LATER",
            BlockStrategy::CoverEarly => "COVER_EARLY",
            BlockStrategy::Concurrent => "CONCURRENT",
        }
    }

    /// Every strategy, with its wire name.
    pub const ALL: [BlockStrategy; 4] = [
        BlockStrategy::SerialExecution,
        BlockStrategy::DiscardLater,
        BlockStrategy::CoverEarly,
        BlockStrategy::Concurrent,
    ];
}

impl std::str::FromStr for BlockStrategy {
    type Err = crate::UnknownName;

    fn from_str(text: &str) -> Result<Self, crate::UnknownName> {
        BlockStrategy::ALL
            .into_iter()
            .find(|strategy| strategy.as_str().eq_ignore_ascii_case(text))
            .ok_or_else(|| crate::UnknownName::new("block strategy", text))
    }
}

/// Limits of one run, as sent on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireLimits {
    /// Wall-clock limit in milliseconds.
    pub timeout_ms: u64,
    /// Fuel budget; none when absent.
    #[serde(default)]
    pub fuel: Option<u64>,
    /// Linear memory limit in bytes.
    pub memory_bytes: u64,
    /// Log cap in bytes.
    pub log_bytes: u64,
}

impl Default for WireLimits {
    fn default() -> Self {
        WireLimits {
            timeout_ms: 60_000,
            fuel: None,
            memory_bytes: 64 << 20,
            log_bytes: 1 << 20,
        }
    }
}

/// `run`: execute a trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCommand {
    /// The run as the guest sees it.
    pub trigger: Trigger,
    /// sha256 (hex) of the module to run; fetched from the admin if unknown.
    pub module_digest: Digest,
    /// What to do when the job is busy here.
    #[serde(default)]
    pub block_strategy: BlockStrategy,
    /// Runs of the job at once under [`BlockStrategy::Concurrent`].
    #[serde(default = "one")]
    pub max_concurrency: u32,
    /// The run's limits.
    #[serde(default)]
    pub limits: WireLimits,
    /// The job's durable state before the run.
    #[serde(default)]
    pub state: HashMap<String, String>,
    /// The revision of each key of `state` (see [`StateRevision`]); the
    /// result names the revisions its reads and writes were based on, so
    /// that the admin can refuse a commit that would overwrite a change
    /// the run never saw.
    #[serde(default)]
    pub state_revisions: HashMap<String, StateRevision>,
    /// Proof that the admin sent this run to this executor: returned
    /// unchanged in the run's result, which the admin refuses without it.
    #[serde(default)]
    pub receipt: String,
    /// A new instance for this run instead of a warm one.
    #[serde(default)]
    pub fresh_instance: bool,
    /// Hold the trigger this long after receiving it, then apply it (block
    /// strategy included) as if it arrived then. The admin sends fires a
    /// little ahead of their instant so that a burst of them starts on
    /// time; a relative delay, so the clocks of admin and executor need not
    /// agree.
    #[serde(default)]
    pub start_in_ms: u64,
    /// The tenant the job belongs to: an executor gives each tenant a
    /// share of its instance slots.
    #[serde(default)]
    pub tenant: String,
    /// The tenant's quota of instances per executor: the executor runs at
    /// most this many of its runs at once (and never more than its own
    /// share per tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_max_instances: Option<u32>,
    /// The job's plain configuration, for `wasi:config/store`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// The origins the run may call over HTTP (`https://api.example.com`,
    /// `https://*.example.com`); empty: no network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_allow: Vec<String>,
    /// The limits of its outbound HTTP.
    #[serde(default, skip_serializing_if = "HttpLimits::is_default")]
    pub http_limits: HttpLimits,
    /// The values of the secrets the job references, by name, for
    /// `wasi:config/store`. Never logged, never written to disk.
    #[serde(default, skip_serializing_if = "Secrets::is_empty")]
    pub secrets: Secrets,
    /// W3C `traceparent` of the admin's fire span, when traces are on: the
    /// executor's run span continues it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The job's label in metrics of its own (`ID name`), when the
    /// operator marked it for them (`--job-metrics`): the executor counts
    /// the run's outbound HTTP requests under it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_job: Option<String>,
}

/// Secret values by name. Its `Debug` shows names only, so that no log of
/// a command prints a value.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secrets(pub BTreeMap<String, String>);

impl Secrets {
    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

fn one() -> u32 {
    1
}

impl RunCommand {
    /// `trigger` on the module `module_digest`, with every other field as
    /// a command without it reads: serial execution, default limits, no
    /// state, sent now, tenant `default`.
    pub fn new(trigger: Trigger, module_digest: Digest) -> RunCommand {
        RunCommand {
            trigger,
            module_digest,
            block_strategy: BlockStrategy::default(),
            max_concurrency: one(),
            limits: WireLimits::default(),
            state: HashMap::new(),
            state_revisions: HashMap::new(),
            receipt: String::new(),
            fresh_instance: false,
            start_in_ms: 0,
            tenant: "default".to_owned(),
            tenant_max_instances: None,
            config: BTreeMap::new(),
            http_allow: Vec::new(),
            http_limits: HttpLimits::default(),
            secrets: Secrets::default(),
            traceparent: None,
            metrics_job: None,
        }
    }
}

/// The answer to `run`: accepted (the result follows by callback) or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunResponse {
    pub run_id: u64,
    /// True when the run was queued or started; its result will be called
    /// back. False when it was refused; no callback follows.
    pub accepted: bool,
    /// Why it was refused, as an outcome (`rejected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<Outcome>,
}

/// `run-batch`: run commands sent together (the admin's dispatches to one
/// executor that queued while its previous request was on the way).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunBatch {
    pub commands: Vec<RunCommand>,
}

impl RunBatch {
    /// Most commands in one batch.
    pub const MAX: usize = 64;
}

/// The answers to a [`RunBatch`], one per command, in its order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunBatchResponse {
    pub answers: Vec<RunAnswer>,
}

/// One command's answer in a batch: what `run` would have answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunAnswer {
    /// `run`'s answer with status 200: accepted or refused as a run.
    Answered(RunResponse),
    /// `run`'s answer with an error status (409: the executor has this
    /// run already; 503: it is shutting down; 400: a bad command).
    Failed { status: u16, error: ApiError },
}

/// `kill`: one run, or every run (running and queued) of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillCommand {
    Run { run_id: u64 },
    Job { job_id: u64 },
}

/// The answer to `kill`: the runs that were stopped or dequeued.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KillResponse {
    pub killed: Vec<u64>,
}

/// `prepare`: the module to fetch and compile ahead of its runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepareCommand {
    /// The module's sha256, lowercase hex.
    pub module_digest: Digest,
}

/// The answer to `prepare`, once the module is loaded or refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepareResponse {
    /// Whether the module is loaded and ready to run here.
    pub ready: bool,
    /// Why not, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the fetch and compilation took (0 when it was loaded
    /// already).
    pub took_ms: u64,
}

/// `idle-beat`: is this job idle on this executor?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleBeatRequest {
    pub job_id: u64,
}

/// The answer to `idle-beat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleBeatResponse {
    /// Neither running nor queued.
    pub idle: bool,
    pub running: u32,
    pub queued: u32,
}

/// The answer to `beat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeatResponse {
    pub ok: bool,
    /// The executor's advertised address.
    pub address: String,
}

/// `log`: a run's lines from a line offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogQuery {
    pub run_id: u64,
    #[serde(default)]
    pub offset: usize,
    /// At most this many lines (the executor caps it too).
    #[serde(default = "default_log_limit")]
    pub limit: usize,
}

fn default_log_limit() -> usize {
    1000
}

/// A page of a run's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LogResponse {
    pub run_id: u64,
    pub lines: Vec<LogLine>,
    /// The offset to ask for next.
    pub next_offset: usize,
    /// True once the run has ended and every line was read.
    pub finished: bool,
    /// When the run began executing (ms since the epoch), once it has
    /// (absent from older executors, and from stored logs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
}

/// The result of a run, as called back to the admin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunResult {
    pub run_id: u64,
    pub job_id: u64,
    /// The run's scheduled time, as its trigger said: the admin finds the
    /// run's row by it sooner (absent from older executors).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at_ms: Option<i64>,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// xxl-job code: 200, 500 or 502.
    #[schema(maximum = 65535)]
    pub code: u16,
    /// Start of execution (ms since the epoch); 0 when it never started.
    pub started_at_ms: i64,
    pub duration_ms: u64,
    #[serde(default)]
    pub fuel_consumed: Option<u64>,
    #[serde(default)]
    pub peak_memory_bytes: u64,
    /// The module that ran (or was to run).
    pub module_digest: Digest,
    /// The final log, size-capped.
    #[serde(default)]
    pub log: Vec<LogLine>,
    #[serde(default)]
    pub log_truncated: bool,
    /// State writes; non-empty only when the run succeeded.
    #[serde(default)]
    pub state_changes: StateChanges,
    /// For each key the run read or wrote, the revision its view of that
    /// key was based on ([`ABSENT_REVISION`] for a key it saw
    /// missing); sent with a non-empty change set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub state_base: BTreeMap<String, StateRevision>,
    /// The executor's advertised address.
    pub executor: String,
    /// The [`RunCommand::receipt`] of the run.
    #[serde(default)]
    pub receipt: String,
    /// The `traceparent` the run was sent with (the admin's fire span),
    /// when traces are on: its trace is the run's, and what follows the
    /// run's end (children, retries, workflow nodes) continues it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// The revision of a key of a job's durable state: the id of the run whose
/// commit last wrote it, a negative number for an operator's edit, and
/// [`ABSENT_REVISION`] for a key that does not exist.
pub type StateRevision = i64;

/// The revision of a key that does not exist.
pub const ABSENT_REVISION: StateRevision = 0;

/// `callback`: results, batched.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CallbackBatch {
    pub results: Vec<RunResult>,
}

/// `registry` / `registry-remove`: who the executor is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Registration {
    /// The executor group (xxl-job's appname).
    pub group: String,
    /// The address the admin reaches the executor at (`http://host:port`).
    pub address: String,
    /// Runs executing on it when it beat (absent from executors that do
    /// not say, as xxl-job's do not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 4_294_967_295_i64)]
    pub busy: Option<u32>,
    /// Free instance slots of its sandbox pool when it beat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 0, maximum = 4_294_967_295_i64)]
    pub free_slots: Option<u32>,
    /// The protocol version it speaks (absent: 1; see
    /// [`check_skew`](crate::check_skew)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 4_294_967_295_i64)]
    pub protocol: Option<u32>,
}
