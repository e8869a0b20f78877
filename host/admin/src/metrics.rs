//! Prometheus metrics of an admin, served at `/metrics`: fires written,
//! start lateness, dispatch failures and backlog, runs by outcome, alarms, and each
//! tenant's quota limits and use (set afresh on every scrape).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QuotaLabel {
    tenant: String,
    quota: String,
}

#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    /// Scheduled fires written as runs by this admin's pre-read.
    pub(crate) fires: Counter,
    /// Execution start minus scheduled time of scheduled runs, seconds.
    pub(crate) lateness: Histogram,
    /// Runs this admin could not hand to an executor.
    pub(crate) dispatch_failures: Counter,
    /// Runs whose time to be sent has come and whose dispatch has not
    /// ended (see [`crate::scheduler::SchedulerConfig::max_backlog`]).
    pub(crate) dispatch_backlog: Gauge,
    /// Pre-read passes that claimed nothing because the backlog was full.
    pub(crate) pre_reads_held: Counter,
    runs: Family<OutcomeLabel, Counter>,
    pub(crate) alarms_sent: Counter,
    pub(crate) alarm_failures: Counter,
    /// Results refused because their receipt did not match the run's
    /// dispatch (forged, or sent by an executor the run never went to).
    pub(crate) results_refused: Counter,
    /// Transactions that wrote callbacks' run ends (callbacks waiting for
    /// the writer together share one).
    pub(crate) run_end_writes: Counter,
    quota_limit: Family<QuotaLabel, Gauge>,
    quota_used: Family<QuotaLabel, Gauge>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("cronbox_admin");
        let fires = Counter::default();
        let lateness = Histogram::new([
            0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
        ]);
        let dispatch_failures = Counter::default();
        let dispatch_backlog = Gauge::default();
        let pre_reads_held = Counter::default();
        let runs = Family::<OutcomeLabel, Counter>::default();
        let alarms_sent = Counter::default();
        let alarm_failures = Counter::default();
        let results_refused = Counter::default();
        let run_end_writes = Counter::default();
        registry.register("fires", "Scheduled fires written as runs", fires.clone());
        registry.register(
            "start_lateness_seconds",
            "Execution start minus scheduled time of scheduled runs",
            lateness.clone(),
        );
        registry.register(
            "dispatch_failures",
            "Runs that could not be handed to an executor",
            dispatch_failures.clone(),
        );
        registry.register(
            "dispatch_backlog",
            "Runs whose time to be sent has come and whose dispatch has not ended",
            dispatch_backlog.clone(),
        );
        registry.register(
            "pre_reads_held",
            "Pre-read passes that claimed no fire because the dispatch backlog was full",
            pre_reads_held.clone(),
        );
        registry.register("runs", "Runs ended, by outcome", runs.clone());
        registry.register(
            "alarms_sent",
            "Failure alarms delivered to webhooks",
            alarms_sent.clone(),
        );
        registry.register(
            "alarm_failures",
            "Failure alarms no attempt delivered",
            alarm_failures.clone(),
        );
        registry.register(
            "results_refused",
            "Results refused: their receipt does not match the run's dispatch",
            results_refused.clone(),
        );
        registry.register(
            "run_end_writes",
            "Transactions that wrote callbacks' run ends (callbacks waiting together share one)",
            run_end_writes.clone(),
        );
        let quota_limit = Family::<QuotaLabel, Gauge>::default();
        let quota_used = Family::<QuotaLabel, Gauge>::default();
        registry.register(
            "tenant_quota_limit",
            "Each tenant's limit of each quota",
            quota_limit.clone(),
        );
        registry.register(
            "tenant_quota_used",
            "Each tenant's use of each quota the admin counts (per-day ones: today, UTC)",
            quota_used.clone(),
        );
        Metrics {
            quota_limit,
            quota_used,
            results_refused,
            run_end_writes,
            registry,
            fires,
            lateness,
            dispatch_failures,
            dispatch_backlog,
            pre_reads_held,
            runs,
            alarms_sent,
            alarm_failures,
        }
    }

    pub(crate) fn run_ended(&self, outcome: &str) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Replaces the quota gauges with `quotas`: (tenant, quota, limit,
    /// use).
    pub(crate) fn set_quotas(&self, quotas: &[(String, cronbox_api::Quota, u64, Option<u64>)]) {
        self.quota_limit.clear();
        self.quota_used.clear();
        let gauge = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
        for (tenant, quota, limit, used) in quotas {
            let label = QuotaLabel {
                tenant: tenant.clone(),
                quota: quota.as_str().to_owned(),
            };
            self.quota_limit.get_or_create(&label).set(gauge(*limit));
            if let Some(used) = used {
                self.quota_used.get_or_create(&label).set(gauge(*used));
            }
        }
    }

    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::error!(%error, "cannot encode metrics");
        }
        text
    }
}
