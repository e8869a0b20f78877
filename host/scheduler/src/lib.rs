//! The cronbox firing engine and the domain it fires: what the admin
//! decides, without its HTTP API or its services (crate `cronbox-admin`),
//! which cannot be named from here.
//!
//! - [`scheduler`] — the pre-read loop, durable fires, dispatch, results,
//!   retries, child jobs, workflows' progress, and the narrow [`Intake`]
//!   the API hands results to;
//! - `housekeeping` — daily reports, run retention, registry clean-up;
//! - `alarms` — failure webhooks, claimed once across admins;
//! - [`metrics`] — Prometheus counters and histograms at `/metrics`;
//! - [`jobs`] — job definitions and their validation;
//! - [`legacy`] — legacy groups of xxl-job executors and xxl-job's wire;
//! - [`quotas`] — what each tenant may hold and run;
//! - [`routing`] — xxl-job's ten route strategies;
//! - [`workflow`] — workflow definitions checked into graphs, the template
//!   language of a node's input, the planner of a workflow run's progress
//!   (pure; the scheduler drives them);
//! - [`secrets`] — secrets sealed at rest;
//! - [`model`] — the stored enums (run status, alarm state, misfire
//!   policy), decoded strictly;
//! - [`clock`] — the time every scheduling decision reads (system, offset
//!   or manual);
//! - [`schedule`] (crate `cronbox-schedule`) and [`store`] (crate
//!   `cronbox-store`), under the names the modules have always used.
//!
//! [`Intake`]: scheduler::Intake

mod alarms;
pub mod clock;
mod housekeeping;
pub mod jobs;
pub mod legacy;
pub mod metrics;
pub mod model;
pub mod quotas;
pub mod routing;
pub mod scheduler;
pub mod secrets;
pub mod workflow;

pub use cronbox_schedule as schedule;
pub use cronbox_store as store;
pub use cronbox_tasks as tasks;

pub use scheduler::run_engine;

/// Helpers shared by the crate's unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    pub(crate) use cronbox_store::test_support::{let_others_run, sqlite_store};

    /// A job of tenant `default` firing every second (`* * * * * ?`).
    pub(crate) fn every_second_job(misfire: crate::model::MisfirePolicy) -> crate::store::JobRow {
        crate::store::JobRow {
            id: crate::model::JobId(1),
            tenant: "default".into(),
            group_name: "default".into(),
            name: "every-second".into(),
            module_digest: "a".repeat(64).parse().unwrap(),
            schedule_type: crate::schedule::ScheduleType::Cron,
            schedule_conf: "* * * * * ?".into(),
            time_zone: "UTC".into(),
            misfire,
            misfire_threshold_ms: 5_000,
            route: crate::model::RouteStrategy::First,
            block_strategy: cronbox_protocol::BlockStrategy::SerialExecution,
            max_concurrency: 1,
            timeout_ms: 1_000,
            fuel: None,
            memory_bytes: 1 << 20,
            retry_count: 0,
            retry_interval_ms: 0,
            children: Vec::new(),
            param: String::new(),
            enabled: true,
            next_fire_at_ms: None,
            module_name: None,
            module_version: None,
            alarm_url: String::new(),
            fresh_instance: false,
            config: Default::default(),
            http_allow: Vec::new(),
            http_limits: Default::default(),
            secrets: Vec::new(),
            schedule_rules: Default::default(),
            pause: None,
            executor_handler: None,
            xxl_job_id: None,
        }
    }
}

/// Unit tests count their allocations (see `scheduler::command`'s).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: cronbox_tests::allocations::Counting = cronbox_tests::allocations::Counting;
