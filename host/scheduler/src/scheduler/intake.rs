//! What the HTTP layer hands the firing engine that is not a change: the
//! results executors send (cronbox's and xxl-job's) and the legacy group
//! an xxl-job executor registers in; and the metrics page, which reads
//! the database, not the scheduler ([`MetricsScrape`]). [`Intake`] is all
//! the API holds of the engine; changes go through the services.

use super::*;

/// The engine's intake (cheap to clone).
#[derive(Debug, Clone)]
pub struct Intake(Arc<Scheduler>, MetricsScrape);

impl Intake {
    pub fn of(scheduler: &Arc<Scheduler>) -> Intake {
        Intake(scheduler.clone(), MetricsScrape::of(scheduler))
    }

    /// Results from a cronbox executor that may deliver those of
    /// `from_groups` (every group: none); see [`Scheduler::accept_results`].
    pub async fn accept_results(
        &self,
        results: Vec<RunResult>,
        from_groups: Option<&[String]>,
    ) -> Result<(), StoreError> {
        self.0.accept_results(results, from_groups).await
    }

    /// Results from xxl-job executors that presented `token`; see
    /// [`Scheduler::accept_legacy_results`].
    pub async fn accept_legacy_results(
        &self,
        group_name: Option<&str>,
        token: &str,
        items: Vec<crate::legacy::wire::CallbackItem>,
    ) -> Result<(), StoreError> {
        self.0.accept_legacy_results(group_name, token, items).await
    }

    /// Legacy group `name`, if there is one.
    pub async fn legacy_group(
        &self,
        name: &str,
    ) -> Result<Option<crate::store::LegacyGroup>, StoreError> {
        self.0.legacy_group(name).await
    }

    /// The metrics as OpenMetrics text (see [`MetricsScrape::metrics_text`]).
    pub async fn metrics_text(&self) -> String {
        self.1.metrics_text().await
    }
}
