//! The typed view of the run now executing, and the job's durable state.

use crate::__private::bindings::cronbox::job::context as host;

/// Why a run was started.
pub use host::TriggerKind;

/// The run now executing: its trigger, and access to the job's state.
///
/// Passed to [`Job::execute`](crate::Job::execute).
#[derive(Debug, Clone)]
pub struct Context {
    trigger: host::Trigger,
}

/// Which part of a broadcast fire this run handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This run's shard, `0..total`.
    pub index: u32,
    /// How many shards the fire was split into (1 unless broadcast).
    pub total: u32,
}

impl Context {
    /// Reads the current trigger from the host.
    pub fn current() -> Self {
        Context {
            trigger: host::current(),
        }
    }

    /// The trigger's parameter (empty when none was given).
    pub fn param(&self) -> &str {
        &self.trigger.param
    }

    /// This run's shard.
    pub fn shard(&self) -> Shard {
        Shard {
            index: self.trigger.shard_index,
            total: self.trigger.shard_total,
        }
    }

    /// The job's id.
    pub fn job_id(&self) -> u64 {
        self.trigger.job_id
    }

    /// This run's id.
    pub fn run_id(&self) -> u64 {
        self.trigger.run_id
    }

    /// 0 for a first attempt, n for the n-th retry.
    pub fn attempt(&self) -> u32 {
        self.trigger.attempt
    }

    /// Why the run was started.
    pub fn kind(&self) -> TriggerKind {
        self.trigger.kind
    }

    /// When the run was scheduled for, in ms since the Unix epoch (UTC).
    pub fn scheduled_at_ms(&self) -> i64 {
        self.trigger.scheduled_at_ms
    }

    /// The job's state for `key`, including this run's own writes.
    pub fn get(&self, key: &str) -> Option<String> {
        host::get(key)
    }

    /// Writes `key`; committed only if this run succeeds.
    pub fn set(&self, key: &str, value: &str) -> Result<(), StateError> {
        host::set(key, value).map_err(StateError)
    }

    /// Removes `key`; committed only if this run succeeds.
    pub fn remove(&self, key: &str) {
        host::remove(key)
    }

    /// The job's configuration for `key` (set in the job's definition,
    /// or with `cronbox run --job-config KEY=VALUE`); none when it is not set.
    pub fn config(&self, key: &str) -> Option<String> {
        crate::__private::config_bindings::wasi::config::store::get(key)
            .ok()
            .flatten()
    }

    /// The value of the tenant's secret `name`, when the job's definition
    /// references it (`"secrets": ["NAME"]`, or `cronbox run --secret
    /// NAME=VALUE`); none otherwise. Read through `wasi:config/store`, as
    /// configuration is. The value is masked (`********`) wherever the
    /// run prints it: its log and its result message.
    pub fn secret(&self, name: &str) -> Option<String> {
        self.config(name)
    }
}

/// A state write the host refused because of its size limits.
#[derive(Debug, Clone)]
pub struct StateError(host::StateError);

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            host::StateError::KeyTooLarge(limit) => {
                write!(f, "state key is empty or longer than {limit} bytes")
            }
            host::StateError::ValueTooLarge(limit) => {
                write!(f, "state value is longer than {limit} bytes")
            }
            host::StateError::QuotaExceeded(limit) => {
                write!(f, "job state would exceed its quota of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for StateError {}
