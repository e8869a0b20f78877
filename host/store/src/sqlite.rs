//! What only SQLite needs: its files made private, its row buffer, and the
//! checkpoints that copy its write-ahead log into the database beside the
//! single writer.

use std::path::Path;

use sqlx::AnyPool;

use super::{StoreError, turns};

/// How often SQLite's WAL is checkpointed beside the writer.
pub(super) const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// The size SQLite trims its write-ahead log back to when it starts it
/// over, should one burst have grown it past this.
pub(super) const SQLITE_JOURNAL_SIZE_LIMIT: &str = "PRAGMA journal_size_limit = 67108864";

/// Copies SQLite's write-ahead log into the database every
/// [`CHECKPOINT_EVERY`] (see [`Store::checkpoint`](super::Store::checkpoint)), so that the writer's
/// own automatic checkpoints never do: with them the writer stopped every
/// few hundred milliseconds at thousands of runs a second to copy pages
/// and sync the file while every claim, mark and end waited. Stops when
/// the last clone of the store is dropped (or its pools are closed).
#[derive(Debug)]
pub(super) struct Checkpointer(tokio::task::JoinHandle<()>);

impl Checkpointer {
    pub(super) fn start(
        readers: AnyPool,
        writer: AnyPool,
        turns: std::sync::Arc<turns::WriterTurns>,
    ) -> Checkpointer {
        Checkpointer(tokio::spawn(async move {
            let mut every = tokio::time::interval(CHECKPOINT_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                if readers.is_closed() || writer.is_closed() {
                    return;
                }
                if let Err(error) = checkpoint_sqlite(&readers, &writer, &turns).await {
                    tracing::warn!(%error, "checkpointing SQLite's log failed");
                }
            }
        }))
    }

    /// Stops checkpointing (the store is closing).
    pub(super) fn stop(&self) {
        self.0.abort();
    }
}

/// SQLite's log copied into the database in two steps. First from a
/// reading connection, beside the writer (a passive checkpoint waits for
/// nobody): the bulk of the copying. Then on the writer's own connection,
/// between two of its transactions: the frames written meanwhile, so that
/// the log is whole in the database when the writer's next transaction
/// begins — which SQLite needs to start the log over from its beginning.
///
/// Run only from a reader, a checkpoint never caught up with a writer that
/// is never idle: at 8,000 runs/s the log grew without end (5.7 GB in 80
/// seconds beside a 200 MB database), every frame written past its end
/// into new file pages, and the kernel's dirty pages with it.
///
/// The second step lets the pre-read's claims go first (see [`turns`]),
/// [`CHECKPOINT_EVERY`] at the longest.
pub(super) async fn checkpoint_sqlite(
    readers: &AnyPool,
    writer: &AnyPool,
    turns: &turns::WriterTurns,
) -> Result<(), StoreError> {
    const PASSIVE: &str = "PRAGMA wal_checkpoint(PASSIVE)";
    sqlx::query(PASSIVE).execute(readers).await?;
    turns.after_urgent(CHECKPOINT_EVERY).await;
    sqlx::query(PASSIVE).execute(writer).await?;
    Ok(())
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Rows a SQLite statement's worker thread hands over before it waits for
/// the task reading them (sqlx's default is 50). sqlx runs each SQLite
/// connection on a thread of its own and sends a statement's rows to the
/// awaiting task through a channel of this size; when it is full the
/// thread stops until that task is next polled. On a loaded runtime that
/// was a wait of milliseconds per 50 rows, with the single writer's
/// connection held: a claim of 1,000 due jobs and their 2,000 fires, or
/// the ends of 2,000 runs, stopped dozens of times, and the writer's
/// thread was busy only 40–50 % of the time while claims queued behind it
/// (BENCHMARKS.md's history, "Rows handed over a few at a time"). Larger than any
/// result the writer reads (a claim's 1,000 jobs, 2,000 ends); bounded,
/// so that a large read still cannot buffer without end.
const SQLITE_ROW_BUFFER: usize = 4_096;

/// `url` with SQLite's row buffer set to [`SQLITE_ROW_BUFFER`], unless the
/// URL sets it itself. The setting is a URL parameter that cronbox's copy
/// of sqlx's SQLite driver adds (`vendor/sqlx-sqlite`): a pool made by
/// `sqlx::any` takes its options from the URL alone.
pub(super) fn with_sqlite_row_buffer(url: &str) -> String {
    if url.contains("row_buffer_size=") {
        return url.to_owned();
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}row_buffer_size={SQLITE_ROW_BUFFER}")
}

/// The database's file in a data directory.
pub(super) const DATABASE_FILE: &str = "cronbox.db";

/// Creates `data_dir` (0700) and takes its exclusive lock, held while the
/// file stays open: one admin (or restore) per data directory.
pub(super) fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, StoreError> {
    let io = |source| StoreError::DataDir {
        path: data_dir.to_path_buf(),
        source,
    };
    create_private_dir(data_dir).map_err(io)?;
    let mut lock_options = std::fs::OpenOptions::new();
    lock_options.create(true).truncate(false).write(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut lock_options, 0o600);
    let lock = lock_options.open(data_dir.join("admin.lock")).map_err(io)?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Locked(data_dir.to_path_buf())),
        Err(std::fs::TryLockError::Error(error)) => Err(io(error)),
    }
}

/// Creates `dir` (and its missing parents) readable by this user only
/// (0700); an existing directory is left as it is.
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Makes the SQLite file `database` and its `-wal` and `-shm` files
/// readable by this user only (0600): an existing one is tightened, a
/// missing database is created empty with that mode, and SQLite gives the
/// files it makes beside it the database's mode.
pub(super) fn make_private_files(database: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let private = std::fs::Permissions::from_mode(0o600);
    if !database.exists() {
        std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(0o600)
            .open(database)?;
    }
    for suffix in ["", "-wal", "-shm"] {
        let mut path = database.as_os_str().to_owned();
        path.push(suffix);
        match std::fs::set_permissions(&path, private.clone()) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[test]
    fn sqlite_urls_get_the_row_buffer_unless_they_set_it() {
        assert_eq!(
            with_sqlite_row_buffer("sqlite:///data/cronbox.db?mode=rwc"),
            format!("sqlite:///data/cronbox.db?mode=rwc&row_buffer_size={SQLITE_ROW_BUFFER}")
        );
        assert_eq!(
            with_sqlite_row_buffer("sqlite:///data/cronbox.db"),
            format!("sqlite:///data/cronbox.db?row_buffer_size={SQLITE_ROW_BUFFER}")
        );
        assert_eq!(
            with_sqlite_row_buffer("sqlite:///x.db?row_buffer_size=64"),
            "sqlite:///x.db?row_buffer_size=64"
        );
    }

    /// The row buffer is a parameter the SQLite driver in use understands
    /// (sqlx's own rejects it as unknown), and a bad value is refused with
    /// its name.
    #[tokio::test]
    async fn the_sqlite_driver_reads_the_row_buffer_from_the_url() {
        use std::str::FromStr;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cronbox.db");
        let url = format!("sqlite://{}?mode=rwc&row_buffer_size=4096", path.display());
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&url).unwrap();
        assert!(
            format!("{options:?}").contains("row_channel_size: 4096"),
            "{options:?}"
        );
        let bad = format!("sqlite://{}?row_buffer_size=0", path.display());
        let error = sqlx::sqlite::SqliteConnectOptions::from_str(&bad).unwrap_err();
        assert!(error.to_string().contains("row_buffer_size"), "{error}");
        // The store's own URL carries it (sqlx's driver would refuse to
        // open it).
        let store = Store::open_sqlite(dir.path()).await.unwrap();
        store.ping().await.unwrap();
    }
}
