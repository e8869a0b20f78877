//! Job definitions as users submit them, validated before anything is
//! stored.

use std::collections::BTreeMap;

use cronbox_api::HttpLimits;
pub use cronbox_api::JobSpec;
use cronbox_api::parse_ignoring_case;
use cronbox_net_policy::NetPolicy;

use crate::model::{BlockStrategy, Digest, JobId, MisfirePolicy, RouteStrategy};
use crate::routing::RouteError;
use crate::schedule::{Rules, Schedule, ScheduleError, ScheduleType};
use crate::store::JobRow;

/// A refused job definition: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidJob {
    pub field: &'static str,
    pub message: String,
}

pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> InvalidJob {
    InvalidJob {
        field,
        message: message.into(),
    }
}

/// Largest parameter accepted, in bytes.
pub const MAX_PARAM_BYTES: usize = 64 << 10;

/// Most keys of a job's configuration.
pub const MAX_CONFIG_KEYS: usize = 64;
/// Longest configuration key.
pub const MAX_CONFIG_KEY_BYTES: usize = 128;
/// Longest configuration value.
pub const MAX_CONFIG_VALUE_BYTES: usize = 4 << 10;
/// Most bytes of a job's configuration, keys and values together.
pub const MAX_CONFIG_BYTES: usize = 16 << 10;

/// Longest executor group name.
pub const MAX_GROUP_BYTES: usize = 128;

/// Longest schedule expression (cron, interval or instant).
pub const MAX_SCHEDULE_CONF_BYTES: usize = 256;

/// Longest time zone name.
pub const MAX_TIME_ZONE_BYTES: usize = 64;

/// Longest alarm webhook URL.
pub const MAX_ALARM_URL_BYTES: usize = 2048;

/// The most a job may ask for, set by the operator: a tenant's jobs cannot
/// hold an executor's slots for days, or reserve its memory budget whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobMaxima {
    pub timeout_ms: i64,
    pub concurrency: i64,
    /// At most 4 GiB, all a 32-bit memory can address (an executor clamps
    /// a run's limit further to its own ceiling).
    pub memory_bytes: i64,
}

impl Default for JobMaxima {
    fn default() -> Self {
        JobMaxima {
            timeout_ms: 24 * 3_600_000,
            concurrency: 64,
            memory_bytes: 1 << 30,
        }
    }
}

/// Checks every field of a definition within `maxima`; returns the row to
/// store (disabled) and the parsed schedule.
pub fn validate(
    spec: &JobSpec,
    tenant: &str,
    maxima: &JobMaxima,
    alarm_nets: &NetPolicy,
) -> Result<(JobRow, Schedule), InvalidJob> {
    if spec.name.trim().is_empty() || spec.name.len() > 200 {
        return Err(invalid("name", "must be 1 to 200 characters"));
    }
    if spec.group.trim().is_empty() || spec.group.len() > MAX_GROUP_BYTES {
        return Err(invalid(
            "group",
            format!("must be 1 to {MAX_GROUP_BYTES} characters"),
        ));
    }
    for (field, text) in [("name", &spec.name), ("group", &spec.group)] {
        refuse_control_characters(field, text)?;
    }
    for (field, value, max) in [
        (
            "schedule_conf",
            &spec.schedule_conf,
            MAX_SCHEDULE_CONF_BYTES,
        ),
        ("time_zone", &spec.time_zone, MAX_TIME_ZONE_BYTES),
        ("alarm_url", &spec.alarm_url, MAX_ALARM_URL_BYTES),
    ] {
        if value.len() > max {
            return Err(invalid(
                field,
                format!("{} bytes; at most {max}", value.len()),
            ));
        }
    }
    crate::legacy::check_glue_type(spec)?;
    // A named module's digest is resolved when the job is stored; a legacy
    // job names a handler instead (its group is checked when it is stored).
    let (module_name, module_version, module_digest) = if let Some(handler) = &spec.executor_handler
    {
        crate::legacy::check_handler(handler, spec)?;
        (None, None, Digest::default())
    } else {
        match (&spec.module, spec.module_digest.is_empty()) {
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
                (Some(name), version, Digest::default())
            }
            (None, false) => {
                let digest: Digest = spec.module_digest.parse().map_err(|_| {
                    invalid("module_digest", "must be a sha256 in hex (64 characters)")
                })?;
                (None, None, digest)
            }
        }
    };
    if !spec.alarm_url.is_empty() {
        check_alarm_url(&spec.alarm_url, alarm_nets)?;
    }
    let (kind, schedule) =
        checked_schedule(&spec.schedule_type, &spec.schedule_conf, &spec.time_zone)?;
    let misfire: MisfirePolicy = spec.misfire.parse().map_err(|_| {
        invalid(
            "misfire",
            format!(
                "unknown misfire strategy {:?}: use DO_NOTHING or FIRE_ONCE_NOW",
                spec.misfire
            ),
        )
    })?;
    if !(0..=86_400_000).contains(&spec.misfire_threshold_ms) {
        return Err(invalid(
            "misfire_threshold_ms",
            "must be between 0 and 86400000 (one day)",
        ));
    }
    let route: RouteStrategy = parse_ignoring_case(&spec.route).map_err(|_| {
        invalid(
            "route",
            RouteError::UnknownStrategy(spec.route.clone()).to_string(),
        )
    })?;
    let block: BlockStrategy =
            spec.block_strategy.parse().map_err(|_| {
                invalid(
                    "block_strategy",
                    format!(
                        "unknown block strategy {:?}: use SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY or CONCURRENT",
                        spec.block_strategy
                    ),
                )
            })?;
    if !(1..=maxima.concurrency).contains(&spec.max_concurrency) {
        return Err(invalid(
            "max_concurrency",
            format!(
                "must be between 1 and {} (this admin's maximum)",
                maxima.concurrency
            ),
        ));
    }
    if !(1..=maxima.timeout_ms).contains(&spec.timeout_ms) {
        return Err(invalid(
            "timeout_ms",
            format!(
                "must be between 1 and {} ms (this admin's maximum)",
                maxima.timeout_ms
            ),
        ));
    }
    if spec.fuel.is_some_and(|fuel| fuel <= 0) {
        return Err(invalid("fuel", "must be positive when given"));
    }
    if !((1 << 20)..=maxima.memory_bytes).contains(&spec.memory_bytes) {
        return Err(invalid(
            "memory_bytes",
            format!(
                "must be between 1 MiB and {} bytes (this admin's maximum)",
                maxima.memory_bytes
            ),
        ));
    }
    if !(0..=100).contains(&spec.retry_count) {
        return Err(invalid("retry_count", "must be between 0 and 100"));
    }
    if !(0..=86_400_000).contains(&spec.retry_interval_ms) {
        return Err(invalid(
            "retry_interval_ms",
            "must be between 0 and 86400000 (one day)",
        ));
    }
    if spec.param.len() > MAX_PARAM_BYTES {
        return Err(invalid(
            "param",
            format!("longer than {MAX_PARAM_BYTES} bytes"),
        ));
    }
    let row = JobRow {
        id: JobId::default(),
        tenant: tenant.to_owned(),
        group_name: spec.group.clone(),
        name: spec.name.clone(),
        module_digest,
        schedule_type: kind,
        schedule_conf: spec.schedule_conf.trim().to_owned(),
        time_zone: spec.time_zone.clone(),
        misfire,
        misfire_threshold_ms: spec.misfire_threshold_ms,
        route,
        block_strategy: block,
        max_concurrency: spec.max_concurrency,
        timeout_ms: spec.timeout_ms,
        fuel: spec.fuel,
        memory_bytes: spec.memory_bytes,
        retry_count: spec.retry_count,
        retry_interval_ms: spec.retry_interval_ms,
        children: unique_children(&spec.children)?,
        param: spec.param.clone(),
        enabled: false,
        next_fire_at_ms: None,
        module_name,
        module_version,
        alarm_url: spec.alarm_url.clone(),
        fresh_instance: spec.fresh_instance,
        config: checked_config(&spec.config)?,
        http_allow: checked_http_allow(&spec.http_allow)?,
        http_limits: checked_http_limits(&spec.http_limits)?,
        secrets: checked_secret_names(&spec.secrets, &spec.config)?,
        schedule_rules: checked_rules(&spec.schedule_rules, &spec.time_zone)?,
        pause: None,
        executor_handler: spec.executor_handler.clone(),
        xxl_job_id: checked_xxl_job_id(spec.xxl_job_id)?,
    };
    Ok((row, schedule))
}

/// What an alarm webhook's host is: an address, checked against the
/// allowed networks at once, or a name, checked once it is resolved, when
/// an alarm is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmHost {
    Address,
    Name,
}

/// An alarm webhook: an http(s) URL with a host; an address written out
/// must be one the admin may call (a name is checked when it is called,
/// after it is resolved).
pub fn check_alarm_url(url: &str, alarm_nets: &NetPolicy) -> Result<AlarmHost, InvalidJob> {
    let not_http = || invalid("alarm_url", format!("{url:?} is not an http(s) URL"));
    let parsed = reqwest::Url::parse(url).map_err(|_| not_http())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(not_http());
    }
    let host = parsed.host_str().ok_or_else(not_http)?;
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let Ok(address) = literal.parse::<std::net::IpAddr>() else {
        return Ok(AlarmHost::Name);
    };
    alarm_nets
        .check(address)
        .map(|()| AlarmHost::Address)
        .map_err(|denied| {
            invalid(
                "alarm_url",
                format!("{url:?}: {denied} (the admin's --alarm-allow-nets allows a network)"),
            )
        })
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

/// Refuses a name holding a control character (CR, LF, TAB, ESC, ...):
/// names are printed in tables and terminals, where one could rewrite the
/// rows around it.
pub fn refuse_control_characters(field: &'static str, text: &str) -> Result<(), InvalidJob> {
    match text.chars().find(|c| c.is_control()) {
        Some(c) => Err(invalid(
            field,
            format!(
                "holds the control character U+{:04X}; names may not hold control characters",
                u32::from(c)
            ),
        )),
        None => Ok(()),
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

/// A schedule as a job definition writes it (type, configuration, time
/// zone), refused naming the field at fault: what a job is checked with
/// when saved, and what the schedule preview shows before it is.
pub fn checked_schedule(
    schedule_type: &str,
    conf: &str,
    time_zone: &str,
) -> Result<(ScheduleType, Schedule), InvalidJob> {
    let kind: ScheduleType = parse_ignoring_case(schedule_type).map_err(|_| {
        invalid(
            "schedule_type",
            ScheduleError::UnknownType(schedule_type.to_owned()).to_string(),
        )
    })?;
    let schedule = Schedule::parse(kind, conf, time_zone).map_err(|error| {
        let field = match error {
            ScheduleError::UnknownTimeZone(_) => "time_zone",
            _ => "schedule_conf",
        };
        invalid(field, error.to_string())
    })?;
    Ok((kind, schedule))
}

/// Schedule rules as written, checked (the excluded dates sorted and
/// without repeats); `time_zone` was checked with the schedule.
fn checked_rules(
    rules: &cronbox_api::ScheduleRules,
    time_zone: &str,
) -> Result<cronbox_api::ScheduleRules, InvalidJob> {
    let zone = time_zone.parse().unwrap_or(chrono_tz::Tz::UTC);
    let checked =
        Rules::parse(rules, zone, 0).map_err(|refused| invalid(refused.field, refused.message))?;
    Ok(cronbox_api::ScheduleRules {
        exclude_dates: crate::schedule::date_texts(&checked.excluded),
        ..rules.clone()
    })
}

/// The rules of a stored job.
pub fn rules_of(job: &JobRow) -> Rules {
    stored_rules(&job.schedule_rules, &job.time_zone, job.id)
}

/// The rules `rules` of job `id` stored with `time_zone`. A job row's zone
/// is checked as it is read (see `store::rows`), and its rules when saved;
/// rules that no longer pass (saved by an earlier version) allow no fire
/// rather than none of their limits: a window that failed to parse must
/// not open now.
pub fn stored_rules(rules: &cronbox_api::ScheduleRules, time_zone: &str, id: JobId) -> Rules {
    match crate::store::stored_schedule_rules(rules, time_zone, id) {
        Ok(rules) => rules,
        Err(error) => {
            tracing::error!(job = %id, %error, "the job will not fire");
            Rules {
                seed: id.0,
                ends_at_ms: Some(i64::MIN),
                ..Rules::default()
            }
        }
    }
}

/// The schedule of a stored job.
pub fn schedule_of(job: &JobRow) -> Result<Schedule, ScheduleError> {
    Schedule::parse(job.schedule_type, &job.schedule_conf, &job.time_zone)
}

/// Whether `param` sends code to a job that reads secrets: `cronbox dev`
/// sources (see [`cronbox_api::carries_dev_sources`]), which only the role
/// that may change such a job's code sends, and never a workflow or a
/// parent job.
pub fn sends_code_to_secrets(job: &JobRow, param: &str) -> bool {
    !job.secrets.is_empty() && cronbox_api::carries_dev_sources(param)
}

/// The child job ids of a stored job.
pub fn children_of(job: &JobRow) -> Vec<JobId> {
    job.children.clone()
}

/// Most children a job may have: each success writes one run per child.
pub const MAX_CHILDREN: usize = 32;

/// A job's configuration within [`MAX_CONFIG_KEYS`],
/// [`MAX_CONFIG_KEY_BYTES`], [`MAX_CONFIG_VALUE_BYTES`] and
/// [`MAX_CONFIG_BYTES`]; keys not empty.
fn checked_config(
    config: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, InvalidJob> {
    if config.len() > MAX_CONFIG_KEYS {
        return Err(invalid(
            "config",
            format!("{} keys; at most {MAX_CONFIG_KEYS}", config.len()),
        ));
    }
    let mut total = 0;
    for (key, value) in config {
        if key.is_empty() || key.len() > MAX_CONFIG_KEY_BYTES {
            return Err(invalid(
                "config",
                format!("key {key:?} must be 1 to {MAX_CONFIG_KEY_BYTES} bytes"),
            ));
        }
        if value.len() > MAX_CONFIG_VALUE_BYTES {
            return Err(invalid(
                "config",
                format!(
                    "the value of {key:?} is {} bytes; at most {MAX_CONFIG_VALUE_BYTES}",
                    value.len()
                ),
            ));
        }
        total += key.len() + value.len();
    }
    if total > MAX_CONFIG_BYTES {
        return Err(invalid(
            "config",
            format!("{total} bytes in all; at most {MAX_CONFIG_BYTES}"),
        ));
    }
    Ok(config.clone())
}

/// Most origins a job may be granted.
pub const MAX_HTTP_GRANTS: usize = 32;

/// A job's HTTP grants, each parsed and written in its canonical form
/// (`HTTPS://Api.Example.com:443/` is stored as `https://api.example.com`).
fn checked_http_allow(origins: &[String]) -> Result<Vec<String>, InvalidJob> {
    if origins.len() > MAX_HTTP_GRANTS {
        return Err(invalid(
            "http_allow",
            format!("{} origins; at most {MAX_HTTP_GRANTS}", origins.len()),
        ));
    }
    let parsed = cronbox_net_policy::parse_origins(origins)
        .map_err(|error| invalid("http_allow", error.to_string()))?;
    let mut canonical: Vec<String> = Vec::with_capacity(parsed.len());
    for origin in parsed.iter().map(ToString::to_string) {
        if !canonical.contains(&origin) {
            canonical.push(origin);
        }
    }
    Ok(canonical)
}

/// A job's HTTP limits, each from 1 to [`HttpLimits::MAX`]'s.
fn checked_http_limits(limits: &HttpLimits) -> Result<HttpLimits, InvalidJob> {
    match limits.first_outside(&HttpLimits::MAX) {
        Some((name, value, max)) => Err(invalid(
            "http_limits",
            format!("{name} is {value}; it must be 1 to {max}"),
        )),
        None => Ok(*limits),
    }
}

/// The names of the secrets a job references: each a secret name, once,
/// at most [`MAX_JOB_SECRETS`](crate::secrets::MAX_JOB_SECRETS), none also
/// a configuration key (both are read through `wasi:config/store`).
fn checked_secret_names(
    names: &[String],
    config: &BTreeMap<String, String>,
) -> Result<Vec<String>, InvalidJob> {
    use crate::secrets::{MAX_JOB_SECRETS, is_secret_name};
    if names.len() > MAX_JOB_SECRETS {
        return Err(invalid(
            "secrets",
            format!("{} secrets; at most {MAX_JOB_SECRETS}", names.len()),
        ));
    }
    let mut unique: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        if !is_secret_name(name) {
            return Err(invalid(
                "secrets",
                format!("{name:?} is not a secret name (1 to 64 of A-Z a-z 0-9 _ - .)"),
            ));
        }
        if config.contains_key(name) {
            return Err(invalid(
                "secrets",
                format!("{name:?} is also a config key; a job reads both by name"),
            ));
        }
        if !unique.contains(name) {
            unique.push(name.clone());
        }
    }
    Ok(unique)
}

/// A job's xxl-job id, if it has one: positive, as xxl-job's are.
fn checked_xxl_job_id(id: Option<i64>) -> Result<Option<i64>, InvalidJob> {
    match id {
        Some(id) if id <= 0 => Err(invalid("xxl_job_id", "must be positive")),
        id => Ok(id),
    }
}

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
