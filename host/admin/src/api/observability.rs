//! `/metrics`: the admin's Prometheus metrics (also sent by OTLP when the
//! operator asks, see `cronbox_telemetry`), with the gauges read from
//! the database set afresh on each scrape (quotas, live executors per
//! group, the most failing jobs of the last hour, readiness), and the jobs
//! marked with `--job-metrics` looked up again.

use super::*;
use crate::metrics::FAILING_JOBS;

/// Prometheus text format; no token (like the executor's).
pub(super) async fn metrics(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        current_metrics(state.scheduler.clone()).await,
    )
}

/// The metrics as OpenMetrics text, the gauges read from the database
/// first (for a scrape, and for an export by OTLP).
pub(crate) async fn current_metrics(scheduler: Arc<Scheduler>) -> String {
    let ready = scheduler.store().ping().await.is_ok();
    scheduler.metrics().ready.set(i64::from(ready));
    if ready {
        if let Err(error) = refresh_quota_metrics(&scheduler).await {
            tracing::warn!(%error, "quota metrics not refreshed");
        }
        if let Err(error) = refresh_fleet_metrics(&scheduler).await {
            tracing::warn!(%error, "executor and failing-job metrics not refreshed");
        }
        let metrics = scheduler.metrics();
        if let Err(error) = metrics.find_marked_jobs(scheduler.store()).await {
            tracing::warn!(%error, "the jobs marked for metrics were not looked up");
        }
    }
    scheduler.metrics().encode()
}

async fn refresh_quota_metrics(scheduler: &Scheduler) -> Result<(), crate::store::StoreError> {
    let store = scheduler.store();
    let mut tenants: Vec<String> = store
        .tenants()
        .await?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    tenants.push(DEFAULT_TENANT.to_owned());
    let quotas = scheduler
        .quotas()
        .all(store, &tenants, scheduler.now_ms())
        .await?;
    scheduler.metrics().set_quotas(&quotas);
    Ok(())
}

/// Live executors per group, and the jobs that failed most in the last
/// hour (with their tenant).
async fn refresh_fleet_metrics(scheduler: &Scheduler) -> Result<(), crate::store::StoreError> {
    let store = scheduler.store();
    let alive_since = scheduler.alive_since_now().await?;
    let mut groups = Vec::new();
    for group in store.groups().await? {
        let alive = store.group_addresses(&group.name, alive_since).await?.len();
        groups.push((group.name, alive as i64));
    }
    scheduler.metrics().set_executors_alive(&groups);
    let hour_ago = scheduler.now_ms() - 3_600_000;
    let failing = store
        .most_failing_jobs(None, hour_ago, FAILING_JOBS)
        .await?;
    let ids: Vec<JobId> = failing.iter().map(|(id, _, _)| *id).collect();
    let jobs = store.jobs_by_id(&ids).await?;
    let labelled = failing
        .into_iter()
        .map(|(id, name, failures)| {
            let tenant = jobs.get(&id).map(|job| job.tenant.clone());
            (tenant.unwrap_or_default(), id, name, failures)
        })
        .collect();
    scheduler.metrics().set_failing_jobs(labelled);
    Ok(())
}
