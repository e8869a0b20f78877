//! Prometheus metrics of an admin, served at `/metrics`: fires written,
//! start lateness, dispatch failures and backlog, runs by outcome, alarms;
//! per tenant, runs by outcome and histograms of start lateness, duration,
//! fuel and peak memory, and the same per job for the jobs the operator
//! marks (`run_series.rs`); and, set afresh on every scrape, each tenant's
//! quota limits and use, the live executors of each group, the jobs that
//! failed most in the last hour (at most [`FAILING_JOBS`]) and whether the
//! database answers. No series is per run, and a job is a label only
//! when the operator marks it or among the most failing few: cardinality
//! is bounded by tenants, groups and the operator's list.

mod run_series;

use std::collections::HashMap;

pub use run_series::JobMark;
pub(crate) use run_series::RunMeasures;
use run_series::{JobLabel, MarkedJobs, RunSeries, TenantLabel, lateness_histogram};

use crate::model::JobId;
use crate::store::{Store, StoreError};

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
pub(crate) struct GroupLabel {
    group: String,
}

/// How many of the most failing jobs of the last hour are labelled.
pub(crate) const FAILING_JOBS: i64 = 20;

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
    tenants: RunSeries<TenantLabel>,
    jobs: RunSeries<JobLabel>,
    marked_jobs: MarkedJobs,
    executors_alive: Family<GroupLabel, Gauge>,
    job_failures: Family<JobLabel, Gauge>,
    /// 1 while the database answers (read at each scrape), else 0.
    pub(crate) ready: Gauge,
}

impl Metrics {
    /// The admin's metrics; `marked_jobs` get series of their own.
    pub(crate) fn new(marked_jobs: Vec<JobMark>) -> Self {
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
        let tenants = RunSeries::register(&mut registry, "tenant", "by tenant");
        let jobs = RunSeries::register(
            &mut registry,
            "job",
            "by job, for the jobs marked with --job-metrics",
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
            tenants,
            jobs,
            marked_jobs: MarkedJobs::new(marked_jobs),
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

    /// A run of `job` of `tenant` ended with `outcome`.
    pub(crate) fn run_ended(&self, tenant: &str, job: JobId, outcome: &str) {
        self.runs
            .get_or_create(&OutcomeLabel {
                outcome: outcome.to_owned(),
            })
            .inc();
        let tenant = TenantLabel {
            tenant: tenant.to_owned(),
        };
        self.tenants.ended(&tenant, outcome);
        if let Some(job) = self.marked_jobs.label(job) {
            self.jobs.ended(&job, outcome);
        }
    }

    /// The label of `job`'s own series (`ID name`) when the operator marked
    /// it (`--job-metrics`), else `None`.
    pub(crate) fn marked_job(&self, job: JobId) -> Option<String> {
        self.marked_jobs.label(job).map(JobLabel::into_job)
    }

    /// What an ended run of `job` of `tenant` measured: its start lateness
    /// (a scheduled run), duration, fuel and peak memory, where known.
    pub(crate) fn run_measured(&self, tenant: &str, job: JobId, measured: RunMeasures) {
        if let Some(late) = measured.lateness_seconds {
            self.lateness.observe(late);
        }
        let tenant = TenantLabel {
            tenant: tenant.to_owned(),
        };
        self.tenants.measured(&tenant, &measured);
        if let Some(job) = self.marked_jobs.label(job) {
            self.jobs.measured(&job, &measured);
        }
    }

    /// Finds the jobs the operator marked in `store` (by id, or by tenant
    /// and name) and labels them `ID name` from now on. Called at start
    /// and at each scrape: a job created or renamed since is counted from
    /// the next one.
    pub(crate) async fn find_marked_jobs(&self, store: &Store) -> Result<(), StoreError> {
        if self.marked_jobs.marks.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::new();
        let mut jobs = Vec::new();
        for mark in &self.marked_jobs.marks {
            match mark {
                JobMark::Id(id) => ids.push(*id),
                JobMark::Named { tenant, name } => {
                    jobs.extend(store.jobs_named(tenant, name).await?)
                }
            }
        }
        jobs.extend(store.jobs_by_id(&ids).await?.into_values());
        let found: HashMap<JobId, JobLabel> = jobs
            .into_iter()
            .map(|job| (job.id, JobLabel::new(job.tenant, job.id, &job.name)))
            .collect();
        self.marked_jobs.set(found);
        Ok(())
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

    /// Replaces the most failing jobs: (tenant, id, name, failures).
    pub(crate) fn set_failing_jobs(&self, jobs: Vec<(String, JobId, String, i64)>) {
        self.job_failures.clear();
        for (tenant, id, name, failures) in jobs {
            self.job_failures
                .get_or_create(&JobLabel::new(tenant, id, &name))
                .set(failures);
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
