//! What a run is: the trigger the scheduler fired, as the guest sees it.

use serde::{Deserialize, Serialize};

/// Why a run was started (mirrors `trigger-kind` in `wit/job.wit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
}

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
