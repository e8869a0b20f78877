//! The cronbox admin's user API as types: what a client sends
//! ([`JobSpec`], [`TriggerRequest`], ...), what the admin answers ([`Job`],
//! [`Run`], [`RunPage`], ...) and the error body every refusal carries
//! ([`ApiError`] with its [`ErrorCode`]).
//!
//! The admin serves these types and derives its OpenAPI document from
//! them; the CLI and the tests call it through [`Client`] (feature
//! `client`), so a change of shape is a compile error on both sides, not a
//! drifted JSON field.
//!
//! - `names` — the enumerations stored and sent as text (run status,
//!   alarm state, misfire policy, schedule type, route strategy);
//! - `ids` — job and run ids, and module content digests;
//! - `jobs`, `runs`, `modules`, `cluster`, `users`, `workflows`, `audit`, `enrolled` — the bodies of each
//!   resource;
//! - `client` — the typed HTTP client.

mod audit;
mod cluster;
mod enrolled;
mod ids;
mod jobs;
mod modules;
mod names;
mod runs;
mod schedules;
mod users;
mod workflows;
mod xxl_job;

#[cfg(feature = "client")]
mod client;
#[cfg(feature = "client")]
mod follow;

pub use audit::{AuditEntry, AuditPage};
#[cfg(feature = "client")]
pub use client::{AuditQuery, Client, ClientError, JobQuery, RunQuery};
pub use cluster::{
    Executor, Group, GroupSpec, GroupTenants, HttpCeiling, LegacyProtocol, LegacySpec,
    QuotaSettings, QuotaUse, Ready, Secret, SecretDeleted, SecretValue, Tenant, TenantCreated,
    TenantQuotas, TenantSpec, TokenCreated, TokenRevoked, TokenSpec,
};
pub use cronbox_protocol::{
    ApiError, BlockStrategy, ErrorCode, HttpLimits, LogLevel, LogLine, LogResponse, LogSource,
    TriggerKind,
};
pub use cronbox_protocol::{Digest, NotADigest};
pub use enrolled::{
    ExecutorToken, ExecutorTokenIssued, ExecutorTokenRevoked, ExecutorTokenRotation,
    ExecutorTokenSpec,
};
#[cfg(feature = "client")]
pub use follow::{FollowEvent, RunFollower};
pub use ids::{JobId, RunId};
pub use jobs::{
    DEV_SOURCES_PREFIX, Deleted, Job, JobBatch, JobKill, JobKilled, JobListed, JobSpec,
    JobStateBody, JobsCreated, LastRun, StateEdit, TriggerRequest, TriggerSource, Triggered,
    carries_dev_sources,
};
pub use xxl_job::{XxlJobFields, XxlJobPlace};
/// The operator's own tenant: objects the operator creates belong to it,
/// and it may use every executor group.
pub const DEFAULT_TENANT: &str = "default";

pub use modules::{ModuleVersion, RolledBack, TenantModule, Uploaded, VersionChoice};
pub use names::{
    AlarmState, MisfirePolicy, OverlapPolicy, Quota, Role, RouteStrategy, RunOutcome, RunStatus,
    ScheduleType, parse_ignoring_case,
};
pub use runs::{
    DailyReport, Dashboard, FailingJob, HourCounts, Report, Run, RunCounts, RunKilled, RunPage,
};
pub use schedules::{
    AlarmCheck, Backfill, BackfillRequest, Calendar, CalendarDates, Pause, PauseRequest,
    SchedulePreview, ScheduleRules,
};
pub use users::{
    LoggedOut, Login, PasswordChange, Session, TokenInfo, User, UserChanged, UserSpec,
    UserTokenCreated, UserTokenSpec,
};
pub use workflows::{
    EdgeCondition, ItemCounts, ItemRun, JoinRule, NodeRun, NodeStatus, Workflow, WorkflowBackfill,
    WorkflowBackfillRequest, WorkflowEdge, WorkflowNode, WorkflowRun, WorkflowRunRequest,
    WorkflowRunStatus, WorkflowSchedule, WorkflowSpec,
};
