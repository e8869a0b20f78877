//! Copies of the embedded SQLite store: `cronbox admin backup` (a
//! consistent online copy taken with `VACUUM INTO`, beside an admin that
//! goes on firing) and `cronbox admin restore` (a copy checked, then put in
//! a data directory for the next admin to start from). PostgreSQL is
//! backed up with its own tools (docs/deploying.md).

use std::path::{Path, PathBuf};

use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Row};

use super::sqlite::{DATABASE_FILE, lock_data_dir};
use super::{Backend, SchemaVersion, StoreError, schema};

/// What a copy holds, read back from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySummary {
    /// The copy's file.
    pub path: PathBuf,
    pub bytes: u64,
    pub schema: SchemaVersion,
    pub tenants: i64,
    pub jobs: i64,
    pub module_versions: i64,
    pub workflows: i64,
    pub users: i64,
    pub runs: i64,
    /// The newest run's id in the copy (0: none): runs up to it are the
    /// copy's, later ones were made after it.
    pub last_run: i64,
}

fn file_error(path: &Path) -> impl Fn(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::File {
        path: path.to_path_buf(),
        source,
    }
}

async fn open(database: &Path) -> Result<AnyPool, StoreError> {
    sqlx::any::install_default_drivers();
    // Read-write: a reader of a database in WAL mode needs to write its
    // shared-memory index. Nothing is written to the database itself.
    let url = format!("sqlite://{}?mode=rw", database.display());
    let pool = AnyPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await?;
    // The admin's writer holds SQLite's write lock for moments at a time.
    sqlx::query("PRAGMA busy_timeout = 30000")
        .execute(&pool)
        .await?;
    Ok(pool)
}

/// Copies the store in `data_dir` to the new file `into` (0600) while its
/// admin may be running: one read transaction, so the copy is the database
/// as of one instant. Secrets stay sealed under the admin's key, which is
/// not in the database.
pub async fn backup_sqlite(data_dir: &Path, into: &Path) -> Result<CopySummary, StoreError> {
    let database = data_dir.join(DATABASE_FILE);
    if !database.is_file() {
        return Err(StoreError::NotADatabase {
            path: database,
            reason: "there is no such file (is --data-dir the admin's?)".to_owned(),
        });
    }
    // SQLite writes into an empty file; making it first makes it private
    // and refuses one that exists.
    let mut options = std::fs::OpenOptions::new();
    options.create_new(true).write(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(into) {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(StoreError::CopyExists(into.to_path_buf()));
        }
        Err(error) => return Err(file_error(into)(error)),
    }
    let source = open(&database).await?;
    let copied = sqlx::query("VACUUM INTO $1")
        .bind(into.display().to_string())
        .execute(&source)
        .await;
    source.close().await;
    if let Err(error) = copied {
        let _ = std::fs::remove_file(into);
        return Err(error.into());
    }
    summarize(into).await
}

/// Puts the copy `from` into `data_dir` as its database, once it is found
/// whole and of a schema this build serves. Refuses while an admin holds
/// the directory, and over a database there unless `replace` (which
/// renames it aside, never deletes it).
pub async fn restore_sqlite(
    from: &Path,
    data_dir: &Path,
    replace: bool,
) -> Result<CopySummary, StoreError> {
    let summary = summarize(from).await?;
    schema::refuse_too_new(&summary.schema)?;
    let _lock = lock_data_dir(data_dir)?;
    let database = data_dir.join(DATABASE_FILE);
    if database.exists() {
        if !replace {
            return Err(StoreError::HoldsDatabase(data_dir.to_path_buf()));
        }
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        for suffix in ["", "-wal", "-shm"] {
            let mut path = database.as_os_str().to_owned();
            path.push(suffix);
            let path = PathBuf::from(path);
            if path.exists() {
                let aside = PathBuf::from(format!("{}.replaced-{stamp}", path.display()));
                std::fs::rename(&path, &aside).map_err(file_error(&path))?;
            }
        }
    }
    let partial = data_dir.join(format!("{DATABASE_FILE}.restoring"));
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(true).write(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut target = options.open(&partial).map_err(file_error(&partial))?;
    let mut source = std::fs::File::open(from).map_err(file_error(from))?;
    std::io::copy(&mut source, &mut target).map_err(file_error(&partial))?;
    target.sync_all().map_err(file_error(&partial))?;
    std::fs::rename(&partial, &database).map_err(file_error(&database))?;
    Ok(CopySummary {
        path: database,
        ..summary
    })
}

/// Checks the copy at `path` and counts what it holds.
pub async fn summarize(path: &Path) -> Result<CopySummary, StoreError> {
    let not_a_database = |reason: String| StoreError::NotADatabase {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::metadata(path).map_err(file_error(path))?.len();
    if bytes == 0 {
        return Err(not_a_database("the file is empty".to_owned()));
    }
    let pool = open(path).await?;
    let result = async {
        let check: String = sqlx::query("PRAGMA integrity_check")
            .fetch_one(&pool)
            .await
            .map_err(|error| not_a_database(error.to_string()))?
            .try_get(0)?;
        if check != "ok" {
            return Err(not_a_database(format!("SQLite's integrity check: {check}")));
        }
        let schema = schema::read(&pool, Backend::Sqlite).await?;
        if schema.applied == 0 {
            return Err(not_a_database(
                "it has no cronbox schema (no migration was ever applied)".to_owned(),
            ));
        }
        let count = |table: &'static str| {
            let pool = &pool;
            async move {
                // `table` is one of the names below, never input.
                let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                    .fetch_one(pool)
                    .await?;
                Ok::<i64, StoreError>(row.try_get(0)?)
            }
        };
        let last_run: Option<i64> = sqlx::query("SELECT MAX(id) FROM run")
            .fetch_one(&pool)
            .await?
            .try_get(0)?;
        Ok(CopySummary {
            path: path.to_path_buf(),
            bytes,
            schema,
            tenants: count("tenant").await?,
            jobs: count("job").await?,
            module_versions: count("module_version").await?,
            workflows: count("workflow").await?,
            users: count("app_user").await?,
            runs: count("run").await?,
            last_run: last_run.unwrap_or(0),
        })
    }
    .await;
    pool.close().await;
    result
}
