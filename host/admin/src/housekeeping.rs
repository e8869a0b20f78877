//! Housekeeping, as xxl-job's admin does it in the background: the daily
//! report rows of the last three days recounted every pass (before
//! retention runs, and no longer for a day it thinned), ended runs older
//! than the retention deleted, executors silent for twice the dead time
//! forgotten, and module content that nothing refers to any more (no job,
//! no kept version, no open run) deleted a day after it was last uploaded,
//! and tenants' per-day usage (run time, log bytes) older than a week.
//! (Which days were thinned is kept in memory: with a retention under three
//! days, a restarted admin may recount a thinned day lower.)
//!
//! Every step is idempotent, so several admins on one database may all run
//! it.

use std::time::Duration;

use chrono::{DateTime, Days, Utc};

use crate::scheduler::SchedulerConfig;
use crate::store::{Store, StoreError};

/// Days recounted every pass (today and the two before, for runs that end
/// after midnight).
const REPORT_DAYS: u64 = 3;

/// How long unreferenced module content is kept after its last upload (an
/// upload is followed by the job or version that uses it).
const MODULE_GRACE: Duration = Duration::from_secs(24 * 3600);

/// Runs housekeeping every `config.housekeeping_interval` until `stop`.
/// Runs until the admin stops (its task is cut short then).
pub(crate) async fn run(store: Store, config: SchedulerConfig) {
    let mut thinned_before = i64::MIN;
    loop {
        if let Err(error) = pass(&store, &config, config.clock.now_ms(), &mut thinned_before).await
        {
            tracing::warn!(%error, "housekeeping failed; trying again next pass");
        }
        tokio::time::sleep(config.housekeeping_interval).await;
    }
}

/// One pass at `now_ms`. `thinned_before` is the newest retention cutoff
/// that deleted runs: days starting before it are not recounted.
async fn pass(
    store: &Store,
    config: &SchedulerConfig,
    now_ms: i64,
    thinned_before: &mut i64,
) -> Result<(), StoreError> {
    let now = DateTime::<Utc>::from_timestamp_millis(now_ms).unwrap_or_default();
    let today = now.date_naive();
    let retention = millis(config.run_retention);
    for back in 0..REPORT_DAYS {
        let Some(day) = today.checked_sub_days(Days::new(back)) else {
            continue;
        };
        let from = day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
        let to = from + chrono::Duration::days(1);
        if from.timestamp_millis() < *thinned_before {
            // Retention deleted some of this day's runs: keep the count
            // made while they were all there.
            continue;
        }
        store
            .refresh_daily_report(
                &day.format("%Y-%m-%d").to_string(),
                from.timestamp_millis(),
                to.timestamp_millis(),
            )
            .await?;
    }
    let deleted = store.delete_runs_before(now_ms - retention).await?;
    if deleted > 0 {
        *thinned_before = now_ms - retention;
        tracing::info!(deleted, "ended runs past the retention deleted");
    }
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
    store.clear_ended_pauses(now_ms).await?;
    let reference = store.liveness_reference(now_ms).await?;
    store
        .forget_silent_executors(reference - 2 * millis(config.dead_after))
        .await?;
    Ok(())
}

/// Days of tenants' per-day usage kept.
const USAGE_DAYS_KEPT: i64 = 7;

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}
