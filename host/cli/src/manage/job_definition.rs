//! A job's definition as `cronbox job create` and `update` take it: a TOML
//! file and flags (flags win), merged onto the job's current definition for
//! an update; and the JSON definitions `job import` reads.

use super::*;

/// A job definition from a TOML file and/or flags (flags win).
#[derive(Debug, Clone, Args)]
pub(super) struct JobDefinition {
    /// TOML file with the job's fields.
    #[arg(long)]
    file: Option<PathBuf>,
    #[arg(long)]
    name: Option<String>,
    /// NAME (follow the latest version) or NAME@VERSION (pin).
    #[arg(long)]
    module: Option<String>,
    /// For a job of a legacy group (xxl-job executors): the handler it
    /// runs there (`@XxlJob("name")`) instead of a module.
    #[arg(long, value_name = "HANDLER", conflicts_with = "module")]
    handler: Option<String>,
    /// A cron expression (sets schedule_type CRON).
    #[arg(long)]
    cron: Option<String>,
    /// IANA time zone of the cron expression.
    #[arg(long)]
    zone: Option<String>,
    #[arg(long)]
    param: Option<String>,
    /// Route strategy (FIRST, ROUND, SHARDING_BROADCAST, ...).
    #[arg(long)]
    route: Option<String>,
    /// The executor group its runs go to (`cronbox group list`).
    #[arg(long)]
    group: Option<String>,
    /// Timeout of a run, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<i64>,
    /// Retries of a failed run (0 to 100).
    #[arg(long, value_name = "COUNT")]
    retries: Option<i64>,
    /// Wait before each retry, in milliseconds.
    #[arg(long, value_name = "MS")]
    retry_interval_ms: Option<i64>,
    /// What a fire missed past its threshold does: DO_NOTHING or
    /// FIRE_ONCE_NOW.
    #[arg(long, value_name = "POLICY")]
    misfire: Option<String>,
    /// What a fire does while a run is still going: SERIAL_EXECUTION,
    /// DISCARD_LATER or COVER_EARLY.
    #[arg(long, value_name = "STRATEGY")]
    block: Option<String>,
    /// Runs of the job at once (with --block SERIAL_EXECUTION).
    #[arg(long, value_name = "COUNT")]
    max_concurrency: Option<i64>,
    /// Memory a run may take, in bytes.
    #[arg(long, value_name = "BYTES")]
    memory_bytes: Option<i64>,
    /// Fuel a run may burn (wasmtime's instruction budget).
    #[arg(long)]
    fuel: Option<i64>,
    /// A webhook called (POST, JSON) when a run fails.
    #[arg(long, value_name = "URL")]
    alarm_url: Option<String>,
    /// A new instance for every run (init, execute, destroy each time)
    /// instead of a warm one.
    #[arg(long)]
    fresh_instance: bool,
    /// A configuration entry the job reads through wasi:config/store, as
    /// KEY=VALUE (repeatable; on update, added to the job's others).
    #[arg(long = "job-config", value_name = "KEY=VALUE", value_parser = crate::run::parse_key_value)]
    job_config: Vec<(String, String)>,
    /// An origin the job may call over HTTP (`https://api.example.com`,
    /// `https://*.example.com`; repeatable, replacing the job's grants).
    /// Each must lie within the tenant's ceiling.
    #[arg(long = "http-allow", value_name = "ORIGIN")]
    http_allow: Vec<String>,
    /// Take away every HTTP grant of the job.
    #[arg(long, conflicts_with = "http_allow")]
    no_http: bool,
    /// A secret of your tenant the job reads (repeatable, replacing the
    /// job's list); `cronbox secret set NAME` first.
    #[arg(long = "secret", value_name = "NAME")]
    secrets: Vec<String>,
}

impl JobDefinition {
    /// The file's fields, then the flags', as a JSON object.
    pub(super) fn changes(&self) -> anyhow::Result<Map<String, Value>> {
        let mut job = match &self.file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let table: toml::Table = text
                    .parse()
                    .with_context(|| format!("{} is not valid TOML", path.display()))?;
                match serde_json::to_value(table)? {
                    Value::Object(fields) => fields,
                    _ => Map::new(),
                }
            }
            None => Map::new(),
        };
        let mut set = |key: &str, value: Value| {
            job.insert(key.to_owned(), value);
        };
        if let Some(name) = &self.name {
            set("name", name.clone().into());
        }
        // A job runs a module or a handler: giving one takes the other away
        // (a job moves between them keeping its id, history and schedule).
        if let Some(module) = &self.module {
            set("module", module.clone().into());
            set("executor_handler", Value::Null);
        }
        if let Some(handler) = &self.handler {
            set("executor_handler", handler.clone().into());
            set("module", Value::Null);
            set("module_digest", "".into());
        }
        if let Some(cron) = &self.cron {
            set("schedule_type", "CRON".into());
            set("schedule_conf", cron.clone().into());
        }
        if let Some(zone) = &self.zone {
            set("time_zone", zone.clone().into());
        }
        if let Some(param) = &self.param {
            set("param", param.clone().into());
        }
        if let Some(route) = &self.route {
            set("route", route.clone().into());
        }
        if let Some(group) = &self.group {
            set("group", group.clone().into());
        }
        if let Some(timeout) = self.timeout_ms {
            set("timeout_ms", timeout.into());
        }
        for (key, value) in [
            ("retry_count", self.retries),
            ("retry_interval_ms", self.retry_interval_ms),
            ("max_concurrency", self.max_concurrency),
            ("memory_bytes", self.memory_bytes),
            ("fuel", self.fuel),
        ] {
            if let Some(value) = value {
                set(key, value.into());
            }
        }
        for (key, value) in [
            ("misfire", &self.misfire),
            ("block_strategy", &self.block),
            ("alarm_url", &self.alarm_url),
        ] {
            if let Some(value) = value {
                set(key, value.clone().into());
            }
        }
        if self.fresh_instance {
            set("fresh_instance", true.into());
        }
        if !self.http_allow.is_empty() || self.no_http {
            set("http_allow", self.http_allow.clone().into());
        }
        if !self.secrets.is_empty() {
            set("secrets", self.secrets.clone().into());
        }
        Ok(job)
    }

    /// `spec` with the configuration flags added to its configuration.
    fn with_job_config(&self, mut spec: JobSpec) -> JobSpec {
        spec.config.extend(self.job_config.iter().cloned());
        spec
    }

    /// A new job's definition.
    pub(super) fn spec(&self) -> anyhow::Result<JobSpec> {
        Ok(self.with_job_config(definition(Value::Object(self.changes()?))?))
    }

    /// `job`'s definition with these changes on top: naming a module (or
    /// a digest) replaces the other.
    pub(super) fn applied_to(&self, job: Job) -> anyhow::Result<JobSpec> {
        let changes = self.changes()?;
        let mut spec = JobSpec::from(job);
        if changes.contains_key("module") {
            spec.module_digest.clear();
        }
        if changes.contains_key("module_digest") {
            spec.module = None;
        }
        let mut merged = match serde_json::to_value(spec)? {
            Value::Object(fields) => fields,
            _ => Map::new(),
        };
        merged.extend(changes);
        Ok(self.with_job_config(definition(Value::Object(merged))?))
    }
}

/// Job definitions from a JSON array or from JSON lines (blank lines
/// skipped); a bad one is named by its line or place.
pub(super) fn job_definitions(text: &str) -> anyhow::Result<Vec<JobSpec>> {
    if text.trim_start().starts_with('[') {
        let values: Vec<Value> =
            serde_json::from_str(text).context("the file is not a JSON array of jobs")?;
        return values
            .into_iter()
            .enumerate()
            .map(|(at, value)| definition(value).with_context(|| format!("job {}", at + 1)))
            .collect();
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(at, line)| {
            let value: Value = serde_json::from_str(line)
                .with_context(|| format!("line {}: not a JSON object", at + 1))?;
            definition(value).with_context(|| format!("line {}", at + 1))
        })
        .collect()
}

/// A job definition from its fields, with the name of a field that is
/// not one or not of its type.
fn definition(fields: Value) -> anyhow::Result<JobSpec> {
    serde_json::from_value(fields).context("not a job definition")
}
