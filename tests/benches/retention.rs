//! What retention costs on PostgreSQL: a day of runs deleted in batches,
//! as SQLite's retention does (and PostgreSQL's does for successes kept
//! for less than failures), against a day's partition dropped whole.
//!
//!     cargo bench -p cronbox-tests --bench retention -- [ROWS_PER_DAY]
//!
//! A real PostgreSQL is started for the run. Two days of ended runs
//! (ROWS_PER_DAY each, default 1,000,000; rows shaped like a real run's:
//! digest, executor, a log line) are inserted directly into their day
//! partitions. The first day is deleted by `delete_ended_runs` in batches
//! of 500 (housekeeping's batch, without its rests); the second is dropped
//! by `maintain_run_partitions`. Printed: for each, the time, runs per
//! second, and the disk space the partition held before and after; and
//! the longest a query of the run table (by id, in a loop) waited while
//! the partition was dropped.
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use cronbox_admin::Store;
use cronbox_admin::store::{DAY_MS, RunStatus};
use cronbox_tests::PostgresServer;

/// Housekeeping's retention batch.
const BATCH: i64 = 500;

fn today() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        / DAY_MS
}

/// Bytes a partition and its indexes hold on disk.
async fn size_of(pool: &sqlx::AnyPool, partition: &str) -> Option<i64> {
    sqlx::query_scalar::<_, i64>(
        "SELECT pg_total_relation_size(oid) FROM pg_class WHERE relname = $1",
    )
    .bind(partition)
    .fetch_optional(pool)
    .await
    .unwrap()
}

fn mib(bytes: Option<i64>) -> String {
    match bytes {
        Some(bytes) => format!("{:.0} MiB", bytes as f64 / f64::from(1 << 20)),
        None => "gone".to_owned(),
    }
}

fn main() {
    let rows: i64 = std::env::args()
        .skip(1)
        .find_map(|word| word.parse().ok())
        .unwrap_or(1_000_000);
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    threads.block_on(async {
        sqlx::any::install_default_drivers();
        let server = PostgresServer::start();
        let url = server.create_database("retention");
        let store = Store::connect(&url).await.unwrap();
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        // Days after the partition of runs from before partitioning.
        let first = today() + 10;
        let made = store
            .maintain_run_partitions(first * DAY_MS, 2, i64::MIN)
            .await
            .unwrap();
        let (deleted_day, dropped_day) = (made.created[0].clone(), made.created[1].clone());
        let began = Instant::now();
        for day in [first, first + 1] {
            sqlx::query(
                "INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, status, executor, \
                 module_digest, module_sha, outcome, code, message, log, created_at_ms, \
                 dispatched_at_ms, started_at_ms, finished_at_ms, alarm_status, \
                 peak_memory_bytes) \
                 SELECT 'default', 1 + g % 1000, 'schedule', $1 + g, 'success', \
                 'http://127.0.0.1:40000', '', decode(repeat('ab', 32), 'hex'), 'success', 200, \
                 'hello, world', \
                 '[{\"at_ms\":' || ($1 + g) || ',\"source\":\"guest\",\"text\":\"hello, world\"}]', \
                 $1 + g, $1 + g + 10, $1 + g + 11, $1 + g + 12, 'none', 1114112 \
                 FROM generate_series(1, $2) AS g",
            )
            .bind(day * DAY_MS)
            .bind(rows)
            .execute(&pool)
            .await
            .unwrap();
        }
        sqlx::query("ANALYZE run").execute(&pool).await.unwrap();
        eprintln!(
            "inserted {} runs in {:.1} s",
            2 * rows,
            began.elapsed().as_secs_f64()
        );

        println!("Retention on PostgreSQL: one day of {rows} ended runs\n");
        println!("| how | time | runs/s | partition before | after |");
        println!("|---|---:|---:|---:|---:|");

        let before = size_of(&pool, &deleted_day).await;
        let began = Instant::now();
        let mut deleted = 0;
        loop {
            let batch = store
                .delete_ended_runs((first + 1) * DAY_MS, &[RunStatus::Success], BATCH)
                .await
                .unwrap();
            deleted += batch;
            if batch < BATCH as u64 {
                break;
            }
        }
        let took = began.elapsed().as_secs_f64();
        assert_eq!(deleted, rows as u64);
        println!(
            "| deleted in batches of {BATCH} | {took:.1} s | {:.0} | {} | {} |",
            deleted as f64 / took,
            mib(before),
            mib(size_of(&pool, &deleted_day).await)
        );

        // The day emptied above goes too, and today's partition is made,
        // before the one to time.
        let changes = store
            .maintain_run_partitions((first + 40) * DAY_MS, 0, (first + 1) * DAY_MS)
            .await
            .unwrap();
        assert!(changes.dropped.contains(&deleted_day), "{changes:?}");
        let before = size_of(&pool, &dropped_day).await;
        // Meanwhile a reader of the run table, as the admin's queries are:
        // the longest it waited is how long the drop held the table.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (reading, read) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn({
            let (pool, stop) = (pool.clone(), stop.clone());
            async move {
                let mut reading = Some(reading);
                let mut longest = std::time::Duration::ZERO;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let began = Instant::now();
                    sqlx::query("SELECT id FROM run WHERE id = 1")
                        .fetch_optional(&pool)
                        .await
                        .unwrap();
                    longest = longest.max(began.elapsed());
                    if let Some(reading) = reading.take() {
                        let _ = reading.send(());
                    }
                }
                longest
            }
        });
        // The drop starts once the reader has read once.
        read.await.unwrap();
        let began = Instant::now();
        let changes = store
            .maintain_run_partitions((first + 40) * DAY_MS, 0, (first + 2) * DAY_MS)
            .await
            .unwrap();
        let took = began.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let longest = reader.await.unwrap();
        assert!(changes.dropped.contains(&dropped_day), "{changes:?}");
        println!(
            "| partition dropped | {:.0} ms | {:.0} | {} | {} |",
            took * 1000.0,
            rows as f64 / took,
            mib(before),
            mib(size_of(&pool, &dropped_day).await)
        );
        println!(
            "\nThe longest a query of the run table waited during the drop: {:.1} ms",
            longest.as_secs_f64() * 1000.0
        );
    });
}
