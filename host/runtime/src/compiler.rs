//! Compilation in a child process, bounded in time and memory.
//!
//! Cranelift's time and memory grow with what a component holds, and the
//! upload check bounds only its size and function count. With
//! [`Compiler::Subprocess`](crate::Compiler::Subprocess) each compilation
//! runs in a child (the executor's own binary, started with a hidden
//! command that calls [`compile_worker`]) under `RLIMIT_AS`, `RLIMIT_CPU`
//! and a wall-clock deadline: a component that takes too much memory or
//! CPU time (or, as a backstop, too long) is killed with its compilation
//! and refused with an error that says which, and the executor, its runs
//! and its other loads carry on. The CPU time is the bound that counts:
//! the compile runs at a low priority, so on a busy machine it takes far
//! longer than the work it does, and a slow compile there is not a hostile
//! one. The child writes the
//! serialized artifact; the parent deserializes it into its own engine,
//! whose compatibility header check refuses an artifact made with other
//! settings. The child runs at a lower CPU priority than the executor
//! (niceness 10), so that other jobs' runs stay on time while it compiles.
//!
//! [`code_config`] is what decides the compiled code, the same in the
//! executor's engine and in a compiler child.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt as _;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::Config;

use crate::config::CompilerProcess;
use crate::errors::{CompileError, RuntimeError};
use crate::function_cache::FunctionCache;

/// The argument naming the function cache's directory to a compiler child.
const FUNCTION_CACHE_ARG: &str = "--function-cache=";

/// The niceness of a compiler process: below the executor, whose runs
/// must stay on time while a large module compiles.
const COMPILER_NICENESS: libc::c_int = 10;

/// Most of a compiler child's error output kept for the message.
const MAX_STDERR_BYTES: u64 = 16 << 10;

/// How often a running compilation is checked for its end.
const POLL: Duration = Duration::from_millis(5);

/// The compiled artifact of `wasm`, made by a child process as `process`
/// says, with the code settings given; with `functions`, the child looks
/// functions up in that cache and stores those it compiles (its key goes
/// over the child's standard input, before the component).
pub(crate) fn compile_in_child(
    process: &CompilerProcess,
    fuel_metering: bool,
    max_wasm_stack_bytes: usize,
    functions: Option<&FunctionCache>,
    wasm: &[u8],
) -> Result<Vec<u8>, CompileError> {
    let mut command = Command::new(&process.program);
    command
        .args(&process.args)
        .arg(format!("--max-wasm-stack={max_wasm_stack_bytes}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if fuel_metering {
        command.arg("--fuel-metering");
    }
    let key = match functions {
        Some(functions) => {
            let mut dir = std::ffi::OsString::from(FUNCTION_CACHE_ARG);
            dir.push(functions.dir());
            command.arg(dir);
            functions.key()
        }
        None => &[],
    };
    let memory = process.memory_bytes;
    let cpu_seconds = cpu_limit_seconds(process.cpu);
    // SAFETY: between fork and exec the closure only calls setrlimit and
    // setpriority, which are async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            set_limit(libc::RLIMIT_AS, memory)?;
            // SIGXCPU at the budget, SIGKILL a second later.
            set_limits(libc::RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)?;
            set_limit(libc::RLIMIT_CORE, 0)?;
            // Runs come first: a large module's compilation (seconds of
            // every core) takes the CPU the executor's runs leave.
            if libc::setpriority(libc::PRIO_PROCESS, 0, COMPILER_NICENESS) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|source| CompileError::Spawn {
        program: process.program.display().to_string(),
        memory_bytes: memory,
        source,
    })?;
    let started = Instant::now();
    let (Some(mut stdin), Some(mut stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(CompileError::Pipe(std::io::Error::other(
            "the child's pipes are missing",
        )));
    };
    // Each pipe on its own thread: a component of megabytes fills a pipe
    // before the child has read it all, and the artifact fills the other.
    // Once the child has exited (or been killed) its pipes are closed, so
    // the threads end and the scope returns.
    let (status, written, artifact, message) = std::thread::scope(|scope| {
        let writer = scope.spawn(move || stdin.write_all(key).and_then(|()| stdin.write_all(wasm)));
        let reader = scope.spawn(move || {
            let mut artifact = Vec::new();
            stdout.read_to_end(&mut artifact).map(|_| artifact)
        });
        let errors = scope.spawn(move || {
            let mut text = String::new();
            let _ = stderr.take(MAX_STDERR_BYTES).read_to_string(&mut text);
            text
        });
        let status = wait_until(&mut child, started + process.timeout);
        let written = writer.join().unwrap_or(Ok(()));
        let artifact = reader
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the reader panicked")));
        (status, written, artifact, errors.join().unwrap_or_default())
    });
    let Some(status) = status? else {
        return Err(CompileError::Timeout {
            timeout: process.timeout,
        });
    };
    if ran_out_of_cpu(status) {
        return Err(CompileError::CpuTime {
            cpu: Duration::from_secs(cpu_seconds),
        });
    }
    if !status.success() {
        // Exit code 1 is the worker's own refusal, with its reason; any
        // other end (a signal, an abort on a failed allocation) is the
        // bound or a crash.
        let message = match (status.code(), message.trim()) {
            (Some(1), reason) if !reason.is_empty() => reason.to_owned(),
            (_, text) => {
                let first = text.lines().next().unwrap_or_default();
                format!(
                    "{first}{}it ran out of its {memory} bytes of address space (the \
                     executor's --compile-memory), or crashed",
                    if first.is_empty() { "" } else { "; " }
                )
            }
        };
        return Err(CompileError::Failed { status, message });
    }
    written?;
    Ok(artifact?)
}

/// Waits for `child` to exit until `deadline`; past it (or when it cannot
/// be waited for) the child is killed and reaped, and the answer is `None`
/// (or the error).
fn wait_until(
    child: &mut std::process::Child,
    deadline: Instant,
) -> std::io::Result<Option<ExitStatus>> {
    loop {
        let exited = child.try_wait();
        if !matches!(exited, Ok(None)) || Instant::now() >= deadline {
            // Killed whenever it is not known to have exited, so that its
            // pipes close and their threads end.
            if !matches!(exited, Ok(Some(_))) {
                let _ = child.kill();
                let _ = child.wait();
            }
            return exited;
        }
        std::thread::sleep(POLL);
    }
}

/// `RLIMIT_CPU` counts whole seconds: the budget rounded up, at least one.
fn cpu_limit_seconds(cpu: Duration) -> u64 {
    let seconds = cpu.as_secs() + u64::from(cpu.subsec_nanos() > 0);
    seconds.max(1)
}

/// Whether the child was stopped by its CPU limit (`SIGXCPU`, whose
/// default action ends it; the hard limit's `SIGKILL` a second later is
/// there in case it did not).
fn ran_out_of_cpu(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    status.signal() == Some(libc::SIGXCPU)
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    set_limits(resource, value, value)
}

fn set_limits(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: a plain system call with a valid pointer to a local.
    if unsafe { libc::setrlimit(resource, &limit) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The compiler child's side: reads a component from `input`, compiles it
/// with the code settings the parent named (`--fuel-metering`,
/// `--max-wasm-stack=N`, `--function-cache=DIR` in `args`; with the last,
/// `input` starts with the cache's key) and writes the serialized artifact
/// to `output`. An error is the text to print on stderr before exiting
/// non-zero.
pub fn compile_worker(
    args: &[String],
    input: &mut impl Read,
    output: &mut impl Write,
) -> Result<(), String> {
    let mut fuel_metering = false;
    let mut max_wasm_stack = crate::RuntimeConfig::default().max_wasm_stack_bytes;
    let mut function_dir = None;
    for arg in args {
        if arg == "--fuel-metering" {
            fuel_metering = true;
        } else if let Some(bytes) = arg.strip_prefix("--max-wasm-stack=") {
            max_wasm_stack = bytes
                .parse()
                .map_err(|_| format!("--max-wasm-stack={bytes}: not a number of bytes"))?;
        } else if let Some(dir) = arg.strip_prefix(FUNCTION_CACHE_ARG) {
            function_dir = Some(std::path::PathBuf::from(dir));
        } else {
            return Err(format!("unknown argument {arg:?}"));
        }
    }
    let functions = match function_dir {
        Some(dir) => {
            let mut key = vec![0; crate::cache::KEY_LEN];
            input
                .read_exact(&mut key)
                .map_err(|error| format!("cannot read the function cache's key: {error}"))?;
            Some(Arc::new(FunctionCache::in_dir(dir, &key)))
        }
        None => None,
    };
    let mut wasm = Vec::new();
    input
        .read_to_end(&mut wasm)
        .map_err(|error| format!("cannot read the component: {error}"))?;
    let config =
        code_config(fuel_metering, max_wasm_stack, functions).map_err(|error| error.to_string())?;
    let engine = wasmtime::Engine::new(&config)
        .map_err(|error| format!("cannot make the engine: {error:#}"))?;
    let artifact = engine
        .precompile_component(&wasm)
        .map_err(|error| format!("{error:#}"))?;
    output
        .write_all(&artifact)
        .and_then(|()| output.flush())
        .map_err(|error| format!("cannot write the artifact: {error}"))
}

/// What decides the compiled code (the same in a compiler child process,
/// which allocates no instances): the features a job may use, fuel and
/// epoch checks, the stack limit. With `functions`, Cranelift looks each
/// function up there before compiling it (see `function_cache`); the code
/// is the same either way.
pub(crate) fn code_config(
    fuel_metering: bool,
    max_wasm_stack_bytes: usize,
    functions: Option<Arc<FunctionCache>>,
) -> Result<Config, RuntimeError> {
    let mut wasm = Config::new();
    // Exactly the proposals an upload is validated with
    // (`cronbox_component_check::job_features`), named here rather than
    // left to wasmtime's build: one memory per core module (several would
    // each get the memory limit), 32-bit memories only (the pool's
    // reservations assume them), no garbage-collected types, exceptions,
    // threads or component-model async (none of them is built into this
    // engine, nor would a job need one).
    wasm.wasm_features(cronbox_component_check::WasmFeatures::all(), false)
        .wasm_features(cronbox_component_check::job_features(), true);
    // Nothing a job needs that would let it observe the host: NaN bits and
    // relaxed SIMD results are the same on every machine.
    wasm.cranelift_nan_canonicalization(true)
        .relaxed_simd_deterministic(true);
    wasm.epoch_interruption(true)
        .consume_fuel(fuel_metering)
        .max_wasm_stack(max_wasm_stack_bytes);
    if let Some(functions) = functions {
        wasm.enable_incremental_compilation(functions)
            .map_err(|error| RuntimeError::Engine(format!("{error:#}")))?;
    }
    Ok(wasm)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine and the upload check agree: a core module using each
    /// proposal the check refuses does not compile either, and one using
    /// proposals a job may (tail calls, SIMD, bulk memory) compiles.
    #[test]
    fn the_engine_takes_exactly_the_features_uploads_are_checked_with() {
        let engine = wasmtime::Engine::new(&code_config(true, 512 << 10, None).unwrap()).unwrap();
        let component =
            |module: &str| wat::parse_str(format!("(component (core module {module}))")).unwrap();
        for module in [
            "(memory 1) (memory 1)",
            "(memory i64 1)",
            "(type (struct (field i32)))",
            "(tag)",
            "(memory 1 1 shared)",
        ] {
            let wasm = component(module);
            assert!(
                cronbox_component_check::validate(&wasm).is_err(),
                "the upload check takes {module}"
            );
            assert!(
                wasmtime::component::Component::new(&engine, &wasm).is_err(),
                "the engine compiles {module}"
            );
        }
        let allowed = "(memory 1) (func (param i32) (result i32) local.get 0 return_call 0) \
                       (func (result v128) v128.const i32x4 0 0 0 0) \
                       (func (memory.fill (i32.const 0) (i32.const 0) (i32.const 0)))";
        wasmtime::component::Component::new(&engine, component(allowed)).unwrap();
    }
}
