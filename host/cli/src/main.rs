//! The `cronbox` command.
//!
//! - `cronbox run`: the job author's inner loop, running a component once on
//!   this machine under the same runtime and limits as an executor;
//! - `cronbox executor`: the executor role (see `host/executor`);
//! - `cronbox admin`: the admin role (see `host/admin`).
//!
//! The admin, `up` and the management commands arrive with their roles.

mod admin;
mod executor;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// cronbox: a distributed job scheduler whose jobs are sandboxed
/// WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "cronbox", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(run::RunArgs),
    Executor(executor::ExecutorArgs),
    Admin(admin::AdminArgs),
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::main(args),
        Command::Executor(args) => executor::main(args),
        Command::Admin(args) => admin::main(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(run::EXIT_BAD_INPUT)
        }
    }
}

/// Logs to stderr, filtered by `CRONBOX_LOG` (e.g. `debug`,
/// `cronbox_runtime=trace`); warnings only by default.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("CRONBOX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
