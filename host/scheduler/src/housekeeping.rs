//! Housekeeping, as xxl-job's admin does it in the background: the runs
//! that ended since the last pass folded into the daily reports (each
//! run's end is counted once, in the transaction that ends it, so the
//! reports stay exact after retention deletes the runs), ended runs past
//! their retention deleted in bounded batches with pauses four times as
//! long as each batch (successes and the rest may be kept for different
//! times), executors silent for twice the dead time
//! forgotten, module content that nothing refers to any more (no job, no
//! kept version, no open run) deleted a day after it was last uploaded,
//! tenants' per-day usage (run time, log bytes) older than a week, and
//! audit log entries past their retention. On
//! PostgreSQL the run table's day partitions are made a few days ahead,
//! and a day whose runs are all past retention is dropped whole before the
//! batches run.
//!
//! Every step is idempotent, so several admins on one database may all run
//! it.

use std::time::Duration;

use crate::model::RunStatus;
use crate::scheduler::SchedulerConfig;
use crate::store::{Store, StoreError};

/// Runs deleted per statement: a batch holds the database's writer for a
/// few milliseconds, so fires are claimed between batches.
const RETENTION_BATCH: i64 = 500;

/// After each retention batch, a pause this many times as long as the
/// batch took: retention holds the database's writer at most a fifth of
/// the time (deleting 2,000 rows at a time without a pause put seconds on
/// the p99 of start lateness at 1,000 runs/s).
const RETENTION_REST: u32 = 4;

/// The shortest pause between two retention batches.
const RETENTION_PAUSE: Duration = Duration::from_millis(5);

/// How long unreferenced module content is kept after its last upload (an
/// upload is followed by the job or version that uses it).
const MODULE_GRACE: Duration = Duration::from_secs(24 * 3600);

/// Runs housekeeping every `config.housekeeping_interval` until `stop`.
/// Runs until the admin stops (its task is cut short then).
pub(crate) async fn run(store: Store, config: SchedulerConfig) {
    loop {
        if let Err(error) = pass(&store, &config, config.clock.now_ms()).await {
            tracing::warn!(%error, "housekeeping failed; trying again next pass");
        }
        tokio::time::sleep(config.housekeeping_interval).await;
    }
}

/// One pass at `now_ms`.
async fn pass(store: &Store, config: &SchedulerConfig, now_ms: i64) -> Result<(), StoreError> {
    store.update_daily_reports().await?;
    let collected = store
        .collect_unused_modules(now_ms - millis(MODULE_GRACE))
        .await?;
    if collected > 0 {
        tracing::info!(collected, "module content nothing refers to deleted");
    }
    // Only today's counts are read (the quotas); a week is kept to look at.
    store
        .delete_day_usage_before(now_ms.div_euclid(crate::store::DAY_MS) - USAGE_DAYS_KEPT)
        .await?;
    store.delete_expired_sessions(now_ms).await?;
    let forgotten = store
        .delete_audit_before(now_ms - millis(config.audit_retention))
        .await?;
    if forgotten > 0 {
        tracing::info!(forgotten, "audit log entries past their retention deleted");
    }
    store.clear_ended_pauses(now_ms).await?;
    let reference = store.liveness_reference(now_ms).await?;
    store
        .forget_silent_executors(reference - 2 * millis(config.dead_after))
        .await?;
    let success_retention = config.success_retention.unwrap_or(config.run_retention);
    // On PostgreSQL whole days go first: a day partition whose every run
    // is past the longer of the two retentions is dropped, and the batches
    // below find only what is left (successes kept for less time, the
    // default partition's runs).
    let changes = store
        .maintain_run_partitions(
            now_ms,
            PARTITION_DAYS_AHEAD,
            now_ms - millis(success_retention.max(config.run_retention)),
        )
        .await?;
    if !changes.created.is_empty() || !changes.dropped.is_empty() {
        tracing::info!(
            created = ?changes.created,
            dropped = ?changes.dropped,
            "run partitions made ahead and dropped past their retention"
        );
    }
    for (statuses, retention) in [
        (&[RunStatus::Success][..], success_retention),
        (
            &[RunStatus::Failed, RunStatus::Cancelled][..],
            config.run_retention,
        ),
    ] {
        let before_ms = now_ms - millis(retention);
        let mut deleted = 0;
        loop {
            let began = std::time::Instant::now();
            let batch = store
                .delete_ended_runs(before_ms, statuses, RETENTION_BATCH)
                .await?;
            deleted += batch;
            if batch < RETENTION_BATCH as u64 {
                break;
            }
            tokio::time::sleep(RETENTION_PAUSE.max(began.elapsed() * RETENTION_REST)).await;
        }
        if deleted > 0 {
            tracing::info!(
                deleted,
                ?statuses,
                "ended runs past their retention deleted"
            );
        }
    }
    Ok(())
}

/// Days after today whose run partitions are made ahead (PostgreSQL): a
/// day's runs never wait for its partition while housekeeping runs at all.
const PARTITION_DAYS_AHEAD: i64 = 3;

/// Days of tenants' per-day usage kept.
const USAGE_DAYS_KEPT: i64 = 7;

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}
