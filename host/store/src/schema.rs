//! The schema's version: migrations applied at an admin's start or by
//! `cronbox admin migrate`, under the database's lock (PostgreSQL's advisory
//! lock, taken by sqlx's migrator; SQLite's data-directory lock), and which
//! schema versions an admin may serve.
//!
//! Migrations expand within a minor version and contract a version later,
//! so that admins N and N+1 serve one database during a rolling upgrade.
//! `schema_compatibility.oldest_reader` is the oldest schema version whose
//! admins may still serve the database: an expand migration leaves it, a
//! contract migration raises it. An admin refuses a database whose oldest
//! reader is past the newest migration it knows, naming both versions.

use std::borrow::Cow;

use sqlx::migrate::{MigrateError, Migrator};
use sqlx::{AnyPool, Row};

use super::{Backend, StoreError};

/// What opening the store does about migrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Migrations {
    /// Apply the pending ones under the database's lock (the default: two
    /// admins starting at once never both migrate).
    #[default]
    Apply,
    /// Apply none; refuse a database with any pending (`cronbox admin
    /// --no-migrate`, where a migration job runs `cronbox admin migrate`
    /// before the admins start).
    Require,
    /// Apply none and refuse nothing but a too-new schema: read the
    /// versions (`cronbox admin migrate --check`).
    Inspect,
}

/// Where a database's schema stands against this build's migrations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaVersion {
    /// The newest migration applied to the database (0: an empty one).
    pub applied: i64,
    /// The newest migration this build knows.
    pub known: i64,
    /// The oldest schema version whose admins may serve the database (0
    /// before the table that records it exists).
    pub oldest_reader: i64,
    /// This build's migrations the database has not had, by version and
    /// description.
    pub pending: Vec<(i64, String)>,
}

impl SchemaVersion {
    /// The database was migrated by a newer admin than this one (which may
    /// still serve it: see [`SchemaVersion::oldest_reader`]).
    pub fn is_newer(&self) -> bool {
        self.applied > self.known
    }
}

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/sqlite");

static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("./migrations/postgres");

fn migrator(backend: Backend) -> &'static Migrator {
    match backend {
        Backend::Sqlite => &SQLITE_MIGRATIONS,
        Backend::Postgres => &POSTGRES_MIGRATIONS,
    }
}

/// Reads the schema's version on `pool` and does what `mode` says; the
/// version once done.
pub(super) async fn prepare(
    pool: &AnyPool,
    backend: Backend,
    mode: Migrations,
) -> Result<SchemaVersion, StoreError> {
    let before = read(pool, backend).await?;
    refuse_too_new(&before)?;
    match mode {
        Migrations::Inspect => return Ok(before),
        Migrations::Require if !before.pending.is_empty() => {
            return Err(StoreError::SchemaBehind {
                database: before.applied,
                known: before.known,
            });
        }
        Migrations::Require => return Ok(before),
        Migrations::Apply => {}
    }
    if before.pending.is_empty() {
        return Ok(before);
    }
    let known = migrator(backend);
    let result = if before.is_newer() {
        // Served as an older admin during a rolling upgrade: the newer
        // admin's migrations are not this build's to check.
        let mut lenient = Migrator::with_migrations(known.migrations.to_vec());
        lenient.set_ignore_missing(true);
        lenient.run(pool).await
    } else {
        known.run(pool).await
    };
    match result {
        Ok(()) => {}
        // A newer admin migrated between the read and the lock.
        Err(MigrateError::VersionMissing(_)) => {
            let now = read(pool, backend).await?;
            refuse_too_new(&now)?;
            return Ok(now);
        }
        Err(error) => return Err(error.into()),
    }
    let after = read(pool, backend).await?;
    tracing::info!(
        from = before.applied,
        to = after.applied,
        "the database's schema was migrated"
    );
    Ok(after)
}

pub(super) fn refuse_too_new(version: &SchemaVersion) -> Result<(), StoreError> {
    if version.is_newer() && version.oldest_reader > version.known {
        return Err(StoreError::SchemaTooNew {
            database: version.applied,
            oldest_reader: version.oldest_reader,
            known: version.known,
        });
    }
    if version.is_newer() {
        tracing::warn!(
            database = version.applied,
            known = version.known,
            "the database's schema is newer than this admin's; serving it as the version before \
             (a rolling upgrade: upgrade this admin next)"
        );
    }
    Ok(())
}

async fn table_exists(pool: &AnyPool, backend: Backend, table: &str) -> Result<bool, StoreError> {
    let query = match backend {
        Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
        Backend::Postgres => {
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = $1"
        }
    };
    let count: i64 = sqlx::query(query)
        .bind(table)
        .fetch_one(pool)
        .await?
        .try_get(0)?;
    Ok(count > 0)
}

pub(super) async fn read(pool: &AnyPool, backend: Backend) -> Result<SchemaVersion, StoreError> {
    let known = migrator(backend);
    let applied: Vec<i64> = if table_exists(pool, backend, "_sqlx_migrations").await? {
        sqlx::query("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(pool)
            .await?
            .iter()
            .map(|row| row.try_get(0))
            .collect::<Result<_, _>>()?
    } else {
        Vec::new()
    };
    let oldest_reader = if table_exists(pool, backend, "schema_compatibility").await? {
        sqlx::query("SELECT MAX(oldest_reader) FROM schema_compatibility")
            .fetch_one(pool)
            .await?
            .try_get::<Option<i64>, _>(0)?
            .unwrap_or(0)
    } else {
        0
    };
    let pending = known
        .iter()
        .filter(|migration| applied.binary_search(&migration.version).is_err())
        .map(|migration| {
            (
                migration.version,
                Cow::into_owned(migration.description.clone()),
            )
        })
        .collect();
    Ok(SchemaVersion {
        applied: applied.last().copied().unwrap_or(0),
        known: known.iter().map(|m| m.version).max().unwrap_or(0),
        oldest_reader,
        pending,
    })
}
