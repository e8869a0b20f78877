//! Job definitions as users submit them, validated before anything is
//! stored.

use serde::Deserialize;

use crate::model::{JobId, MisfirePolicy};
use crate::routing::RouteStrategy;
use crate::schedule::{Schedule, ScheduleError, ScheduleType};
use crate::store::JobRow;

/// A job as submitted through the API. Omitted fields take defaults.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    pub name: String,
    #[serde(default = "default_group")]
    pub group: String,
    /// sha256 of an uploaded module (the job runs exactly that content), or
    /// empty when `module` names one.
    #[serde(default)]
    pub module_digest: String,
    /// A named module instead of a digest: `NAME` follows its latest
    /// version (a push or a rollback moves the job), `NAME@N` pins version
    /// N.
    #[serde(default)]
    pub module: Option<String>,
    /// Webhook called (POST, JSON) when a run of this job fails.
    #[serde(default)]
    pub alarm_url: String,
    #[serde(default = "default_schedule_type")]
    #[schema(value_type = crate::schedule::ScheduleType)]
    pub schedule_type: String,
    #[serde(default)]
    pub schedule_conf: String,
    #[serde(default = "default_zone")]
    pub time_zone: String,
    /// DO_NOTHING or FIRE_ONCE_NOW.
    #[serde(default = "default_misfire")]
    #[schema(value_type = crate::model::MisfirePolicy)]
    pub misfire: String,
    #[serde(default = "default_misfire_threshold")]
    pub misfire_threshold_ms: i64,
    #[serde(default = "default_route")]
    #[schema(value_type = crate::routing::RouteStrategy)]
    pub route: String,
    #[serde(default = "default_block")]
    #[schema(value_type = cronbox_protocol::BlockStrategy)]
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

/// A refused job definition: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidJob {
    pub field: &'static str,
    pub message: String,
}

fn invalid(field: &'static str, message: impl Into<String>) -> InvalidJob {
    InvalidJob {
        field,
        message: message.into(),
    }
}

/// Largest parameter accepted, in bytes.
pub const MAX_PARAM_BYTES: usize = 64 << 10;

/// Longest executor group name.
pub const MAX_GROUP_BYTES: usize = 128;

/// Longest schedule expression (cron, interval or instant).
pub const MAX_SCHEDULE_CONF_BYTES: usize = 256;

/// Longest time zone name.
pub const MAX_TIME_ZONE_BYTES: usize = 64;

/// Longest alarm webhook URL.
pub const MAX_ALARM_URL_BYTES: usize = 2048;

impl JobSpec {
    /// Checks every field; returns the row to store (disabled) and the
    /// parsed schedule.
    pub fn validate(&self, tenant: &str) -> Result<(JobRow, Schedule), InvalidJob> {
        if self.name.trim().is_empty() || self.name.len() > 200 {
            return Err(invalid("name", "must be 1 to 200 characters"));
        }
        if self.group.trim().is_empty() || self.group.len() > MAX_GROUP_BYTES {
            return Err(invalid(
                "group",
                format!("must be 1 to {MAX_GROUP_BYTES} characters"),
            ));
        }
        for (field, value, max) in [
            (
                "schedule_conf",
                &self.schedule_conf,
                MAX_SCHEDULE_CONF_BYTES,
            ),
            ("time_zone", &self.time_zone, MAX_TIME_ZONE_BYTES),
            ("alarm_url", &self.alarm_url, MAX_ALARM_URL_BYTES),
        ] {
            if value.len() > max {
                return Err(invalid(
                    field,
                    format!("{} bytes; at most {max}", value.len()),
                ));
            }
        }
        let (module_name, module_version) = match (&self.module, self.module_digest.is_empty()) {
            (Some(_), false) => {
                return Err(invalid(
                    "module",
                    "give either module (a name) or module_digest, not both",
                ));
            }
            (None, true) => {
                return Err(invalid(
                    "module",
                    "name the module to run: module (NAME or NAME@VERSION) or module_digest",
                ));
            }
            (Some(reference), true) => {
                let (name, version) = parse_module_reference(reference)?;
                (Some(name), version)
            }
            (None, false) => {
                if self.module_digest.len() != 64
                    || !self.module_digest.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(invalid(
                        "module_digest",
                        "must be a sha256 in hex (64 characters)",
                    ));
                }
                (None, None)
            }
        };
        let alarm_url_ok = self.alarm_url.is_empty()
            || self.alarm_url.starts_with("http://")
            || self.alarm_url.starts_with("https://");
        if !alarm_url_ok {
            return Err(invalid(
                "alarm_url",
                format!("{:?} is not an http(s) URL", self.alarm_url),
            ));
        }
        let kind: ScheduleType = self
            .schedule_type
            .parse()
            .map_err(|error: ScheduleError| invalid("schedule_type", error.to_string()))?;
        let schedule =
            Schedule::parse(kind, &self.schedule_conf, &self.time_zone).map_err(|error| {
                let field = match error {
                    ScheduleError::UnknownTimeZone(_) => "time_zone",
                    _ => "schedule_conf",
                };
                invalid(field, error.to_string())
            })?;
        let misfire: MisfirePolicy = self.misfire.parse().map_err(|_| {
            invalid(
                "misfire",
                format!(
                    "unknown misfire strategy {:?}: use DO_NOTHING or FIRE_ONCE_NOW",
                    self.misfire
                ),
            )
        })?;
        if !(0..=86_400_000).contains(&self.misfire_threshold_ms) {
            return Err(invalid(
                "misfire_threshold_ms",
                "must be between 0 and 86400000 (one day)",
            ));
        }
        let route: RouteStrategy = self
            .route
            .parse()
            .map_err(|error: crate::routing::RouteError| invalid("route", error.to_string()))?;
        let block: cronbox_protocol::BlockStrategy =
            self.block_strategy.parse().map_err(|_| {
                invalid(
                    "block_strategy",
                    format!(
                        "unknown block strategy {:?}: use SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY or CONCURRENT",
                        self.block_strategy
                    ),
                )
            })?;
        if !(1..=1000).contains(&self.max_concurrency) {
            return Err(invalid("max_concurrency", "must be between 1 and 1000"));
        }
        if !(1..=7 * 86_400_000).contains(&self.timeout_ms) {
            return Err(invalid("timeout_ms", "must be between 1 ms and 7 days"));
        }
        if self.fuel.is_some_and(|fuel| fuel <= 0) {
            return Err(invalid("fuel", "must be positive when given"));
        }
        if !((1 << 20)..=(16_i64 << 30)).contains(&self.memory_bytes) {
            return Err(invalid("memory_bytes", "must be between 1 MiB and 16 GiB"));
        }
        if !(0..=100).contains(&self.retry_count) {
            return Err(invalid("retry_count", "must be between 0 and 100"));
        }
        if !(0..=86_400_000).contains(&self.retry_interval_ms) {
            return Err(invalid(
                "retry_interval_ms",
                "must be between 0 and 86400000 (one day)",
            ));
        }
        if self.param.len() > MAX_PARAM_BYTES {
            return Err(invalid(
                "param",
                format!("longer than {MAX_PARAM_BYTES} bytes"),
            ));
        }
        let row = JobRow {
            id: JobId::default(),
            tenant: tenant.to_owned(),
            group_name: self.group.clone(),
            name: self.name.clone(),
            module_digest: self.module_digest.to_ascii_lowercase(),
            schedule_type: kind,
            schedule_conf: self.schedule_conf.trim().to_owned(),
            time_zone: self.time_zone.clone(),
            misfire,
            misfire_threshold_ms: self.misfire_threshold_ms,
            route,
            block_strategy: block,
            max_concurrency: self.max_concurrency,
            timeout_ms: self.timeout_ms,
            fuel: self.fuel,
            memory_bytes: self.memory_bytes,
            retry_count: self.retry_count,
            retry_interval_ms: self.retry_interval_ms,
            children: unique_children(&self.children)?,
            param: self.param.clone(),
            enabled: false,
            next_fire_at_ms: None,
            module_name,
            module_version,
            alarm_url: self.alarm_url.clone(),
            fresh_instance: self.fresh_instance,
        };
        Ok((row, schedule))
    }
}

/// Module names: what `cronbox module push NAME` accepts.
pub fn check_module_name(name: &str) -> Result<(), InvalidJob> {
    let valid = !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(invalid(
            "module",
            format!("module name {name:?} must be 1 to 100 letters, digits, '-', '_' or '.'"),
        ))
    }
}

/// `NAME` (latest) or `NAME@N` (version N).
fn parse_module_reference(reference: &str) -> Result<(String, Option<i64>), InvalidJob> {
    let (name, version) = match reference.split_once('@') {
        Some((name, version)) => {
            let version: i64 = version.parse().ok().filter(|v| *v >= 1).ok_or_else(|| {
                invalid(
                    "module",
                    format!("version {version:?} in {reference:?} must be a number from 1"),
                )
            })?;
            (name, Some(version))
        }
        None => (reference, None),
    };
    check_module_name(name)?;
    Ok((name.to_owned(), version))
}

/// The schedule of a stored job.
pub fn schedule_of(job: &JobRow) -> Result<Schedule, ScheduleError> {
    Schedule::parse(job.schedule_type, &job.schedule_conf, &job.time_zone)
}

/// The child job ids of a stored job.
pub fn children_of(job: &JobRow) -> Vec<JobId> {
    job.children.clone()
}

/// Most children a job may have: each success writes one run per child.
pub const MAX_CHILDREN: usize = 32;

/// A job's children as given, each once (in the order of first mention),
/// refused beyond [`MAX_CHILDREN`].
fn unique_children(children: &[JobId]) -> Result<Vec<JobId>, InvalidJob> {
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<JobId> = children
        .iter()
        .copied()
        .filter(|id| seen.insert(*id))
        .collect();
    if unique.len() > MAX_CHILDREN {
        return Err(invalid(
            "children",
            format!(
                "{} children; a job may have at most {MAX_CHILDREN}",
                unique.len()
            ),
        ));
    }
    Ok(unique)
}

/// The first cycle the child links would form if job `id` had `children`,
/// as the list of job ids around it; `None` if there is none.
pub fn child_cycle(id: JobId, children: &[JobId], jobs: &[JobRow]) -> Option<Vec<JobId>> {
    let links: std::collections::HashMap<JobId, Vec<JobId>> = jobs
        .iter()
        .map(|job| {
            (
                job.id,
                if job.id == id {
                    children.to_vec()
                } else {
                    children_of(job)
                },
            )
        })
        .chain(std::iter::once((id, children.to_vec())))
        .collect();
    // Depth-first from `id`, remembering the path.
    let mut stack = vec![(id, vec![id])];
    let mut seen = std::collections::HashSet::new();
    while let Some((job, path)) = stack.pop() {
        for child in links.get(&job).into_iter().flatten() {
            if *child == id {
                let mut cycle = path.clone();
                cycle.push(id);
                return Some(cycle);
            }
            if seen.insert(*child) {
                let mut next = path.clone();
                next.push(*child);
                stack.push((*child, next));
            }
        }
    }
    None
}
