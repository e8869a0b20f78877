//! Workflows: jobs run in a defined order as one thing — named nodes, each
//! running one of the tenant's jobs with an input rendered from the
//! workflow's input and its ancestors' outputs, and edges that say which
//! node follows which, and on what outcome.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{MisfirePolicy, OverlapPolicy, RunId, ScheduleRules, ScheduleType, TriggerKind};

/// `PUT /api/v1/workflows/{name}`: a workflow's definition (also the
/// `workflow.toml` file form).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSpec {
    #[serde(default)]
    pub description: String,
    /// The steps, at most [`WorkflowSpec::MAX_NODES`], each named once.
    pub nodes: Vec<WorkflowNode>,
    /// Which node follows which, at most [`WorkflowSpec::MAX_EDGES`],
    /// without a cycle. A node without incoming edges starts the workflow.
    #[serde(default)]
    pub edges: Vec<WorkflowEdge>,
    /// Runs started by a schedule, as a job's; absent: on request only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<WorkflowSchedule>,
    /// The longest a run may take, in milliseconds (1 s to 7 days): past
    /// it the run fails, its running nodes killed, the rest not started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
}

/// When a workflow starts by itself: a schedule as a job's (CRON with
/// seconds or Unix CRON, FIX_RATE, ONE_SHOT) in an IANA time zone; a fire
/// found more than 5 s late follows `misfire`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowSchedule {
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    #[serde(default = "utc")]
    pub time_zone: String,
    #[serde(default = "skip_late")]
    pub misfire: MisfirePolicy,
    /// The input of each scheduled run (JSON text; `{}` if absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// What a fire does while a run of the workflow is in progress: ALLOW
    /// (default: start another), SKIP, BUFFER_ONE (start once the runs in
    /// progress end; while one fire waits, later ones are skipped) or
    /// CANCEL_OTHER (cancel the runs in progress, then start).
    #[serde(default, skip_serializing_if = "is_allow")]
    pub overlap: OverlapPolicy,
    /// A window, excluded dates and jitter, as a job's schedule rules
    /// (shared calendars are a job's only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<ScheduleRules>,
}

fn is_allow(policy: &OverlapPolicy) -> bool {
    *policy == OverlapPolicy::Allow
}

fn utc() -> String {
    "UTC".to_owned()
}

fn skip_late() -> MisfirePolicy {
    MisfirePolicy::DoNothing
}

impl WorkflowSpec {
    /// Most nodes in one workflow.
    pub const MAX_NODES: usize = 200;
    /// Most edges in one workflow.
    pub const MAX_EDGES: usize = 1_000;
    /// Longest rendered input of one node, and longest workflow input.
    pub const MAX_INPUT_BYTES: usize = 64 * 1024;
    /// Longest deadline of a run.
    pub const MAX_DEADLINE_MS: i64 = 7 * 24 * 3_600_000;
    /// Most elements a fanned-out node runs for.
    pub const MAX_FAN_OUT: usize = 1_000;
    /// Most of a fanned-out node's runs in progress at once.
    pub const MAX_CONCURRENCY: u32 = 100;
    /// How many of a fanned-out node's runs are in progress at once when
    /// its definition does not say.
    pub const DEFAULT_CONCURRENCY: u32 = 10;
    /// Longest output of a fanned-out node (its elements' outputs as one
    /// JSON array), and longest sum of its elements' inputs.
    pub const MAX_FAN_OUT_BYTES: usize = 1024 * 1024;
    /// Most `{{ }}` holes in a node's param: with the fan-out's elements,
    /// what bounds the work rendering a node's inputs may cost the admin.
    pub const MAX_TEMPLATE_HOLES: usize = 1_000;
    /// Longest `when` expression of an edge.
    pub const MAX_CONDITION_BYTES: usize = 4 * 1024;
    /// Most runs one backfill starts.
    pub const MAX_BACKFILL_RUNS: usize = 100;
}

/// `POST /api/v1/workflows/{name}/backfill`: run the schedule's instants
/// in a past range, one workflow run each (kind `backfill`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowBackfillRequest {
    /// The range's start (exclusive), ms since the epoch.
    pub from_ms: i64,
    /// Its end (inclusive), not in the future.
    pub to_ms: i64,
}

/// A workflow backfill's runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowBackfill {
    /// The schedule's instants in the range.
    pub planned: i64,
    /// The runs started, one per instant not backfilled before.
    pub started: Vec<i64>,
    /// Instants an earlier backfill already ran (not run again).
    pub already_run: i64,
}

/// One step of a workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowNode {
    /// The node's name: 1 to 64 letters, digits, `-` or `_`, unique in the
    /// workflow (templates name nodes by it).
    pub name: String,
    /// The name of the tenant's job the node runs (its module, limits,
    /// group, retries and configuration). Either `job` or `module`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job: String,
    /// A module the node runs (`name` or `name@version`), with
    /// `settings`: the node runs it as a job the workflow owns, named
    /// `WORKFLOW.NODE`, made and kept up to date when the workflow is
    /// saved and deleted with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// With `module`: the fields of a job definition for the job the node
    /// runs it as (`timeout_ms`, `fuel`, `memory_bytes`, `config`,
    /// `group`, `retry_count`, `http_allow`, ...; not its name, module,
    /// schedule, children nor secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub settings: Option<serde_json::Map<String, serde_json::Value>>,
    /// The run's param: a template over the workflow's input and the
    /// outputs of the node's ancestors (`{{ input.day }}`,
    /// `{{ nodes.extract.output.rows }}`). Absent: the job's own param.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// When the node runs, given its parents' ends (default: every
    /// parent succeeded).
    #[serde(default)]
    pub join: JoinRule,
    /// Fan-out: a path to an array (`nodes.extract.output.items`,
    /// `input.days`); the node runs its job once per element (at most
    /// [`WorkflowSpec::MAX_FAN_OUT`]), its param rendered with `{{ item }}`
    /// and `{{ index }}`, and its output is their outputs as a JSON array,
    /// in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<String>,
    /// With `for_each`: how many of its runs are in progress at once (1 to
    /// [`WorkflowSpec::MAX_CONCURRENCY`]; default
    /// [`WorkflowSpec::DEFAULT_CONCURRENCY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

/// An edge: `to` may run once `from` ended as `on` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowEdge {
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub on: EdgeCondition,
    /// And only if this expression over the workflow's input and the
    /// outputs of `to`'s ancestors holds (`nodes.check.output.count > 0
    /// && input.mode == "full"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
}

/// The ends of `from` an edge passes on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EdgeCondition {
    /// `from` succeeded.
    #[default]
    Success,
    /// `from` failed (every retry spent).
    Failure,
    /// `from` ended, however.
    Always,
}

/// When a node with parents runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JoinRule {
    /// Every incoming edge passed (with the default edges: every parent
    /// succeeded).
    #[default]
    AllPassed,
    /// Every parent ended (whatever its end), and at least one edge
    /// passed.
    AllDone,
    /// As soon as one incoming edge passed.
    AnyPassed,
}

/// A workflow as stored and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Workflow {
    pub id: i64,
    pub tenant: String,
    pub name: String,
    /// Counts every saved definition from 1; a run keeps the version it
    /// started with.
    pub version: i64,
    /// The latest version's definition.
    pub definition: WorkflowSpec,
    /// When its schedule starts it next, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_fire_at_ms: Option<i64>,
    /// When that fire starts its run: its instant plus the schedule's
    /// jitter (the same unless the rules give a jitter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<i64>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// `POST /api/v1/workflows/{name}/runs`: start a run now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowRunRequest {
    /// The workflow's input, JSON text (templates read it as `input`); at
    /// most [`WorkflowSpec::MAX_INPUT_BYTES`]. Absent: `{}`.
    #[serde(default)]
    pub input: Option<String>,
}

/// Where a workflow run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowRunStatus {
    Running,
    /// Every node ended, and none failed without an edge that handles it.
    Succeeded,
    /// A node failed and no edge handles its failure.
    Failed,
    /// Cancelled by a person: its running nodes killed, the rest not run.
    Cancelled,
}

/// Where one node of a workflow run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Waiting for its parents.
    Pending,
    /// Its run is written, dispatched or running.
    Running,
    Succeeded,
    Failed,
    /// Its parents ended so that it cannot run (its join rule does not
    /// hold).
    Skipped,
    /// Its workflow run was cancelled before it ended.
    Cancelled,
}

impl NodeStatus {
    /// Ended, one way or another.
    pub fn is_done(self) -> bool {
        !matches!(self, NodeStatus::Pending | NodeStatus::Running)
    }
}

/// One node of a workflow run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NodeRun {
    pub node: String,
    pub status: NodeStatus,
    /// Its run, once written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    /// The param it was given (its template rendered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
    /// Its run's output: the success message (JSON text, when it parses
    /// as JSON, is read by templates as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// A fanned-out node's elements: how many, and how many ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ItemCounts>,
}

/// Where a fanned-out node's elements are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ItemCounts {
    pub total: i64,
    pub running: i64,
    pub succeeded: i64,
    pub failed: i64,
}

/// One element of a fanned-out node's run
/// (`GET /api/v1/workflow-runs/{id}/nodes/{node}/items`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ItemRun {
    /// Its place in the array, from 0.
    pub index: i64,
    /// `pending`, `running`, `succeeded`, `failed`, `skipped` or
    /// `cancelled`, as a node's.
    pub status: NodeStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<RunId>,
    pub input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A workflow run as stored and answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkflowRun {
    pub id: i64,
    pub tenant: String,
    pub workflow_id: i64,
    pub workflow_name: String,
    /// The definition's version the run follows.
    pub version: i64,
    /// What started it: `schedule`, `misfire` (a late fire run once) or
    /// `api` (a request, from the CLI, the console or a script).
    pub kind: TriggerKind,
    pub status: WorkflowRunStatus,
    pub input: String,
    /// The schedule's instant it was started for (a scheduled, late or
    /// backfilled run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fire_at_ms: Option<i64>,
    pub started_at_ms: i64,
    /// When it fails if it has not ended (its definition's deadline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
    /// Every node of the definition, in its order.
    pub nodes: Vec<NodeRun>,
}
