//! The cronbox admin: its HTTP API for executors and users and its web
//! console over the services, which hold the rules a request must pass
//! beyond its shape; the firing engine they drive is the crate
//! `cronbox-scheduler` (re-exported here under its modules' names).
//!
//! - `api` — the HTTP API (authentication, scoping to the caller's
//!   tenant, typed bodies, the OpenAPI document at
//!   `/api/v1/openapi.json`);
//! - [`service`] — the rules a request must pass beyond its shape, and the
//!   writes that follow;
//! - [`console`] — the web console at `/` (files in `host/admin/console/`,
//!   built into the binary), a page of the same public API;
//! - [`start`] — an admin: the store, the engine, the API.
//!
//! The admin never links wasmtime: it talks to executors over HTTP.

mod api;
pub mod console;
pub mod service;

/// The firing engine and its domain are the crate `cronbox-scheduler`,
/// re-exported under the names the admin's modules have always used.
pub use cronbox_scheduler::{
    clock, jobs, legacy, metrics, model, quotas, routing, schedule, scheduler, secrets, store,
    tasks, workflow,
};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use metrics::JobMark;
pub use scheduler::SchedulerConfig;
pub use store::{Migrations, SchemaVersion, Store, StoreError, create_private_dir};

/// Versions kept per module name (older ones go unless a job pins them).
pub const KEPT_MODULE_VERSIONS: usize = 30;

/// Where the admin keeps its data.
#[derive(Debug, Clone)]
pub enum Database {
    /// Embedded SQLite under a data directory (one admin per directory).
    Sqlite(std::path::PathBuf),
    /// A database URL (`postgres://...` for clusters, or `sqlite://...`).
    Url(String),
}

/// Everything an admin needs at start.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub bind: SocketAddr,
    pub database: Database,
    /// Whether the admin applies pending migrations as it starts (the
    /// default) or refuses to start until `cronbox admin migrate` has.
    pub migrations: Migrations,
    /// The operator token: the user API for tenant `default`, every
    /// tenant's objects, and tenant management. Tenants' own tokens are
    /// made through the API and stored hashed.
    pub api_token: String,
    /// Token executors present (and are sent).
    pub executor_token: String,
    pub scheduler: SchedulerConfig,
    /// Largest module upload, bytes.
    pub max_request_bytes: usize,
    /// Serve the API and console over TLS with this certificate (reloaded
    /// on SIGHUP or when its files change); `None`: plain HTTP.
    pub tls: Option<cronbox_tls::ServerIdentity>,
    /// Send the metrics by OTLP too (every interval of its own), besides
    /// serving them at `/metrics`.
    pub metrics_export: Option<cronbox_telemetry::MetricsExporter>,
}

/// Why an admin could not start.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("the admin needs a non-empty API token and executor token")]
    MissingToken,
    /// A dispatch lease too short to outlast a send.
    #[error(
        "the dispatch lease ({lease:?}) must be at least the dispatch timeout ({timeout:?}) and a second more"
    )]
    DispatchLeaseTooShort { lease: Duration, timeout: Duration },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    /// The listener's certificate or the executors' CA file is unusable.
    #[error(transparent)]
    Tls(#[from] cronbox_tls::TlsError),
}

/// A started admin.
#[derive(Debug)]
pub struct RunningAdmin {
    local_addr: SocketAddr,
    tasks: tasks::Tasks,
    /// Stops the firing alone (see [`RunningAdmin::stop_firing`]).
    firing: tokio_util::sync::CancellationToken,
    /// Closed once every task has ended.
    store: Store,
}

/// Opens the store (running migrations), starts the scheduler (recovering
/// runs an earlier process wrote but did not dispatch) and the HTTP API.
pub async fn start(config: AdminConfig) -> Result<RunningAdmin, AdminError> {
    if config.api_token.is_empty() || config.executor_token.is_empty() {
        return Err(AdminError::MissingToken);
    }
    let (lease, timeout) = (
        config.scheduler.dispatch_lease,
        config.scheduler.dispatch_timeout,
    );
    if lease < timeout + Duration::from_secs(1) {
        return Err(AdminError::DispatchLeaseTooShort { lease, timeout });
    }
    let store = match &config.database {
        Database::Sqlite(dir) => Store::open_sqlite_with(dir, config.migrations).await?,
        Database::Url(url) => Store::connect_with(url, config.migrations).await?,
    }
    .with_leases(store::Leases::with_dispatch(lease));
    // Executors' certificates are checked against the system's roots and
    // the CA file, read here once.
    let executor_http = cronbox_tls::client_builder(config.scheduler.ca_file.as_deref())?;
    let tls = config
        .tls
        .clone()
        .map(cronbox_tls::TlsServer::load)
        .transpose()?;
    let mut scheduler_config = config.scheduler.clone();
    scheduler_config.executor_token = config.executor_token.clone();
    let receipt_key = store.receipt_key().await?;
    let tasks = tasks::Tasks::new();
    let quotas = Arc::new(quotas::Quotas::new(scheduler_config.quota_defaults.clone()));
    let scheduler = scheduler::Scheduler::new(
        store.clone(),
        scheduler_config.clone(),
        quotas.clone(),
        receipt_key,
        executor_http,
        tasks.clone(),
    );
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .map_err(|source| AdminError::Bind {
            address: config.bind,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| AdminError::Bind {
        address: config.bind,
        source,
    })?;
    let state = Arc::new(api::AdminState {
        services: service::Services::new(store.clone(), &scheduler_config, quotas, &scheduler),
        intake: scheduler::Intake::of(&scheduler),
        api_token: config.api_token.clone(),
        executor_token: config.executor_token.clone(),
        max_module_bytes: config.max_request_bytes,
        keep_versions: KEPT_MODULE_VERSIONS,
        logins: service::users::LoginThrottle::default(),
        uploads: api::UploadRoom::for_modules_of(config.max_request_bytes),
        serves_tls: tls.is_some(),
    });
    let app = api::router(state, config.max_request_bytes);
    let stop = tasks.stopping();
    let listener =
        cronbox_tls::Listener::new(listener, tls.as_ref()).map_err(|source| AdminError::Bind {
            address: config.bind,
            source,
        })?;
    if let Some(tls) = tls {
        tasks.spawn_loop(tls.watch(tasks.stopping()));
    }
    // Tapped (doing nothing) because axum hands a listener's peer address
    // to `ConnectInfo` only for its own listener or a tapped one.
    let listener = axum::serve::ListenerExt::tap_io(listener, |_| ());
    tasks.spawn_loop(async move {
        let serve = axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(stop.cancelled_owned());
        if let Err(error) = serve.await {
            tracing::error!(%error, "admin API stopped");
        }
    });
    let firing = scheduler.firing_stop();
    cronbox_scheduler::run_engine(scheduler, &tasks, config.metrics_export.clone()).await;
    tracing::info!(%local_addr, "admin started");
    Ok(RunningAdmin {
        local_addr,
        tasks,
        firing,
        store,
    })
}

impl RunningAdmin {
    /// Where the API listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops firing: no more fires are claimed, and runs claimed but not
    /// yet sent stay pending for the next start (or another admin), while
    /// the API still takes results. The first step of a shutdown beside an
    /// executor that drains (`cronbox up`): nothing is sent to it that it
    /// would refuse.
    pub fn stop_firing(&self) {
        self.firing.cancel();
    }

    /// Stops the scheduler and the API, waits until every task the admin
    /// spawned has ended, and closes its store: nothing of it runs after
    /// this returns, and its data directory is free for another admin
    /// (a clone of the store still dropping in a finished connection task
    /// used to hold it a moment longer).
    pub async fn shutdown(self) {
        self.tasks.shutdown().await;
        self.store.close().await;
    }
}
