//! `cronbox admin`: run the admin role until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Args;
use cronbox_admin::{AdminConfig, Database, SchedulerConfig};

/// Run an admin: store jobs, fire them on time, route them to executors,
/// record their results.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:
  cronbox admin --token api-secret --executor-token exec-secret
  cronbox admin --database-url postgres://cronbox@db/cronbox --bind 0.0.0.0:8080 \\
      --token api-secret --executor-token exec-secret
  cronbox admin --tls-cert certs/admin.pem --tls-key certs/admin-key.pem \\
      --ca-file certs/ca.pem --token api-secret --executor-token exec-secret
  cronbox admin migrate --database-url postgres://cronbox@db/cronbox
  cronbox admin backup cronbox-backup.db",
    subcommand_negates_reqs = true
)]
pub struct AdminArgs {
    /// Address the admin API listens on.
    #[arg(long, env = "CRONBOX_ADMIN_BIND", default_value = "127.0.0.1:8080")]
    bind: SocketAddr,
    #[command(flatten)]
    database: DatabaseArgs,
    /// Apply no migration at start: refuse to start while any is pending
    /// (for deployments where `cronbox admin migrate` runs first, as a
    /// job). By default an admin migrates as it starts, under the
    /// database's lock.
    #[arg(long, env = "CRONBOX_ADMIN_NO_MIGRATE")]
    no_migrate: bool,
    #[command(subcommand)]
    operation: Option<crate::admin_ops::AdminOperation>,
    /// Token of the user API.
    #[arg(
        long,
        env = "CRONBOX_API_TOKEN",
        hide_env_values = true,
        required = true
    )]
    token: Option<String>,
    /// Token shared with executors.
    #[arg(long, env = "CRONBOX_TOKEN", hide_env_values = true, required = true)]
    executor_token: Option<String>,
    #[command(flatten)]
    tls: crate::tls::ServeTls,
    /// How far ahead due jobs are read and their runs written (a job read
    /// has its fires in the second after that written too).
    #[arg(long, env = "CRONBOX_ADMIN_PRE_READ", default_value = "5s", value_parser = humantime::parse_duration)]
    pre_read: Duration,
    #[command(flatten)]
    liveness: LivenessArgs,
    /// How long a dispatch holds its run, and a written fire (5 s more past
    /// its instant): how soon another admin on the database takes over the
    /// runs of one that died. At least 4s (a send's timeout and a second).
    #[arg(long, env = "CRONBOX_ADMIN_DISPATCH_LEASE", default_value = "10s", value_parser = humantime::parse_duration)]
    dispatch_lease: Duration,
    /// How long before its instant a fire is sent to its executor, which
    /// holds it until then; fires due within a third of this of each other
    /// go together, as early as the first needs (0s: send at the instant).
    #[arg(long, env = "CRONBOX_ADMIN_DISPATCH_AHEAD", default_value = "300ms", value_parser = humantime::parse_duration)]
    dispatch_ahead: Duration,
    /// Ended runs older than this are deleted.
    #[arg(long, env = "CRONBOX_ADMIN_RUN_RETENTION", default_value = "30days", value_parser = humantime::parse_duration)]
    run_retention: Duration,
    /// Successful runs older than this are deleted (default: the run
    /// retention), e.g. `6h` to keep failures 30 days and successes hours.
    #[arg(long, env = "CRONBOX_ADMIN_SUCCESS_RETENTION", value_parser = humantime::parse_duration)]
    success_retention: Option<Duration>,
    /// Audit log entries older than this are deleted.
    #[arg(long, env = "CRONBOX_ADMIN_AUDIT_RETENTION", default_value = "365days", value_parser = humantime::parse_duration)]
    audit_retention: Duration,
    /// Test-only: shift this admin's clock (e.g. `2s`, `-2s`), to check
    /// that admins whose clocks disagree still fire each run once.
    #[arg(long, hide = true, default_value = "0s", allow_hyphen_values = true, value_parser = parse_offset)]
    clock_offset: i64,
    /// File holding the key tenants' secrets are sealed under (64 hex
    /// digits; `openssl rand -hex 32`). Keep it apart from the database:
    /// without it secrets cannot be set or used. Every admin of a cluster
    /// needs the same key.
    #[arg(long, env = "CRONBOX_ADMIN_SECRETS_KEY_FILE")]
    secrets_key_file: Option<PathBuf>,
    #[command(flatten)]
    tenant_policy: TenantPolicyArgs,
    /// Largest module upload.
    #[arg(long, env = "CRONBOX_ADMIN_MAX_MODULE_SIZE", default_value = "64MiB")]
    max_module_size: bytesize::ByteSize,
}

/// Where an admin keeps its data, shared by `cronbox admin` and its
/// operations (`migrate`, `backup`, `restore`).
#[derive(Debug, Clone, Args)]
pub(crate) struct DatabaseArgs {
    /// Embedded SQLite database directory (one admin per directory).
    #[arg(
        long,
        global = true,
        env = "CRONBOX_ADMIN_DATA_DIR",
        default_value = "cronbox-data/admin"
    )]
    pub(crate) data_dir: PathBuf,
    /// Database URL instead of the embedded SQLite (postgres://... for clusters).
    #[arg(long, global = true, env = "CRONBOX_DATABASE_URL")]
    pub(crate) database_url: Option<String>,
}

impl DatabaseArgs {
    pub(crate) fn database(self) -> Database {
        match self.database_url {
            Some(url) => Database::Url(url),
            None => Database::Sqlite(self.data_dir),
        }
    }
}

/// When an executor is dead and a run on it lost, shared by `cronbox
/// admin` and `cronbox up`.
#[derive(Debug, Clone, Args)]
pub(crate) struct LivenessArgs {
    /// An executor without a heartbeat for this long is dead.
    #[arg(long, env = "CRONBOX_ADMIN_DEAD_AFTER", default_value = "90s", value_parser = humantime::parse_duration)]
    pub(crate) dead_after: Duration,
    /// A run on a dead executor with no result for this long is marked
    /// lost (failed, then retried if it may be).
    #[arg(long, env = "CRONBOX_ADMIN_LOST_AFTER", default_value = "10m", value_parser = humantime::parse_duration)]
    pub(crate) lost_after: Duration,
}

/// What the operator lets a tenant's jobs ask for and reach, where their
/// traces are viewed and which get metrics of their own, shared by
/// `cronbox admin` and `cronbox up`.
#[derive(Debug, Clone, Args)]
pub(crate) struct TenantPolicyArgs {
    /// Networks a tenant's alarm webhook may reach beyond the public
    /// internet, comma-separated (`127.0.0.1/32,10.0.0.0/8`). Loopback,
    /// private, link-local and metadata addresses are refused otherwise.
    #[arg(long, env = "CRONBOX_ADMIN_ALARM_ALLOW_NETS", default_value = "")]
    alarm_allow_nets: cronbox_net_policy::NetPolicy,
    /// Longest timeout a job may have.
    #[arg(long, env = "CRONBOX_ADMIN_MAX_JOB_TIMEOUT", default_value = "24h", value_parser = humantime::parse_duration)]
    max_job_timeout: Duration,
    /// Most runs of one job at once (CONCURRENT) a job may ask for.
    #[arg(long, env = "CRONBOX_ADMIN_MAX_JOB_CONCURRENCY", default_value_t = 64)]
    max_job_concurrency: u32,
    /// Most memory a job may ask for (at most 4GiB).
    #[arg(long, env = "CRONBOX_ADMIN_MAX_JOB_MEMORY", default_value = "1GiB")]
    max_job_memory: bytesize::ByteSize,
    /// A default quota for every tenant without its own, `NAME=VALUE`
    /// (repeatable; `cronbox quota --help` lists the names), e.g.
    /// `jobs=500`, `state_bytes=64MiB`, `min_interval_ms=10s`.
    #[arg(long = "quota-default", env = "CRONBOX_ADMIN_QUOTA_DEFAULTS", value_delimiter = ',', value_parser = crate::manage::parse_quota_change)]
    quota_defaults: Vec<(cronbox_api::Quota, Option<u64>)>,
    /// The operator's trace viewer, `{trace_id}` where a run's trace id
    /// goes (e.g. `http://127.0.0.1:16686/trace/{trace_id}`): a run's page
    /// in the console links its trace there. Traces are exported when
    /// OTEL_EXPORTER_OTLP_ENDPOINT is set.
    #[arg(long, env = "CRONBOX_ADMIN_TRACE_URL")]
    trace_url: Option<String>,
    /// Jobs given metrics of their own (`cronbox_admin_job_*`: runs by
    /// outcome, lateness, duration, fuel, memory), comma-separated, each
    /// an id or TENANT/NAME: `42,default/nightly-report`.
    #[arg(
        long,
        env = "CRONBOX_ADMIN_JOB_METRICS",
        value_delimiter = ',',
        value_name = "JOBS"
    )]
    job_metrics: Vec<cronbox_admin::JobMark>,
}

impl TenantPolicyArgs {
    /// `scheduler` with this policy, checked.
    pub(crate) fn apply(self, scheduler: SchedulerConfig) -> anyhow::Result<SchedulerConfig> {
        let memory = self.max_job_memory.as_u64();
        if !(1 << 20..=4 << 30).contains(&memory) {
            bail!("--max-job-memory must be between 1MiB and 4GiB (a 32-bit memory's reach)");
        }
        if self.max_job_concurrency == 0 || self.max_job_timeout.is_zero() {
            bail!("--max-job-concurrency and --max-job-timeout must be positive");
        }
        if let Some(url) = &self.trace_url
            && (!(url.starts_with("http://") || url.starts_with("https://"))
                || !url.contains("{trace_id}"))
        {
            bail!("--trace-url must be an http(s) URL with {{trace_id}} in it, got {url:?}");
        }
        let mut quotas = cronbox_api::QuotaSettings::default();
        for (quota, limit) in self.quota_defaults {
            let Some(limit) = limit else {
                bail!("--quota-default {quota}=default: give the default a value");
            };
            quotas.set(quota, Some(limit));
        }
        Ok(SchedulerConfig {
            quota_defaults: cronbox_admin::quotas::QuotaDefaults::default().with(&quotas),
            alarm_nets: self.alarm_allow_nets,
            job_maxima: cronbox_admin::jobs::JobMaxima {
                timeout_ms: i64::try_from(self.max_job_timeout.as_millis()).unwrap_or(i64::MAX),
                concurrency: i64::from(self.max_job_concurrency),
                memory_bytes: memory as i64,
            },
            trace_url: self.trace_url,
            job_metrics: self.job_metrics,
            ..scheduler
        })
    }
}

/// A signed duration in milliseconds: `2s`, `-1500ms`.
fn parse_offset(text: &str) -> Result<i64, String> {
    let (sign, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, text),
    };
    humantime::parse_duration(magnitude)
        .map(|duration| sign * duration.as_millis() as i64)
        .map_err(|error| error.to_string())
}

pub fn main(
    args: AdminArgs,
    metrics_export: Option<cronbox_telemetry::MetricsExporter>,
) -> anyhow::Result<ExitCode> {
    if let Some(operation) = args.operation {
        return crate::admin_ops::main(operation, args.database.database());
    }
    let (Some(token), Some(executor_token)) = (args.token, args.executor_token) else {
        bail!("--token and --executor-token are needed to run an admin");
    };
    if token.is_empty() || executor_token.is_empty() {
        bail!("--token and --executor-token must not be empty");
    }
    let config = AdminConfig {
        bind: args.bind,
        database: args.database.database(),
        migrations: if args.no_migrate {
            cronbox_admin::Migrations::Require
        } else {
            cronbox_admin::Migrations::Apply
        },
        api_token: token,
        executor_token,
        scheduler: args.tenant_policy.apply(SchedulerConfig {
            pre_read: args.pre_read,
            dead_after: args.liveness.dead_after,
            lost_after: args.liveness.lost_after,
            dispatch_lease: args.dispatch_lease,
            dispatch_ahead: args.dispatch_ahead,
            run_retention: args.run_retention,
            success_retention: args.success_retention,
            audit_retention: args.audit_retention,
            clock: std::sync::Arc::new(cronbox_admin::clock::SystemClock::with_offset(
                args.clock_offset,
            )),
            secrets: match &args.secrets_key_file {
                Some(path) => Some(std::sync::Arc::new(
                    cronbox_admin::secrets::SecretBox::from_key_file(path)?,
                )),
                None => None,
            },
            ca_file: args.tls.ca_file.clone(),
            ..SchedulerConfig::default()
        })?,
        max_request_bytes: usize::try_from(args.max_module_size.as_u64()).unwrap_or(usize::MAX),
        tls: args.tls.identity(),
        metrics_export,
    };
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let threads = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    threads.block_on(async move {
        let admin = cronbox_admin::start(config).await?;
        eprintln!(
            "cronbox admin listening on {scheme}://{}",
            admin.local_addr()
        );
        crate::shutdown_signal().await;
        eprintln!("cronbox admin shutting down");
        admin.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
