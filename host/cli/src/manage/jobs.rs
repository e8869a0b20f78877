//! `cronbox job` (create, update, list, show, start, stop, pause, trigger,
//! backfill, import, export, delete) and `cronbox state`.

use super::*;

/// Create and manage jobs.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox job create --file greeter.toml --start
  cronbox job create --name hi --module greeter --cron '*/5 * * * * ?' --param you
  cronbox job list
  cronbox job trigger 3 --param 'once more'
  cronbox job update 3 --file greeter.toml
  cronbox job stop 3 && cronbox job delete 3
  cronbox job export > jobs.jsonl && cronbox job import jobs.jsonl --start

A job file holds the fields of the API's job (see `GET /api/v1/openapi.json`):
  name = \"greeter\"
  module = \"greeter\"            # or \"greeter@2\" to pin, or module_digest = \"...\"
  schedule_type = \"CRON\"
  schedule_conf = \"0 */5 * * * ?\"
  time_zone = \"Europe/Berlin\"
  param = \"world\"")]
pub struct JobArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: JobCommand,
}

/// A job definition from a TOML file and/or flags (flags win).
#[derive(Debug, Clone, Args)]
struct JobDefinition {
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
    fn changes(&self) -> anyhow::Result<Map<String, Value>> {
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
    fn spec(&self) -> anyhow::Result<JobSpec> {
        Ok(self.with_job_config(definition(Value::Object(self.changes()?))?))
    }

    /// `job`'s definition with these changes on top: naming a module (or
    /// a digest) replaces the other.
    fn applied_to(&self, job: Job) -> anyhow::Result<JobSpec> {
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
fn job_definitions(text: &str) -> anyhow::Result<Vec<JobSpec>> {
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

#[derive(Debug, Subcommand)]
enum JobCommand {
    /// Create a job (stopped unless --start).
    Create {
        #[command(flatten)]
        definition: JobDefinition,
        /// Start firing on schedule right away.
        #[arg(long)]
        start: bool,
    },
    /// Replace a job's definition.
    Update {
        id: JobId,
        #[command(flatten)]
        definition: JobDefinition,
    },
    /// The jobs this token sees.
    List,
    /// One job, with its next fire times.
    Show { id: JobId },
    /// Start firing on schedule.
    Start { id: JobId },
    /// Stop firing.
    Stop { id: JobId },
    /// Run the schedule's instants in a past range (runs of kind backfill),
    /// a few a second.
    Backfill {
        id: JobId,
        /// Start of the range, exclusive (RFC 3339).
        #[arg(long)]
        from: String,
        /// End of the range, inclusive (RFC 3339; default now).
        #[arg(long)]
        to: Option<String>,
        /// Runs written per second (1 to 1,000; default 10).
        #[arg(long)]
        per_second: Option<i64>,
    },
    /// Cancel a backfill: no more of its runs are written.
    BackfillCancel { backfill: i64 },
    /// Pause with a note: no fire until --for / --until passes (then it
    /// resumes by itself), or until started.
    Pause {
        id: JobId,
        /// Why (shown with the job).
        #[arg(long, default_value = "")]
        note: String,
        /// Resume after this long (`2h`, `30m`, `1d`).
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "until")]
        r#for: Option<Duration>,
        /// Resume at this instant (RFC 3339, e.g. 2026-12-01T09:00:00Z).
        #[arg(long)]
        until: Option<String>,
    },
    /// Run now.
    Trigger {
        id: JobId,
        /// Parameter for this run (default: the job's).
        #[arg(long)]
        param: Option<String>,
        /// Executor address for this run (repeatable; operator only, and
        /// only executors of the job's group).
        #[arg(long = "address")]
        addresses: Vec<String>,
    },
    /// Delete a job (its runs stay).
    Delete { id: JobId },
    /// Create many jobs from a file of definitions: one JSON object per
    /// line (what `job export` writes) or one JSON array; sent 1,000 at a
    /// time, each thousand all or none.
    Import {
        /// The file (default: stdin).
        file: Option<PathBuf>,
        /// Start every job that has a next fire.
        #[arg(long)]
        start: bool,
    },
    /// Every job this token sees as definitions, one JSON object per line
    /// (what `job import` reads).
    Export,
}

/// Print a job's durable state.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  cronbox state 3")]
pub struct StateArgs {
    #[command(flatten)]
    connection: Connection,
    job: JobId,
}

/// What runs a job: the module it follows, or its digest.
pub(super) fn module_of(job: &Job) -> String {
    match (&job.module_name, job.module_version) {
        (Some(name), Some(version)) => format!("{name}@{version}"),
        (Some(name), None) => name.clone(),
        (None, _) => job.module_digest.short().to_owned(),
    }
}

pub(super) fn started(job: &Job) -> String {
    match &job.pause {
        Some(pause) => format!(
            "paused by {}{}{}",
            pause.by,
            match pause.until_ms {
                Some(until) => format!(" until {}", time(Some(until))),
                None => String::new(),
            },
            if pause.note.is_empty() {
                String::new()
            } else {
                format!(": {}", pause.note)
            }
        ),
        None if job.enabled => "started".to_owned(),
        None => "stopped".to_owned(),
    }
}

fn show_job(json: bool, job: &Job) -> anyhow::Result<()> {
    show(json, job, |job| {
        outln!(
            "job {} {:?}: {} {} ({}), module {}, {}",
            job.id,
            job.name,
            job.schedule_type,
            job.schedule_conf,
            job.time_zone,
            module_of(job),
            started(job)
        );
    })
}

pub fn job(args: JobArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            JobCommand::Create { definition, start } => {
                let spec = definition.spec()?;
                if !definition.changes()?.contains_key("schedule_type") {
                    eprintln!(
                        "note: no schedule given (--cron, or schedule_type in --file): the job \
                         runs only when triggered (`cronbox job trigger ID`)"
                    );
                }
                let mut job = client.create_job(&spec).await?;
                if start {
                    job = client.start_job(job.id).await?;
                }
                show_job(json, &job)
            }
            JobCommand::Update { id, definition } => {
                let spec = definition.applied_to(client.job(id).await?)?;
                show_job(json, &client.update_job(id, &spec).await?)
            }
            JobCommand::List => print_list(
                json,
                &client.jobs(&JobQuery::default()).await?,
                &[
                    "ID",
                    "NAME",
                    "SCHEDULE",
                    "MODULE",
                    "STATE",
                    "NEXT FIRE (UTC)",
                    "LAST RUN",
                ],
                |listed| {
                    let job = &listed.job;
                    vec![
                        job.id.to_string(),
                        job.name.clone(),
                        format!("{} {}", job.schedule_type, job.schedule_conf)
                            .trim()
                            .to_owned(),
                        module_of(job),
                        started(job).to_owned(),
                        time(job.next_fire_at_ms),
                        listed.last_run.as_ref().map_or("-".to_owned(), |run| {
                            format!(
                                "{} {} {}",
                                run.id,
                                run.outcome
                                    .map_or(run.status.to_string(), |o| o.to_string()),
                                time(Some(run.scheduled_at_ms))
                            )
                        }),
                    ]
                },
            ),
            JobCommand::Show { id } => {
                let job = client.job(id).await?;
                let fires = client.next_fires(id, 5).await?;
                if json {
                    print_json(&json!({ "job": job, "next_fires": fires }))
                } else {
                    // The runs that were due, not fires written ahead.
                    let query = cronbox_api::RunQuery {
                        job: Some(id),
                        to_ms: Some(chrono::Utc::now().timestamp_millis() + 1),
                        limit: Some(5),
                        ..Default::default()
                    };
                    let recent = client.runs(&query).await?;
                    super::job_details::print(&job, &fires, &recent.runs);
                    Ok(())
                }
            }
            JobCommand::Start { id } => show_job(json, &client.start_job(id).await?),
            JobCommand::Stop { id } => show_job(json, &client.stop_job(id).await?),
            JobCommand::Backfill {
                id,
                from,
                to,
                per_second,
            } => {
                let instant = |flag: &str, text: &str| -> anyhow::Result<i64> {
                    Ok(chrono::DateTime::parse_from_rfc3339(text)
                        .with_context(|| format!("--{flag} {text:?} is not an RFC 3339 instant"))?
                        .timestamp_millis())
                };
                let request = cronbox_api::BackfillRequest {
                    from_ms: instant("from", &from)?,
                    to_ms: match &to {
                        Some(text) => instant("to", text)?,
                        None => chrono::Utc::now().timestamp_millis(),
                    },
                    per_second,
                };
                let backfill = client.backfill(id, &request).await?;
                show(json, &backfill, |backfill| {
                    outln!(
                        "backfill {} of job {}: {} instant(s), {} a second",
                        backfill.id,
                        backfill.job_id,
                        backfill.planned,
                        backfill.per_second
                    );
                })
            }
            JobCommand::BackfillCancel { backfill } => {
                let backfill = client.cancel_backfill(backfill).await?;
                show(json, &backfill, |backfill| {
                    outln!(
                        "backfill {} {}: {} of {} run(s) written",
                        backfill.id,
                        backfill.status,
                        backfill.written,
                        backfill.planned
                    );
                })
            }
            JobCommand::Pause {
                id,
                note,
                r#for,
                until,
            } => {
                let until_ms = match (r#for, until) {
                    (Some(wait), _) => Some(
                        chrono::Utc::now().timestamp_millis()
                            + i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2),
                    ),
                    (None, Some(text)) => Some(
                        chrono::DateTime::parse_from_rfc3339(&text)
                            .with_context(|| {
                                format!("--until {text:?} is not an RFC 3339 instant")
                            })?
                            .timestamp_millis(),
                    ),
                    (None, None) => None,
                };
                let request = cronbox_api::PauseRequest { note, until_ms };
                show_job(json, &client.pause_job(id, &request).await?)
            }
            JobCommand::Trigger {
                id,
                param,
                addresses,
            } => {
                // A person at the CLI: the run's kind is `manual` (a
                // program calling the API gets `api`).
                let request = TriggerRequest {
                    param,
                    addresses: (!addresses.is_empty()).then_some(addresses),
                    kind: TriggerSource::Manual,
                };
                let answer = client.trigger(id, &request).await?;
                show(json, &answer, |answer| outln!("run {}", answer.run_id))
            }
            JobCommand::Import { file, start } => {
                let specs = job_definitions(&read_input(file.as_ref(), "the job definitions")?)?;
                let mut created = JobsCreated {
                    ids: Vec::new(),
                    started: 0,
                };
                for (chunk, jobs) in specs.chunks(JobBatch::MAX).enumerate() {
                    let batch = JobBatch {
                        jobs: jobs.to_vec(),
                        start,
                    };
                    let done = client.create_jobs(&batch).await.with_context(|| {
                        format!(
                            "jobs {} to {} refused ({} imported before them)",
                            chunk * JobBatch::MAX + 1,
                            chunk * JobBatch::MAX + jobs.len(),
                            created.ids.len()
                        )
                    })?;
                    created.ids.extend(done.ids);
                    created.started += done.started;
                }
                if json {
                    print_json(&created)
                } else {
                    outln!(
                        "imported {} jobs ({} started)",
                        created.ids.len(),
                        created.started
                    );
                    Ok(())
                }
            }
            JobCommand::Export => {
                for job in every_job(&client).await? {
                    outln!("{}", serde_json::to_string(&JobSpec::from(job))?);
                }
                Ok(())
            }
            JobCommand::Delete { id } => {
                let answer = client.delete_job(id).await?;
                show(json, &answer, |_| outln!("job {id} deleted"))
            }
        }
    })
}

pub fn state(args: StateArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = client.state(args.job).await?;
        show(json, &answer, |answer| {
            let rows: Vec<Vec<String>> = answer
                .state
                .iter()
                .map(|(key, value)| vec![key.clone(), value.clone()])
                .collect();
            print_table(&["KEY", "VALUE"], &rows);
        })
    })
}
