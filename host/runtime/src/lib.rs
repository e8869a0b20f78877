//! The sandboxed WebAssembly runtime of cronbox: the only crate that links
//! wasmtime.
//!
//! A [`Runtime`] owns one wasmtime engine (component model, async, Cranelift,
//! pooling allocator, epoch interruption driven by a ticker on its own OS
//! thread), an on-disk [artifact cache](cache) and Cranelift's cache of
//! compiled functions beside it (`function_cache`: a new version compiles
//! only what changed). [`Runtime::load`] turns
//! the bytes of an uploaded component into a validated, compiled
//! [`JobModule`]; a [`JobWorker`] runs a module's `execute` once per
//! [`RunRequest`] on a warm instance (or a fresh one per run) and always
//! answers with a [`RunReport`]: a typed [`Outcome`], duration, fuel, memory,
//! the captured log and the state change set. A [`RunHandle`] kills a run or
//! reads its log while it runs.
//!
//! Guarantees kept here (see ARCHITECTURE.md): a guest cannot take the host
//! down (traps, panics, stack overflows, memory bombs and infinite loops end
//! that run only); a run stops within one epoch tick of its deadline or kill,
//! including a guest blocked in a host call; a store that saw any error is
//! dropped, never entered again; only artifacts this host wrote, and whose
//! checksum matches, or that its own compiler child process just made, are
//! ever deserialized; compilation in a child (see `compiler`) is bounded in
//! time and memory.

mod cache;
mod clocks;
mod compiler;
mod config;
mod engine;
mod errors;
mod function_cache;
mod host;
mod http;
mod idle;
mod instance;
mod log;
mod module;
mod run;
mod validate;
mod worker;

pub use cache::{CacheStatus, renew as renew_cache_file};
pub use clocks::CLOCK_RESOLUTION;
pub use compiler::compile_worker;
pub use config::{Compiler, CompilerProcess, InstanceMode, RunLimits, RuntimeConfig, StateLimits};
pub use cronbox_net_policy::{NetPolicy, OriginPattern, parse_origins};
pub use cronbox_protocol::HttpLimits;
pub use cronbox_protocol::{LogLevel, LogLine, LogSource, Outcome, StateChanges, Trigger};
pub use engine::Runtime;
pub use errors::{CompileError, LoadError, RuntimeError};
pub use http::HttpStatsSnapshot;
pub use log::{LINE_OVERHEAD, LogPage, MAX_LINES, RunLog};
pub use module::JobModule;
pub use run::{RunHandle, RunReport, RunRequest, StateSnapshot};
pub use worker::{JobWorker, RetireReport};

#[doc(hidden)]
pub mod bench_support {
    //! Access for the runtime's own benchmarks, which compare it against
    //! bare wasmtime on the very same engine. Not a public API.

    /// The runtime's engine.
    pub fn engine(runtime: &crate::Runtime) -> &wasmtime::Engine {
        &runtime.inner.engine
    }
}
