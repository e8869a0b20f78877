//! Jobs: the definition a user submits ([`JobSpec`]), the job as stored
//! and answered ([`Job`]), and the bodies of its actions (trigger, state,
//! kill, delete).

use std::collections::{BTreeMap, HashMap};

use cronbox_protocol::{BlockStrategy, HttpLimits};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    Digest, JobId, MisfirePolicy, Pause, RouteStrategy, RunId, ScheduleRules, ScheduleType,
};

/// A job as submitted through the API. Omitted fields take defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// 1 to 200 characters, not all blank.
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    /// The executor group that runs it (1 to 128 characters).
    #[serde(default = "default_group")]
    #[schema(min_length = 1, max_length = 128)]
    pub group: String,
    /// sha256 of an uploaded module (the job runs exactly that content), or
    /// empty when `module` names one (or `executor_handler` a handler).
    #[serde(default)]
    pub module_digest: String,
    /// A named module instead of a digest: `NAME` follows its latest
    /// version (a push or a rollback moves the job), `NAME@N` pins version
    /// N.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9._-]{1,100}(@[0-9]+)?$")]
    pub module: Option<String>,
    /// For a job of a legacy group (xxl-job executors): the handler it
    /// runs there (`@XxlJob("name")`; 1 to 255 characters), instead of a
    /// module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 255)]
    pub executor_handler: Option<String>,
    /// xxl-job's `glue_type`, accepted for definitions carried over from
    /// it: `BEAN` (with `executor_handler`) only; GLUE types (source stored
    /// with the job) are refused: write the handler as a module. Not
    /// stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glue_type: Option<String>,
    /// The job's id in the xxl-job install it came from (set by `cronbox
    /// import xxl-job` and xxl-job 3.5's job API; unique in its group): xxl-job 3.5's `/api/updateJob` and the others find it by
    /// it. Omitted from a replacement: the current one is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xxl_job_id: Option<i64>,
    /// Webhook called (POST, JSON) when a run of this job fails.
    #[serde(default)]
    pub alarm_url: String,
    #[serde(default = "default_schedule_type")]
    #[schema(value_type = ScheduleType)]
    pub schedule_type: String,
    #[serde(default)]
    pub schedule_conf: String,
    #[serde(default = "default_zone")]
    pub time_zone: String,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    #[serde(default = "default_misfire")]
    #[schema(value_type = MisfirePolicy)]
    pub misfire: String,
    #[serde(default = "default_misfire_threshold")]
    pub misfire_threshold_ms: i64,
    #[serde(default = "default_route")]
    #[schema(value_type = RouteStrategy)]
    pub route: String,
    #[serde(default = "default_block")]
    #[schema(value_type = BlockStrategy)]
    pub block_strategy: String,
    #[serde(default = "default_one")]
    pub max_concurrency: i64,
    #[serde(default = "default_timeout")]
    pub timeout_ms: i64,
    #[serde(default)]
    pub fuel: Option<i64>,
    #[serde(default = "default_memory")]
    pub memory_bytes: i64,
    #[serde(default)]
    pub retry_count: i64,
    #[serde(default)]
    pub retry_interval_ms: i64,
    /// Ids of jobs triggered when a run of this one succeeds.
    #[serde(default)]
    pub children: Vec<JobId>,
    #[serde(default)]
    pub param: String,
    /// A new instance for every run (`init`, `execute`, `destroy` each
    /// time) instead of a warm one kept between runs.
    #[serde(default)]
    pub fresh_instance: bool,
    /// Plain configuration the job reads through `wasi:config/store`: at
    /// most 64 keys of 1 to 128 bytes, values of at most 4 KiB, 16 KiB in
    /// all. Not for secrets: it is shown to whoever may read the job.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The origins the job may call over HTTP: `scheme://host[:port]`,
    /// where host may be `*.example.com` (names below it) or `*`; no port
    /// means the scheme's default. Each must lie within the tenant's
    /// ceiling. Empty: no network.
    #[serde(default)]
    pub http_allow: Vec<String>,
    /// Limits of the job's outbound HTTP per run (omitted fields take
    /// their defaults).
    #[serde(default)]
    pub http_limits: HttpLimits,
    /// Names of the tenant's secrets the job reads through
    /// `wasi:config/store` (at most 32; each must exist, and must not also
    /// be a `config` key). Their values are sent only with this job's runs.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// A window, excluded dates and jitter for the schedule's fires.
    #[serde(default)]
    pub schedule_rules: ScheduleRules,
}

fn default_group() -> String {
    "default".to_owned()
}
fn default_schedule_type() -> String {
    "NONE".to_owned()
}
fn default_zone() -> String {
    "UTC".to_owned()
}
fn default_misfire() -> String {
    "DO_NOTHING".to_owned()
}
fn default_misfire_threshold() -> i64 {
    5_000
}
fn default_route() -> String {
    "FIRST".to_owned()
}
fn default_block() -> String {
    "SERIAL_EXECUTION".to_owned()
}
fn default_one() -> i64 {
    1
}
fn default_timeout() -> i64 {
    60_000
}
fn default_memory() -> i64 {
    64 << 20
}

impl JobSpec {
    /// A definition with every default: `name` running the module
    /// `module` (NAME follows its latest version, NAME@VERSION pins one),
    /// never firing by itself.
    pub fn new(name: impl Into<String>, module: impl Into<String>) -> JobSpec {
        JobSpec {
            module: Some(module.into()),
            ..JobSpec::defaults(name.into())
        }
    }

    /// A definition with every default: `name` running exactly the
    /// content `digest`, never firing by itself.
    pub fn of_digest(name: impl Into<String>, digest: &Digest) -> JobSpec {
        JobSpec {
            module_digest: digest.to_string(),
            ..JobSpec::defaults(name.into())
        }
    }

    fn defaults(name: String) -> JobSpec {
        JobSpec {
            name,
            group: default_group(),
            module_digest: String::new(),
            module: None,
            executor_handler: None,
            glue_type: None,
            xxl_job_id: None,
            alarm_url: String::new(),
            schedule_type: default_schedule_type(),
            schedule_conf: String::new(),
            time_zone: default_zone(),
            misfire: default_misfire(),
            misfire_threshold_ms: default_misfire_threshold(),
            route: default_route(),
            block_strategy: default_block(),
            max_concurrency: default_one(),
            timeout_ms: default_timeout(),
            fuel: None,
            memory_bytes: default_memory(),
            retry_count: 0,
            retry_interval_ms: 0,
            children: Vec::new(),
            param: String::new(),
            fresh_instance: false,
            config: BTreeMap::new(),
            http_allow: Vec::new(),
            http_limits: HttpLimits::default(),
            secrets: Vec::new(),
            schedule_rules: ScheduleRules::default(),
        }
    }

    /// A definition with every default: `name` running handler `handler`
    /// of the xxl-job executors of legacy group `group`.
    pub fn legacy(
        name: impl Into<String>,
        group: impl Into<String>,
        handler: impl Into<String>,
    ) -> JobSpec {
        JobSpec {
            group: group.into(),
            executor_handler: Some(handler.into()),
            ..JobSpec::defaults(name.into())
        }
    }

    /// The same definition on a cron schedule.
    pub fn with_cron(mut self, expression: impl Into<String>) -> JobSpec {
        self.schedule_type = ScheduleType::Cron.as_str().to_owned();
        self.schedule_conf = expression.into();
        self
    }
}

impl From<Job> for JobSpec {
    /// A stored job as the definition that would store it again: a job
    /// following a module names it (`NAME`, or `NAME@N` when pinned), one
    /// made from a digest keeps the digest.
    fn from(job: Job) -> JobSpec {
        let (module, module_digest) = match job.module_name {
            Some(name) => match job.module_version {
                Some(version) => (Some(format!("{name}@{version}")), String::new()),
                None => (Some(name), String::new()),
            },
            None => (None, job.module_digest.to_string()),
        };
        JobSpec {
            name: job.name,
            group: job.group_name,
            module_digest,
            module,
            executor_handler: job.executor_handler,
            glue_type: None,
            xxl_job_id: job.xxl_job_id,
            alarm_url: job.alarm_url,
            schedule_type: job.schedule_type.as_str().to_owned(),
            schedule_conf: job.schedule_conf,
            time_zone: job.time_zone,
            misfire: job.misfire.as_str().to_owned(),
            misfire_threshold_ms: job.misfire_threshold_ms,
            route: job.route.as_str().to_owned(),
            block_strategy: job.block_strategy.as_str().to_owned(),
            max_concurrency: job.max_concurrency,
            timeout_ms: job.timeout_ms,
            fuel: job.fuel,
            memory_bytes: job.memory_bytes,
            retry_count: job.retry_count,
            retry_interval_ms: job.retry_interval_ms,
            children: job.children,
            param: job.param,
            fresh_instance: job.fresh_instance,
            config: job.config,
            http_allow: job.http_allow,
            http_limits: job.http_limits,
            secrets: job.secrets,
            schedule_rules: job.schedule_rules,
        }
    }
}

/// A job as listed: the job, and its last run that was due (none yet: no
/// run, or only runs written ahead of their time).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobListed {
    #[serde(flatten)]
    pub job: Job,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<LastRun>,
}

/// The last run of a job that was due, in brief.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LastRun {
    pub id: crate::RunId,
    pub status: crate::RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<crate::RunOutcome>,
    pub scheduled_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<i64>,
}

/// A job as stored and answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: JobId,
    pub tenant: String,
    pub group_name: String,
    pub name: String,
    /// The content the job runs now (empty for a legacy job, which runs
    /// `executor_handler`).
    pub module_digest: Digest,
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    pub time_zone: String,
    pub misfire: MisfirePolicy,
    pub misfire_threshold_ms: i64,
    pub route: RouteStrategy,
    pub block_strategy: BlockStrategy,
    pub max_concurrency: i64,
    pub timeout_ms: i64,
    pub fuel: Option<i64>,
    pub memory_bytes: i64,
    pub retry_count: i64,
    pub retry_interval_ms: i64,
    /// The jobs triggered after each success, in order.
    pub children: Vec<JobId>,
    pub param: String,
    /// Firing on its schedule.
    pub enabled: bool,
    pub next_fire_at_ms: Option<i64>,
    /// The module name the job follows (its latest version) or pins
    /// (`module_version`); `None` for a job that names a digest.
    pub module_name: Option<String>,
    pub module_version: Option<i64>,
    /// Webhook called when a run fails (empty: no alarm).
    pub alarm_url: String,
    /// A new instance for every run instead of a warm one (`init` and
    /// `destroy` around each run).
    pub fresh_instance: bool,
    /// Plain configuration, read by the job through `wasi:config/store`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The origins the job may call over HTTP (empty: no network).
    #[serde(default)]
    pub http_allow: Vec<String>,
    /// Limits of its outbound HTTP per run.
    #[serde(default)]
    pub http_limits: HttpLimits,
    /// Names of the secrets it references (never their values).
    #[serde(default)]
    pub secrets: Vec<String>,
    /// The schedule's window, excluded dates and jitter.
    #[serde(default)]
    pub schedule_rules: ScheduleRules,
    /// Set while the job is paused (see `POST /api/v1/jobs/{id}/pause`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Pause>,
    /// A legacy job's handler on its xxl-job executors (no module).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_handler: Option<String>,
    /// Its id in the xxl-job install it came from (see [`JobSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xxl_job_id: Option<i64>,
}

/// How the parameter of a `cronbox dev` run of a Python job begins: it
/// carries the job's sources, which the dev runner imports and runs.
pub const DEV_SOURCES_PREFIX: &str = "{\"cronbox_dev\"";

/// Whether `param` carries `cronbox dev` sources: code, which only a
/// caller who may change the job's code may send (in a job that reads
/// secrets, an admin).
pub fn carries_dev_sources(param: &str) -> bool {
    param.trim_start().starts_with(DEV_SOURCES_PREFIX)
}

/// `POST /api/v1/jobs/{id}/trigger`: a run now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerRequest {
    /// Parameter of this run (default: the job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// Executor addresses for this run only (route strategy applied).
    /// Operator only, and only addresses of the job's group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// Who starts the run: `api` (a program; the default) or `manual` (a
    /// person, through the CLI or the console). The run's trigger kind.
    #[serde(default)]
    pub kind: TriggerSource,
}

/// The trigger kinds a trigger request may give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TriggerSource {
    #[default]
    Api,
    Manual,
}

/// A run written by a trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Triggered {
    pub run_id: RunId,
}

/// `POST /api/v1/jobs/batch`: many jobs created at once (an import, a
/// migration), all or none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobBatch {
    /// The definitions, at most [`JobBatch::MAX`]. Children must be jobs
    /// that exist before the batch.
    pub jobs: Vec<JobSpec>,
    /// Start every job of the batch (those with schedule NONE, or a
    /// one-shot in the past, stay stopped).
    #[serde(default)]
    pub start: bool,
}

impl JobBatch {
    /// Most jobs in one batch.
    pub const MAX: usize = 1000;
}

/// The jobs a batch created, in the batch's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobsCreated {
    pub ids: Vec<JobId>,
    /// How many of them were started.
    pub started: usize,
}

/// A deleted job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Deleted {
    pub deleted: JobId,
}

/// A job's durable state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobStateBody {
    pub job_id: JobId,
    pub state: BTreeMap<String, String>,
}

impl JobStateBody {
    pub fn new(job_id: JobId, state: HashMap<String, String>) -> Self {
        JobStateBody {
            job_id,
            state: state.into_iter().collect(),
        }
    }
}

/// `PUT /api/v1/jobs/{id}/state`: the whole state the next run sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StateEdit {
    pub state: HashMap<String, String>,
}

/// What a kill of a whole job did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobKill {
    /// Runs that were waiting to be dispatched, now cancelled.
    pub cancelled: Vec<RunId>,
    /// Runs executors stopped or dropped from their queues.
    pub killed: Vec<u64>,
    /// Executors that could not be reached (their runs of the job go on).
    pub unreachable: Vec<String>,
}

/// `POST /api/v1/jobs/{id}/kill`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobKilled {
    pub job_id: JobId,
    #[serde(flatten)]
    pub outcome: JobKill,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_constructors_defaults_are_the_servers() {
        let sent: JobSpec =
            serde_json::from_str(r#"{ "name": "x", "module": "greeter" }"#).unwrap();
        assert_eq!(sent, JobSpec::new("x", "greeter"));
        let digest: Digest = "ab".repeat(32).parse().unwrap();
        let json = format!(r#"{{ "name": "x", "module_digest": "{digest}" }}"#);
        let sent: JobSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(sent, JobSpec::of_digest("x", &digest));
        let spec = JobSpec::new("x", "greeter@2").with_cron("0 * * * * ?");
        let again: JobSpec = serde_json::from_value(serde_json::to_value(&spec).unwrap()).unwrap();
        assert_eq!(
            again, spec,
            "what the client sends is what the server reads"
        );
    }

    #[test]
    fn a_stored_job_gives_back_its_definition() {
        let job = Job {
            id: JobId(3),
            tenant: "acme".into(),
            group_name: "batch".into(),
            name: "nightly".into(),
            module_digest: "cd".repeat(32).parse().unwrap(),
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0 0 3 * * ?".into(),
            time_zone: "Europe/Berlin".into(),
            misfire: MisfirePolicy::FireOnceNow,
            misfire_threshold_ms: 1_000,
            route: RouteStrategy::Round,
            block_strategy: BlockStrategy::DiscardLater,
            max_concurrency: 2,
            timeout_ms: 5_000,
            fuel: Some(10),
            memory_bytes: 1 << 20,
            retry_count: 1,
            retry_interval_ms: 100,
            children: vec![JobId(4)],
            param: "p".into(),
            enabled: true,
            next_fire_at_ms: Some(1),
            module_name: Some("nightly".into()),
            module_version: Some(2),
            alarm_url: String::new(),
            fresh_instance: true,
            config: [("greeting".to_owned(), "hi".to_owned())].into(),
            http_allow: vec!["https://*.example.com".to_owned()],
            http_limits: HttpLimits {
                max_requests: 5,
                ..HttpLimits::default()
            },
            secrets: vec!["TOKEN".to_owned()],
            pause: None,
            executor_handler: None,
            xxl_job_id: None,
            schedule_rules: ScheduleRules {
                exclude_dates: vec!["2026-12-25".to_owned()],
                jitter_ms: 500,
                ..ScheduleRules::default()
            },
        };
        let spec = JobSpec::from(job.clone());
        assert_eq!(
            spec.module.as_deref(),
            Some("nightly@2"),
            "pinned stays pinned"
        );
        assert_eq!(spec.module_digest, "", "a named module, not its digest");
        assert_eq!(
            (
                spec.route.as_str(),
                spec.block_strategy.as_str(),
                spec.misfire.as_str()
            ),
            ("ROUND", "DISCARD_LATER", "FIRE_ONCE_NOW")
        );
        let by_digest = JobSpec::from(Job {
            module_name: None,
            module_version: None,
            ..job
        });
        assert_eq!(
            (by_digest.module, by_digest.module_digest),
            (None, "cd".repeat(32))
        );
    }
}
