//! `cronbox job` (create, update, list, show, start, stop, pause, trigger,
//! backfill, import, export, delete) and `cronbox state`.

use std::process::ExitCode;

use super::job_definition::{JobDefinition, job_definitions};
use super::job_ref::JobRef;
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
        /// The job's id, or its name.
        job: JobRef,
        #[command(flatten)]
        definition: JobDefinition,
    },
    /// The jobs this token sees.
    List,
    /// One job, with its next fire times.
    Show {
        /// The job's id, or its name.
        job: JobRef,
    },
    /// Start firing on schedule.
    Start {
        /// The job's id, or its name.
        job: JobRef,
    },
    /// Stop firing.
    Stop {
        /// The job's id, or its name.
        job: JobRef,
    },
    /// Run the schedule's instants in a past range (runs of kind backfill),
    /// a few a second.
    Backfill {
        /// The job's id, or its name.
        job: JobRef,
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
        /// The job's id, or its name.
        job: JobRef,
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
    /// Run now; prints the run's id (with --wait, then its log as it is
    /// written, exiting 1 unless it succeeds).
    Trigger {
        /// The job's id, or its name.
        job: JobRef,
        /// Parameter for this run (default: the job's).
        #[arg(long)]
        param: Option<String>,
        /// Executor address for this run (repeatable; operator only, and
        /// only executors of the job's group).
        #[arg(long = "address")]
        addresses: Vec<String>,
        /// Follow the run to its end (its log as it is written) and exit
        /// with its outcome, as `cronbox logs ID --follow` does.
        #[arg(long)]
        wait: bool,
    },
    /// Delete a job (its runs stay).
    Delete {
        /// The job's id, or its name.
        job: JobRef,
    },
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
    /// The job's id, or its name.
    job: JobRef,
}

/// What runs a job: the module it follows, or its digest; a legacy job's
/// handler on its xxl-job executors.
pub(super) fn module_of(job: &Job) -> String {
    if let Some(handler) = &job.executor_handler {
        return format!("handler {handler}");
    }
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
            "job {} {:?}: {} {} ({}), {}, {}",
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

pub fn job(args: JobArgs) -> anyhow::Result<ExitCode> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let done = match args.command {
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
            JobCommand::Update { job, definition } => {
                let id = job.id(&client).await?;
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
                    "NEXT FIRE (THE JOB'S ZONE)",
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
                        super::job_details::local_time(job.next_fire_at_ms, &job.time_zone),
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
            JobCommand::Show { job } => {
                let id = job.id(&client).await?;
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
            JobCommand::Start { job } => {
                show_job(json, &client.start_job(job.id(&client).await?).await?)
            }
            JobCommand::Stop { job } => {
                show_job(json, &client.stop_job(job.id(&client).await?).await?)
            }
            JobCommand::Backfill {
                job,
                from,
                to,
                per_second,
            } => {
                let id = job.id(&client).await?;
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
                job,
                note,
                r#for,
                until,
            } => {
                let id = job.id(&client).await?;
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
                job,
                param,
                addresses,
                wait,
            } => {
                let id = job.id(&client).await?;
                // A person at the CLI: the run's kind is `manual` (a
                // program calling the API gets `api`).
                let request = TriggerRequest {
                    param,
                    addresses: (!addresses.is_empty()).then_some(addresses),
                    kind: TriggerSource::Manual,
                };
                let answer = client.trigger(id, &request).await?;
                // The bare id, for `R=$(cronbox job trigger 4)`.
                show(json, &answer, |answer| outln!("{}", answer.run_id))?;
                if wait {
                    return super::runs::ended_with(&client, answer.run_id, json).await;
                }
                Ok(())
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
            JobCommand::Delete { job } => {
                let id = job.id(&client).await?;
                let answer = client.delete_job(id).await?;
                show(json, &answer, |_| outln!("job {id} deleted"))
            }
        };
        done.map(|()| ExitCode::SUCCESS)
    })
}

pub fn state(args: StateArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = client.state(args.job.id(&client).await?).await?;
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
