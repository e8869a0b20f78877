//! What a run is: the trigger the scheduler fired, as the guest sees it.

use serde::{Deserialize, Serialize};

/// Why a run was started (mirrors `trigger-kind` in `wit/job.wit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// Fired by the job's schedule.
    Schedule,
    /// Started by a person.
    Manual,
    /// Started through the HTTP API.
    Api,
    /// A retry of an earlier failed run.
    Retry,
    /// Started because a parent job succeeded.
    Parent,
    /// A late fire run once under the FIRE_ONCE_NOW misfire strategy.
    Misfire,
    /// A past instant of the schedule, run on request (a backfill); the
    /// guest sees it as `schedule`, with that instant.
    Backfill,
    /// A node of a workflow run; the guest sees it as `parent` (its
    /// parents in the workflow started it).
    Workflow,
}

impl TriggerKind {
    /// Every kind.
    pub const ALL: [TriggerKind; 8] = [
        TriggerKind::Schedule,
        TriggerKind::Manual,
        TriggerKind::Api,
        TriggerKind::Retry,
        TriggerKind::Parent,
        TriggerKind::Misfire,
        TriggerKind::Backfill,
        TriggerKind::Workflow,
    ];

    /// The wire name (`schedule`, `manual`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Schedule => "schedule",
            TriggerKind::Manual => "manual",
            TriggerKind::Api => "api",
            TriggerKind::Retry => "retry",
            TriggerKind::Parent => "parent",
            TriggerKind::Misfire => "misfire",
            TriggerKind::Backfill => "backfill",
            TriggerKind::Workflow => "workflow",
        }
    }

    /// Whether a run of this kind is a fire of the job's schedule (on time
    /// or as a misfire): the kinds that are unique per (job, instant,
    /// shard), that a stopped job does not run, and that carry a FIX_DELAY
    /// chain.
    pub fn is_scheduled_fire(self) -> bool {
        matches!(self, TriggerKind::Schedule | TriggerKind::Misfire)
    }
}

impl std::fmt::Display for TriggerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TriggerKind {
    type Err = UnknownName;

    fn from_str(text: &str) -> Result<Self, UnknownName> {
        TriggerKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| UnknownName::new("trigger kind", text))
    }
}

/// A name that is not one of an enumeration's (a decode error, never a
/// silent default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What was being named (`trigger kind`).
    pub what: &'static str,
    /// The name found.
    pub found: String,
}

impl UnknownName {
    pub fn new(what: &'static str, found: &str) -> Self {
        UnknownName {
            what,
            found: found.to_owned(),
        }
    }
}

impl std::fmt::Display for UnknownName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown {} {:?}", self.what, self.found)
    }
}

impl std::error::Error for UnknownName {}

/// The run the guest is executing (mirrors `trigger` in `wit/job.wit`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// The job this run belongs to.
    pub job_id: u64,
    /// This run.
    pub run_id: u64,
    /// Free-form parameter (empty when none).
    pub param: String,
    /// This run's shard, `0..shard_total`.
    pub shard_index: u32,
    /// Number of shards (at least 1).
    pub shard_total: u32,
    /// Why the run was started.
    pub kind: TriggerKind,
    /// When the run was scheduled for, in ms since the Unix epoch (UTC).
    pub scheduled_at_ms: i64,
    /// 0 for the first attempt, n for the n-th retry.
    pub attempt: u32,
}

impl Trigger {
    /// A manual trigger for a local run: job 0, run 0, one shard, now.
    pub fn manual(param: impl Into<String>, scheduled_at_ms: i64) -> Self {
        Trigger {
            job_id: 0,
            run_id: 0,
            param: param.into(),
            shard_index: 0,
            shard_total: 1,
            kind: TriggerKind::Manual,
            scheduled_at_ms,
            attempt: 0,
        }
    }
}
