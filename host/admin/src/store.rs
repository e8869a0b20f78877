//! The admin's store: sqlx over SQLite (embedded default, one file, WAL) or
//! PostgreSQL (clusters), with the same schema and queries on both.
//!
//! Times are milliseconds since the Unix epoch. Queries are written once
//! with `$n` placeholders, which both engines accept. With SQLite one admin
//! owns a data directory: a second is refused through an exclusive lock
//! file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cronbox_protocol::{ABSENT_REVISION, StateChanges, StateRevision};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another admin holds the SQLite data directory.
    #[error(
        "another cronbox admin is using the data directory {0} (SQLite allows one admin per data \
         directory; use PostgreSQL to run several)"
    )]
    Locked(PathBuf),
    #[error("cannot use the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://...")]
    UnsupportedUrl(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migration(#[from] sqlx::migrate::MigrateError),
}

/// Which engine the store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The database.
#[derive(Debug, Clone)]
pub struct Store {
    /// Reads (SQLite in WAL reads concurrently with the writer).
    pool: AnyPool,
    /// Writes: a single connection on SQLite, so writers queue in the pool
    /// instead of colliding on SQLite's lock and sleeping in its busy
    /// handler; the same pool as reads on PostgreSQL.
    writer: AnyPool,
    backend: Backend,
    /// This process's name in run leases (random per start).
    owner: std::sync::Arc<str>,
    _lock: Option<std::sync::Arc<std::fs::File>>,
}

/// How long after its scheduled time the admin that wrote a fire keeps the
/// sole right to dispatch it.
pub const WRITE_LEASE_MS: i64 = 5_000;
/// How long a dispatch holds its run (the send's timeout, and time to
/// record it).
pub const DISPATCH_LEASE_MS: i64 = 10_000;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// A job as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobRow {
    pub id: i64,
    pub tenant: String,
    pub group_name: String,
    pub name: String,
    pub module_digest: String,
    pub schedule_type: String,
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire: String,
    pub misfire_threshold_ms: i64,
    pub route: String,
    pub block_strategy: String,
    pub max_concurrency: i64,
    pub timeout_ms: i64,
    pub fuel: Option<i64>,
    pub memory_bytes: i64,
    pub retry_count: i64,
    pub retry_interval_ms: i64,
    pub children: String,
    pub param: String,
    pub enabled: bool,
    pub next_fire_at_ms: Option<i64>,
    /// The module name the job follows (its latest version) or pins
    /// (`module_version`); `None` for a job that names a digest.
    pub module_name: Option<String>,
    pub module_version: Option<i64>,
    /// Webhook called when a run fails (empty: no alarm).
    pub alarm_url: String,
    /// A new instance for every run instead of a warm one (`init` and
    /// `destroy` around each run).
    pub fresh_instance: bool,
}

/// The columns of a job, as a literal for `concat!` (queries stay static).
macro_rules! job_columns {
    () => {
        "id, tenant, group_name, name, module_digest, schedule_type, schedule_conf, time_zone, \
         misfire, misfire_threshold_ms, route, block_strategy, max_concurrency, timeout_ms, fuel, \
         memory_bytes, retry_count, retry_interval_ms, children, param, enabled, next_fire_at_ms, \
         module_name, module_version, alarm_url, fresh_instance"
    };
}

fn job_from_row(row: &AnyRow) -> Result<JobRow, sqlx::Error> {
    Ok(JobRow {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        group_name: row.try_get("group_name")?,
        name: row.try_get("name")?,
        module_digest: row.try_get("module_digest")?,
        schedule_type: row.try_get("schedule_type")?,
        schedule_conf: row.try_get("schedule_conf")?,
        time_zone: row.try_get("time_zone")?,
        misfire: row.try_get("misfire")?,
        misfire_threshold_ms: row.try_get("misfire_threshold_ms")?,
        route: row.try_get("route")?,
        block_strategy: row.try_get("block_strategy")?,
        max_concurrency: row.try_get("max_concurrency")?,
        timeout_ms: row.try_get("timeout_ms")?,
        fuel: row.try_get("fuel")?,
        memory_bytes: row.try_get("memory_bytes")?,
        retry_count: row.try_get("retry_count")?,
        retry_interval_ms: row.try_get("retry_interval_ms")?,
        children: row.try_get("children")?,
        param: row.try_get("param")?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        next_fire_at_ms: row.try_get("next_fire_at_ms")?,
        module_name: row.try_get("module_name")?,
        module_version: row.try_get("module_version")?,
        alarm_url: row.try_get("alarm_url")?,
        fresh_instance: row.try_get::<i64, _>("fresh_instance")? != 0,
    })
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRow {
    pub id: i64,
    pub tenant: String,
    pub job_id: i64,
    pub kind: String,
    pub scheduled_at_ms: i64,
    pub shard_index: i64,
    pub shard_total: i64,
    pub attempt: i64,
    pub param: String,
    pub status: String,
    pub executor: Option<String>,
    pub module_digest: String,
    pub outcome: Option<String>,
    pub code: Option<i64>,
    pub message: Option<String>,
    pub created_at_ms: i64,
    pub dispatched_at_ms: Option<i64>,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    /// `none`, `due`, `sending`, `sent` or `failed` (see [`alarm`]).
    pub alarm_status: String,
    pub alarm_message: Option<String>,
}

/// Alarm states of a run.
pub mod alarm {
    /// No alarm is due (success, or not ended yet).
    pub const NONE: &str = "none";
    /// Failed; its job's webhook is to be called.
    pub const DUE: &str = "due";
    /// Claimed by one admin, which is calling the webhook.
    pub const SENDING: &str = "sending";
    pub const SENT: &str = "sent";
    pub const FAILED: &str = "failed";
    /// Failed, but its job has no webhook.
    pub const NOT_CONFIGURED: &str = "not_configured";
}

/// The columns of a run, as a literal for `concat!`.
macro_rules! run_columns {
    () => {
        "id, tenant, job_id, kind, scheduled_at_ms, shard_index, shard_total, attempt, param, \
         status, executor, module_digest, outcome, code, message, created_at_ms, dispatched_at_ms, \
         started_at_ms, finished_at_ms, alarm_status, alarm_message"
    };
}

fn run_from_row(row: &AnyRow) -> Result<RunRow, sqlx::Error> {
    Ok(RunRow {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        job_id: row.try_get("job_id")?,
        kind: row.try_get("kind")?,
        scheduled_at_ms: row.try_get("scheduled_at_ms")?,
        shard_index: row.try_get("shard_index")?,
        shard_total: row.try_get("shard_total")?,
        attempt: row.try_get("attempt")?,
        param: row.try_get("param")?,
        status: row.try_get("status")?,
        executor: row.try_get("executor")?,
        module_digest: row.try_get("module_digest")?,
        outcome: row.try_get("outcome")?,
        code: row.try_get("code")?,
        message: row.try_get("message")?,
        created_at_ms: row.try_get("created_at_ms")?,
        dispatched_at_ms: row.try_get("dispatched_at_ms")?,
        started_at_ms: row.try_get("started_at_ms")?,
        finished_at_ms: row.try_get("finished_at_ms")?,
        alarm_status: row.try_get("alarm_status")?,
        alarm_message: row.try_get("alarm_message")?,
    })
}

/// A run to write before it is dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub job_id: i64,
    pub kind: &'static str,
    pub scheduled_at_ms: i64,
    pub shard_index: i64,
    pub shard_total: i64,
    pub attempt: i64,
    pub param: String,
    pub module_digest: String,
}

/// A run accepted by an executor, to be recorded as dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchMark {
    pub run_id: i64,
    pub executor: String,
    pub at_ms: i64,
}

/// How a run ended, to be recorded once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunEnd {
    pub run_id: i64,
    pub success: bool,
    /// The outcome kind (`success`, `failed`, `timeout`, `lost`, ...).
    pub outcome: String,
    pub code: i64,
    pub message: String,
    /// The run's log as JSON lines.
    pub log: String,
    /// The executor that ran it, when known.
    pub executor: Option<String>,
    pub started_at_ms: Option<i64>,
    /// Committed only when `success`, and only if every key in
    /// `state_base` is still at the revision the run based it on.
    pub state_changes: StateChanges,
    /// The revisions the run's reads and writes were based on (empty: not
    /// checked, as from an executor that predates revisions).
    pub state_base: std::collections::BTreeMap<String, StateRevision>,
    pub finished_at_ms: i64,
    /// The module that ran, when it differs from the one written (a job
    /// moved to another version between the fire and its dispatch).
    pub module_digest: Option<String>,
}

impl RunEnd {
    /// A run that ended without a result from a guest (not dispatched,
    /// refused, lost): `outcome` says which.
    pub fn failed(run_id: i64, outcome: &str, message: &str, now_ms: i64) -> RunEnd {
        RunEnd {
            run_id,
            success: false,
            outcome: outcome.to_owned(),
            code: 500,
            message: message.to_owned(),
            finished_at_ms: now_ms,
            ..RunEnd::default()
        }
    }

    /// A run that will not run: its job was stopped or killed while it
    /// waited (status `cancelled`: no alarm, no retry).
    pub fn cancelled(run_id: i64, message: &str, now_ms: i64) -> RunEnd {
        RunEnd {
            code: 0,
            ..RunEnd::failed(run_id, status::CANCELLED, message, now_ms)
        }
    }
}

/// Which runs to list: every field narrows; newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Runs of this tenant only (`None`: every tenant's).
    pub tenant: Option<String>,
    pub job_id: Option<i64>,
    pub status: Option<String>,
    /// Scheduled at or after.
    pub from_ms: Option<i64>,
    /// Scheduled before.
    pub to_ms: Option<i64>,
    /// Ids below this one (the cursor of the next page).
    pub before_id: Option<i64>,
    pub limit: i64,
}

/// One day's run counts of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DailyReport {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub success: i64,
    pub failed: i64,
    /// Written and not ended when the report was refreshed.
    pub running: i64,
    /// Never ran: the job was stopped or killed while they waited.
    pub cancelled: i64,
}

/// A new version of a named module, as pushed.
#[derive(Debug, Clone, Copy)]
pub struct VersionPush<'a> {
    pub tenant: &'a str,
    pub name: &'a str,
    pub digest: &'a str,
    pub labels: &'a [String],
    /// Why, when not a plain push (`rollback to version 2`).
    pub note: &'a str,
}

/// A version of a named module.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModuleVersion {
    pub name: String,
    /// 1, 2, 3, ... per (tenant, name).
    pub version: i64,
    pub digest: String,
    /// Labels currently on this version (a label is on one version).
    pub labels: Vec<String>,
    /// Why it was made, when not a plain push (`rollback to version 2`).
    pub note: String,
    pub created_at_ms: i64,
}

macro_rules! module_version_columns {
    () => {
        "name, version, digest, labels, note, created_at_ms"
    };
}

fn module_version_from_row(row: &AnyRow) -> Result<ModuleVersion, sqlx::Error> {
    let labels: String = row.try_get("labels")?;
    Ok(ModuleVersion {
        name: row.try_get("name")?,
        version: row.try_get("version")?,
        digest: row.try_get("digest")?,
        labels: labels
            .split(',')
            .filter(|label| !label.is_empty())
            .map(str::to_owned)
            .collect(),
        note: row.try_get("note")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

/// Takes `label` off every version of module `name`.
async fn remove_label(
    conn: &mut sqlx::AnyConnection,
    tenant: &str,
    name: &str,
    label: &str,
) -> Result<(), StoreError> {
    let rows = sqlx::query(
        "SELECT version, labels FROM module_version WHERE tenant = $1 AND name = $2 \
         AND labels <> ''",
    )
    .bind(tenant)
    .bind(name)
    .fetch_all(&mut *conn)
    .await?;
    for row in rows {
        let labels: String = row.try_get("labels")?;
        if labels.split(',').any(|l| l == label) {
            let kept: Vec<&str> = labels.split(',').filter(|l| *l != label).collect();
            sqlx::query(
                "UPDATE module_version SET labels = $1 WHERE tenant = $2 AND name = $3 \
                 AND version = $4",
            )
            .bind(kept.join(","))
            .bind(tenant)
            .bind(name)
            .bind(row.try_get::<i64, _>("version")?)
            .execute(&mut *conn)
            .await?;
        }
    }
    Ok(())
}

/// A job claimed by [`Store::claim_due_batch`] and the fires written for it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub job: JobRow,
    /// Each fire with the id of its run (`None`: it already existed).
    pub written: Vec<(Option<i64>, NewRun)>,
}

/// Run statuses.
pub mod status {
    /// Written, not yet sent to an executor.
    pub const PENDING: &str = "pending";
    /// Accepted by an executor; its result is awaited.
    pub const DISPATCHED: &str = "dispatched";
    /// Ended successfully.
    pub const SUCCESS: &str = "success";
    /// Ended in any other way (the outcome says how).
    pub const FAILED: &str = "failed";
    /// Never ran: its job was stopped or killed while it waited. Not a
    /// failure: no alarm, no retry, counted apart.
    pub const CANCELLED: &str = "cancelled";
}

/// The outcome of a successful run whose state changes conflicted with a
/// commit it did not see (a failure: alarm and retry apply).
pub const STATE_CONFLICT: &str = "state_conflict";

/// Outcomes of runs that a person or the system ended on purpose: no
/// alarm, no retry.
pub fn outcome_is_deliberate(outcome: &str) -> bool {
    matches!(outcome, "killed" | "covered" | "cancelled")
}

/// A job's durable state with the revision of each key (see
/// [`cronbox_protocol::StateRevision`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobState {
    pub values: HashMap<String, String>,
    pub revisions: HashMap<String, StateRevision>,
}

impl JobState {
    fn insert(&mut self, key: String, value: String, revision: StateRevision) {
        self.revisions.insert(key.clone(), revision);
        self.values.insert(key, value);
    }
}

impl Store {
    /// Opens the embedded SQLite store under `data_dir` (creating it),
    /// refusing a data directory another admin holds.
    pub async fn open_sqlite(data_dir: &Path) -> Result<Store, StoreError> {
        let io = |source| StoreError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(data_dir).map_err(io)?;
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(data_dir.join("admin.lock"))
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::Locked(data_dir.to_path_buf()));
            }
            Err(std::fs::TryLockError::Error(error)) => return Err(io(error)),
        }
        let url = format!(
            "sqlite://{}?mode=rwc",
            data_dir.join("cronbox.db").display()
        );
        let mut store = Store::connect(&url).await?;
        store._lock = Some(std::sync::Arc::new(lock));
        Ok(store)
    }

    /// Connects by URL (`sqlite://...` or `postgres://...`) and migrates.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        let connect = |connections: u32| {
            AnyPoolOptions::new()
                .max_connections(connections)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if backend == Backend::Sqlite {
                            // WAL with NORMAL sync: a commit survives a
                            // process crash; only an OS crash may lose the
                            // newest ones.
                            sqlx::query("PRAGMA synchronous = NORMAL")
                                .execute(&mut *conn)
                                .await?;
                        }
                        Ok(())
                    })
                })
                .connect(url)
        };
        let (pool, writer) = match backend {
            Backend::Sqlite => {
                let writer = connect(1).await?;
                sqlx::query("PRAGMA journal_mode = WAL")
                    .execute(&writer)
                    .await?;
                SQLITE_MIGRATIONS.run(&writer).await?;
                (connect(4).await?, writer)
            }
            Backend::Postgres => {
                let pool = connect(16).await?;
                POSTGRES_MIGRATIONS.run(&pool).await?;
                (pool.clone(), pool)
            }
        };
        Ok(Store {
            pool,
            writer,
            backend,
            owner: hex::encode(rand::random::<[u8; 8]>()).into(),
            _lock: None,
        })
    }

    /// The engine.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    // ---- registry -------------------------------------------------------

    /// Records a heartbeat of `address` in `group`.
    pub async fn registry_beat(
        &self,
        group: &str,
        address: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO registry (group_name, address, updated_at_ms) VALUES ($1, $2, $3) \
             ON CONFLICT (group_name, address) DO UPDATE SET updated_at_ms = excluded.updated_at_ms",
        )
        .bind(group)
        .bind(address)
        .bind(now_ms)
        .execute(&self.writer)
        .await?;
        // An executor registering in a group makes it known (AUTO).
        sqlx::query(
            "INSERT INTO executor_group (name, address_type, addresses) VALUES ($1, 'AUTO', '') \
             ON CONFLICT (tenant, name) DO NOTHING",
        )
        .bind(group)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Every registered executor: (group, address, last heartbeat), by
    /// group and address.
    pub async fn registered_executors(&self) -> Result<Vec<(String, String, i64)>, StoreError> {
        Ok(sqlx::query(
            "SELECT group_name, address, updated_at_ms FROM registry ORDER BY group_name, address",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            Ok((
                row.try_get("group_name")?,
                row.try_get("address")?,
                row.try_get("updated_at_ms")?,
            ))
        })
        .collect::<Result<_, sqlx::Error>>()?)
    }

    /// Whether executor group `name` is known: configured by the operator
    /// or registered in by an executor.
    pub async fn group_exists(&self, name: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("SELECT 1 AS known FROM executor_group WHERE name = $1")
                .bind(name)
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    /// The secret every admin of this database signs run receipts with,
    /// made by the first admin that asks.
    pub async fn receipt_key(&self) -> Result<Vec<u8>, StoreError> {
        let fresh = hex::encode(rand::random::<[u8; 32]>());
        sqlx::query(
            "INSERT INTO admin_secret (name, value) VALUES ('run_receipts', $1) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(&fresh)
        .execute(&self.writer)
        .await?;
        let stored: String =
            sqlx::query("SELECT value FROM admin_secret WHERE name = 'run_receipts'")
                .fetch_one(&self.writer)
                .await?
                .try_get("value")?;
        Ok(stored.into_bytes())
    }

    /// Forgets `address` in `group`.
    pub async fn registry_remove(&self, group: &str, address: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM registry WHERE group_name = $1 AND address = $2")
            .bind(group)
            .bind(address)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The addresses of `group`, sorted: its manual list if it has one,
    /// else the executors that beat since `alive_since_ms`.
    pub async fn group_addresses(
        &self,
        group: &str,
        alive_since_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        let manual: Option<(String, String)> =
            sqlx::query("SELECT address_type, addresses FROM executor_group WHERE name = $1")
                .bind(group)
                .fetch_optional(&self.pool)
                .await?
                .map(|row| (row.get("address_type"), row.get("addresses")));
        if let Some((kind, addresses)) = manual
            && kind == "MANUAL"
        {
            return Ok(addresses
                .split(',')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect());
        }
        let mut addresses: Vec<String> = sqlx::query(
            "SELECT address FROM registry WHERE group_name = $1 AND updated_at_ms >= $2",
        )
        .bind(group)
        .bind(alive_since_ms)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| row.get("address"))
        .collect();
        addresses.sort();
        Ok(addresses)
    }

    /// Creates or replaces an executor group: `AUTO` (addresses from the
    /// registry) or `MANUAL` (the given addresses).
    pub async fn put_group(
        &self,
        name: &str,
        address_type: &str,
        addresses: &[String],
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO executor_group (name, address_type, addresses) VALUES ($1, $2, $3) \
             ON CONFLICT (tenant, name) DO UPDATE SET address_type = excluded.address_type, \
             addresses = excluded.addresses",
        )
        .bind(name)
        .bind(address_type)
        .bind(addresses.join(","))
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Every configured group: (name, address type, manual addresses).
    pub async fn groups(&self) -> Result<Vec<(String, String, Vec<String>)>, StoreError> {
        Ok(
            sqlx::query("SELECT name, address_type, addresses FROM executor_group ORDER BY name")
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|row| {
                    let addresses: String = row.get("addresses");
                    (
                        row.get("name"),
                        row.get("address_type"),
                        addresses
                            .split(',')
                            .filter(|a| !a.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    /// The instant executor liveness is measured from: now, or the newest
    /// heartbeat recorded if that is older. When heartbeats could not be
    /// recorded at all (the database was away), executors do not all look
    /// dead afterwards; one that stopped while others beat still does.
    pub async fn liveness_reference(&self, now_ms: i64) -> Result<i64, StoreError> {
        let newest: Option<i64> = sqlx::query("SELECT MAX(updated_at_ms) AS newest FROM registry")
            .fetch_one(&self.pool)
            .await?
            .try_get("newest")?;
        Ok(newest.map_or(now_ms, |newest| newest.min(now_ms)))
    }

    /// Whether `address` beat since `alive_since_ms` in any group.
    pub async fn is_alive(&self, address: &str, alive_since_ms: i64) -> Result<bool, StoreError> {
        let row =
            sqlx::query("SELECT 1 AS one FROM registry WHERE address = $1 AND updated_at_ms >= $2")
                .bind(address)
                .bind(alive_since_ms)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.is_some())
    }

    // ---- modules --------------------------------------------------------

    /// Stores a module's bytes under its digest (idempotent).
    pub async fn put_module(
        &self,
        digest: &str,
        content: &[u8],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO module (digest, size, content, created_at_ms) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (digest) DO NOTHING",
        )
        .bind(digest)
        .bind(content.len() as i64)
        .bind(content.to_vec())
        .bind(now_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// A module's bytes.
    pub async fn module(&self, digest: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(sqlx::query("SELECT content FROM module WHERE digest = $1")
            .bind(digest)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| row.get("content")))
    }

    /// Records that `tenant` uploaded the module `digest` (idempotent).
    pub async fn own_module(&self, tenant: &str, digest: &str) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO module_owner (tenant, digest) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(tenant)
        .bind(digest)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Whether `tenant` uploaded the module `digest`.
    pub async fn owns_module(&self, tenant: &str, digest: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("SELECT 1 AS one FROM module_owner WHERE tenant = $1 AND digest = $2")
                .bind(tenant)
                .bind(digest)
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    /// Adds `digest` as the next version of module `name` of `tenant`, then
    /// keeps only its newest `keep` versions (and any a job pins), and
    /// moves the jobs that follow the module to it, in one transaction. A
    /// push of the content the latest version already has changes nothing
    /// unless `note` says why (a rollback). Returns the version and how
    /// many jobs moved.
    pub async fn add_module_version(
        &self,
        push: &VersionPush<'_>,
        keep: usize,
        now_ms: i64,
    ) -> Result<(ModuleVersion, u64), StoreError> {
        let VersionPush {
            tenant,
            name,
            digest,
            labels,
            note,
        } = *push;
        let mut tx = self.writer.begin().await?;
        let latest = sqlx::query(concat!(
            "SELECT ",
            module_version_columns!(),
            " FROM module_version WHERE tenant = $1 AND name = $2 ORDER BY version DESC LIMIT 1"
        ))
        .bind(tenant)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?
        .as_ref()
        .map(module_version_from_row)
        .transpose()?;
        if let Some(latest) = &latest
            && latest.digest == digest
            && note.is_empty()
            && labels.is_empty()
        {
            tx.rollback().await?;
            return Ok((latest.clone(), 0));
        }
        let version = latest.map_or(1, |latest| latest.version + 1);
        for label in labels {
            // A label names one version: move it here.
            remove_label(&mut tx, tenant, name, label).await?;
        }
        sqlx::query(
            "INSERT INTO module_version (tenant, name, version, digest, labels, note, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(tenant)
        .bind(name)
        .bind(version)
        .bind(digest)
        .bind(labels.join(","))
        .bind(note)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM module_version WHERE tenant = $1 AND name = $2 AND version <= $3 \
             AND NOT EXISTS (SELECT 1 FROM job WHERE job.tenant = module_version.tenant \
             AND job.module_name = module_version.name \
             AND job.module_version = module_version.version)",
        )
        .bind(tenant)
        .bind(name)
        .bind(version - keep as i64)
        .execute(&mut *tx)
        .await?;
        let moved = sqlx::query(
            "UPDATE job SET module_digest = $1, updated_at_ms = $2 WHERE tenant = $3 \
             AND module_name = $4 AND module_version IS NULL",
        )
        .bind(digest)
        .bind(now_ms)
        .bind(tenant)
        .bind(name)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok((
            ModuleVersion {
                name: name.to_owned(),
                version,
                digest: digest.to_owned(),
                labels: labels.to_vec(),
                note: note.to_owned(),
                created_at_ms: now_ms,
            },
            moved,
        ))
    }

    /// The versions of module `name` of `tenant`, newest first.
    pub async fn module_versions(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Vec<ModuleVersion>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            module_version_columns!(),
            " FROM module_version WHERE tenant = $1 AND name = $2 ORDER BY version DESC"
        ))
        .bind(tenant)
        .bind(name)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(module_version_from_row)
            .collect::<Result<_, _>>()?)
    }

    /// The latest version of each module of `tenant` (every tenant's when
    /// `None`), by name.
    pub async fn latest_modules(
        &self,
        tenant: Option<&str>,
    ) -> Result<Vec<(String, ModuleVersion)>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT tenant, ",
            module_version_columns!(),
            " FROM module_version m WHERE ($1 = '' OR tenant = $1) AND version = \
             (SELECT MAX(version) FROM module_version l WHERE l.tenant = m.tenant AND l.name = m.name) \
             ORDER BY tenant, name"
        ))
        .bind(tenant.unwrap_or(""))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("tenant")?, module_version_from_row(row)?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Puts `label` on version `version` of module `name` (taking it off
    /// any other); false if there is no such version.
    pub async fn set_module_label(
        &self,
        tenant: &str,
        name: &str,
        version: i64,
        label: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        remove_label(&mut tx, tenant, name, label).await?;
        let Some(row) = sqlx::query(
            "SELECT labels FROM module_version WHERE tenant = $1 AND name = $2 AND version = $3",
        )
        .bind(tenant)
        .bind(name)
        .bind(version)
        .fetch_optional(&mut *tx)
        .await?
        else {
            tx.rollback().await?;
            return Ok(false);
        };
        let labels: String = row.try_get("labels")?;
        let mut labels: Vec<&str> = labels.split(',').filter(|l| !l.is_empty()).collect();
        labels.push(label);
        sqlx::query(
            "UPDATE module_version SET labels = $1 WHERE tenant = $2 AND name = $3 AND version = $4",
        )
        .bind(labels.join(","))
        .bind(tenant)
        .bind(name)
        .bind(version)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    // ---- tenants and tokens ---------------------------------------------

    /// Creates a tenant; false if it exists.
    pub async fn create_tenant(&self, name: &str, now_ms: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "INSERT INTO tenant (name, created_at_ms) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(now_ms)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Every tenant with its number of tokens.
    pub async fn tenants(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, (SELECT COUNT(*) FROM api_token WHERE api_token.tenant = tenant.name) \
             AS tokens FROM tenant ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("name")?, row.try_get("tokens")?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Stores a token of `tenant` by its sha256; returns its id.
    pub async fn add_token(
        &self,
        tenant: &str,
        label: &str,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO api_token (tenant, label, token_hash, created_at_ms) \
             VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .bind(tenant)
        .bind(label)
        .bind(token_hash)
        .bind(now_ms)
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Revokes token `id` of `tenant`; false if there was none.
    pub async fn revoke_token(&self, tenant: &str, id: i64) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("DELETE FROM api_token WHERE tenant = $1 AND id = $2")
                .bind(tenant)
                .bind(id)
                .execute(&self.writer)
                .await?
                .rows_affected()
                == 1,
        )
    }

    /// The tenant whose token has this sha256.
    pub async fn tenant_of_token(&self, token_hash: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query("SELECT tenant FROM api_token WHERE token_hash = $1")
                .bind(token_hash)
                .fetch_optional(&self.pool)
                .await?
                .map(|row| row.get("tenant")),
        )
    }

    // ---- jobs -----------------------------------------------------------

    /// Inserts a validated job; returns its id.
    pub async fn insert_job(&self, job: &JobRow, now_ms: i64) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO job (tenant, group_name, name, module_digest, schedule_type, schedule_conf, \
             time_zone, misfire, misfire_threshold_ms, route, block_strategy, max_concurrency, \
             timeout_ms, fuel, memory_bytes, retry_count, retry_interval_ms, children, param, \
             enabled, next_fire_at_ms, module_name, module_version, alarm_url, created_at_ms, \
             updated_at_ms, fresh_instance) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
             $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $25, $26) \
             RETURNING id",
        )
        .bind(&job.tenant)
        .bind(&job.group_name)
        .bind(&job.name)
        .bind(&job.module_digest)
        .bind(&job.schedule_type)
        .bind(&job.schedule_conf)
        .bind(&job.time_zone)
        .bind(&job.misfire)
        .bind(job.misfire_threshold_ms)
        .bind(&job.route)
        .bind(&job.block_strategy)
        .bind(job.max_concurrency)
        .bind(job.timeout_ms)
        .bind(job.fuel)
        .bind(job.memory_bytes)
        .bind(job.retry_count)
        .bind(job.retry_interval_ms)
        .bind(&job.children)
        .bind(&job.param)
        .bind(i64::from(job.enabled))
        .bind(job.next_fire_at_ms)
        .bind(&job.module_name)
        .bind(job.module_version)
        .bind(&job.alarm_url)
        .bind(now_ms)
        .bind(i64::from(job.fresh_instance))
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Replaces a job's definition (keeping whether it is enabled); its next
    /// fire is `next_fire_at_ms`.
    pub async fn update_job(
        &self,
        id: i64,
        job: &JobRow,
        next_fire_at_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE job SET group_name = $1, name = $2, module_digest = $3, schedule_type = $4, \
             schedule_conf = $5, time_zone = $6, misfire = $7, misfire_threshold_ms = $8, route = $9, \
             block_strategy = $10, max_concurrency = $11, timeout_ms = $12, fuel = $13, \
             memory_bytes = $14, retry_count = $15, retry_interval_ms = $16, children = $17, \
             param = $18, next_fire_at_ms = $19, updated_at_ms = $20, module_name = $22, \
             module_version = $23, alarm_url = $24, fresh_instance = $25 WHERE id = $21",
        )
        .bind(&job.group_name)
        .bind(&job.name)
        .bind(&job.module_digest)
        .bind(&job.schedule_type)
        .bind(&job.schedule_conf)
        .bind(&job.time_zone)
        .bind(&job.misfire)
        .bind(job.misfire_threshold_ms)
        .bind(&job.route)
        .bind(&job.block_strategy)
        .bind(job.max_concurrency)
        .bind(job.timeout_ms)
        .bind(job.fuel)
        .bind(job.memory_bytes)
        .bind(job.retry_count)
        .bind(job.retry_interval_ms)
        .bind(&job.children)
        .bind(&job.param)
        .bind(next_fire_at_ms)
        .bind(now_ms)
        .bind(id)
        .bind(&job.module_name)
        .bind(job.module_version)
        .bind(&job.alarm_url)
        .bind(i64::from(job.fresh_instance))
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// A job by id.
    pub async fn job(&self, id: i64) -> Result<Option<JobRow>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM job WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(job_from_row).transpose()?)
    }

    /// The jobs among `ids` that exist, read in as few queries as the
    /// engines' parameter limits allow.
    pub async fn jobs_by_id(&self, ids: &[i64]) -> Result<HashMap<i64, JobRow>, StoreError> {
        let mut jobs = HashMap::with_capacity(ids.len());
        for chunk in ids.chunks(IN_LIST_CHUNK) {
            let sql = format!(
                concat!("SELECT ", job_columns!(), " FROM job WHERE id IN ({})"),
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                let job = job_from_row(&row)?;
                jobs.insert(job.id, job);
            }
        }
        Ok(jobs)
    }

    /// Every job, by id.
    pub async fn jobs(&self) -> Result<Vec<JobRow>, StoreError> {
        let rows = sqlx::query(concat!("SELECT ", job_columns!(), " FROM job ORDER BY id"))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(job_from_row).collect::<Result<_, _>>()?)
    }

    /// Starts or stops a job, setting its next fire.
    pub async fn set_enabled(
        &self,
        id: i64,
        enabled: bool,
        next_fire_at_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE job SET enabled = $1, next_fire_at_ms = $2, updated_at_ms = $3 WHERE id = $4",
        )
        .bind(i64::from(enabled))
        .bind(next_fire_at_ms)
        .bind(now_ms)
        .bind(id)
        .execute(&self.writer)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Stops a job: no next fire, and its fires and retries waiting to be
    /// dispatched end as cancelled, in one transaction. Returns the ids of
    /// the cancelled runs, or `None` if there is no such job.
    pub async fn stop_job(&self, id: i64, now_ms: i64) -> Result<Option<Vec<i64>>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let stopped = sqlx::query(
            "UPDATE job SET enabled = 0, next_fire_at_ms = NULL, updated_at_ms = $1 WHERE id = $2",
        )
        .bind(now_ms)
        .bind(id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if stopped != 1 {
            return Ok(None);
        }
        let cancelled = cancel_waiting(
            &mut tx,
            id,
            Some(&["schedule", "misfire", "retry"]),
            "cancelled: the job was stopped before this run was dispatched",
            now_ms,
        )
        .await?;
        tx.commit().await?;
        Ok(Some(cancelled))
    }

    /// Ends every run of a job that waits to be dispatched, whatever its
    /// kind, as cancelled (a kill of the whole job); returns their ids.
    pub async fn cancel_waiting_runs(
        &self,
        job_id: i64,
        message: &str,
        now_ms: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let mut conn = self.writer.acquire().await?;
        cancel_waiting(&mut conn, job_id, None, message, now_ms).await
    }

    /// The executors holding dispatched runs of a job.
    pub async fn executors_of_running(&self, job_id: i64) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query(
            "SELECT DISTINCT executor FROM run WHERE job_id = $1 AND status = $2 \
             AND executor IS NOT NULL",
        )
        .bind(job_id)
        .bind(status::DISPATCHED)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| row.get("executor"))
        .collect())
    }

    /// Sets the next fire of a FIX_DELAY job whose chain waits for a run to
    /// end, once: only an enabled FIX_DELAY job without a next fire is
    /// changed, so the first of several ends (broadcast shards, a restart
    /// in between) wins and the rest change nothing. True if it was set.
    pub async fn continue_fixed_delay(
        &self,
        job_id: i64,
        next_fire_at_ms: i64,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE job SET next_fire_at_ms = $1, updated_at_ms = $2 WHERE id = $3 \
             AND enabled = 1 AND schedule_type = 'FIX_DELAY' AND next_fire_at_ms IS NULL",
        )
        .bind(next_fire_at_ms)
        .bind(now_ms)
        .bind(job_id)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Records that a broadcast fire became shard `index` of `total`.
    pub async fn set_shard(&self, run_id: i64, index: i64, total: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE run SET shard_index = $1, shard_total = $2 WHERE id = $3")
            .bind(index)
            .bind(total)
            .bind(run_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Deletes a job and its durable state (its runs stay as history).
    /// Returns false if there was no such job.
    pub async fn delete_job(&self, id: i64) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM job_state WHERE job_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let deleted = sqlx::query("DELETE FROM job WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted == 1)
    }

    /// Enabled jobs due by `until_ms`, soonest first.
    pub async fn due_jobs(&self, until_ms: i64, limit: i64) -> Result<Vec<JobRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM job WHERE enabled = 1 AND next_fire_at_ms IS NOT NULL \
             AND next_fire_at_ms <= $1 ORDER BY next_fire_at_ms LIMIT $2"
        ))
        .bind(until_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(job_from_row).collect::<Result<_, _>>()?)
    }

    /// Claims a job's fires: moves its next fire from `expected_next` to
    /// `new_next` and writes `fires` as pending runs, in one transaction.
    /// Returns, for each fire, the id of the run written (`None` for a fire
    /// that already existed: the unique key on (job, scheduled time, shard)
    /// drops it), or `None` overall when another admin claimed first (the
    /// job's next fire had already moved).
    pub async fn claim_fires(
        &self,
        job_id: i64,
        expected_next: i64,
        new_next: Option<i64>,
        fires: &[NewRun],
        now_ms: i64,
    ) -> Result<Option<Vec<Option<i64>>>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let moved = sqlx::query(
            "UPDATE job SET next_fire_at_ms = $1 WHERE id = $2 AND enabled = 1 AND next_fire_at_ms = $3",
        )
        .bind(new_next)
        .bind(job_id)
        .bind(expected_next)
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(None);
        }
        let mut ids = Vec::with_capacity(fires.len());
        for fire in fires {
            ids.push(insert_run(&mut tx, fire, &self.owner, now_ms, true).await?);
        }
        tx.commit().await?;
        Ok(Some(ids))
    }

    /// PostgreSQL: claims up to `limit` jobs due by `until_ms` that no other
    /// admin is claiming right now (`FOR UPDATE SKIP LOCKED`), in one
    /// transaction: `plan` gives each job's fires and next fire (`None`:
    /// the job cannot be scheduled and is stopped). Several admins each take
    /// a disjoint share of the due jobs. Returns the claimed jobs with the
    /// id of each fire written (`None` where the unique key dropped one).
    pub async fn claim_due_batch(
        &self,
        until_ms: i64,
        limit: i64,
        now_ms: i64,
        mut plan: impl FnMut(&JobRow) -> Option<(Vec<NewRun>, Option<i64>)>,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            job_columns!(),
            " FROM job WHERE enabled = 1 AND next_fire_at_ms IS NOT NULL \
             AND next_fire_at_ms <= $1 ORDER BY next_fire_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED"
        ))
        .bind(until_ms)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let mut claimed = Vec::with_capacity(rows.len());
        for row in &rows {
            let job = job_from_row(row)?;
            let Some((fires, next)) = plan(&job) else {
                sqlx::query("UPDATE job SET enabled = 0, next_fire_at_ms = NULL WHERE id = $1")
                    .bind(job.id)
                    .execute(&mut *tx)
                    .await?;
                continue;
            };
            sqlx::query("UPDATE job SET next_fire_at_ms = $1 WHERE id = $2")
                .bind(next)
                .bind(job.id)
                .execute(&mut *tx)
                .await?;
            let mut written = Vec::with_capacity(fires.len());
            for fire in fires {
                let id = insert_run(&mut tx, &fire, &self.owner, now_ms, true).await?;
                written.push((id, fire));
            }
            claimed.push(ClaimedJob { job, written });
        }
        tx.commit().await?;
        Ok(claimed)
    }

    /// Writes a run outside the schedule (manual, API, retry, parent).
    pub async fn insert_run(&self, run: &NewRun, now_ms: i64) -> Result<i64, StoreError> {
        let mut conn = self.writer.acquire().await?;
        let id = insert_run(&mut conn, run, &self.owner, now_ms, false).await?;
        id.ok_or_else(|| StoreError::Database(sqlx::Error::RowNotFound))
    }

    /// A run by id.
    pub async fn run(&self, id: i64) -> Result<Option<RunRow>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(run_from_row).transpose()?)
    }

    /// A job's runs, oldest first.
    pub async fn runs_of_job(&self, job_id: i64) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE job_id = $1 ORDER BY id"
        ))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Runs matching `filter`, newest first, at most `filter.limit`.
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let mut conditions = Vec::new();
        let mut next = 0;
        let mut placeholder = || {
            next += 1;
            format!("${next}")
        };
        if filter.tenant.is_some() {
            conditions.push(format!("tenant = {}", placeholder()));
        }
        if filter.job_id.is_some() {
            conditions.push(format!("job_id = {}", placeholder()));
        }
        if filter.status.is_some() {
            conditions.push(format!("status = {}", placeholder()));
        }
        if filter.from_ms.is_some() {
            conditions.push(format!("scheduled_at_ms >= {}", placeholder()));
        }
        if filter.to_ms.is_some() {
            conditions.push(format!("scheduled_at_ms < {}", placeholder()));
        }
        if filter.before_id.is_some() {
            conditions.push(format!("id < {}", placeholder()));
        }
        let limit = placeholder();
        let condition = if conditions.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conditions.join(" AND "))
        };
        // Only placeholders and fixed column names go into the text.
        let sql = format!(
            concat!(
                "SELECT ",
                run_columns!(),
                " FROM run{} ORDER BY id DESC LIMIT {}"
            ),
            condition, limit
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        if let Some(tenant) = &filter.tenant {
            query = query.bind(tenant.clone());
        }
        if let Some(job_id) = filter.job_id {
            query = query.bind(job_id);
        }
        if let Some(status) = &filter.status {
            query = query.bind(status.clone());
        }
        if let Some(from) = filter.from_ms {
            query = query.bind(from);
        }
        if let Some(to) = filter.to_ms {
            query = query.bind(to);
        }
        if let Some(before) = filter.before_id {
            query = query.bind(before);
        }
        let rows = query.bind(filter.limit).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Takes the right to dispatch the runs among `run_ids` that are still
    /// pending and whose lease is this admin's or has run out; returns
    /// their ids. Several admins may ask at once: each run goes to one.
    pub async fn take_leases(&self, run_ids: &[i64], now_ms: i64) -> Result<Vec<i64>, StoreError> {
        let mut taken = Vec::with_capacity(run_ids.len());
        let mut run_ids = run_ids.to_vec();
        run_ids.sort_unstable();
        for chunk in run_ids.chunks(IN_LIST_CHUNK) {
            // $1 owner, $2 until, $3 now, $4 pending, then the ids.
            let ids: Vec<String> = (0..chunk.len()).map(|n| format!("${}", n + 5)).collect();
            let sql = format!(
                "UPDATE run SET lease_owner = $1, lease_until_ms = $2 WHERE status = $4 \
                 AND (lease_owner = $1 OR lease_until_ms IS NULL OR lease_until_ms < $3) \
                 AND id IN ({}) RETURNING id",
                ids.join(", ")
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(self.owner.to_string())
                .bind(now_ms + DISPATCH_LEASE_MS)
                .bind(now_ms)
                .bind(status::PENDING);
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.writer).await? {
                taken.push(row.try_get("id")?);
            }
        }
        Ok(taken)
    }

    /// Pending runs whose lease ran out before `now_ms`: their admin died
    /// (or fell far behind) before dispatching them.
    pub async fn orphaned_runs(&self, now_ms: i64, limit: i64) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE status = $1 AND lease_until_ms < $2 ORDER BY scheduled_at_ms LIMIT $3"
        ))
        .bind(status::PENDING)
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Runs written but not dispatched (to recover after a crash).
    pub async fn pending_runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE status = $1 ORDER BY scheduled_at_ms"
        ))
        .bind(status::PENDING)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Marks a pending run dispatched to `executor` (false if it was not
    /// pending any more: another admin dispatched it, or its result came
    /// first).
    pub async fn mark_dispatched(
        &self,
        run_id: i64,
        executor: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mark = DispatchMark {
            run_id,
            executor: executor.to_owned(),
            at_ms: now_ms,
        };
        Ok(self
            .mark_dispatched_many(std::slice::from_ref(&mark))
            .await?
            == 1)
    }

    /// Marks several pending runs dispatched in one transaction; returns
    /// how many were still pending.
    pub async fn mark_dispatched_many(&self, marks: &[DispatchMark]) -> Result<u64, StoreError> {
        // Rows in id order, as every batch writer takes them, so that two
        // admins' batches cannot deadlock on each other.
        let mut marks: Vec<&DispatchMark> = marks.iter().collect();
        marks.sort_by_key(|mark| mark.run_id);
        let mut tx = self.writer.begin().await?;
        let mut marked = 0;
        for mark in marks {
            marked += sqlx::query(
                "UPDATE run SET status = $1, executor = $2, dispatched_at_ms = $3 \
                 WHERE id = $4 AND status = $5",
            )
            .bind(status::DISPATCHED)
            .bind(&mark.executor)
            .bind(mark.at_ms)
            .bind(mark.run_id)
            .bind(status::PENDING)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(marked)
    }

    /// Ends a run with its result, once: a second result for a finished run
    /// changes nothing (returns `None`). A successful run's state changes
    /// are committed in the same transaction. Returns the ended run.
    pub async fn finish_run(&self, end: &RunEnd) -> Result<Option<RunRow>, StoreError> {
        Ok(self
            .finish_runs(std::slice::from_ref(end))
            .await?
            .pop()
            .flatten())
    }

    /// [`Store::finish_run`] for several runs in one transaction (a
    /// callback batch): for each, the ended run or `None` if it had already
    /// ended.
    pub async fn finish_runs(&self, ends: &[RunEnd]) -> Result<Vec<Option<RunRow>>, StoreError> {
        // Rows in id order (see `mark_dispatched_many`); answers in the
        // callers' order.
        let mut order: Vec<usize> = (0..ends.len()).collect();
        order.sort_by_key(|index| ends[*index].run_id);
        let mut tx = self.writer.begin().await?;
        let mut ended = vec![None; ends.len()];
        for index in order {
            let mut end = std::borrow::Cow::Borrowed(&ends[index]);
            if end.success && !end.state_changes.is_empty() {
                // Optimistic concurrency: the changes apply only over the
                // state the run saw. Otherwise the run failed.
                if let Some((key, based_on, now)) =
                    state_conflict(&mut tx, end.run_id, &end.state_base).await?
                {
                    let conflict = end.to_mut();
                    conflict.success = false;
                    conflict.outcome = STATE_CONFLICT.to_owned();
                    conflict.code = 500;
                    conflict.message = format!(
                        "state not committed: key {key:?} changed after this run read it \
                         (revision {based_on}, now {now}); the run's changes were dropped"
                    );
                    conflict.state_changes.clear();
                }
            }
            let end = end.as_ref();
            let alarm_status = if end.success || outcome_is_deliberate(&end.outcome) {
                alarm::NONE
            } else {
                alarm::DUE
            };
            let row = sqlx::query(concat!(
                "UPDATE run SET status = $1, outcome = $2, code = $3, message = $4, log = $5, \
                 executor = COALESCE($6, executor), started_at_ms = $7, finished_at_ms = $8, \
                 alarm_status = $12, module_digest = COALESCE($13, module_digest) \
                 WHERE id = $9 AND status IN ($10, $11) RETURNING ",
                run_columns!()
            ))
            .bind(if end.success {
                status::SUCCESS
            } else if end.outcome == status::CANCELLED {
                status::CANCELLED
            } else {
                status::FAILED
            })
            .bind(&end.outcome)
            .bind(end.code)
            .bind(&end.message)
            .bind(&end.log)
            .bind(end.executor.as_deref())
            .bind(end.started_at_ms)
            .bind(end.finished_at_ms)
            .bind(end.run_id)
            .bind(status::PENDING)
            .bind(status::DISPATCHED)
            .bind(alarm_status)
            .bind(end.module_digest.as_deref())
            .fetch_optional(&mut *tx)
            .await?;
            let Some(run) = row.as_ref().map(run_from_row).transpose()? else {
                continue;
            };
            if end.success {
                for (key, value) in &end.state_changes {
                    match value {
                        Some(value) => {
                            sqlx::query(
                                "INSERT INTO job_state (job_id, key, value, revision) \
                                 VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, key) DO UPDATE \
                                 SET value = excluded.value, revision = excluded.revision",
                            )
                            .bind(run.job_id)
                            .bind(key)
                            .bind(value)
                            .bind(run.id)
                            .execute(&mut *tx)
                            .await?;
                        }
                        None => {
                            sqlx::query("DELETE FROM job_state WHERE job_id = $1 AND key = $2")
                                .bind(run.job_id)
                                .bind(key)
                                .execute(&mut *tx)
                                .await?;
                        }
                    }
                }
            }
            ended[index] = Some(run);
        }
        tx.commit().await?;
        Ok(ended)
    }

    /// Runs dispatched before `dispatched_before_ms` to an executor that has
    /// not beaten since `alive_since_ms` (the lost-run monitor's query).
    pub async fn lost_runs(
        &self,
        dispatched_before_ms: i64,
        alive_since_ms: i64,
    ) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE status = $1 AND dispatched_at_ms < $2 AND NOT EXISTS \
             (SELECT 1 FROM registry WHERE registry.address = run.executor \
              AND registry.updated_at_ms >= $3)"
        ))
        .bind(status::DISPATCHED)
        .bind(dispatched_before_ms)
        .bind(alive_since_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// A finished run's stored log (JSON lines), if any.
    pub async fn run_log(&self, run_id: i64) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query("SELECT log FROM run WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?
            .and_then(|row| row.get::<Option<String>, _>("log")))
    }

    /// The durable state of each job among `job_ids` (empty for a job
    /// without state), with each key's revision.
    pub async fn job_states(&self, job_ids: &[i64]) -> Result<HashMap<i64, JobState>, StoreError> {
        let mut states: HashMap<i64, JobState> = job_ids
            .iter()
            .map(|id| (*id, JobState::default()))
            .collect();
        for chunk in job_ids.chunks(IN_LIST_CHUNK) {
            let sql = format!(
                "SELECT job_id, key, value, revision FROM job_state WHERE job_id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                states.entry(row.try_get("job_id")?).or_default().insert(
                    row.try_get("key")?,
                    row.try_get("value")?,
                    row.try_get("revision")?,
                );
            }
        }
        Ok(states)
    }

    /// Replaces a job's durable state (an operator's edit): every key it
    /// sets gets a new revision, so a run that read the old state cannot
    /// commit over the edit.
    pub async fn replace_job_state(
        &self,
        job_id: i64,
        state: &HashMap<String, String>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM job_state WHERE job_id = $1")
            .bind(job_id)
            .execute(&mut *tx)
            .await?;
        for (key, value) in state {
            sqlx::query(
                "INSERT INTO job_state (job_id, key, value, revision) VALUES ($1, $2, $3, $4)",
            )
            .bind(job_id)
            .bind(key)
            .bind(value)
            .bind(-now_ms.max(1))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    // ---- alarms -----------------------------------------------------------

    /// Failed runs whose alarm is due, with their job's webhook (empty if
    /// the job has none or is gone); also puts back claims older than
    /// `stale_before_ms` (an admin died while sending).
    pub async fn due_alarms(
        &self,
        stale_before_ms: i64,
        limit: i64,
    ) -> Result<Vec<(RunRow, String, String)>, StoreError> {
        sqlx::query(
            "UPDATE run SET alarm_status = $1 WHERE alarm_status = $2 AND alarm_claimed_at_ms < $3",
        )
        .bind(alarm::DUE)
        .bind(alarm::SENDING)
        .bind(stale_before_ms)
        .execute(&self.writer)
        .await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            ", COALESCE((SELECT alarm_url FROM job WHERE job.id = run.job_id), '') AS alarm_url, \
             COALESCE((SELECT name FROM job WHERE job.id = run.job_id), '') AS job_name \
             FROM run WHERE alarm_status = $1 ORDER BY id LIMIT $2"
        ))
        .bind(alarm::DUE)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    run_from_row(row)?,
                    row.try_get("alarm_url")?,
                    row.try_get("job_name")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Claims a due alarm for this admin: true for exactly one claimant.
    pub async fn claim_alarm(&self, run_id: i64, now_ms: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE run SET alarm_status = $1, alarm_claimed_at_ms = $2 \
             WHERE id = $3 AND alarm_status = $4",
        )
        .bind(alarm::SENDING)
        .bind(now_ms)
        .bind(run_id)
        .bind(alarm::DUE)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Records how an alarm ended (`from` is the state it must be in).
    pub async fn finish_alarm(
        &self,
        run_id: i64,
        from: &str,
        to: &str,
        message: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE run SET alarm_status = $1, alarm_message = $2 WHERE id = $3 AND alarm_status = $4",
        )
        .bind(to)
        .bind(message)
        .bind(run_id)
        .bind(from)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    // ---- housekeeping ---------------------------------------------------

    /// Recounts the daily report of `day` (`YYYY-MM-DD`, UTC) from the runs
    /// written in [`from_ms`, `to_ms`), per tenant: succeeded, failed, and
    /// not yet ended.
    pub async fn refresh_daily_report(
        &self,
        day: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, \
             SUM(CASE WHEN status = $1 THEN 1 ELSE 0 END) AS success, \
             SUM(CASE WHEN status = $2 THEN 1 ELSE 0 END) AS failed, \
             SUM(CASE WHEN status IN ($3, $4) THEN 1 ELSE 0 END) AS running, \
             SUM(CASE WHEN status = $7 THEN 1 ELSE 0 END) AS cancelled \
             FROM run WHERE created_at_ms >= $5 AND created_at_ms < $6 GROUP BY tenant",
        )
        .bind(status::SUCCESS)
        .bind(status::FAILED)
        .bind(status::PENDING)
        .bind(status::DISPATCHED)
        .bind(from_ms)
        .bind(to_ms)
        .bind(status::CANCELLED)
        .fetch_all(&self.pool)
        .await?;
        let mut tx = self.writer.begin().await?;
        for row in rows {
            let tenant: String = row.try_get("tenant")?;
            sqlx::query(
                "INSERT INTO daily_report (tenant, day, success, failed, running, cancelled) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, day) DO UPDATE SET \
                 success = excluded.success, failed = excluded.failed, \
                 running = excluded.running, cancelled = excluded.cancelled",
            )
            .bind(tenant)
            .bind(day)
            .bind(row.try_get::<i64, _>("success")?)
            .bind(row.try_get::<i64, _>("failed")?)
            .bind(row.try_get::<i64, _>("running")?)
            .bind(row.try_get::<i64, _>("cancelled")?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Daily reports of `tenant` from `from_day` to `to_day` (inclusive,
    /// `YYYY-MM-DD`), oldest first.
    pub async fn daily_reports(
        &self,
        tenant: &str,
        from_day: &str,
        to_day: &str,
    ) -> Result<Vec<DailyReport>, StoreError> {
        let rows = sqlx::query(
            "SELECT day, success, failed, running, cancelled FROM daily_report \
             WHERE tenant = $1 AND day >= $2 AND day <= $3 ORDER BY day",
        )
        .bind(tenant)
        .bind(from_day)
        .bind(to_day)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(DailyReport {
                    day: row.try_get("day")?,
                    success: row.try_get("success")?,
                    failed: row.try_get("failed")?,
                    running: row.try_get("running")?,
                    cancelled: row.try_get("cancelled")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Deletes ended runs written before `before_ms` (run retention);
    /// returns how many.
    pub async fn delete_runs_before(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(
            sqlx::query("DELETE FROM run WHERE created_at_ms < $1 AND status IN ($2, $3, $4)")
                .bind(before_ms)
                .bind(status::SUCCESS)
                .bind(status::FAILED)
                .bind(status::CANCELLED)
                .execute(&self.writer)
                .await?
                .rows_affected(),
        )
    }

    /// Forgets executors that have not beaten since `before_ms`.
    pub async fn forget_silent_executors(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(sqlx::query("DELETE FROM registry WHERE updated_at_ms < $1")
            .bind(before_ms)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }

    /// A job's durable state, with each key's revision.
    pub async fn job_state(&self, job_id: i64) -> Result<JobState, StoreError> {
        Ok(self
            .job_states(&[job_id])
            .await?
            .remove(&job_id)
            .unwrap_or_default())
    }
}

/// Ids per `IN (...)` list: well under SQLite's and PostgreSQL's limits on
/// bound parameters.
const IN_LIST_CHUNK: usize = 500;

/// `$1, $2, ..., $count`: the placeholders of an `IN` list. Only numbers go
/// into the SQL text; the values are bound.
fn placeholders(count: usize) -> String {
    (1..=count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Ends the pending runs of `job_id` (of `kinds`, or all) as cancelled: no
/// alarm, no retry. Returns their ids.
async fn cancel_waiting(
    conn: &mut sqlx::AnyConnection,
    job_id: i64,
    kinds: Option<&[&str]>,
    message: &str,
    now_ms: i64,
) -> Result<Vec<i64>, StoreError> {
    let kinds_clause = match kinds {
        Some(kinds) => format!(
            " AND kind IN ({})",
            (0..kinds.len())
                .map(|n| format!("${}", n + 6))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => String::new(),
    };
    let sql = format!(
        "UPDATE run SET status = $1, outcome = $1, code = 0, message = $2, finished_at_ms = $3, \
         alarm_status = $4 WHERE job_id = $5 AND status = 'pending'{kinds_clause} RETURNING id"
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(status::CANCELLED)
        .bind(message)
        .bind(now_ms)
        .bind(alarm::NONE)
        .bind(job_id);
    for kind in kinds.unwrap_or_default() {
        query = query.bind(*kind);
    }
    let mut ids: Vec<i64> = query
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.try_get("id"))
        .collect::<Result<_, _>>()?;
    ids.sort_unstable();
    Ok(ids)
}

/// The first key of `base` whose revision in job `run_id`'s state is no
/// longer the one the run based its view on: (key, the run's base, now).
async fn state_conflict(
    conn: &mut sqlx::AnyConnection,
    run_id: i64,
    base: &std::collections::BTreeMap<String, StateRevision>,
) -> Result<Option<(String, StateRevision, StateRevision)>, StoreError> {
    for (key, based_on) in base {
        let current: StateRevision = sqlx::query(
            "SELECT revision FROM job_state WHERE key = $2 \
             AND job_id = (SELECT job_id FROM run WHERE id = $1)",
        )
        .bind(run_id)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.try_get("revision"))
        .transpose()?
        .unwrap_or(ABSENT_REVISION);
        if current != *based_on {
            return Ok(Some((key.clone(), *based_on, current)));
        }
    }
    Ok(None)
}

async fn insert_run(
    conn: &mut sqlx::AnyConnection,
    run: &NewRun,
    owner: &str,
    now_ms: i64,
    skip_duplicates: bool,
) -> Result<Option<i64>, StoreError> {
    macro_rules! insert {
        ($conflict:literal) => {
            concat!(
                "INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, shard_index, shard_total, \
                 attempt, param, status, module_digest, created_at_ms, lease_owner, lease_until_ms) \
                 VALUES (COALESCE((SELECT tenant FROM job WHERE id = $1), 'default'), $1, $2, $3, \
                 $4, $5, $6, $7, $8, $9, $10, $11, $12)",
                $conflict,
                " RETURNING id"
            )
        };
    }
    let sql = if skip_duplicates {
        insert!(" ON CONFLICT DO NOTHING")
    } else {
        insert!("")
    };
    let row = sqlx::query(sql)
        .bind(run.job_id)
        .bind(run.kind)
        .bind(run.scheduled_at_ms)
        .bind(run.shard_index)
        .bind(run.shard_total)
        .bind(run.attempt)
        .bind(&run.param)
        .bind(status::PENDING)
        .bind(&run.module_digest)
        .bind(now_ms)
        .bind(owner)
        .bind(run.scheduled_at_ms.max(now_ms) + WRITE_LEASE_MS)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.map(|row| row.try_get("id")).transpose()?)
}
