//! Runs as people read them: one run with its job's name and its module's
//! label, a page of runs by filter, an ended run's stored log, the daily
//! reports and the dashboard's figures.

use cronbox_api::{Dashboard, FailingJob, HourCounts, Report, RunCounts, RunPage};

use super::{ServiceError, Services};
use crate::store::{DailyReport, RunFilter, RunId, RunRow, Store};

/// `run` with its job's name and its module's label.
pub async fn named(store: &Store, mut run: RunRow) -> Result<RunRow, ServiceError> {
    store.with_job_names(std::slice::from_mut(&mut run)).await?;
    run.module = store.module_label(&run.tenant, &run.module_digest).await?;
    Ok(run)
}

/// One page of runs, newest first, as `filter` narrows them, each with
/// its job's name; `next_before` is where the next page starts (none: no
/// more runs), also when the page came out short because the filter's
/// bounded read ended.
pub async fn page(store: &Store, filter: &RunFilter) -> Result<RunPage, ServiceError> {
    let mut runs = store.list_runs(filter).await?;
    store.with_job_names(&mut runs).await?;
    let next_before = if runs.len() as i64 == filter.limit {
        runs.last().map(|run| run.id)
    } else {
        store.oldest_examined(filter).await?
    };
    Ok(RunPage { runs, next_before })
}

/// Run `id` as stored (none: no such run, or deleted by retention).
pub async fn find(store: &Store, id: RunId) -> Result<Option<RunRow>, ServiceError> {
    Ok(store.run(id).await?)
}

/// Run `id`'s log as the store keeps it (empty: none kept).
pub async fn stored_log(store: &Store, id: RunId) -> Result<String, ServiceError> {
    Ok(store.run_log(id).await?.unwrap_or_default())
}

/// `tenant`'s run counts per day from `from` to `to` (days as
/// `YYYY-MM-DD`), and their totals.
pub async fn daily_report(
    store: &Store,
    tenant: &str,
    from: chrono::NaiveDate,
    to: chrono::NaiveDate,
) -> Result<Report, ServiceError> {
    let days = store
        .daily_reports(tenant, &day_text(from), &day_text(to))
        .await?;
    let total = |count: fn(&DailyReport) -> i64| days.iter().map(count).sum::<i64>();
    let totals = RunCounts {
        success: total(|day| day.success),
        failed: total(|day| day.failed),
        running: total(|day| day.running),
        cancelled: total(|day| day.cancelled),
    };
    Ok(Report { days, totals })
}

fn day_text(day: chrono::NaiveDate) -> String {
    day.format("%Y-%m-%d").to_string()
}

/// Hours the dashboard's hourly chart covers.
const DASHBOARD_HOURS: i64 = 24;
/// Days its daily chart covers.
const DASHBOARD_DAYS: i64 = 30;
/// Most scheduled runs the lateness figures are read from.
const LATENESS_SAMPLE: i64 = 1_000;
/// Jobs listed as failing most.
const TOP_FAILING: i64 = 5;
const HOUR_MS: i64 = 3_600_000;

/// `tenant`'s runs at a glance (none: every tenant's): the last day by
/// hour, the last month by day, start lateness, executors online, runs in
/// progress and the jobs failing most this week.
pub async fn dashboard(
    services: &Services,
    tenant: Option<&str>,
) -> Result<Dashboard, ServiceError> {
    let store = services.store();
    let now_ms = services.now_ms();
    let first_hour = (now_ms.div_euclid(HOUR_MS) - (DASHBOARD_HOURS - 1)) * HOUR_MS;
    let counted = store
        .run_counts_by_bucket(tenant, first_hour, now_ms + 1, HOUR_MS)
        .await?;
    let hours: Vec<HourCounts> = (0..DASHBOARD_HOURS)
        .map(|hour| {
            let counts = counted
                .iter()
                .find(|(bucket, _)| *bucket == hour)
                .map(|(_, counts)| *counts)
                .unwrap_or_default();
            HourCounts {
                start_ms: first_hour + hour * HOUR_MS,
                success: counts.success,
                failed: counts.failed,
                running: counts.running,
                cancelled: counts.cancelled,
            }
        })
        .collect();
    let (succeeded, failed) = hours
        .iter()
        .fold((0, 0), |(s, f), hour| (s + hour.success, f + hour.failed));
    let success_rate =
        (succeeded + failed > 0).then(|| succeeded as f64 / (succeeded + failed) as f64);

    let today = services.now().date_naive();
    let first_day = today - chrono::Duration::days(DASHBOARD_DAYS - 1);
    let reported = store
        .daily_report_totals(tenant, &day_text(first_day), &day_text(today))
        .await?;
    let days = first_day
        .iter_days()
        .take(DASHBOARD_DAYS as usize)
        .map(|day| {
            let day = day_text(day);
            reported
                .iter()
                .find(|report| report.day == day)
                .cloned()
                .unwrap_or(DailyReport {
                    day,
                    success: 0,
                    failed: 0,
                    running: 0,
                    cancelled: 0,
                })
        })
        .collect();

    let day_ago = now_ms - DASHBOARD_HOURS * HOUR_MS;
    let mut lateness = store
        .recent_start_lateness(tenant, day_ago, LATENESS_SAMPLE)
        .await?;
    lateness.sort_unstable();
    let percentile =
        |p: usize| (!lateness.is_empty()).then(|| lateness[(lateness.len() - 1) * p / 100].max(0));
    let alive_since = services.alive_since_now().await?;
    let executors_online = store
        .registered_executors()
        .await?
        .iter()
        .filter(|executor| executor.last_beat_ms >= alive_since)
        .count() as i64;
    let top_failing = store
        .most_failing_jobs(tenant, now_ms - 7 * 24 * HOUR_MS, TOP_FAILING)
        .await?
        .into_iter()
        .map(|(job_id, name, failures)| FailingJob {
            job_id,
            name,
            failures,
        })
        .collect();
    Ok(Dashboard {
        now_ms,
        hours,
        days,
        success_rate,
        lateness_p50_ms: percentile(50),
        lateness_p99_ms: percentile(99),
        lateness_sample: lateness.len() as i64,
        executors_online,
        runs_in_progress: store.runs_in_progress(tenant, now_ms).await?,
        top_failing,
    })
}
