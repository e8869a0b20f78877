//! The series of ended runs kept per tenant, and per job for the jobs the
//! operator marks (`--job-metrics`): runs by outcome, and histograms of
//! start lateness, duration, fuel and peak memory. One [`RunSeries`] type
//! serves both, named `cronbox_admin_tenant_*` and `cronbox_admin_job_*`.

use std::collections::HashMap;
use std::sync::RwLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::model::JobId;

/// What an ended run measured (see [`super::Metrics::run_measured`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RunMeasures {
    pub(crate) lateness_seconds: Option<f64>,
    pub(crate) duration_seconds: Option<f64>,
    pub(crate) fuel: Option<i64>,
    pub(crate) peak_memory_bytes: Option<i64>,
}

pub(super) fn lateness_histogram() -> Histogram {
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
    Histogram::new(exponential_buckets(1e3, 10.0, 10))
}

fn memory_histogram() -> Histogram {
    Histogram::new(exponential_buckets(f64::from(1 << 20), 4.0, 7))
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantLabel {
    pub(super) tenant: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantOutcomeLabel {
    tenant: String,
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobLabel {
    tenant: String,
    /// `ID name`.
    job: String,
}

impl JobLabel {
    /// Job `id` named `name` of `tenant`, labelled `ID name`.
    pub(super) fn new(tenant: String, id: JobId, name: &str) -> JobLabel {
        JobLabel {
            tenant,
            job: format!("{id} {name}"),
        }
    }

    /// `ID name`.
    pub(super) fn into_job(self) -> String {
        self.job
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct JobOutcomeLabel {
    tenant: String,
    job: String,
    outcome: String,
}

/// The labels of one [`RunSeries`], and the same with the outcome.
pub(crate) trait RunLabels:
    Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static
{
    type WithOutcome: Clone
        + std::hash::Hash
        + Eq
        + EncodeLabelSet
        + std::fmt::Debug
        + Send
        + Sync
        + 'static;
    fn with_outcome(&self, outcome: &str) -> Self::WithOutcome;
}

impl RunLabels for TenantLabel {
    type WithOutcome = TenantOutcomeLabel;
    fn with_outcome(&self, outcome: &str) -> TenantOutcomeLabel {
        TenantOutcomeLabel {
            tenant: self.tenant.clone(),
            outcome: outcome.to_owned(),
        }
    }
}

impl RunLabels for JobLabel {
    type WithOutcome = JobOutcomeLabel;
    fn with_outcome(&self, outcome: &str) -> JobOutcomeLabel {
        JobOutcomeLabel {
            tenant: self.tenant.clone(),
            job: self.job.clone(),
            outcome: outcome.to_owned(),
        }
    }
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Runs by outcome and four histograms, labelled by `L`.
#[derive(Debug)]
pub(crate) struct RunSeries<L: RunLabels> {
    runs: Family<L::WithOutcome, Counter>,
    lateness: Histograms<L>,
    duration: Histograms<L>,
    fuel: Histograms<L>,
    memory: Histograms<L>,
}

impl<L: RunLabels> RunSeries<L> {
    /// Registers the series as `{scope}_runs`, `{scope}_start_lateness_seconds`,
    /// ...; `by` ends their help ("by tenant").
    pub(super) fn register(registry: &mut Registry, scope: &str, by: &str) -> Self {
        let runs = Family::<L::WithOutcome, Counter>::default();
        registry.register(
            format!("{scope}_runs"),
            format!("Runs ended, {by} and outcome"),
            runs.clone(),
        );
        let mut histograms = |name: &str, help: &str, make: fn() -> Histogram| {
            let family = Histograms::<L>::new_with_constructor(make);
            registry.register(
                format!("{scope}_{name}"),
                format!("{help}, {by}"),
                family.clone(),
            );
            family
        };
        RunSeries {
            runs,
            lateness: histograms(
                "start_lateness_seconds",
                "Execution start minus scheduled time of scheduled runs",
                lateness_histogram,
            ),
            duration: histograms(
                "run_duration_seconds",
                "Duration of ended runs that started",
                duration_histogram,
            ),
            fuel: histograms(
                "run_fuel",
                "Fuel consumed by runs that report it",
                fuel_histogram,
            ),
            memory: histograms(
                "run_peak_memory_bytes",
                "Peak memory of runs that report it",
                memory_histogram,
            ),
        }
    }

    pub(super) fn ended(&self, labels: &L, outcome: &str) {
        self.runs.get_or_create(&labels.with_outcome(outcome)).inc();
    }

    pub(super) fn measured(&self, labels: &L, measured: &RunMeasures) {
        if let Some(late) = measured.lateness_seconds {
            self.lateness.get_or_create(labels).observe(late);
        }
        if let Some(seconds) = measured.duration_seconds {
            self.duration.get_or_create(labels).observe(seconds);
        }
        if let Some(fuel) = measured.fuel {
            self.fuel.get_or_create(labels).observe(fuel as f64);
        }
        if let Some(bytes) = measured.peak_memory_bytes {
            self.memory.get_or_create(labels).observe(bytes as f64);
        }
    }
}

/// A job the operator wants its own series for: by id, or by tenant and
/// name (`--job-metrics 42,acme/nightly-report`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobMark {
    Id(JobId),
    Named { tenant: String, name: String },
}

impl std::str::FromStr for JobMark {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        if let Ok(id) = text.parse::<JobId>() {
            return Ok(JobMark::Id(id));
        }
        match text.split_once('/') {
            Some((tenant, name)) if !tenant.is_empty() && !name.is_empty() => Ok(JobMark::Named {
                tenant: tenant.to_owned(),
                name: name.to_owned(),
            }),
            _ => Err(format!(
                "{text:?} is not a job: give its id (42) or its tenant and name (acme/nightly-report)"
            )),
        }
    }
}

/// The marked jobs as found in the database (at start and at each
/// scrape): their ids and labels. Empty, and never locked, when nothing is
/// marked.
#[derive(Debug)]
pub(super) struct MarkedJobs {
    pub(super) marks: Vec<JobMark>,
    found: RwLock<HashMap<JobId, JobLabel>>,
}

impl MarkedJobs {
    pub(super) fn new(marks: Vec<JobMark>) -> Self {
        MarkedJobs {
            marks,
            found: RwLock::default(),
        }
    }

    pub(super) fn label(&self, job: JobId) -> Option<JobLabel> {
        if self.marks.is_empty() {
            return None;
        }
        let found = self
            .found
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        found.get(&job).cloned()
    }

    pub(super) fn set(&self, jobs: HashMap<JobId, JobLabel>) {
        *self
            .found
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = jobs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_job_is_an_id_or_a_tenant_and_name() {
        assert_eq!("42".parse::<JobMark>(), Ok(JobMark::Id(JobId(42))));
        assert_eq!(
            " acme/nightly-report".parse::<JobMark>(),
            Ok(JobMark::Named {
                tenant: "acme".to_owned(),
                name: "nightly-report".to_owned()
            })
        );
        for bad in ["nightly", "/x", "acme/", ""] {
            let error = bad.parse::<JobMark>().unwrap_err();
            assert!(error.contains("tenant and name"), "{bad}: {error}");
        }
    }
}
