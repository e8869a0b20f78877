//! The admin's metrics as a scrape reads them (`/metrics`, and the OTLP
//! export when the operator asks): [`MetricsScrape`] sets the gauges read
//! from the database afresh first (quotas, live executors per group, the
//! most failing jobs of the last hour, readiness) and looks up the jobs
//! marked with `--job-metrics` again. It holds what it reads, not the
//! scheduler.

use super::*;
use crate::metrics::FAILING_JOBS;
use crate::model::DEFAULT_TENANT;

/// The metrics page and what refreshes it (cheap to clone).
#[derive(Debug, Clone)]
pub struct MetricsScrape {
    store: Store,
    metrics: Arc<Metrics>,
    quotas: Arc<crate::quotas::Quotas>,
    clock: Arc<dyn Clock>,
    /// An executor is dead after this long without a heartbeat.
    dead_after: Duration,
}

impl MetricsScrape {
    /// The scrape of `scheduler`'s metrics, over what it shares.
    pub(super) fn of(scheduler: &Scheduler) -> MetricsScrape {
        MetricsScrape {
            store: scheduler.store.clone(),
            metrics: scheduler.metrics.clone(),
            quotas: scheduler.quotas.clone(),
            clock: scheduler.config.clock.clone(),
            dead_after: scheduler.config.dead_after,
        }
    }

    /// The metrics as OpenMetrics text, the gauges read from the database
    /// first.
    pub async fn metrics_text(&self) -> String {
        let ready = self.store.ping().await.is_ok();
        self.metrics.ready.set(i64::from(ready));
        if ready {
            if let Err(error) = self.refresh_quota_metrics().await {
                tracing::warn!(%error, "quota metrics not refreshed");
            }
            if let Err(error) = self.refresh_fleet_metrics().await {
                tracing::warn!(%error, "executor and failing-job metrics not refreshed");
            }
            if let Err(error) = self.metrics.find_marked_jobs(&self.store).await {
                tracing::warn!(%error, "the jobs marked for metrics were not looked up");
            }
        }
        self.metrics.encode()
    }

    async fn refresh_quota_metrics(&self) -> Result<(), StoreError> {
        let mut tenants: Vec<String> = self
            .store
            .tenants()
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        tenants.push(DEFAULT_TENANT.to_owned());
        let now = self.clock.now_ms();
        let quotas = self.quotas.all(&self.store, &tenants, now).await?;
        self.metrics.set_quotas(&quotas);
        Ok(())
    }

    /// Live executors per group, and the jobs that failed most in the last
    /// hour (with their tenant).
    async fn refresh_fleet_metrics(&self) -> Result<(), StoreError> {
        let store = &self.store;
        let now = self.clock.now_ms();
        let alive_since = results::alive_since(store, now, self.dead_after).await?;
        let mut groups = Vec::new();
        for group in store.groups().await? {
            let alive = store.group_addresses(&group.name, alive_since).await?.len();
            groups.push((group.name, alive as i64));
        }
        self.metrics.set_executors_alive(&groups);
        let hour_ago = now - 3_600_000;
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
        self.metrics.set_failing_jobs(labelled);
        Ok(())
    }
}
