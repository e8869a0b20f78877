//! The API's enumerations that travel and are stored as text: each has
//! one wire name, parses strictly (an unknown name is an error naming what
//! was being named, never a silent default) and serializes under the same
//! name.

use std::str::FromStr;

use cronbox_protocol::UnknownName;
use serde::{Deserialize, Serialize};

/// Defines an enum of wire names with `ALL`, `as_str`, `FromStr`,
/// `Display`, serde and an OpenAPI schema under those names.
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stored and wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;

            fn from_str(text: &str) -> Result<Self, UnknownName> {
                $name::ALL
                    .iter()
                    .copied()
                    .find(|value| value.as_str() == text)
                    .ok_or_else(|| UnknownName::new($what, text))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        // By hand: the derive cannot read the wire names through the macro.
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text,)*]))
                    .into()
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
        }
    };
}

named_enum! {
    /// Where a run is in its life.
    RunStatus, "run status" {
        /// Written, not yet accepted by an executor.
        Pending => "pending",
        /// Accepted by an executor; its result is awaited.
        Dispatched => "dispatched",
        /// Ended successfully.
        Success => "success",
        /// Ended in any other way (the outcome says how).
        Failed => "failed",
        /// Never ran: its job was stopped or killed while it waited. Not a
        /// failure: no alarm, no retry, counted apart.
        Cancelled => "cancelled",
    }
}

impl RunStatus {
    /// Whether the run has not ended yet.
    pub fn is_open(self) -> bool {
        matches!(self, RunStatus::Pending | RunStatus::Dispatched)
    }
}

named_enum! {
    /// How a run ended: what the executor reported (the protocol's
    /// `OutcomeKind`), or what the admin decided for a run that did not
    /// report (`lost`, `cancelled`, `quota_exceeded`) or whose report it
    /// could not take (`state_conflict`, `state_unstorable`).
    RunOutcome, "run outcome" {
        /// `execute` returned ok.
        Success => "success",
        /// `execute` (or `init`) returned an error.
        Failed => "failed",
        /// Stopped at its deadline.
        Timeout => "timeout",
        /// Killed on request.
        Killed => "killed",
        /// Replaced by a newer run of its job (COVER_EARLY).
        Covered => "covered",
        /// Used up its fuel.
        OutOfFuel => "out_of_fuel",
        /// Asked for memory past its limit.
        MemoryLimit => "memory_limit",
        /// Trapped (a panic, a stack overflow, ...).
        Trap => "trap",
        /// Not run: refused by a block strategy, a module that could not
        /// load, no executor, ...
        Rejected => "rejected",
        /// Dispatched, and its executor stopped answering before a result.
        Lost => "lost",
        /// Never ran: its job was stopped or killed while it waited.
        Cancelled => "cancelled",
        /// Not run, or its changes dropped: its tenant was past a quota.
        QuotaExceeded => "quota_exceeded",
        /// Succeeded, but another run changed the state it read or wrote
        /// first: its changes were not committed (a failure, retried).
        StateConflict => "state_conflict",
        /// Succeeded, but its state changes hold text the database cannot
        /// store (U+0000): not committed.
        StateUnstorable => "state_unstorable",
    }
}

impl RunOutcome {
    /// Whether a person or the system ended the run on purpose: no alarm,
    /// no retry.
    pub fn is_deliberate(self) -> bool {
        matches!(
            self,
            RunOutcome::Killed | RunOutcome::Covered | RunOutcome::Cancelled
        )
    }
}

/// A run's end before anything is known of it counts as failed.
impl Default for RunOutcome {
    fn default() -> RunOutcome {
        RunOutcome::Failed
    }
}

impl From<cronbox_protocol::OutcomeKind> for RunOutcome {
    fn from(kind: cronbox_protocol::OutcomeKind) -> RunOutcome {
        use cronbox_protocol::OutcomeKind as Kind;
        match kind {
            Kind::Success => RunOutcome::Success,
            Kind::Failed => RunOutcome::Failed,
            Kind::Timeout => RunOutcome::Timeout,
            Kind::Killed => RunOutcome::Killed,
            Kind::Covered => RunOutcome::Covered,
            Kind::OutOfFuel => RunOutcome::OutOfFuel,
            Kind::MemoryLimit => RunOutcome::MemoryLimit,
            Kind::Trap => RunOutcome::Trap,
            Kind::Rejected => RunOutcome::Rejected,
        }
    }
}

named_enum! {
    /// Where a run's failure alarm is.
    AlarmState, "alarm state" {
        /// No alarm is due (success, not ended yet, or ended on purpose).
        None => "none",
        /// Failed; its job's webhook is to be called.
        Due => "due",
        /// Claimed by one admin, which is calling the webhook.
        Sending => "sending",
        /// Delivered.
        Sent => "sent",
        /// No attempt was delivered.
        Failed => "failed",
        /// Failed, but its job has no webhook.
        NotConfigured => "not_configured",
    }
}

named_enum! {
    /// What a scheduled fire does when a run of its job is still in
    /// progress anywhere in the cluster.
    #[derive(Default)]
    OverlapPolicy, "overlap policy" {
        /// Run anyway (the executor's block strategy still applies).
        #[default]
        Allow => "ALLOW",
        /// Do not run; the fire is recorded as skipped (a cancelled run).
        Skip => "SKIP",
        /// Wait until the runs in progress end, then run; while one fire
        /// waits, later ones are skipped.
        BufferOne => "BUFFER_ONE",
        /// Kill the runs in progress, then run.
        CancelOther => "CANCEL_OTHER",
    }
}

named_enum! {
    /// What to do with a fire found later than the job's misfire threshold.
    MisfirePolicy, "misfire policy" {
        /// Skip it; plan the next fire from now.
        DoNothing => "DO_NOTHING",
        /// Run once now (kind `misfire`), then plan from now.
        FireOnceNow => "FIRE_ONCE_NOW",
    }
}

named_enum! {
    /// The kinds of schedule.
    ScheduleType, "schedule type" {
        /// Cron expression in the job's time zone.
        Cron => "CRON",
        /// Every N, counted from the previous planned fire.
        FixRate => "FIX_RATE",
        /// N after the previous run completed.
        FixDelay => "FIX_DELAY",
        /// Once, at an instant.
        OneShot => "ONE_SHOT",
        /// Never by itself: manual, API, parent and retry triggers only.
        None => "NONE",
    }
}

named_enum! {
    /// How a trigger picks its executor among its group's (xxl-job's ten
    /// route strategies).
    RouteStrategy, "route strategy" {
        First => "FIRST",
        Last => "LAST",
        Round => "ROUND",
        Random => "RANDOM",
        ConsistentHash => "CONSISTENT_HASH",
        LeastFrequentlyUsed => "LEAST_FREQUENTLY_USED",
        LeastRecentlyUsed => "LEAST_RECENTLY_USED",
        Failover => "FAILOVER",
        Busyover => "BUSYOVER",
        ShardingBroadcast => "SHARDING_BROADCAST",
    }
}

named_enum! {
    /// A tenant's quotas: each has an operator-wide default and may be set
    /// per tenant.
    Quota, "quota" {
        /// Jobs defined.
        Jobs => "jobs",
        /// Module names (each with its versions).
        Modules => "modules",
        /// Bytes of module content the tenant has uploaded (each distinct
        /// content counted once).
        ModuleBytes => "module_bytes",
        /// Shortest interval between two fires of one job, in milliseconds
        /// (checked over a cron expression's next 1,000 fires).
        MinIntervalMs => "min_interval_ms",
        /// Runs dispatched and not yet ended, across the cluster.
        RunningRuns => "running_runs",
        /// Instances one executor runs at once for the tenant.
        ExecutorInstances => "executor_instances",
        /// Milliseconds of run time (wall clock, start to end) per UTC day.
        RunMsPerDay => "run_ms_per_day",
        /// Bytes of durable state (keys and values) over all its jobs.
        StateBytes => "state_bytes",
        /// Bytes of run logs stored per UTC day.
        LogBytesPerDay => "log_bytes_per_day",
        /// Workflow runs in progress at once.
        WorkflowRuns => "workflow_runs",
        /// Fanned-out elements not yet ended, over the tenant's workflow
        /// runs in progress.
        WorkflowItems => "workflow_items",
        /// Runs the tenant's backfills in progress have still to write.
        BackfillRuns => "backfill_runs",
    }
}

named_enum! {
    /// What a user or an API token may do, each role including those
    /// below it.
    Role, "role" {
        /// Reads everything of its tenant; changes nothing.
        Viewer => "viewer",
        /// Modules, jobs, runs, kills and durable state of its tenant.
        Developer => "developer",
        /// A tenant's users, tokens and secrets (and the jobs that read
        /// secrets, and the modules those follow), and what a developer
        /// does.
        Admin => "admin",
        /// The operator: every tenant, tenants themselves, executor
        /// groups and the tenants each serves, quotas and HTTP ceilings (users of tenant `default`
        /// only).
        Operator => "operator",
    }
}

impl Role {
    /// Whether this role includes `other` (an admin may do what a
    /// developer may).
    pub fn includes(self, other: Role) -> bool {
        self.rank() >= other.rank()
    }

    fn rank(self) -> u8 {
        match self {
            Role::Viewer => 0,
            Role::Developer => 1,
            Role::Admin => 2,
            Role::Operator => 3,
        }
    }
}

/// Parses a name typed by a person: any letter case (`cron`, `Cron`).
pub fn parse_ignoring_case<T: FromStr>(text: &str) -> Result<T, T::Err> {
    text.to_ascii_uppercase()
        .parse()
        .or_else(|_| text.to_ascii_lowercase().parse())
        .or_else(|_| text.parse())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips_and_an_unknown_one_is_named() {
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>(), Ok(*status));
            let json = serde_json::to_string(status).unwrap_or_default();
            assert_eq!(json, format!("\"{status}\""));
        }
        for route in RouteStrategy::ALL {
            assert_eq!(route.as_str().parse::<RouteStrategy>(), Ok(*route));
        }
        let error = "BEST_EFFORT".parse::<RouteStrategy>().unwrap_err();
        assert_eq!(error.to_string(), "unknown route strategy \"BEST_EFFORT\"");
        assert_eq!(
            parse_ignoring_case::<ScheduleType>("fix_rate"),
            Ok(ScheduleType::FixRate)
        );
        assert!(
            "cron".parse::<ScheduleType>().is_err(),
            "stored names are exact"
        );
    }
}
