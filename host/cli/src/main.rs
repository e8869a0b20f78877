//! The `cronbox` command.
//!
//! - `cronbox run`: the job author's inner loop, running a component once on
//!   this machine under the same runtime and limits as an executor;
//! - `cronbox executor`: the executor role (see `host/executor`);
//! - `cronbox admin`: the admin role (see `host/admin`);
//! - `cronbox up`: both roles in one process with demo jobs (`up.rs`).
//!
//! `client.rs` is the admin API client the commands share.

mod admin;
mod client;
mod executor;
mod run;
mod up;

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
    Up(up::UpArgs),
    Run(run::RunArgs),
    Executor(executor::ExecutorArgs),
    Admin(admin::AdminArgs),
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Up(args) => up::main(args),
        Command::Run(args) => run::main(args),
        Command::Executor(args) => executor::main(args),
        Command::Admin(args) => admin::main(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            ExitCode::from(run::EXIT_BAD_INPUT)
        }
    }
}

/// An error and its causes, each cause shown once: library errors often
/// repeat their cause in their own message already.
fn error_chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
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
