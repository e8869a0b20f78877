//! Write [cronbox](https://example.invalid/cronbox) jobs in Rust.
//!
//! A job is a type implementing [`Job`], exported with [`export_job!`], and
//! compiled for `wasm32-wasip2`:
//!
//! ```rust,no_run
//! use cronbox_guest::{export_job, info, Context, Job, Result};
//!
//! #[derive(Default)]
//! struct Hello;
//!
//! impl Job for Hello {
//!     fn execute(&mut self, ctx: &Context) -> Result<String> {
//!         info!("hello, {}", ctx.param());
//!         Ok(format!("hello, {}", ctx.param()))
//!     }
//! }
//!
//! export_job!(Hello);
//! # fn main() {}
//! ```
//!
//! ```toml
//! # Cargo.toml of the job
//! [lib]
//! crate-type = ["cdylib"]
//!
//! [dependencies]
//! cronbox-guest = "0.1"
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` and try it
//! locally with `cronbox run target/wasm32-wasip2/release/hello.wasm --param world`.
//!
//! # The life of an instance
//!
//! The host creates the job value with [`Default`], then calls [`Job::init`]
//! once, [`Job::execute`] once per run (the same value serves many runs while
//! the instance stays warm), and [`Job::destroy`] when a healthy instance is
//! retired. After a trap (a panic, a timeout, a kill, running out of fuel or
//! memory) the instance is thrown away without `destroy`: keep anything that
//! must survive in [`Context::set`] state, not in the struct.
//!
//! # Results
//!
//! `Ok(message)` is a successful run; `Err(error)` a failed one, with the
//! error's chain (`{:#}`) as the message. Errors are [`Error`] (from `anyhow`), so `?`
//! works on any standard error, and [`bail!`] makes one from a message. A
//! panic ends the run as a trap; its message is in the run's log.
//!
//! # Logs
//!
//! [`trace!`], [`debug!`], [`info!`], [`warn!`] and [`error!`] write leveled
//! lines to the run's log; `println!` and `eprintln!` are captured too. The
//! log is size-capped by the host: past the cap lines are dropped behind a
//! visible marker, and logging never fails.
//!
//! # State
//!
//! [`Context::get`], [`Context::set`] and [`Context::remove`] read and write
//! the job's durable key/value state. Writes are visible to later `get`s at
//! once and are committed only if the run succeeds.
//!
//! # Configuration and HTTP
//!
//! [`Context::config`] reads the job's configuration (`wasi:config/store`).
//! [`http::Request`] calls the origins the job's definition grants
//! (`wasi:http/outgoing-handler`); any HTTP client over `wasi:http` works
//! the same way.
//!
//! # Structured output
//!
//! A run's success message is its output; a workflow's templates and
//! conditions read one that is JSON text as JSON. [`output`] makes it one
//! line: `Ok(output(&json!({ "rows": rows }))?)`.

// Lets the generated bindings name this crate the way job crates do.
extern crate self as cronbox_guest;

mod context;
pub mod http;
mod logger;

pub use anyhow::{Error, Result, anyhow, bail, ensure};
pub use context::{Context, Shard, StateError, TriggerKind};
pub use log::{debug, error, info, trace, warn};
pub use serde_json::{self, json};

/// `value` as compact JSON text: a structured output, which a workflow's
/// templates read as JSON (`{{ nodes.extract.output.rows }}`). A
/// workflow node's output is at most 64 KiB.
pub fn output<T: serde::Serialize + ?Sized>(value: &T) -> Result<String> {
    Ok(serde_json::to_string(value)?)
}

/// A cronbox job: the state of one instance and what it does per run.
///
/// Only [`execute`](Job::execute) is required. The value is created with
/// [`Default`] when the host instantiates the job.
pub trait Job: Default + 'static {
    /// Called once per instance, before its first run. An error fails the
    /// run that caused the instance to be created.
    fn init(&mut self) -> Result<()> {
        Ok(())
    }

    /// Runs the job once. `Ok(message)` is success, `Err(error)` failure.
    fn execute(&mut self, ctx: &Context) -> Result<String>;

    /// Called when a healthy instance is retired. Never called after a trap,
    /// timeout or kill: nothing may depend on it.
    fn destroy(&mut self) {}
}

/// Exports a [`Job`] type as the component's `cronbox:job/job` world.
///
/// Use it once per crate, at the top level, with the job type:
/// `export_job!(MyJob);`.
#[macro_export]
macro_rules! export_job {
    ($job:ty) => {
        const _: () = {
            ::std::thread_local! {
                static JOB: ::std::cell::RefCell<::std::option::Option<$job>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            struct CronboxJobExport;

            impl $crate::__private::bindings::Guest for CronboxJobExport {
                fn init() -> ::std::result::Result<(), ::std::string::String> {
                    $crate::__private::init::<$job>(&JOB)
                }
                fn execute() -> ::std::result::Result<::std::string::String, ::std::string::String>
                {
                    $crate::__private::execute::<$job>(&JOB)
                }
                fn destroy() {
                    $crate::__private::destroy::<$job>(&JOB)
                }
            }

            $crate::__private::bindings::__cronbox_export_world!(
                CronboxJobExport with_types_in $crate::__private::bindings
            );
        };
    };
}

#[doc(hidden)]
pub mod __private {
    //! Support for [`export_job!`](crate::export_job); not a public API.

    use std::cell::RefCell;
    use std::thread::LocalKey;

    pub use wit_bindgen;

    #[allow(missing_docs, missing_debug_implementations, clippy::all)]
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "cronbox:job/job",
            pub_export_macro: true,
            export_macro_name: "__cronbox_export_world",
            default_bindings_module: "::cronbox_guest::__private::bindings",
            runtime_path: "::cronbox_guest::__private::wit_bindgen::rt",
        });
    }

    /// `wasi:config/store`, which serves the job's configuration.
    #[allow(missing_docs, missing_debug_implementations, clippy::all)]
    pub mod config_bindings {
        wit_bindgen::generate!({
            path: "../wit/deps/config",
            world: "wasi:config/imports",
            runtime_path: "::cronbox_guest::__private::wit_bindgen::rt",
        });
    }

    use crate::{Context, Job};

    type Slot<J> = LocalKey<RefCell<Option<J>>>;

    fn create<J: Job>() -> Result<J, String> {
        crate::logger::install();
        let mut job = J::default();
        job.init().map_err(|error| format!("{error:#}"))?;
        Ok(job)
    }

    pub fn init<J: Job>(slot: &'static Slot<J>) -> Result<(), String> {
        let job = create::<J>()?;
        slot.with(|cell| *cell.borrow_mut() = Some(job));
        Ok(())
    }

    pub fn execute<J: Job>(slot: &'static Slot<J>) -> Result<String, String> {
        slot.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                // A host that skipped `init`: initialise on first use.
                *cell = Some(create::<J>()?);
            }
            let job = cell.as_mut().expect("initialised above");
            let ctx = Context::current();
            job.execute(&ctx).map_err(|error| format!("{error:#}"))
        })
    }

    pub fn destroy<J: Job>(slot: &'static Slot<J>) {
        slot.with(|cell| {
            if let Some(mut job) = cell.borrow_mut().take() {
                job.destroy();
            }
        });
    }
}
