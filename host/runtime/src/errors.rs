//! Every error type of the runtime, in one module that imports no other
//! of the crate's: why a [`Runtime`](crate::Runtime) could not be built,
//! why a module was refused, and why a compilation in a child process gave
//! no artifact. The other modules import from here, never from each other
//! for an error.

use std::process::ExitStatus;
use std::time::Duration;

use cronbox_component_check::ComponentError;

/// Why a [`Runtime`](crate::Runtime) could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the engine configuration.
    #[error("cannot configure the WebAssembly engine: {0}")]
    Engine(String),
    /// The host imports could not be linked.
    #[error("cannot link the host interfaces: {0}")]
    Linker(String),
    /// The artifact cache directory is unusable.
    #[error("cannot use the artifact cache directory {path}: {source}")]
    CacheDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The epoch ticker thread could not be started.
    #[error("cannot start the epoch ticker thread: {0}")]
    Ticker(std::io::Error),
}

/// Why a module was refused. Every message names what is wrong.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// Zero bytes.
    #[error("the module is empty (0 bytes)")]
    Empty,
    /// Over the size limit.
    #[error("the module is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    /// Not WebAssembly at all.
    #[error("not a WebAssembly binary: it does not start with the \\0asm magic")]
    NotWasm,
    /// A core module rather than a component.
    #[error(
        "this is a core WebAssembly module, not a component: build the job for the \
         wasm32-wasip2 target (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// More functions, core instances, memories or tables than a job may
    /// have.
    #[error("the component has {count} {what}, over the limit of {limit} for a job")]
    OverLimit {
        what: &'static str,
        count: u64,
        limit: u64,
    },
    /// Malformed, or refused by the compiler.
    #[error("invalid component: {0}")]
    Invalid(String),
    /// Its compilation took more time or memory than a compiler child
    /// process may, or the process could not run.
    #[error("cannot compile the component: {0}")]
    Compile(String),
    /// A component, but not for world `cronbox:job/job`.
    #[error(
        "not a component for world cronbox:job/job: it does not export the function `{missing}` \
         (its exports: {})",
        if exports.is_empty() { "none".to_owned() } else { exports.join(", ") }
    )]
    WrongWorld {
        missing: String,
        exports: Vec<String>,
    },
    /// Imports something the host never grants (every such import listed).
    #[error(
        "the component imports {}, which cronbox does not grant; jobs may import only {} \
         (and {}, which link but grant nothing)",
        imports.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", "),
        cronbox_component_check::GRANTED_INTERFACES.join(", "),
        cronbox_component_check::DENIED_INTERFACES.join(", ")
    )]
    ForbiddenImport { imports: Vec<String> },
    /// Imports and exports have the right names but the wrong types.
    #[error("the component does not match world cronbox:job/job: {0}")]
    Mismatch(String),
}

impl From<ComponentError> for LoadError {
    fn from(error: ComponentError) -> LoadError {
        match error {
            ComponentError::Empty => LoadError::Empty,
            ComponentError::TooLarge { size, limit } => LoadError::TooLarge { size, limit },
            ComponentError::NotWasm => LoadError::NotWasm,
            ComponentError::CoreModule => LoadError::CoreModule,
            ComponentError::OverLimit { what, count, limit } => {
                LoadError::OverLimit { what, count, limit }
            }
            ComponentError::ForbiddenImport { imports } => LoadError::ForbiddenImport { imports },
            ComponentError::WrongWorld { missing, exports } => {
                LoadError::WrongWorld { missing, exports }
            }
            other @ ComponentError::Invalid(_) => LoadError::Invalid(other.to_string()),
        }
    }
}

/// Why a compilation in a child process gave no artifact.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(
        "cannot start the compiler process {program} within {memory_bytes} bytes of address \
         space (the executor's --compile-memory): {source}"
    )]
    Spawn {
        program: String,
        memory_bytes: u64,
        source: std::io::Error,
    },
    #[error("compiling used more than {cpu:?} of CPU time: stopped (the executor's --compile-cpu)")]
    CpuTime { cpu: Duration },
    #[error("compiling took longer than {timeout:?}: stopped (the executor's --compile-timeout)")]
    Timeout { timeout: Duration },
    #[error("the compiler process failed ({status}): {message}")]
    Failed { status: ExitStatus, message: String },
    #[error("cannot talk to the compiler process: {0}")]
    Pipe(#[from] std::io::Error),
}
