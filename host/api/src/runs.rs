//! Runs: a run as stored and answered, pages of them, counts and daily
//! reports, and a kill's answer.

use cronbox_protocol::TriggerKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{AlarmState, Digest, JobId, RunId, RunOutcome, RunStatus};

/// A run as stored and answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Run {
    pub id: RunId,
    pub tenant: String,
    pub job_id: JobId,
    /// The job's name, where an answer carries it (runs listed and read;
    /// absent from callbacks and stored rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
    /// The module version that ran, as `NAME@VERSION`, where an answer
    /// carries it (a run read alone; its latest version with that
    /// content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    pub kind: TriggerKind,
    pub scheduled_at_ms: i64,
    pub shard_index: i64,
    pub shard_total: i64,
    /// 0 for the first try, then 1, 2, ... for retries.
    pub attempt: i64,
    pub param: String,
    pub status: RunStatus,
    /// The executor that accepted it.
    pub executor: Option<String>,
    /// The content that ran (or will); empty for a run of a legacy job
    /// (xxl-job executors run a handler, not a module).
    pub module_digest: Digest,
    /// How it ended.
    pub outcome: Option<RunOutcome>,
    pub code: Option<i64>,
    pub message: Option<String>,
    pub created_at_ms: i64,
    pub dispatched_at_ms: Option<i64>,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    pub alarm_status: AlarmState,
    pub alarm_message: Option<String>,
    /// Fuel the run consumed (absent without a fuel budget, or before it
    /// ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuel_consumed: Option<i64>,
    /// The most linear memory its instance held, bytes (absent before it
    /// ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<i64>,
    /// The OpenTelemetry trace the run belongs to (32 hex digits), when
    /// the admin exports traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The run's trace in the operator's trace viewer (the admin's
    /// `--trace-url` with the trace id in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_url: Option<String>,
}

impl Run {
    /// A run of a legacy job, sent to an xxl-job executor (no module).
    pub fn is_legacy(&self) -> bool {
        self.module_digest.as_str().is_empty()
    }
}

/// A page of runs, newest first; `next_before` is the cursor of the next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RunPage {
    pub runs: Vec<Run>,
    pub next_before: Option<RunId>,
}

/// Run counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunCounts {
    pub success: i64,
    pub failed: i64,
    pub running: i64,
    pub cancelled: i64,
}

/// One day's run counts of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DailyReport {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub success: i64,
    pub failed: i64,
    /// Written and not ended when the report was refreshed.
    pub running: i64,
    /// Never ran: the job was stopped or killed while they waited.
    pub cancelled: i64,
}

/// Daily run counts over a range of days, and their totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Report {
    pub days: Vec<DailyReport>,
    pub totals: RunCounts,
}

/// A kill of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RunKilled {
    pub run_id: RunId,
    /// Whether an executor stopped it (false: it had ended).
    pub killed: bool,
}

/// Runs of one hour, by how they stand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HourCounts {
    /// The hour's start, ms since the epoch.
    pub start_ms: i64,
    pub success: i64,
    pub failed: i64,
    /// Waiting or running.
    pub running: i64,
    pub cancelled: i64,
}

/// A job among those that failed most.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailingJob {
    pub job_id: JobId,
    /// Empty if the job has been deleted.
    pub name: String,
    pub failures: i64,
}

/// `GET /api/v1/dashboard`: the state of the caller's tenant (every
/// tenant's, for the operator) at a glance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Dashboard {
    /// When this was read, ms since the epoch.
    pub now_ms: i64,
    /// The last 24 hours, oldest first, each hour counted from the runs
    /// stored (runs deleted by retention are not).
    pub hours: Vec<HourCounts>,
    /// The last 30 days, oldest first, from the daily reports (exact
    /// after runs are deleted).
    pub days: Vec<DailyReport>,
    /// Successes over ended runs (successes and failures) in the last
    /// 24 hours; absent when none ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_rate: Option<f64>,
    /// Start lateness of the newest scheduled runs (up to
    /// `lateness_sample`) of the last 24 hours: median and 99th
    /// percentile, ms; absent when none started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness_p50_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness_p99_ms: Option<i64>,
    /// How many runs the lateness was read from.
    pub lateness_sample: i64,
    /// Executors whose heartbeat is recent.
    pub executors_online: i64,
    /// Runs running now, or due and waiting to be sent.
    pub runs_in_progress: i64,
    /// The jobs with the most failed runs in the last 7 days, most first.
    pub top_failing: Vec<FailingJob>,
}
