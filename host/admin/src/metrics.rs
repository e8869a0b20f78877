//! Prometheus metrics of an admin, served at `/metrics`: fires written,
//! start lateness, dispatch failures and backlog, runs by outcome, alarms;
//! per tenant, runs by outcome and histograms of start lateness, duration,
//! fuel and peak memory; and, set afresh on every scrape, each tenant's
//! quota limits and use, the live executors of each group, the jobs that
//! failed most in the last hour (at most [`FAILING_JOBS`]) and whether the
//! database answers. No series is per run, and a job is a label only among
//! the most failing few: cardinality is bounded by tenants and groups.

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
pub(crate) struct TenantOutcomeLabel {
    tenant: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantLabel {
    tenant: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GroupLabel {
    group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobLabel {
    tenant: String,
    /// `ID name`.
    job: String,
}

/// A histogram per tenant.
type PerTenant = Family<TenantLabel, Histogram, fn() -> Histogram>;

/// How many of the most failing jobs of the last hour are labelled.
pub(crate) const FAILING_JOBS: i64 = 20;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct QuotaLabel {
    tenant: String,
    quota: String,
}

/// What an ended run measured (see [`Metrics::run_measured`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunMeasures {
    pub(crate) lateness_seconds: Option<f64>,
    pub(crate) duration_seconds: Option<f64>,
    pub(crate) fuel: Option<i64>,
    pub(crate) peak_memory_bytes: Option<i64>,
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
    tenant_runs: Family<TenantOutcomeLabel, Counter>,
    tenant_lateness: PerTenant,
    tenant_duration: PerTenant,
    tenant_fuel: PerTenant,
    tenant_memory: PerTenant,
    executors_alive: Family<GroupLabel, Gauge>,
    job_failures: Family<JobLabel, Gauge>,
    /// 1 while the database answers (read at each scrape), else 0.
    pub(crate) ready: Gauge,
}

fn lateness_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0,
    ])
}

fn duration_histogram() -> Histogram {
    Histogram::new([
        0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
    ])
}

fn fuel_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        1e3, 10.0, 10,
    ))
}

fn memory_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        f64::from(1 << 20),
        4.0,
        7,
    ))
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("cronbox_admin");
        let fires = Counter::default();
        let lateness = lateness_histogram();
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
        let tenant_runs = Family::<TenantOutcomeLabel, Counter>::default();
        registry.register(
            "tenant_runs",
            "Runs ended, by tenant and outcome",
            tenant_runs.clone(),
        );
        let per_tenant =
            |registry: &mut Registry, name: &str, help: &str, make: fn() -> Histogram| {
                let family = PerTenant::new_with_constructor(make);
                registry.register(name, help, family.clone());
                family
            };
        let tenant_lateness = per_tenant(
            &mut registry,
            "tenant_start_lateness_seconds",
            "Execution start minus scheduled time of scheduled runs, by tenant",
            lateness_histogram,
        );
        let tenant_duration = per_tenant(
            &mut registry,
            "tenant_run_duration_seconds",
            "Duration of ended runs that started, by tenant",
            duration_histogram,
        );
        let tenant_fuel = per_tenant(
            &mut registry,
            "tenant_run_fuel",
            "Fuel consumed by runs that report it, by tenant",
            fuel_histogram,
        );
        let tenant_memory = per_tenant(
            &mut registry,
            "tenant_run_peak_memory_bytes",
            "Peak memory of runs that report it, by tenant",
            memory_histogram,
        );
        let executors_alive = Family::<GroupLabel, Gauge>::default();
        registry.register(
            "executors_alive",
            "Executors beating within the dead-after time, by group (MANUAL groups: their addresses)",
            executors_alive.clone(),
        );
        let job_failures = Family::<JobLabel, Gauge>::default();
        registry.register(
            "job_failures_last_hour",
            "Failed runs written in the last hour of the jobs that failed most (at most 20 jobs)",
            job_failures.clone(),
        );
        let ready = Gauge::default();
        registry.register(
            "ready",
            "1 while the admin's database answers, else 0",
            ready.clone(),
        );
        Metrics {
            tenant_runs,
            tenant_lateness,
            tenant_duration,
            tenant_fuel,
            tenant_memory,
            executors_alive,
            job_failures,
            ready,
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

    /// A run of `tenant` ended with `outcome`.
    pub(crate) fn run_ended(&self, tenant: &str, outcome: &str) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            })
            .inc();
        self.tenant_runs
            .get_or_create(&TenantOutcomeLabel {
                tenant: tenant.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// What an ended run of `tenant` measured: its start lateness (a
    /// scheduled run), duration, fuel and peak memory, where known.
    pub(crate) fn run_measured(&self, tenant: &str, measured: RunMeasures) {
        let label = TenantLabel {
            tenant: tenant.to_owned(),
        };
        if let Some(late) = measured.lateness_seconds {
            self.lateness.observe(late);
            self.tenant_lateness.get_or_create(&label).observe(late);
        }
        if let Some(seconds) = measured.duration_seconds {
            self.tenant_duration.get_or_create(&label).observe(seconds);
        }
        if let Some(fuel) = measured.fuel {
            self.tenant_fuel.get_or_create(&label).observe(fuel as f64);
        }
        if let Some(bytes) = measured.peak_memory_bytes {
            self.tenant_memory
                .get_or_create(&label)
                .observe(bytes as f64);
        }
    }

    /// Replaces the live executor counts: (group, executors alive).
    pub(crate) fn set_executors_alive(&self, groups: &[(String, i64)]) {
        self.executors_alive.clear();
        for (group, alive) in groups {
            self.executors_alive
                .get_or_create(&GroupLabel {
                    group: group.clone(),
                })
                .set(*alive);
        }
    }

    /// Replaces the most failing jobs: (tenant, `ID name`, failures).
    pub(crate) fn set_failing_jobs(&self, jobs: &[(String, String, i64)]) {
        self.job_failures.clear();
        for (tenant, job, failures) in jobs {
            self.job_failures
                .get_or_create(&JobLabel {
                    tenant: tenant.clone(),
                    job: job.clone(),
                })
                .set(*failures);
        }
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
