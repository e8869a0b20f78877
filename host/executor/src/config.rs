//! Settings of an executor.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use cronbox_runtime::RuntimeConfig;

/// Everything an executor needs to know at start.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// Where the HTTP API listens (port 0 picks a free port).
    pub bind: SocketAddr,
    /// The address admins reach this executor at, e.g. `https://exec-1.example:9090`;
    /// `None` means `http://` (`https://` with [`tls`](Self::tls)) + the
    /// bound address.
    pub advertised_address: Option<String>,
    /// Serve the API over TLS with this certificate (reloaded on SIGHUP or
    /// when its files change); `None`: plain HTTP.
    pub tls: Option<cronbox_tls::ServerIdentity>,
    /// A PEM file of CA certificates trusted, besides the system's roots,
    /// for admins that serve TLS.
    pub ca_file: Option<PathBuf>,
    /// Base URLs of every admin, e.g. `http://127.0.0.1:8080`.
    pub admins: Vec<String>,
    /// The token admins present to this executor, and this executor to them.
    /// Must not be empty: requests are refused without it (fail-closed).
    pub token: String,
    /// The executor group this executor registers in (xxl-job's appname).
    pub group: String,
    /// Holds the module cache, the artifact cache and the callback spool.
    pub data_dir: PathBuf,
    /// How often to heartbeat every admin.
    pub beat_interval: Duration,
    /// A job's worker retires (calling `destroy`) after this long idle.
    pub idle_retire: Duration,
    /// On shutdown, how long running runs may take before they are killed.
    pub shutdown_grace: Duration,
    /// Largest request body accepted.
    pub max_request_bytes: usize,
    /// Largest page of log lines returned by `log`.
    pub max_log_page: usize,
    /// Results per callback request.
    pub callback_batch: usize,
    /// Finished runs whose logs stay readable through `log`: at most this
    /// many, and at most `retained_log_bytes` of log (charged as the
    /// runtime charges a log: text plus a per-line overhead).
    pub retained_finished_runs: usize,
    pub retained_log_bytes: usize,
    /// Largest run result sent to an admin, serialized; a larger one has
    /// its log cut behind a marker line.
    pub max_result_bytes: usize,
    /// Runs of one tenant executing at once (`None`: three quarters of the
    /// instance slots), so that no tenant fills every slot.
    pub max_tenant_instances: Option<u32>,
    /// Modules kept loaded in memory (least recently used dropped).
    pub max_loaded_modules: usize,
    /// Bytes of module files and compiled artifacts kept on disk (least
    /// recently written deleted first, never a loaded module's).
    pub disk_cache_bytes: u64,
    /// The sandbox's settings (its artifact cache goes under `data_dir`).
    pub runtime: RuntimeConfig,
    /// Send the metrics by OTLP too (every interval of its own), besides
    /// serving them at `/metrics`.
    pub metrics_export: Option<cronbox_telemetry::MetricsExporter>,
}

impl ExecutorConfig {
    /// A tenant's share of the instance slots (at least one).
    pub fn tenant_share(&self) -> usize {
        let share = self
            .max_tenant_instances
            .unwrap_or(self.runtime.max_instances.saturating_mul(3) / 4);
        share.max(1) as usize
    }

    /// Defaults for everything but where to listen, whom to talk to and the
    /// token.
    pub fn new(bind: SocketAddr, admins: Vec<String>, token: String, data_dir: PathBuf) -> Self {
        ExecutorConfig {
            bind,
            advertised_address: None,
            tls: None,
            ca_file: None,
            admins,
            token,
            group: "default".to_owned(),
            data_dir,
            beat_interval: Duration::from_secs(30),
            idle_retire: Duration::from_secs(90),
            shutdown_grace: Duration::from_secs(10),
            max_request_bytes: 4 << 20,
            max_log_page: 5_000,
            callback_batch: 1000,
            retained_finished_runs: 1_000,
            retained_log_bytes: 64 << 20,
            max_result_bytes: 3 << 19,
            max_tenant_instances: None,
            max_loaded_modules: 256,
            disk_cache_bytes: 4 << 30,
            runtime: RuntimeConfig::default(),
            metrics_export: None,
        }
    }
}
