//! The `cronbox` command.
//!
//! - `cronbox run`: the job author's inner loop, running a component once on
//!   this machine under the same runtime and limits as an executor;
//! - `cronbox executor`: the executor role (see `host/executor`);
//! - `cronbox admin`: the admin role (see `host/admin`);
//! - `cronbox up`: both roles in one process with demo jobs (`up.rs`);
//! - `cronbox module|job|runs|logs|kill|state|quota`: management over the
//!   admin API (`manage.rs`, through `client.rs`);
//! - `cronbox compile-worker` (hidden): the child process an executor
//!   compiles each component in, bounded in time and memory.
//! - `cronbox config show`: every setting and where its value came from
//!   (`config.rs`: flags > `CRONBOX_*` variables > `cronbox.toml`).

#[macro_use]
mod out;

mod admin;
mod admin_ops;
mod cache;
mod config;
mod context;
mod deploy;
mod dev;
mod dev_python;
mod dirs;
mod executor;
mod manage;
mod run;
mod scaffold;
mod telemetry;
mod tls;
mod up;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// mimalloc rather than the system's allocator: the admin and executor
/// allocate from many threads at once, where glibc's arenas contend (see
/// BENCHMARKS.md's history, "Throughput").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// cronbox: a distributed job scheduler whose jobs are sandboxed
/// WebAssembly components.
#[derive(Debug, Parser)]
#[command(name = "cronbox", version, about, long_about = None)]
#[command(after_help = "Start here:
  cronbox up                      admin + executor + demo jobs on ./cronbox-data
  cronbox job list                (in another terminal)
  cronbox run --example hello     one run, locally, sandboxed

Settings come from flags, then CRONBOX_* variables, then ./cronbox.toml (or
--config FILE); `cronbox config show` lists them all.")]
struct Cli {
    /// Configuration file (default: ./cronbox.toml if it exists).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    telemetry: telemetry::TelemetryArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Up(up::UpArgs),
    Run(run::RunArgs),
    Executor(executor::ExecutorArgs),
    Admin(admin::AdminArgs),
    Module(manage::ModuleArgs),
    Job(manage::JobArgs),
    Runs(manage::RunsArgs),
    Logs(manage::LogsArgs),
    Kill(manage::KillArgs),
    State(manage::StateArgs),
    Quota(manage::QuotaArgs),
    Ceiling(manage::CeilingArgs),
    Calendar(manage::CalendarArgs),
    Group(manage::GroupArgs),
    ExecutorToken(manage::ExecutorTokenArgs),
    Import(manage::ImportArgs),
    Workflow(manage::WorkflowArgs),
    Secret(manage::SecretArgs),
    User(manage::UserArgs),
    Audit(manage::AuditArgs),
    Config(ConfigArgs),
    Context(context::ContextArgs),
    Cert(tls::CertArgs),
    New(scaffold::NewArgs),
    Build(scaffold::BuildArgs),
    Deploy(deploy::DeployArgs),
    Dev(dev::DevArgs),
    /// Compiles the component on stdin to an artifact on stdout (the
    /// executor's compiler child process).
    #[command(hide = true)]
    CompileWorker {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Inspect the configuration.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  CRONBOX_ADMIN=http://admin:8080 cronbox config show --config prod.toml"
)]
struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Every setting with its value and where it came from.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Exit code of a management command that failed.
const EXIT_FAILED: u8 = 1;

fn main() -> ExitCode {
    out::quiet_panics();
    let args: Vec<String> = std::env::args().collect();
    let command = Cli::command();
    let known = config::known_settings(&command);
    let settings = match config::config_path(&args) {
        Some(path) => match config::read_file(&path, &known) {
            Ok(settings) => settings,
            Err(error) => {
                eprintln!("error: {}", error_chain(&error));
                return ExitCode::from(run::EXIT_BAD_INPUT);
            }
        },
        None => config::FileSettings::default(),
    };
    let matches = config::apply(command, &settings).get_matches_from(&args);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let service = match &cli.command {
        Command::Admin(_) => "cronbox-admin",
        Command::Executor(_) => "cronbox-executor",
        _ => "cronbox",
    };
    let telemetry = cli.telemetry.init(service);
    let (result, failure_code) = match cli.command {
        Command::Up(args) => (
            up::main(args, telemetry.metrics_exporter()),
            run::EXIT_BAD_INPUT,
        ),
        Command::Run(args) => (run::main(args), run::EXIT_BAD_INPUT),
        Command::Executor(args) => (
            executor::main(args, telemetry.metrics_exporter()),
            run::EXIT_BAD_INPUT,
        ),
        Command::Admin(args) => (
            admin::main(args, telemetry.metrics_exporter()),
            run::EXIT_BAD_INPUT,
        ),
        Command::Module(args) => (
            manage::module(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Job(args) => (manage::job(args), EXIT_FAILED),
        Command::Runs(args) => (manage::runs(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Logs(args) => (manage::logs(args), EXIT_FAILED),
        Command::Kill(args) => (manage::kill(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::ExecutorToken(args) => (
            manage::executor_token(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Audit(args) => (manage::audit(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::State(args) => (manage::state(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Quota(args) => (manage::quota(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::User(args) => (manage::user(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Secret(args) => (
            manage::secret(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Calendar(args) => (
            manage::calendar(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Group(args) => (manage::group(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Import(args) => (
            manage::import(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Workflow(args) => (
            manage::workflow(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Ceiling(args) => (
            manage::ceiling(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Context(args) => (context::main(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Cert(args) => (tls::main(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::New(args) => (scaffold::new(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Build(args) => (
            scaffold::build(args).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
        Command::Deploy(args) => (deploy::main(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::Dev(args) => (dev::main(args).map(|()| ExitCode::SUCCESS), EXIT_FAILED),
        Command::CompileWorker { args } => {
            return match cronbox_runtime::compile_worker(
                &args,
                &mut std::io::stdin().lock(),
                &mut std::io::stdout().lock(),
            ) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("{message}");
                    ExitCode::from(EXIT_FAILED)
                }
            };
        }
        Command::Config(ConfigArgs {
            command: ConfigCommand::Show { json },
        }) => (
            show_config(&Cli::command(), &settings, json).map(|()| ExitCode::SUCCESS),
            EXIT_FAILED,
        ),
    };
    telemetry.finish();
    match result {
        Ok(code) => code,
        // The reader of our output went away (`| head`): nothing is wrong.
        Err(error) if out::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", error_chain(&error));
            ExitCode::from(failure_code)
        }
    }
}

fn show_config(
    command: &clap::Command,
    settings: &config::FileSettings,
    json: bool,
) -> anyhow::Result<()> {
    let shown = config::show(command, settings);
    if json {
        outln!("{}", serde_json::to_string_pretty(&shown)?);
        return Ok(());
    }
    let width = shown.iter().map(|s| s.setting.len()).max().unwrap_or(0);
    for setting in shown {
        outln!(
            "{:<width$}  {}  [{}; {}]",
            setting.setting,
            setting.value.as_deref().unwrap_or("-"),
            setting.source,
            setting.commands.join(", "),
        );
        if !setting.help.is_empty() {
            outln!("{:<width$}    {}", "", setting.help);
        }
    }
    Ok(())
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
