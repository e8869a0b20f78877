//! The cronbox admin: it decides what runs where and when, and records what
//! happened.
//!
//! - [`clock`] — the time every scheduling decision reads (system, offset
//!   or manual);
//! - [`schedule`] (crate `cronbox-schedule`) — cron (Quartz and Unix
//!   dialects) in IANA time zones with a written DST rule, fixed rate,
//!   fixed delay, one-shot, none;
//! - [`routing`] — xxl-job's ten route strategies;
//! - [`store`] (crate `cronbox-store`) — sqlx over SQLite or PostgreSQL,
//!   same schema on both;
//! - [`scheduler`] — the pre-read loop, durable fires, dispatch, results,
//!   retries, child jobs;
//! - `api` — the HTTP API for executors and users (authentication, scoping
//!   to the caller's tenant, typed bodies);
//! - [`service`] — the rules a request must pass beyond its shape, and the
//!   writes that follow;
//! - [`jobs`] — job definitions and their validation;
//! - [`workflow`] — workflow definitions checked into graphs, the template
//!   language of a node's input, the planner of a workflow run's progress
//!   (pure; the scheduler drives them);
//! - [`model`] — the stored enums (run status, alarm state, misfire
//!   policy), decoded strictly;
//! - `housekeeping` — daily reports, run retention, registry clean-up;
//! - `alarms` — failure webhooks, claimed once across admins;
//! - `metrics` — Prometheus counters and histograms at `/metrics`;
//! - `openapi` — the OpenAPI document at `/api/v1/openapi.json`;
//! - [`console`] — the web console at `/` (files in `host/admin/console/`,
//!   built into the binary), a page of the same public API.
//!
//! The admin never links wasmtime: it talks to executors over HTTP.

mod alarms;
mod api;
pub mod clock;
pub mod console;
mod housekeeping;
pub mod jobs;
pub mod legacy;
mod metrics;
pub mod model;
pub mod quotas;
pub mod routing;
pub mod scheduler;
pub mod secrets;
pub mod service;
pub mod workflow;

/// The store and the schedule arithmetic are crates of their own, under
/// the names the admin's modules have always used for them.
pub use cronbox_schedule as schedule;
pub use cronbox_store as store;
pub use cronbox_tasks as tasks;

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
    let scheduler = scheduler::Scheduler::new(
        store,
        scheduler_config,
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
        services: service::Services::of(&scheduler),
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
    if let Err(error) = scheduler
        .metrics()
        .find_marked_jobs(scheduler.store())
        .await
    {
        tracing::warn!(%error, "the jobs marked for metrics were not looked up");
    }
    if let Some(exporter) = config.metrics_export.clone() {
        let scheduler = scheduler.clone();
        let stop = tasks.stopping();
        tasks.spawn_loop(exporter.push_until(
            move || {
                let scheduler = scheduler.clone();
                async move { scheduler.metrics_text().await }
            },
            stop.cancelled_owned(),
        ));
    }
    tasks.spawn(housekeeping::run(
        scheduler.store().clone(),
        scheduler.config().clone(),
    ));
    tasks.spawn_loop(alarms::run(
        scheduler.store().clone(),
        scheduler.metrics().clone(),
        scheduler.config().clock.clone(),
        scheduler.config().alarm_nets.clone(),
        tasks.clone(),
    ));
    let store = scheduler.store().clone();
    tasks.spawn_loop(scheduler.run());
    tracing::info!(%local_addr, "admin started");
    Ok(RunningAdmin {
        local_addr,
        tasks,
        store,
    })
}

impl RunningAdmin {
    /// Where the API listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
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

/// Helpers shared by the crate's unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    pub(crate) use cronbox_store::test_support::{let_others_run, sqlite_store};

    /// A job of tenant `default` firing every second (`* * * * * ?`).
    pub(crate) fn every_second_job(misfire: crate::model::MisfirePolicy) -> crate::store::JobRow {
        crate::store::JobRow {
            id: crate::model::JobId(1),
            tenant: "default".into(),
            group_name: "default".into(),
            name: "every-second".into(),
            module_digest: "a".repeat(64).parse().unwrap(),
            schedule_type: crate::schedule::ScheduleType::Cron,
            schedule_conf: "* * * * * ?".into(),
            time_zone: "UTC".into(),
            misfire,
            misfire_threshold_ms: 5_000,
            route: crate::model::RouteStrategy::First,
            block_strategy: cronbox_protocol::BlockStrategy::SerialExecution,
            max_concurrency: 1,
            timeout_ms: 1_000,
            fuel: None,
            memory_bytes: 1 << 20,
            retry_count: 0,
            retry_interval_ms: 0,
            children: Vec::new(),
            param: String::new(),
            enabled: true,
            next_fire_at_ms: None,
            module_name: None,
            module_version: None,
            alarm_url: String::new(),
            fresh_instance: false,
            config: Default::default(),
            http_allow: Vec::new(),
            http_limits: Default::default(),
            secrets: Vec::new(),
            schedule_rules: Default::default(),
            pause: None,
            executor_handler: None,
        }
    }
}

/// Unit tests count their allocations (see `scheduler::command`'s).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: cronbox_tests::allocations::Counting = cronbox_tests::allocations::Counting;
