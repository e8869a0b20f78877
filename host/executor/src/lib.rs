//! The cronbox executor: registers with its admins, runs what they send in
//! the sandboxed runtime, and calls the results back.
//!
//! - [`api`](crate) — the HTTP API (`beat`, `idle-beat`, `run`, `kill`, `log`,
//!   `/metrics`), token-checked in constant time: an enrolled executor
//!   (`cbe_…` token) takes only its admins' proof, never the shared token;
//! - `jobs` — a queue and a task per job, block strategies, warm workers,
//!   hot swap, idle retirement;
//! - `modules` — modules by digest, fetched from an admin and verified;
//! - `spool` — results on disk until an admin acknowledges them;
//! - `admin` — the HTTP client for the admins; `metrics` — Prometheus.
//!
//! The executor never touches a database: everything it must not lose is
//! in the spool, everything else the admin can send again.

mod admin;
mod api;
mod config;
mod disk;
mod jobs;
mod metrics;
mod modules;
mod spool;

use std::net::SocketAddr;
use std::sync::Arc;

use cronbox_protocol::{Registration, admin_paths};
use cronbox_runtime::{Runtime, RuntimeError};
use cronbox_tasks::Tasks;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use admin::AdminError;
pub use config::ExecutorConfig;
pub use disk::{DiskBound, Trimmed};

use crate::admin::AdminClient;
use crate::api::ApiState;
use crate::jobs::{JobSettings, Jobs, Retention};
use crate::metrics::Metrics;
use crate::modules::{ModuleBounds, ModuleStore};
use crate::spool::Spool;

/// Why an executor could not start.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// No token: the executor refuses to serve unauthenticated (fail-closed).
    #[error("an executor needs a token (it refuses to run without one)")]
    MissingToken,
    /// The sandbox could not be set up.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The data directory is unusable.
    #[error("cannot use the data directory {path}: {source}")]
    DataDir {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The API address could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    /// The listener's certificate or the admins' CA file is unusable.
    #[error(transparent)]
    Tls(#[from] cronbox_tls::TlsError),
}

/// A started executor. Dropping it leaves the tasks running until the
/// process ends; call [`shutdown`](Self::shutdown) to stop it gracefully.
#[derive(Debug)]
pub struct RunningExecutor {
    local_addr: SocketAddr,
    address: String,
    state: Arc<ApiState>,
    admins: AdminClient,
    registration: Registration,
    spool: Arc<Spool>,
    grace: std::time::Duration,
    stop_server: CancellationToken,
    stop_background: CancellationToken,
    /// Every task of the executor's own (its job table and module loader
    /// track theirs and end them in [`Jobs::shutdown`](jobs::Jobs)).
    tasks: Tasks,
    server: JoinHandle<()>,
    sender: JoinHandle<()>,
    beater: JoinHandle<()>,
    /// Sends the metrics by OTLP, when asked to.
    metrics_pusher: Option<JoinHandle<()>>,
    /// Reloads the listener's certificate when it changes (with TLS).
    tls_watch: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ApiState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiState")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Starts an executor: the API, the heartbeat to every admin and the
/// callback sender (which first delivers whatever an earlier process left
/// in the spool).
pub async fn start(config: ExecutorConfig) -> Result<RunningExecutor, ExecutorError> {
    if config.token.is_empty() {
        return Err(ExecutorError::MissingToken);
    }
    let data_dir = |source| ExecutorError::DataDir {
        path: config.data_dir.clone(),
        source,
    };
    std::fs::create_dir_all(&config.data_dir).map_err(data_dir)?;
    let mut runtime_config = config.runtime.clone();
    if runtime_config.cache_dir.is_none() {
        runtime_config.cache_dir = Some(config.data_dir.join("artifacts"));
        // Beside the cache, not in it: whoever can write the cache cannot
        // sign an entry.
        runtime_config.cache_key_file = Some(config.data_dir.join("artifact-cache.key"));
    }
    let tls = config
        .tls
        .clone()
        .map(cronbox_tls::TlsServer::load)
        .transpose()?;
    let admin_http = cronbox_tls::client_builder(config.ca_file.as_deref())?;
    let runtime = Runtime::new(runtime_config)?;

    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|source| ExecutorError::Bind {
            address: config.bind,
            source,
        })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| ExecutorError::Bind {
            address: config.bind,
            source,
        })?;
    let address = config.advertised_address.clone().unwrap_or_else(|| {
        let scheme = if tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{local_addr}")
    });

    let admins = AdminClient::new(admin_http, config.admins.clone(), config.token.clone());
    let metrics = Arc::new(Metrics::new());
    let spool =
        Spool::open(config.data_dir.join("spool"), config.max_result_bytes).map_err(data_dir)?;
    metrics
        .spool_records_skipped
        .inc_by(spool.skipped_records() as u64);
    let modules = ModuleStore::new(
        runtime.clone(),
        config.data_dir.join("modules"),
        admins.clone(),
        metrics.clone(),
        ModuleBounds {
            max_loaded: config.max_loaded_modules,
            disk_bytes: config.disk_cache_bytes,
        },
    )
    .map_err(data_dir)?;
    let jobs = Jobs::new(
        runtime,
        modules,
        spool.clone(),
        metrics.clone(),
        address.clone(),
        JobSettings {
            idle_retire: config.idle_retire,
            retained: Retention {
                runs: config.retained_finished_runs,
                log_bytes: config.retained_log_bytes,
            },
            tenant_share: config.tenant_share(),
        },
    );
    let state = Arc::new(ApiState {
        jobs,
        metrics: metrics.clone(),
        admin_bearer: admin_bearer(&config.token),
        address: address.clone(),
        max_log_page: config.max_log_page,
    });

    let stop_server = CancellationToken::new();
    let stop_background = CancellationToken::new();
    let app = api::router(state.clone(), config.max_request_bytes);
    let listener = cronbox_tls::Listener::new(listener, tls.as_ref()).map_err(|source| {
        ExecutorError::Bind {
            address: config.bind,
            source,
        }
    })?;
    let tasks = Tasks::new();
    let tls_watch = tls.map(|tls| tasks.spawn_loop(tls.watch(stop_server.clone())));
    let server = {
        let stop = stop_server.clone();
        tasks.spawn_loop(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(stop.cancelled_owned());
            if let Err(error) = serve.await {
                tracing::error!(%error, "executor API stopped");
            }
        })
    };
    let sender = tasks.spawn_loop(spool.clone().run_sender(
        admins.clone(),
        config.callback_batch,
        metrics,
        stop_background.clone(),
    ));
    let registration = Registration {
        group: config.group.clone(),
        address: address.clone(),
        busy: None,
        free_slots: None,
        protocol: Some(cronbox_protocol::PROTOCOL_VERSION),
    };
    let beater = {
        let admins = admins.clone();
        let registration = registration.clone();
        let stop = stop_background.clone();
        let interval = config.beat_interval;
        let load = state.clone();
        tasks.spawn_loop(async move {
            loop {
                // Each beat says how loaded the executor is (the console
                // shows it).
                let beat = Registration {
                    busy: u32::try_from(load.metrics.running.get()).ok(),
                    free_slots: u32::try_from(load.jobs.runtime().free_instance_slots()).ok(),
                    ..registration.clone()
                };
                if admins.beat_all(&beat).await == 0 {
                    tracing::warn!("no admin accepted the heartbeat");
                }
                tokio::select! {
                    _ = tokio::time::sleep(interval) => {}
                    _ = stop.cancelled() => return,
                }
            }
        })
    };
    let metrics_pusher = config.metrics_export.clone().map(|exporter| {
        let state = state.clone();
        tasks.spawn_loop(exporter.push_until(
            move || std::future::ready(api::current_metrics(&state)),
            stop_background.clone().cancelled_owned(),
        ))
    });
    tracing::info!(%address, %local_addr, "executor started");
    Ok(RunningExecutor {
        local_addr,
        address,
        state,
        admins,
        registration,
        spool,
        grace: config.shutdown_grace,
        stop_server,
        stop_background,
        tasks,
        server,
        sender,
        beater,
        metrics_pusher,
        tls_watch,
    })
}

impl RunningExecutor {
    /// Where the API listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address advertised to admins.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The executor's own tasks (the API, the TLS watch, the result
    /// sender, the heartbeat, the metrics push): all ended once
    /// [`shutdown`](Self::shutdown) returns.
    pub fn tasks(&self) -> Tasks {
        self.tasks.clone()
    }

    /// Results spooled and not yet acknowledged by an admin.
    pub fn pending_results(&self) -> usize {
        self.spool.pending()
    }

    /// How long a shutdown lets running runs finish before it kills them.
    pub fn shutdown_grace(&self) -> std::time::Duration {
        self.grace
    }

    /// Graceful shutdown: stop accepting runs, report queued runs as not
    /// executed, let running runs finish within the grace period then kill
    /// them, retire every instance (`destroy`), deliver what the spool holds
    /// (briefly: what is left is sent by the next start), deregister.
    pub async fn shutdown(self) {
        self.state.jobs.shutdown(self.grace).await;
        self.stop_server.cancel();
        let _ = self.server.await;
        if let Some(watch) = self.tls_watch {
            let _ = watch.await;
        }
        self.stop_background.cancel();
        self.beater.abort();
        if let Some(pusher) = self.metrics_pusher {
            let _ = pusher.await;
        }
        let mut sender = self.sender;
        let flush = tokio::time::timeout(std::time::Duration::from_secs(5), &mut sender);
        if flush.await.is_err() {
            sender.abort();
            tracing::warn!(
                pending = self.spool.pending(),
                "results left in the spool for the next start"
            );
        }
        self.admins
            .post_all(admin_paths::REGISTRY_REMOVE, &self.registration)
            .await;
        self.tasks.shutdown().await;
        tracing::info!(address = %self.address, "executor stopped");
    }
}

/// What admins must present to this executor: the proof derived from its
/// enrolled token, else the shared token itself.
fn admin_bearer(token: &str) -> String {
    use cronbox_protocol::credentials;
    if credentials::is_enrolled(token) {
        credentials::admin_proof(&credentials::token_hash(token))
    } else {
        token.to_owned()
    }
}

/// Unit tests count their allocations (see `jobs::job_loop`'s).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: cronbox_tests::allocations::Counting = cronbox_tests::allocations::Counting;
