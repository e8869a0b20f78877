//! `cronbox run`: run a job component once, locally, with production limits.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use clap::Args;
use cronbox_protocol::{Outcome, Trigger};
use cronbox_runtime::{
    InstanceMode, JobWorker, RunHandle, RunLimits, RunReport, RunRequest, Runtime, RuntimeConfig,
};
use serde::Serialize;

/// Exit code of a run that did not succeed.
pub const EXIT_RUN_FAILED: u8 = 1;
/// Exit code of bad input: unreadable or refused module, bad flags.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Run a job component once on this machine and print its log and outcome.
///
/// Exits 0 when the run succeeded, 1 when it ran but did not succeed
/// (failed, timeout, trap, out of fuel, memory limit), 2 when the module or
/// the flags were refused.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox run target/wasm32-wasip2/release/hello.wasm --param world
  cronbox run --example runaway --timeout 200ms
  cronbox run job.wasm --fuel 1000000 --memory 16MiB --state count=41 --json")]
pub struct RunArgs {
    /// The component to run (a .wasm file built for wasm32-wasip2).
    #[arg(required_unless_present = "example", conflicts_with = "example")]
    file: Option<PathBuf>,
    /// Run one of the bundled example jobs instead of a file (e.g. hello).
    #[arg(long, value_name = "NAME")]
    example: Option<String>,
    /// The trigger's parameter, as `ctx.param()` returns it.
    #[arg(long, short, default_value = "")]
    param: String,
    /// Wall-clock limit of the run (e.g. 500ms, 5s, 1m).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Fuel budget (deterministic instruction count); unlimited when absent.
    #[arg(long)]
    fuel: Option<u64>,
    /// Memory limit of the instance (e.g. 64MiB, 1GiB).
    #[arg(long, default_value = "64MiB")]
    memory: bytesize::ByteSize,
    /// Cap on the run's log (stdout, stderr and log calls).
    #[arg(long, default_value = "1MiB")]
    log_limit: bytesize::ByteSize,
    /// Initial job state, as key=value (repeatable).
    #[arg(long = "state", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    state: Vec<(String, String)>,
    /// Job configuration, read through wasi:config/store, as key=value
    /// (repeatable).
    #[arg(long = "job-config", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    job_config: Vec<(String, String)>,
    /// A secret the job reads through wasi:config/store, as NAME=VALUE
    /// (repeatable); masked in the log and outcome like an executor's.
    #[arg(long = "secret", value_name = "NAME=VALUE", value_parser = parse_key_value)]
    secrets: Vec<(String, String)>,
    /// An origin the job may call over HTTP (`https://api.example.com`,
    /// `https://*.example.com`; repeatable). None: no network.
    #[arg(long = "http-allow", value_name = "ORIGIN")]
    http_allow: Vec<cronbox_net_policy::OriginPattern>,
    /// Networks the job's HTTP may reach beyond the public internet
    /// (`127.0.0.1/32`); loopback, private and link-local addresses are
    /// refused otherwise.
    #[arg(long, value_name = "NETS", default_value = "")]
    http_allow_nets: cronbox_net_policy::NetPolicy,
    /// Shard index and total, as INDEX/TOTAL (e.g. 1/3).
    #[arg(long, default_value = "0/1", value_parser = parse_shard)]
    shard: (u32, u32),
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    compiler: crate::executor::CompilerArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
}

pub(crate) fn parse_key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

fn parse_shard(text: &str) -> Result<(u32, u32), String> {
    let parsed = text
        .split_once('/')
        .and_then(|(index, total)| Some((index.parse().ok()?, total.parse().ok()?)));
    match parsed {
        Some((index, total)) if total >= 1 && index < total => Ok((index, total)),
        _ => Err(format!(
            "expected INDEX/TOTAL with INDEX < TOTAL, got {text:?}"
        )),
    }
}

/// The JSON shape of `--json`.
#[derive(Debug, Serialize)]
struct JsonReport<'a> {
    #[serde(flatten)]
    outcome: &'a Outcome,
    code: u16,
    duration_ms: f64,
    fuel_consumed: Option<u64>,
    peak_memory_bytes: u64,
    module_digest: &'a str,
    log: &'a [cronbox_protocol::LogLine],
    log_truncated: bool,
    state_changes: &'a cronbox_protocol::StateChanges,
}

pub fn main(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (source, wasm) = match (&args.file, &args.example) {
        (Some(path), _) => (
            path.display().to_string(),
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?,
        ),
        (None, Some(name)) => {
            if !cronbox_example_jobs::JOBS.contains(&name.as_str()) {
                bail!(
                    "no example job named {name:?}; the examples are: {}",
                    cronbox_example_jobs::JOBS.join(", ")
                );
            }
            let path = cronbox_example_jobs::path(name);
            (
                format!("example {name}"),
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?,
            )
        }
        (None, None) => bail!("give a component file or --example NAME"),
    };

    let runtime_threads = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime_threads.block_on(run_once(&args, wasm))?;
    let report = match report {
        Ok(report) => report,
        Err(error) => bail!("{source} was refused: {error}"),
    };

    if args.json {
        let json = JsonReport {
            outcome: &report.outcome,
            code: report.outcome.code(),
            duration_ms: report.duration.as_secs_f64() * 1000.0,
            fuel_consumed: report.fuel_consumed,
            peak_memory_bytes: report.peak_memory_bytes,
            module_digest: report.module_digest.as_str(),
            log: &report.log,
            log_truncated: report.log_truncated,
            state_changes: &report.state_changes,
        };
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_text(&report);
    }
    Ok(if report.outcome.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_RUN_FAILED)
    })
}

async fn run_once(
    args: &RunArgs,
    wasm: Vec<u8>,
) -> anyhow::Result<Result<RunReport, cronbox_runtime::LoadError>> {
    // One run here: its memory limit is the whole budget.
    let mut config = RuntimeConfig {
        max_instances: 2,
        memory_budget_bytes: Some(args.memory.as_u64()),
        compiler: args.compiler.compiler()?,
        http_nets: args.http_allow_nets.clone(),
        ..RuntimeConfig::default()
    };
    args.cache.apply(&mut config);
    let runtime = Runtime::new(config)?;
    eprintln!("loading the component ({} bytes)…", wasm.len());
    let module = match runtime.load(wasm).await {
        Ok(module) => module,
        Err(error) => return Ok(Err(error)),
    };
    let took = module.load_time().as_millis();
    match module.cache_status() {
        cronbox_runtime::CacheStatus::Hit => eprintln!("compiled earlier: loaded in {took} ms"),
        _ => {
            eprintln!("compiled in {took} ms");
            args.cache.trim(module.digest().as_str());
        }
    }
    if !module.denied_imports().is_empty() {
        eprintln!(
            "note: {} linked, granting nothing (a use fails inside the job)",
            denied_packages(module.denied_imports())
        );
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|now| now.as_millis() as i64)
        .unwrap_or(0);
    let trigger = Trigger {
        shard_index: args.shard.0,
        shard_total: args.shard.1,
        ..Trigger::manual(args.param.clone(), now_ms)
    };
    let request = RunRequest {
        trigger,
        limits: RunLimits {
            timeout: args.timeout,
            fuel: args.fuel,
            memory_bytes: args.memory.as_u64(),
            log_bytes: usize::try_from(args.log_limit.as_u64()).unwrap_or(usize::MAX),
            ..RunLimits::default()
        },
        state: Arc::new(args.state.iter().cloned().collect::<HashMap<_, _>>()),
        config: args.job_config.iter().cloned().collect(),
        http_allow: args.http_allow.clone().into(),
        http_limits: Default::default(),
        secrets: args.secrets.iter().cloned().collect(),
    };
    let mut worker = JobWorker::new(&runtime, module, InstanceMode::FreshPerRun);
    Ok(Ok(worker.run(request, &RunHandle::new()).await))
}

fn print_text(report: &RunReport) {
    for line in &report.log {
        outln!("{line}");
    }
    if !report.log.is_empty() {
        outln!();
    }
    outln!("outcome: {}", report.outcome);
    let mut figures = format!(
        "duration: {:.1} ms, peak memory: {}",
        report.duration.as_secs_f64() * 1000.0,
        bytesize::ByteSize::b(report.peak_memory_bytes)
            .display()
            .iec()
    );
    if let Some(fuel) = report.fuel_consumed {
        figures.push_str(&format!(", fuel: {fuel}"));
    }
    outln!("{figures}");
    if !report.state_changes.is_empty() {
        outln!("state changes (committed only because the run succeeded):");
        for (key, value) in &report.state_changes {
            match value {
                Some(value) => outln!("  {key} = {value}"),
                None => outln!("  {key} removed"),
            }
        }
    }
}

/// The packages of denied imports, once each (`wasi:filesystem/types@0.2.9`
/// and `wasi:filesystem/preopens@0.2.9` are `wasi:filesystem`), as a list
/// for a person.
fn denied_packages(imports: &[String]) -> String {
    let mut packages: Vec<&str> = imports
        .iter()
        .map(|import| import.split('/').next().unwrap_or(import))
        .collect();
    packages.dedup();
    match packages.as_slice() {
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        [] => String::new(),
    }
}
