//! The admin's store: sqlx over SQLite (embedded default, one file, WAL) or
//! PostgreSQL (clusters), with the same schema and queries on both.
//!
//! Times are milliseconds since the Unix epoch. Queries are written once
//! with `$n` placeholders, which both engines accept. With SQLite one admin
//! owns a data directory: a second is refused through an exclusive lock
//! file.
//!
//! Laid out by aggregate: `rows` (the row types and their decoding),
//! `registry` (executors, groups, the receipt key), `modules`, `tenants`,
//! `users` (users, sessions, tokens with their roles), `jobs`
//! (definitions, claims, durable state; `job_cache` keeps the rows read,
//! checked against each job's revision), `runs` (writing, leasing,
//! dispatching and ending runs), `history` (alarms, daily reports,
//! retention), `dashboard` (the console's counts over recent runs),
//! `backfills` (a schedule run over a past range, and its progress),
//! `calendars` (dates a tenant's jobs share as holidays), `partitions` (the
//! run table's day partitions on PostgreSQL, made ahead and dropped whole),
//! `audit` (the audit log: appended, paged, deleted past its retention),
//! `executor_credentials` (enrolled executors' credentials), `sqlite` (what
//! only SQLite needs: private files, the row buffer, checkpoints).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cronbox_protocol::{ABSENT_REVISION, StateChanges, StateRevision, TriggerKind};

pub use schema::{Migrations, SchemaVersion};

pub use cronbox_api::{AlarmState, Digest, JobId, MisfirePolicy, RunId, RunOutcome, RunStatus};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

#[macro_use]
mod rows;
mod audit;
mod backfills;
pub mod backup;
mod calendars;
mod claims;
mod dashboard;
mod executor_credentials;
mod history;
mod job_cache;
mod job_definition;
mod job_states;
mod jobs;
mod leases;
pub mod logs;
mod modules;
mod partitions;
mod quotas;
mod registry;
mod run_ends;
mod run_lists;
mod runs;
mod schema;
mod secrets;
mod sqlite;
mod tenants;
mod turns;
mod users;
mod workflow_fires;
mod workflow_items;
mod workflow_runs;
mod workflows;

pub use audit::{AuditFilter, NewAuditEntry, audit_outcome};
pub use claims::DueClaim;
pub use dashboard::BucketCounts;
pub use executor_credentials::EnrolledExecutor;
pub use jobs::JobInserts;
pub use leases::{DEFAULT_DISPATCH_LEASE, Leases};
pub use modules::{ModuleVersion, Moved, VersionPush};
pub use partitions::{PartitionChanges, RunPartition};
pub use quotas::{DAY_MS, DayUsage, TenantUsage};
pub use registry::{ExecutorLoad, GroupRow, LegacyGroup, RegisteredExecutor, RegisteredWith};
pub use rows::{
    ClaimedJob, DailyReport, DispatchMark, DueJob, JobFilter, JobRow, JobState, NewRun, RunCharge,
    RunEnd, RunFilter, RunRow, stored_schedule, stored_schedule_rules,
};
pub use secrets::Sealed;
pub use sqlite::create_private_dir;
use sqlite::{
    Checkpointer, SQLITE_JOURNAL_SIZE_LIMIT, checkpoint_sqlite, make_private_files,
    with_sqlite_row_buffer,
};
pub use turns::UrgentWrites;
pub use users::{Principal, StoredUser, TokenOwner};
pub use workflow_fires::Fire;
pub use workflow_items::NodeOfRun;
pub use workflows::{NodeEnd, StoredWorkflowRun};
// Shared by the aggregates' files (each imports `super::*`).
use rows::{decode_due_jobs, digest_bytes, job_from_row, run_from_row, scheduled_range};
use runs::{cancel_waiting, insert_fires, insert_run};

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
    /// The database was migrated past what this admin can serve.
    #[error(
        "the database's schema is at version {database}, which admins from schema version \
         {oldest_reader} on can serve; this admin knows schema versions up to {known}: upgrade \
         this admin to a release at least as new as the database's"
    )]
    SchemaTooNew {
        database: i64,
        oldest_reader: i64,
        known: i64,
    },
    #[error("cannot use {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file given as a copy of the store is not one.
    #[error("{path} is not a usable cronbox database: {reason}")]
    NotADatabase { path: PathBuf, reason: String },
    /// A backup never overwrites a file.
    #[error("{0} exists already: name a new file (a backup never overwrites one)")]
    CopyExists(PathBuf),
    /// A restore into a data directory that holds a database.
    #[error(
        "{0} holds a database already: stop its admin and pass --replace to set the database \
         aside (renamed cronbox.db.replaced-TIME) and restore in its place"
    )]
    HoldsDatabase(PathBuf),
    /// `--no-migrate` against a database with migrations pending.
    #[error(
        "the database's schema is at version {database} and this admin needs version {known}: \
         run `cronbox admin migrate` first (or start without --no-migrate)"
    )]
    SchemaBehind { database: i64, known: i64 },
    /// Job {0}'s children would lead back to it (found when writing, so a
    /// concurrent update cannot slip one past the check before it).
    #[error("child jobs would form a cycle through job {0}")]
    ChildCycle(JobId),
}

impl StoreError {
    /// A stored row holds a value its column's type does not decode (an
    /// unknown enum name, JSON that does not parse): reading it again
    /// fails the same way.
    pub fn is_undecodable_row(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::ColumnDecode { .. }))
    }
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
    /// The SQLite data directory's lock, held until [`Store::close`] or
    /// the last clone drops; `None` for a store opened by URL.
    lock: Option<std::sync::Arc<std::fs::File>>,
    /// SQLite's checkpoints, run beside the writer (see [`Checkpointer`]).
    checkpointer: Option<std::sync::Arc<Checkpointer>>,
    /// Who goes first at SQLite's writer (see [`turns`]); `None` on
    /// PostgreSQL.
    turns: Option<std::sync::Arc<turns::WriterTurns>>,
    /// Job rows read, served again while their revision holds.
    jobs: std::sync::Arc<job_cache::JobCache>,
    /// How long this admin's writes and dispatches hold their runs.
    leases: Leases,
    /// The schema's version when the store opened.
    schema: std::sync::Arc<SchemaVersion>,
}

/// Text as the database stores it: PostgreSQL refuses the character U+0000
/// in text (and SQLite's functions stop at it), so a guest's message that
/// carried one failed the write of every run ended with it — the whole
/// callback, other tenants' results included. Each is replaced by U+FFFD.
pub(crate) fn storable_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Ids per `IN (...)` list: well under SQLite's and PostgreSQL's limits on
/// bound parameters.
const IN_LIST_CHUNK: usize = 500;

/// Bound values past which a batch statement is split on SQLite. sqlx binds
/// a `$n` parameter after looking its name up, and SQLite finds a name by
/// walking the statement's list of them, so binding a statement costs the
/// square of its parameters: with 1,300 to 2,600 a statement it was an
/// eighth of the whole process's time at 4,000 runs/s (perf). PostgreSQL
/// binds by position; its batches stay as large as they are written.
const SQLITE_VALUES_PER_STATEMENT: usize = 256;

/// The page cache of each SQLite connection: 32 MiB (negative: KiB), five
/// connections at most.
const SQLITE_CACHE_SIZE: &str = "PRAGMA cache_size = -32768";

impl Backend {
    /// SQL that turns `hex_text`, hex digits (any case), into the bytes
    /// they spell: how a digest bound as text is stored in a run's
    /// `module_sha`. Validate the text first: PostgreSQL's `decode` fails
    /// the statement on a non-hex digit where SQLite's `unhex` answers NULL.
    fn bytes_of_hex(self, hex_text: &str) -> String {
        match self {
            Backend::Sqlite => format!("unhex({hex_text})"),
            Backend::Postgres => format!("decode({hex_text}, 'hex')"),
        }
    }

    /// The rows of a batch statement as one bound value: `SELECT`ing, from
    /// the JSON array of objects bound as `$parameter`, each of `fields`
    /// (its key and SQL type) as the column `{prefix}{key}`.
    ///
    /// A batch in one value is one statement whatever its size, with
    /// nothing to look up per value (see [`SQLITE_VALUES_PER_STATEMENT`])
    /// and no `CASE id WHEN ...` to walk per row: a thousand run ends
    /// bound value by value were 53 statements on SQLite.
    fn json_rows(self, parameter: usize, fields: &[(&str, &str)], prefix: &str) -> String {
        // Each field (key, SQL type) written as `item` writes it.
        let list = |item: &dyn Fn(&str, &str) -> String| {
            fields
                .iter()
                .map(|(key, sql_type)| item(key, sql_type))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            // `jsonb_each`, not `json_each`: each object comes as SQLite's
            // binary JSON, which `->>` reads as it is. `json_each` gave it
            // as text, written out and parsed again for every field.
            Backend::Sqlite => format!(
                "SELECT {} FROM jsonb_each(${parameter})",
                list(&|key, _| format!("value->>'{key}' AS {prefix}{key}"))
            ),
            Backend::Postgres => format!(
                "SELECT {} FROM jsonb_to_recordset(CAST(${parameter} AS jsonb)) AS batch({})",
                list(&|key, _| format!("{key} AS {prefix}{key}")),
                list(&|key, sql_type| format!("{key} {sql_type}")),
            ),
        }
    }

    /// A subquery of the ids in the JSON array bound as `$parameter`: one
    /// statement text whatever their number, prepared once per connection
    /// and kept in its statement cache, where `IN ($1, ..., $n)` was a
    /// statement to prepare for every new n.
    fn ids_in(self, parameter: usize) -> String {
        match self {
            Backend::Sqlite => format!("SELECT value FROM json_each(${parameter})"),
            Backend::Postgres => format!(
                "SELECT CAST(value AS BIGINT) FROM jsonb_array_elements_text(CAST(${parameter} AS jsonb))"
            ),
        }
    }

    /// Rows a batch statement writes or reads at a time, `values_per_row`
    /// bound values each: `most`, or fewer on SQLite (see
    /// [`SQLITE_VALUES_PER_STATEMENT`]).
    fn rows_per_statement(self, most: usize, values_per_row: usize) -> usize {
        match self {
            Backend::Postgres => most,
            Backend::Sqlite => (SQLITE_VALUES_PER_STATEMENT / values_per_row.max(1)).clamp(1, most),
        }
    }
}

/// `value` as the JSON text `what` is bound as: a JSON column, or the rows
/// a batch statement binds as one value (see [`Backend::json_rows`] and
/// [`Backend::ids_in`]); an error naming `what` if it cannot be written
/// (never a default written in its place).
fn json_text<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<String, sqlx::Error> {
    serde_json::to_string(value)
        .map_err(|error| sqlx::Error::Encode(format!("{what}: {error}").into()))
}

/// Whether the PostgreSQL server `conn` is on takes writes: after a
/// failover the old primary may live on as a standby, refusing every write
/// (SQLSTATE 25006), and a connection still open to it must not be used.
async fn is_primary(conn: &mut sqlx::AnyConnection) -> Result<bool, sqlx::Error> {
    let in_recovery: bool = sqlx::query("SELECT pg_is_in_recovery()")
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    Ok(!in_recovery)
}

/// `$1, $2, ..., $count`: the placeholders of an `IN` list. Only numbers go
/// into the SQL text; the values are bound.
fn placeholders(count: usize) -> String {
    (1..=count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Store {
    /// Opens the embedded SQLite store under `data_dir` (creating it 0700,
    /// its database files 0600),
    /// refusing a data directory another admin holds.
    pub async fn open_sqlite(data_dir: &Path) -> Result<Store, StoreError> {
        Store::open_sqlite_with(data_dir, Migrations::Apply).await
    }

    /// [`Store::open_sqlite`], doing what `migrations` says.
    pub async fn open_sqlite_with(
        data_dir: &Path,
        migrations: Migrations,
    ) -> Result<Store, StoreError> {
        let lock = sqlite::lock_data_dir(data_dir)?;
        let database = data_dir.join(sqlite::DATABASE_FILE);
        make_private_files(&database).map_err(|source| StoreError::DataDir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        let url = format!("sqlite://{}?mode=rwc", database.display());
        let mut store = Store::connect_with(&url, migrations).await?;
        store.lock = Some(std::sync::Arc::new(lock));
        Ok(store)
    }

    /// Closes the store for every clone of it: stops SQLite's checkpoints,
    /// waits for the connections in use to come back and closes them all
    /// (SQLite's last one folds its log into the database), then frees
    /// the data directory for another admin. Queries made after fail.
    pub async fn close(&self) {
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.stop();
        }
        self.writer.close().await;
        self.pool.close().await;
        if let Some(lock) = &self.lock
            && let Err(error) = lock.unlock()
        {
            tracing::warn!(%error, "the data directory's lock was not released");
        }
    }

    /// Connects by URL (`sqlite://...` or `postgres://...`) and migrates.
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        Store::connect_with(url, Migrations::Apply).await
    }

    /// Connects by URL, doing what `migrations` says.
    pub async fn connect_with(url: &str, migrations: Migrations) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        let url = match backend {
            Backend::Sqlite => with_sqlite_row_buffer(url),
            Backend::Postgres => url.to_owned(),
        };
        let url = url.as_str();
        let connect = |connections: u32, writes: bool| {
            AnyPoolOptions::new()
                .max_connections(connections)
                // Connections are kept for the pool's life, so that sqlx
                // starts no maintenance task. sqlx 0.9's walks the idle
                // connections `num_idle()` times, a counter that a return
                // racing a take wraps below zero: the walk then spins a
                // runtime thread for good (found spinning after a bench
                // round; sqlx issue 3645).
                .idle_timeout(None)
                .max_lifetime(None)
                // A SQLite connection is a file in this process: it cannot
                // drop like a server's, and the ping sqlx sends before each
                // use was a round trip through its worker thread. A
                // PostgreSQL one is checked before each use instead (a round
                // trip, as a ping is): one whose server closed it, or that is
                // now a standby's, is dropped and another made.
                .test_before_acquire(false)
                .before_acquire(move |conn, _| {
                    Box::pin(async move {
                        if backend == Backend::Postgres {
                            return is_primary(conn).await;
                        }
                        Ok(true)
                    })
                })
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if backend == Backend::Postgres && !is_primary(conn).await? {
                            return Err(sqlx::Error::Protocol(
                                "connected to a standby (read-only) server: the database URL \
                                 must lead to the primary"
                                    .into(),
                            ));
                        }
                        if backend == Backend::Sqlite {
                            // WAL with NORMAL sync: a commit survives a
                            // process crash; only an OS crash may lose the
                            // newest ones.
                            sqlx::query("PRAGMA synchronous = NORMAL")
                                .execute(&mut *conn)
                                .await?;
                            // Pages kept by each connection (the default,
                            // 2 MiB, read the run table's indexes back
                            // from the kernel a page at a time at rate).
                            sqlx::query(SQLITE_CACHE_SIZE).execute(&mut *conn).await?;
                            if writes {
                                // Checkpoints run beside it (Checkpointer).
                                sqlx::query("PRAGMA wal_autocheckpoint = 0")
                                    .execute(&mut *conn)
                                    .await?;
                                sqlx::query(SQLITE_JOURNAL_SIZE_LIMIT)
                                    .execute(&mut *conn)
                                    .await?;
                            }
                        }
                        Ok(())
                    })
                })
                .connect(url)
        };
        let (pool, writer, checkpointer, turns, schema) = match backend {
            Backend::Sqlite => {
                let writer = connect(1, true).await?;
                sqlx::query("PRAGMA journal_mode = WAL")
                    .execute(&writer)
                    .await?;
                let schema = schema::prepare(&writer, backend, migrations).await?;
                let pool = connect(4, false).await?;
                let turns = std::sync::Arc::new(turns::WriterTurns::default());
                let checkpointer = Checkpointer::start(pool.clone(), writer.clone(), turns.clone());
                (
                    pool,
                    writer,
                    Some(std::sync::Arc::new(checkpointer)),
                    Some(turns),
                    schema,
                )
            }
            Backend::Postgres => {
                let pool = connect(16, false).await?;
                let schema = schema::prepare(&pool, backend, migrations).await?;
                (pool.clone(), pool, None, None, schema)
            }
        };
        Ok(Store {
            pool,
            writer,
            backend,
            owner: hex::encode(rand::random::<[u8; 8]>()).into(),
            lock: None,
            checkpointer,
            turns,
            jobs: std::sync::Arc::new(job_cache::JobCache::new(job_cache::JOB_CACHE_BYTES)),
            leases: Leases::default(),
            schema: std::sync::Arc::new(schema),
        })
    }

    /// The schema's version as the store found or left it when it opened.
    pub fn schema(&self) -> &SchemaVersion {
        &self.schema
    }

    /// Copies SQLite's write-ahead log into the database now, as the store
    /// does by itself every half second (see [`checkpoint_sqlite`]); the
    /// writer's next transaction starts the log over. Nothing on
    /// PostgreSQL.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        match &self.turns {
            Some(turns) => checkpoint_sqlite(&self.pool, &self.writer, turns).await,
            None => Ok(()),
        }
    }

    /// The store with its writes and dispatches holding their runs for
    /// `leases` (the default: [`DEFAULT_DISPATCH_LEASE`]).
    pub fn with_leases(mut self, leases: Leases) -> Store {
        self.leases = leases;
        self
    }

    /// How long this admin's writes and dispatches hold their runs.
    pub fn leases(&self) -> Leases {
        self.leases
    }

    /// Whether the database answers (a trivial query).
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// The engine.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// This admin instance's name: the lease owner of the runs it writes
    /// and dispatches (random per start; `GET /readyz` reports it).
    pub fn instance(&self) -> &str {
        &self.owner
    }
}

/// Helpers for the unit tests of this crate and of the admin (feature
/// `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub mod test_support {
    /// Lets every other task on this (single-threaded) test runtime run
    /// as far as it can without waiting on anything outside it.
    pub async fn let_others_run() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// A store on a new SQLite file in a temporary directory, which is
    /// deleted when the returned handle drops: keep it for the test's life.
    pub async fn sqlite_store() -> (tempfile::TempDir, crate::Store) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = crate::Store::open_sqlite(dir.path())
            .await
            .expect("a store");
        (dir, store)
    }
}

#[cfg(test)]
mod tests {
    /// No pool of the store has sqlx reap its connections: the task that
    /// would could spin a runtime thread for good (see [`Store::connect`]).
    #[tokio::test]
    async fn no_pool_has_a_maintenance_task() {
        let (_dir, store) = crate::test_support::sqlite_store().await;
        for pool in [&store.pool, &store.writer] {
            let options = pool.options();
            assert_eq!(
                (
                    options.get_idle_timeout(),
                    options.get_max_lifetime(),
                    options.get_min_connections()
                ),
                (None, None, 0)
            );
        }
    }
}
