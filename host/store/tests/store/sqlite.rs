//! SQLite itself: its build flags, its log restarting under writes, the checkpointer, the files' modes.

use super::*;

/// The SQLite linked in is built as `.cargo/config.toml` asks: without
/// its memory statistics (with them, every allocation and free of every
/// connection takes one process-wide lock, which held firing back;
/// BENCHMARKS.md's history, "SQLite's allocation lock"), and with statement
/// journals kept in memory (past SQLite's 64 KiB, claims and run ends wrote
/// theirs to files; "Statement journals in memory").
#[tokio::test]
async fn sqlite_is_built_with_the_workspace_flags() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("any.db").display());
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let options: Vec<String> =
        sqlx::query_scalar("SELECT compile_options FROM pragma_compile_options")
            .fetch_all(&pool)
            .await
            .unwrap();
    for wanted in ["DEFAULT_MEMSTATUS=0", "STMTJRNL_SPILL=-1"] {
        assert!(
            options.iter().any(|option| option == wanted),
            "{wanted} not in {options:?}"
        );
    }
}

/// A statement inside a transaction whose journal is larger than any
/// spill commits: with the statement journal spilling past 16 MiB (this
/// build's flag before), one updating 20,000 rows of a kilobyte failed
/// with `database or disk is full`, and so did every spill but SQLite's
/// default once passed, no system call failing (a workflow run of 25,000
/// elements could not be cancelled).
#[tokio::test]
async fn statement_journals_past_any_size_commit() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("big.db").display());
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::query("PRAGMA journal_mode = WAL")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE item (id BIGINT PRIMARY KEY, status TEXT NOT NULL, input TEXT NOT NULL)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let mut tx = pool.begin().await.unwrap();
    sqlx::query(
        "WITH RECURSIVE n(id) AS (SELECT 1 UNION ALL SELECT id + 1 FROM n WHERE id < 20000) \
         INSERT INTO item SELECT id, 'pending', printf('%.900c', 'p') FROM n",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    let updated = sqlx::query("UPDATE item SET status = 'cancelled' WHERE status = 'pending'")
        .execute(&mut *tx)
        .await
        .unwrap()
        .rows_affected();
    tx.commit().await.unwrap();
    assert_eq!(updated, 20_000);
}

/// SQLite's log starts over while writes never pause: checkpointed only
/// from a reader, beside a writer that always had a transaction going, it
/// was never whole in the database when a transaction began, so SQLite
/// never went back to its start and it grew by every write (5.7 GB in 80 s
/// of firing at 8,000 runs/s). Here one task writes runs back to back
/// while the test checkpoints after every [`WRITES_PER_CHECKPOINT`] of
/// them, until the log has started over; without the writer's own step
/// of the checkpoint it never does in [`MOST_WRITES`] (twice what was seen
/// needed on a loaded machine).
#[tokio::test]
async fn sqlite_log_starts_over_under_writes_that_never_pause() {
    const MOST_WRITES: usize = 3_200;
    const WRITES_PER_CHECKPOINT: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    let written = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let writer = {
        let (store, written) = (store.clone(), written.clone());
        tokio::spawn(async move {
            for at in 0..MOST_WRITES as i64 {
                let run = NewRun {
                    param: "p".repeat(8 << 10),
                    ..fire(id, at)
                };
                store.insert_run(&run, at).await.unwrap();
                written.add_permits(1);
            }
        })
    };
    let log = dir.path().join("cronbox.db-wal");
    let mut checked = 0;
    let restarts = loop {
        written
            .acquire_many(WRITES_PER_CHECKPOINT as u32)
            .await
            .unwrap()
            .forget();
        checked += WRITES_PER_CHECKPOINT;
        store.checkpoint().await.unwrap();
        let restarts = log_restarts(&log);
        if restarts >= 1 || checked >= MOST_WRITES {
            break restarts;
        }
    };
    writer.abort();
    assert!(
        restarts >= 1,
        "the log never started over in {checked} writes ({} bytes)",
        std::fs::metadata(&log).unwrap().len()
    );
}

/// How many times SQLite's log at `path` has started over: a log that
/// starts over writes a new header with its checkpoint sequence number one
/// higher (SQLite's WAL format: bytes 12..16, big endian, 0 in a log that
/// never started over). Counted, not inferred from the log's size: on a
/// loaded machine the restarts come late and the size says little.
fn log_restarts(path: &std::path::Path) -> u32 {
    use std::io::Read;
    let mut header = [0u8; 32];
    std::fs::File::open(path)
        .unwrap()
        .read_exact(&mut header)
        .unwrap();
    assert!(
        matches!(header[..4], [0x37, 0x7f, 0x06, 0x82 | 0x83]),
        "not a SQLite log"
    );
    u32::from_be_bytes(header[12..16].try_into().unwrap())
}

/// The writer never checkpoints SQLite's log (a pause of every write at
/// rate); the store's checkpointer copies it into the database beside it.
#[tokio::test]
async fn sqlite_log_is_checkpointed_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    let database = dir.path().join("cronbox.db");
    let before = std::fs::metadata(&database).unwrap().len();
    // About 8 MiB of runs: twice the log SQLite's writer would have
    // checkpointed by itself.
    for at in 0..1_000 {
        let run = NewRun {
            param: "p".repeat(8 << 10),
            ..fire(id, at)
        };
        store.insert_run(&run, at).await.unwrap();
    }
    cronbox_tests::until("the log is copied into the database", || async {
        let size = std::fs::metadata(&database).ok()?.len();
        (size >= before + (8 << 20)).then_some(())
    })
    .await;
}

/// The admin's data directory is made 0700 and its database files 0600
/// (they hold sealed secrets, token and password hashes); files left
/// readable by an earlier version are tightened at the next start.
#[tokio::test]
async fn the_data_directory_and_database_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().unwrap();
    let data = parent.path().join("cronbox-data");
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let store = Store::open_sqlite(&data).await.unwrap();
    store.ping().await.unwrap();
    assert_eq!(mode(&data), 0o700);
    for file in [
        "cronbox.db",
        "cronbox.db-wal",
        "cronbox.db-shm",
        "admin.lock",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }

    // An earlier version's world-readable files.
    let older = parent.path().join("older");
    std::fs::create_dir(&older).unwrap();
    for file in ["cronbox.db", "cronbox.db-wal"] {
        std::fs::write(older.join(file), b"").unwrap();
        std::fs::set_permissions(older.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let store = Store::open_sqlite(&older).await.unwrap();
    store.ping().await.unwrap();
    for file in ["cronbox.db", "cronbox.db-wal", "cronbox.db-shm"] {
        assert_eq!(mode(&older.join(file)), 0o600, "{file} tightened");
    }
}
