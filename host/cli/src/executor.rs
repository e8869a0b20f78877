//! `cronbox executor`: run the executor role until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use cronbox_executor::ExecutorConfig;
use cronbox_runtime::{Compiler, CompilerProcess, RuntimeConfig};

/// Run an executor: register with the admins and run the jobs they send.
///
/// Stops gracefully on SIGINT or SIGTERM: running runs get the grace period,
/// queued runs are reported as not executed, results are delivered or left
/// in the spool for the next start, and the executor deregisters.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox executor --admin http://127.0.0.1:8080 --token s3cret
  CRONBOX_TOKEN=s3cret cronbox executor --admin http://admin-1:8080 --admin http://admin-2:8080 \\
      --bind 0.0.0.0:9090 --advertise https://exec-7.cluster.test:9090 --group billing \\
      --tls-cert certs/exec-7.pem --tls-key certs/exec-7-key.pem --ca-file certs/ca.pem")]
pub struct ExecutorArgs {
    /// Address the executor API listens on.
    #[arg(long, env = "CRONBOX_EXECUTOR_BIND", default_value = "127.0.0.1:9090")]
    bind: SocketAddr,
    /// Address admins reach this executor at (default: http:// + --bind,
    /// https:// with --tls-cert).
    #[arg(long, env = "CRONBOX_EXECUTOR_ADVERTISE")]
    advertise: Option<String>,
    /// Base URL of an admin (repeatable; comma-separated in the variable).
    #[arg(
        long = "admin",
        env = "CRONBOX_ADMINS",
        value_delimiter = ',',
        required = true
    )]
    admins: Vec<String>,
    /// Token shared with the admins (required: requests without it are refused).
    #[arg(long, env = "CRONBOX_TOKEN", hide_env_values = true)]
    token: String,
    #[command(flatten)]
    tls: crate::tls::ServeTls,
    /// Executor group to register in.
    #[arg(long, env = "CRONBOX_EXECUTOR_GROUP", default_value = "default")]
    group: String,
    /// Directory for modules, compiled artifacts and the result spool.
    #[arg(
        long,
        env = "CRONBOX_EXECUTOR_DATA_DIR",
        default_value = "cronbox-data/executor"
    )]
    data_dir: PathBuf,
    /// Directory where compiled components are kept (default: in
    /// --data-dir). Executors, `cronbox up` and `cronbox run` given the
    /// same directory share it: each component is compiled once, by
    /// whichever needs it first, and loaded by the others.
    #[arg(long, env = "CRONBOX_EXECUTOR_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Heartbeat interval.
    #[arg(long, env = "CRONBOX_EXECUTOR_BEAT_INTERVAL", default_value = "30s", value_parser = humantime::parse_duration)]
    beat_interval: Duration,
    /// Idle time after which a job's instance is retired (calling destroy).
    #[arg(long, env = "CRONBOX_EXECUTOR_IDLE_RETIRE", default_value = "90s", value_parser = humantime::parse_duration)]
    idle_retire: Duration,
    /// Time running runs get to finish on shutdown before they are killed.
    #[arg(long, env = "CRONBOX_EXECUTOR_SHUTDOWN_GRACE", default_value = "10s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Networks a job's outbound HTTP may reach beyond the public internet,
    /// comma-separated (`127.0.0.1/32,10.0.0.0/8`). Loopback, private,
    /// link-local and metadata addresses are refused otherwise, whatever
    /// a job's grants say.
    #[arg(long, env = "CRONBOX_EXECUTOR_HTTP_ALLOW_NETS", default_value = "")]
    http_allow_nets: cronbox_net_policy::NetPolicy,
    /// The operator's maximum for a run's HTTP limits, `NAME=VALUE`
    /// (repeatable): a job asking for more gets this. Names:
    /// max_requests, max_concurrent, max_bytes_sent (a size, 8MiB),
    /// max_bytes_received, connect_timeout_ms (a duration, 10s),
    /// first_byte_timeout_ms.
    #[arg(long = "http-limit-max", env = "CRONBOX_EXECUTOR_HTTP_LIMIT_MAX", value_delimiter = ',', value_parser = parse_http_limit)]
    http_limit_max: Vec<(String, u64)>,
    /// Instances (warm or running) alive at once; more wait for a slot.
    #[arg(long, env = "CRONBOX_EXECUTOR_MAX_INSTANCES", default_value_t = 64)]
    max_instances: u32,
    /// Largest memory any run may be given.
    #[arg(long, env = "CRONBOX_EXECUTOR_MEMORY_CEILING", default_value = "1GiB")]
    memory_ceiling: bytesize::ByteSize,
    /// Memory all live instances may be given together: each reserves its
    /// job's memory limit while it lives; more wait (default: 64 MiB per
    /// instance slot).
    #[arg(long, env = "CRONBOX_EXECUTOR_MEMORY_BUDGET")]
    memory_budget: Option<bytesize::ByteSize>,
    /// Disk kept for downloaded modules and compiled artifacts (least
    /// recently used deleted first, never a loaded module's; checked each
    /// time one is written).
    #[arg(long, env = "CRONBOX_EXECUTOR_DISK_CACHE", default_value = "4GiB")]
    disk_cache: bytesize::ByteSize,
    /// Modules kept loaded in memory (least recently used dropped).
    #[arg(long, env = "CRONBOX_EXECUTOR_LOADED_MODULES", default_value_t = 256)]
    loaded_modules: usize,
    /// Runs of one tenant executing at once (default: three quarters of
    /// --max-instances), so that no tenant fills every slot.
    #[arg(long, env = "CRONBOX_EXECUTOR_MAX_TENANT_INSTANCES")]
    max_tenant_instances: Option<u32>,
    #[command(flatten)]
    compiler: CompilerArgs,
}

/// How an executor compiles components: each in a child process, bounded.
#[derive(Debug, Clone, Args)]
pub(crate) struct CompilerArgs {
    /// CPU time a component's compilation may use, all its threads
    /// together (whole seconds); the compiler process is stopped then and
    /// the module refused.
    #[arg(long, env = "CRONBOX_EXECUTOR_COMPILE_CPU", default_value = "2m", value_parser = humantime::parse_duration)]
    compile_cpu: Duration,
    /// Longest a component's compilation may take on the clock, a
    /// backstop to --compile-cpu: compiles run at a low priority, so on a
    /// busy machine one takes far longer than the CPU time it uses.
    #[arg(long, env = "CRONBOX_EXECUTOR_COMPILE_TIMEOUT", default_value = "15m", value_parser = humantime::parse_duration)]
    compile_timeout: Duration,
    /// Address space a compiler process may use.
    #[arg(long, env = "CRONBOX_EXECUTOR_COMPILE_MEMORY", default_value = "4GiB")]
    compile_memory: bytesize::ByteSize,
}

impl CompilerArgs {
    /// Compilation in a child process of this very binary.
    pub(crate) fn compiler(&self) -> anyhow::Result<Compiler> {
        let program = std::env::current_exe()
            .context("cannot find this program's path to start compiler processes")?;
        Ok(Compiler::Subprocess(CompilerProcess {
            program,
            args: vec!["compile-worker".to_owned()],
            cpu: self.compile_cpu,
            timeout: self.compile_timeout,
            memory_bytes: self.compile_memory.as_u64(),
        }))
    }
}

pub fn main(
    args: ExecutorArgs,
    metrics_export: Option<cronbox_telemetry::MetricsExporter>,
) -> anyhow::Result<ExitCode> {
    if args.token.is_empty() {
        bail!("--token (or CRONBOX_TOKEN) must not be empty");
    }
    let mut config = ExecutorConfig::new(args.bind, args.admins, args.token, args.data_dir);
    config.advertised_address = args.advertise;
    config.metrics_export = metrics_export;
    config.tls = args.tls.identity();
    config.ca_file = args.tls.ca_file.clone();
    config.group = args.group;
    config.beat_interval = args.beat_interval;
    config.idle_retire = args.idle_retire;
    config.shutdown_grace = args.shutdown_grace;
    config.disk_cache_bytes = args.disk_cache.as_u64();
    config.max_loaded_modules = args.loaded_modules;
    config.max_tenant_instances = args.max_tenant_instances;
    config.runtime = RuntimeConfig {
        max_instances: args.max_instances,
        memory_ceiling_bytes: args.memory_ceiling.as_u64(),
        memory_budget_bytes: args.memory_budget.map(|budget| budget.as_u64()),
        compiler: args.compiler.compiler()?,
        http_nets: args.http_allow_nets.clone(),
        http_max: {
            let mut max = cronbox_protocol::HttpLimits::MAX;
            for (name, value) in &args.http_limit_max {
                max.set_field(name, *value);
            }
            max
        },
        ..RuntimeConfig::default()
    };
    if let Some(dir) = &args.cache_dir {
        crate::cache::keep_in(dir, &mut config.runtime);
    }
    if let Some(warning) = mapping_limit_warning(args.max_instances, max_map_count()) {
        eprintln!("warning: {warning}");
    }
    let threads = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    threads.block_on(async move {
        let executor = cronbox_executor::start(config).await?;
        eprintln!(
            "cronbox executor listening on {} (advertised as {})",
            executor.local_addr(),
            executor.address()
        );
        crate::shutdown_signal().await;
        eprintln!("cronbox executor shutting down");
        executor.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Memory mappings an instance slot in use may cost the process, with
/// room to spare: wasmtime guards each instance's stack and memory, and a
/// process with all of 10,064 slots in use held about 65,000 mappings
/// (BENCHMARKS.md's history, "Claims first at the writer").
const MAPPINGS_PER_SLOT: u64 = 8;

/// Linux's limit on a process's memory mappings, where it can be read.
fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What to tell the operator when `slots` instance slots in use could
/// need more memory mappings than `max_map_count` allows: past it the
/// process can start no thread, and requests fail with `EAGAIN`.
fn mapping_limit_warning(slots: u32, max_map_count: Option<u64>) -> Option<String> {
    let limit = max_map_count?;
    let needed = u64::from(slots) * MAPPINGS_PER_SLOT;
    (needed > limit).then(|| {
        format!(
            "--max-instances {slots} may need about {needed} memory mappings, more than \
             vm.max_map_count ({limit}) allows; past it the process cannot start threads. \
             Raise it (sysctl vm.max_map_count={}) or give fewer slots",
            needed.next_power_of_two().max(262_144)
        )
    })
}

/// `NAME=VALUE` for one of a run's HTTP limits: a number; a size
/// (`64MiB`) for the byte limits; a duration (`10s`) for the timeouts.
fn parse_http_limit(text: &str) -> Result<(String, u64), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got {text:?}"))?;
    let name = name.trim();
    let value = value.trim();
    let parsed = if let Ok(number) = value.parse::<u64>() {
        Some(number)
    } else if name.contains("bytes") {
        value
            .parse::<bytesize::ByteSize>()
            .ok()
            .map(|size| size.as_u64())
    } else if name.ends_with("_ms") {
        humantime::parse_duration(value)
            .ok()
            .map(|duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    } else {
        None
    };
    let value =
        parsed.ok_or_else(|| format!("{name}: {value:?} is not a number, size or duration"))?;
    let mut probe = cronbox_protocol::HttpLimits::default();
    if !probe.set_field(name, value) || value == 0 {
        return Err(format!(
            "{name}={value}: the names are max_requests, max_concurrent, max_bytes_sent, \
             max_bytes_received, connect_timeout_ms, first_byte_timeout_ms, each above 0"
        ));
    }
    Ok((name.to_owned(), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_limit_maxima_read_numbers_sizes_and_durations() {
        assert_eq!(
            parse_http_limit("max_requests=50"),
            Ok(("max_requests".to_owned(), 50))
        );
        assert_eq!(
            parse_http_limit("max_bytes_received=1MiB"),
            Ok(("max_bytes_received".to_owned(), 1 << 20))
        );
        assert_eq!(
            parse_http_limit("connect_timeout_ms=2s"),
            Ok(("connect_timeout_ms".to_owned(), 2_000))
        );
        for bad in [
            "max_requests",
            "max_request=5",
            "max_requests=0",
            "max_requests=lots",
        ] {
            assert!(parse_http_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slots_past_the_memory_mapping_limit_are_warned_about() {
        // Linux's default limit holds the default slots with room.
        assert_eq!(mapping_limit_warning(64, Some(65_530)), None);
        let warning = mapping_limit_warning(10_000, Some(65_530)).expect("too many slots");
        assert!(warning.contains("--max-instances 10000"), "{warning}");
        assert!(warning.contains("vm.max_map_count (65530)"), "{warning}");
        assert!(
            warning.contains("sysctl vm.max_map_count=262144"),
            "{warning}"
        );
        assert_eq!(mapping_limit_warning(10_000, Some(262_144)), None);
        // No limit to read (not Linux): nothing to say.
        assert_eq!(mapping_limit_warning(10_000, None), None);
    }
}
