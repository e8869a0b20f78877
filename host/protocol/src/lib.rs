//! Wire types shared by the cronbox admin, its executors and the runtime.
//!
//! Everything here is plain data with `serde` derives: no I/O, no wasmtime,
//! no database. The admin and the executor exchange these as JSON over HTTP;
//! the runtime produces [`Outcome`]s and [`LogLine`]s in the same shapes so
//! that a run's result travels unchanged from the sandbox to the store.
//!
//! Names follow the `wit/job.wit` contract where the guest sees the same
//! concept (trigger kinds, log levels).

#[cfg(feature = "credentials")]
pub mod credentials;
mod digest;
mod errors;
#[cfg(feature = "axum")]
mod failure;
mod http;
mod log;
mod outcome;
#[cfg(feature = "tracing")]
pub mod trace_context;
mod trigger;
mod version;
mod wire;

pub use digest::{Digest, NotADigest};
pub use errors::{ApiError, ErrorCode};
#[cfg(feature = "axum")]
pub use failure::Failure;
pub use http::HttpLimits;
pub use log::{LogLevel, LogLine, LogSource};
pub use outcome::{Outcome, OutcomeKind};
pub use trigger::{Trigger, TriggerKind, UnknownName};
pub use version::{PROTOCOL_HEADER, PROTOCOL_VERSION, SkewError, UNVERSIONED, check_skew};
pub use wire::{
    ABSENT_REVISION, BeatResponse, BlockStrategy, CallbackBatch, IdleBeatRequest, IdleBeatResponse,
    KillCommand, KillResponse, LogQuery, LogResponse, PrepareCommand, PrepareResponse,
    Registration, RunAnswer, RunBatch, RunBatchResponse, RunCommand, RunResponse, RunResult,
    Secrets, StateRevision, WireLimits, admin_paths, executor_paths,
};

/// The state change set of a run: for each key the run wrote, its new value,
/// or `None` when the run removed it. The admin applies it only when the run
/// succeeded.
pub type StateChanges = std::collections::BTreeMap<String, Option<String>>;
