//! A job's schedule beyond its expression, as the API reads and answers it:
//! the rules (window, excluded dates, calendars, jitter, overlap), a
//! preview of fires, pauses, backfills and tenants' calendars.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::JobId;

/// `GET /api/v1/schedule-preview`: the next fires of a schedule before any
/// job has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SchedulePreview {
    /// Each fire in UTC (RFC 3339, milliseconds).
    pub fires: Vec<String>,
    /// The same fires in the schedule's time zone, with its offset.
    pub local: Vec<String>,
    /// The time zone they are shown in.
    pub time_zone: String,
}

/// `GET /api/v1/alarm-check`: a webhook the admin would send a job's
/// alarms to (one it would not is refused, 422, naming `alarm_url`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlarmCheck {
    pub url: String,
    /// The URL names a host rather than an address: the admin resolves it
    /// when it calls, and checks its allowed networks then.
    pub checked_when_called: bool,
}

/// What changes a schedule's fires whatever its type: a window, a calendar
/// of excluded dates, jitter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRules {
    /// No fire before this instant (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starts_at_ms: Option<i64>,
    /// No fire after this instant; the schedule ends there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at_ms: Option<i64>,
    /// Local dates (`YYYY-MM-DD`, in the job's time zone) on which it does
    /// not fire, at most 1,000.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_dates: Vec<String>,
    /// Names of the tenant's shared calendars whose dates it does not
    /// fire on either (at most 8; each must exist when the job is saved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<String>,
    /// Each fire's run is written for up to this many milliseconds after
    /// its planned instant (0 to 300,000), by an amount fixed for the job
    /// and the instant: jobs due at the same second spread out.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 300000)]
    pub jitter_ms: i64,
    /// What a scheduled fire does while a run of the job is in progress
    /// anywhere: ALLOW (default), SKIP, BUFFER_ONE or CANCEL_OTHER.
    #[serde(default, skip_serializing_if = "is_allow")]
    pub overlap: crate::OverlapPolicy,
}

fn is_allow(policy: &crate::OverlapPolicy) -> bool {
    *policy == crate::OverlapPolicy::Allow
}

/// Who paused a job, why, since and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Pause {
    /// The user (or which kind of token) that paused it.
    pub by: String,
    pub note: String,
    pub paused_at_ms: i64,
    /// When it resumes by itself; absent: until someone starts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
}

/// `POST /api/v1/jobs/{id}/pause`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// Why (at most 1,024 bytes).
    #[serde(default)]
    #[schema(max_length = 1024)]
    pub note: String,
    /// When to resume by itself (ms since the epoch, in the future); absent:
    /// paused until started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
}

/// `POST /api/v1/jobs/{id}/backfill`: run the job's schedule over a past
/// range.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// The range's start (exclusive), ms since the epoch.
    pub from_ms: i64,
    /// Its end (inclusive), not in the future.
    pub to_ms: i64,
    /// Runs written per second (1 to 1,000; default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub per_second: Option<i64>,
}

/// A backfill and how far it has gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Backfill {
    pub id: i64,
    pub tenant: String,
    pub job_id: JobId,
    pub from_ms: i64,
    pub to_ms: i64,
    pub per_second: i64,
    /// Instants of the schedule in the range.
    pub planned: i64,
    /// Runs written so far (an instant another backfill already ran is
    /// not written again).
    pub written: i64,
    /// `running`, `done` or `cancelled`.
    pub status: String,
    pub created_by: String,
    pub created_at_ms: i64,
}

/// A tenant's calendar: dates its jobs that name it do not fire on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Calendar {
    pub tenant: String,
    pub name: String,
    /// `YYYY-MM-DD`, sorted.
    pub dates: Vec<String>,
    pub updated_at_ms: i64,
}

/// `PUT /api/v1/calendars/{name}`: the dates (local dates in each job's
/// zone), at most 1,000.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CalendarDates {
    pub dates: Vec<String>,
}
