//! The management commands: `module`, `job`, `runs`, `logs`, `kill` and
//! `state`, each a thin layer over the admin's API ([`ApiClient`]).
//!
//! Output is a readable table or summary by default and the admin's JSON
//! with `--json`. Errors print one line naming what went wrong and exit 1.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::client::ApiClient;

/// How to reach the admin, shared by every management command.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of the admin API.
    #[arg(
        long,
        global = true,
        env = "CRONBOX_ADMIN",
        default_value = "http://127.0.0.1:8080"
    )]
    admin: String,
    /// API token (default: the one `cronbox up` keeps in
    /// ./cronbox-data/api-token).
    #[arg(long, global = true, env = "CRONBOX_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the admin's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

impl Connection {
    /// What every command starts from: a client, whether to print JSON,
    /// and a runtime to drive the requests on.
    fn open(&self) -> anyhow::Result<(ApiClient, bool, tokio::runtime::Runtime)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        Ok((self.client()?, self.json, runtime))
    }

    fn client(&self) -> anyhow::Result<ApiClient> {
        let token = match &self.token {
            Some(token) => token.clone(),
            None => std::fs::read_to_string("cronbox-data/api-token")
                .map(|token| token.trim().to_owned())
                .map_err(|_| {
                    anyhow::anyhow!(
                        "no API token: pass --token or set CRONBOX_API_TOKEN (cronbox up keeps \
                         its token in cronbox-data/api-token)"
                    )
                })?,
        };
        Ok(ApiClient::new(&self.admin, &token))
    }
}

/// Push and manage job modules (named, versioned components).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox module push greeter target/wasm32-wasip2/release/greeter.wasm --label beta
  cronbox module list
  cronbox module versions greeter
  cronbox module rollback greeter 2")]
pub struct ModuleArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: ModuleCommand,
}

#[derive(Debug, Subcommand)]
enum ModuleCommand {
    /// Upload a component as the next version of NAME (jobs following NAME
    /// move to it).
    Push {
        name: String,
        file: PathBuf,
        /// Label for the new version (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
    },
    /// The latest version of each module.
    List,
    /// Every kept version of a module, newest first.
    Versions { name: String },
    /// Make an earlier version current again.
    Rollback { name: String, version: i64 },
}

/// Create and manage jobs.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox job create --file greeter.toml --start
  cronbox job create --name hi --module greeter --cron '*/5 * * * * ?' --param you
  cronbox job list
  cronbox job trigger 3 --param 'once more'
  cronbox job update 3 --file greeter.toml
  cronbox job stop 3 && cronbox job delete 3

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
    /// Timeout of a run, in milliseconds.
    #[arg(long)]
    timeout_ms: Option<i64>,
    /// A new instance for every run (init, execute, destroy each time)
    /// instead of a warm one.
    #[arg(long)]
    fresh_instance: bool,
}

impl JobDefinition {
    fn to_json(&self) -> anyhow::Result<Value> {
        let mut job = match &self.file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let table: toml::Table = text
                    .parse()
                    .with_context(|| format!("{} is not valid TOML", path.display()))?;
                serde_json::to_value(table)?
            }
            None => json!({}),
        };
        let mut set = |key: &str, value: Value| job[key] = value;
        if let Some(name) = &self.name {
            set("name", name.clone().into());
        }
        if let Some(module) = &self.module {
            set("module", module.clone().into());
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
        if let Some(timeout) = self.timeout_ms {
            set("timeout_ms", timeout.into());
        }
        if self.fresh_instance {
            set("fresh_instance", true.into());
        }
        Ok(job)
    }
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
        id: i64,
        #[command(flatten)]
        definition: JobDefinition,
    },
    /// The jobs this token sees.
    List,
    /// One job, with its next fire times.
    Show { id: i64 },
    /// Start firing on schedule.
    Start { id: i64 },
    /// Stop firing.
    Stop { id: i64 },
    /// Run now.
    Trigger {
        id: i64,
        /// Parameter for this run (default: the job's).
        #[arg(long)]
        param: Option<String>,
        /// Executor address for this run (repeatable; operator only, and
        /// only executors of the job's group).
        #[arg(long = "address")]
        addresses: Vec<String>,
    },
    /// Delete a job (its runs stay).
    Delete { id: i64 },
}

/// List runs, newest first.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox runs --job 3 --limit 20
  cronbox runs --status failed --json")]
pub struct RunsArgs {
    #[command(flatten)]
    connection: Connection,
    /// Runs of this job.
    #[arg(long)]
    job: Option<i64>,
    /// pending, dispatched, success, failed or cancelled.
    #[arg(long)]
    status: Option<String>,
    /// How many.
    #[arg(long, default_value_t = 20)]
    limit: u32,
}

/// Print a run's log; with --follow, until the run ends.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox logs 42
  cronbox logs 42 --follow")]
pub struct LogsArgs {
    #[command(flatten)]
    connection: Connection,
    run: i64,
    /// Keep printing new lines until the run ends.
    #[arg(long, short)]
    follow: bool,
}

/// Kill a running run, or every run of a job.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox kill 42          the run 42
  cronbox kill --job 3     job 3's running, queued and held runs, and its
                           runs waiting to be dispatched (retries included)")]
pub struct KillArgs {
    #[command(flatten)]
    connection: Connection,
    /// The run to kill.
    #[arg(required_unless_present = "job", conflicts_with = "job")]
    run: Option<i64>,
    /// Kill every run of this job instead.
    #[arg(long)]
    job: Option<i64>,
}

/// Print a job's durable state.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  cronbox state 3")]
pub struct StateArgs {
    #[command(flatten)]
    connection: Connection,
    job: i64,
}

fn print_json(value: &Value) {
    outln!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
    );
}

/// Prints rows under a header, columns padded to their widest cell.
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        outln!("{}", padded.join("  ").trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

/// Prints a JSON array as the admin sent it (`--json`), or as a table with
/// one `row` per element.
fn print_list(json: bool, value: &Value, header: &[&str], row: impl Fn(&Value) -> Vec<String>) {
    if json {
        print_json(value);
    } else {
        let rows: Vec<Vec<String>> = list(value).iter().map(row).collect();
        print_table(header, &rows);
    }
}

/// A JSON field as table text.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn short(digest: &Value) -> String {
    cell(digest).chars().take(12).collect()
}

/// Milliseconds since the epoch as a UTC time.
fn time(ms: &Value) -> String {
    ms.as_i64()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || "-".to_owned(),
            |at| at.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        )
}

pub fn module(args: ModuleArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            ModuleCommand::Push { name, file, labels } => {
                let bytes = std::fs::read(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                eprintln!("uploading {} ({} bytes)…", file.display(), bytes.len());
                let answer = client.upload_named(&name, &labels, bytes).await?;
                if json {
                    print_json(&answer);
                } else {
                    outln!(
                        "{} version {} ({}), {} job(s) moved to it",
                        name,
                        cell(&answer["version"]),
                        short(&answer["digest"]),
                        cell(&answer["jobs_moved"])
                    );
                }
            }
            ModuleCommand::List => print_list(
                json,
                &client.get("/api/v1/modules").await?,
                &["NAME", "LATEST", "DIGEST", "LABELS", "PUSHED (UTC)"],
                |m| {
                    vec![
                        cell(&m["name"]),
                        cell(&m["version"]),
                        short(&m["digest"]),
                        labels(&m["labels"]),
                        time(&m["created_at_ms"]),
                    ]
                },
            ),
            ModuleCommand::Versions { name } => print_list(
                json,
                &client
                    .get(&format!("/api/v1/modules/{name}/versions"))
                    .await?,
                &["VERSION", "DIGEST", "LABELS", "NOTE", "PUSHED (UTC)"],
                |v| {
                    vec![
                        cell(&v["version"]),
                        short(&v["digest"]),
                        labels(&v["labels"]),
                        cell(&v["note"]),
                        time(&v["created_at_ms"]),
                    ]
                },
            ),
            ModuleCommand::Rollback { name, version } => {
                let answer = client
                    .post(
                        &format!("/api/v1/modules/{name}/rollback"),
                        &json!({ "version": version }),
                    )
                    .await?;
                if json {
                    print_json(&answer);
                } else {
                    outln!(
                        "{name} rolled back to version {version}: now version {} ({}), {} job(s) moved",
                        cell(&answer["version"]["version"]),
                        short(&answer["version"]["digest"]),
                        cell(&answer["jobs_moved"])
                    );
                }
            }
        }
        Ok(())
    })
}

fn list(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

fn labels(value: &Value) -> String {
    let labels: Vec<String> = list(value).iter().map(cell).collect();
    if labels.is_empty() {
        "-".to_owned()
    } else {
        labels.join(",")
    }
}

pub fn job(args: JobArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let show_job = |job: &Value| {
            if json {
                print_json(job);
            } else {
                outln!(
                    "job {} {:?}: {} {} ({}), module {}, {}",
                    cell(&job["id"]),
                    cell(&job["name"]),
                    cell(&job["schedule_type"]),
                    cell(&job["schedule_conf"]),
                    cell(&job["time_zone"]),
                    job["module_name"]
                        .as_str()
                        .map_or_else(|| short(&job["module_digest"]), str::to_owned),
                    if job["enabled"] == true {
                        "started"
                    } else {
                        "stopped"
                    }
                );
            }
        };
        match args.command {
            JobCommand::Create { definition, start } => {
                let mut job = client.post("/api/v1/jobs", &definition.to_json()?).await?;
                if start {
                    job = client
                        .post(
                            &format!("/api/v1/jobs/{}/start", cell(&job["id"])),
                            &Value::Null,
                        )
                        .await?;
                }
                show_job(&job);
            }
            JobCommand::Update { id, definition } => {
                let mut body = client.get(&format!("/api/v1/jobs/{id}")).await?;
                // The stored job as a definition, then the changes on top.
                body["group"] = body["group_name"].clone();
                if let Some(name) = body["module_name"].as_str() {
                    body["module"] = match body["module_version"].as_i64() {
                        Some(version) => format!("{name}@{version}").into(),
                        None => name.into(),
                    };
                    body["module_digest"] = "".into();
                }
                let changes = definition.to_json()?;
                if changes.get("module_digest").is_some() {
                    body["module"] = Value::Null;
                }
                if changes.get("module").is_some() {
                    body["module_digest"] = "".into();
                }
                for (key, value) in changes.as_object().into_iter().flatten() {
                    body[key] = value.clone();
                }
                let object = body.as_object_mut().context("a job is an object")?;
                for stored_only in [
                    "id",
                    "tenant",
                    "group_name",
                    "enabled",
                    "next_fire_at_ms",
                    "module_name",
                    "module_version",
                ] {
                    object.remove(stored_only);
                }
                if object.get("module").is_some_and(Value::is_null) {
                    object.remove("module");
                }
                let job = client.put(&format!("/api/v1/jobs/{id}"), &body).await?;
                show_job(&job);
            }
            JobCommand::List => print_list(
                json,
                &client.get("/api/v1/jobs").await?,
                &[
                    "ID",
                    "NAME",
                    "SCHEDULE",
                    "MODULE",
                    "STATE",
                    "NEXT FIRE (UTC)",
                ],
                |job| {
                    vec![
                        cell(&job["id"]),
                        cell(&job["name"]),
                        format!(
                            "{} {}",
                            cell(&job["schedule_type"]),
                            cell(&job["schedule_conf"])
                        )
                        .trim()
                        .to_owned(),
                        job["module_name"]
                            .as_str()
                            .map_or_else(|| short(&job["module_digest"]), str::to_owned),
                        if job["enabled"] == true {
                            "started"
                        } else {
                            "stopped"
                        }
                        .to_owned(),
                        time(&job["next_fire_at_ms"]),
                    ]
                },
            ),
            JobCommand::Show { id } => {
                let job = client.get(&format!("/api/v1/jobs/{id}")).await?;
                let fires = client
                    .get(&format!("/api/v1/jobs/{id}/next-fires?count=5"))
                    .await?;
                if json {
                    print_json(&json!({ "job": job, "next_fires": fires }));
                } else {
                    show_job(&job);
                    for fire in list(&fires) {
                        outln!("  next: {}", cell(&fire));
                    }
                }
            }
            JobCommand::Start { id } => show_job(
                &client
                    .post(&format!("/api/v1/jobs/{id}/start"), &Value::Null)
                    .await?,
            ),
            JobCommand::Stop { id } => show_job(
                &client
                    .post(&format!("/api/v1/jobs/{id}/stop"), &Value::Null)
                    .await?,
            ),
            JobCommand::Trigger {
                id,
                param,
                addresses,
            } => {
                // A person at the CLI: the run's kind is `manual` (a
                // program calling the API gets `api`).
                let mut body = json!({ "kind": "manual" });
                if let Some(param) = param {
                    body["param"] = param.into();
                }
                if !addresses.is_empty() {
                    body["addresses"] = addresses.into();
                }
                let answer = client
                    .post(&format!("/api/v1/jobs/{id}/trigger"), &body)
                    .await?;
                if json {
                    print_json(&answer);
                } else {
                    outln!("run {}", cell(&answer["run_id"]));
                }
            }
            JobCommand::Delete { id } => {
                let answer = client.delete(&format!("/api/v1/jobs/{id}")).await?;
                if json {
                    print_json(&answer);
                } else {
                    outln!("job {id} deleted");
                }
            }
        }
        Ok(())
    })
}

pub fn runs(args: RunsArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let mut path = format!("/api/v1/runs?limit={}", args.limit);
        if let Some(job) = args.job {
            path.push_str(&format!("&job={job}"));
        }
        if let Some(status) = &args.status {
            path.push_str(&format!("&status={status}"));
        }
        let page = client.get(&path).await?;
        if json {
            print_json(&page);
            return Ok(());
        }
        let rows: Vec<Vec<String>> = list(&page["runs"])
            .iter()
            .map(|run| {
                vec![
                    cell(&run["id"]),
                    cell(&run["job_id"]),
                    cell(&run["kind"]),
                    time(&run["scheduled_at_ms"]),
                    cell(&run["status"]),
                    cell(&run["outcome"]),
                    cell(&run["message"]).chars().take(60).collect(),
                ]
            })
            .collect();
        print_table(
            &[
                "RUN",
                "JOB",
                "KIND",
                "SCHEDULED (UTC)",
                "STATUS",
                "OUTCOME",
                "MESSAGE",
            ],
            &rows,
        );
        Ok(())
    })
}

/// How often `logs --follow` asks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

pub fn logs(args: LogsArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let mut offset = 0;
        loop {
            let page = client
                .get(&format!("/api/v1/runs/{}/log?offset={offset}", args.run))
                .await?;
            let lines = list(&page["lines"]);
            let mut out = std::io::stdout().lock();
            for line in &lines {
                if json {
                    writeln!(out, "{line}")?;
                } else {
                    writeln!(
                        out,
                        "{:<6} {:<5} {}",
                        cell(&line["source"]),
                        cell(&line["level"]),
                        cell(&line["text"])
                    )?;
                }
            }
            out.flush()?;
            offset = page["next_offset"].as_u64().unwrap_or(offset as u64) as usize;
            if !args.follow || (page["finished"] == true && lines.is_empty()) {
                break;
            }
            if page["finished"] == true {
                continue; // read what is left
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        if args.follow {
            let run = client.get(&format!("/api/v1/runs/{}", args.run)).await?;
            eprintln!(
                "run {} ended: {} ({})",
                args.run,
                cell(&run["outcome"]),
                cell(&run["message"])
            );
        }
        Ok(())
    })
}

pub fn kill(args: KillArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        if let Some(job) = args.job {
            let answer = client
                .post(&format!("/api/v1/jobs/{job}/kill"), &Value::Null)
                .await?;
            if json {
                print_json(&answer);
                return Ok(());
            }
            let count = |key: &str| answer[key].as_array().map_or(0, Vec::len);
            outln!(
                "job {job}: {} runs killed, {} waiting runs cancelled",
                count("killed"),
                count("cancelled")
            );
            for executor in list(&answer["unreachable"]) {
                outln!("  not reached: {}", cell(&executor));
            }
            return Ok(());
        }
        let run = args.run.context("name a run, or --job")?;
        let answer = client
            .post(&format!("/api/v1/runs/{run}/kill"), &Value::Null)
            .await?;
        if json {
            print_json(&answer);
        } else if answer["killed"] == true {
            outln!("run {run} killed");
        } else {
            bail!("run {run} was not running on its executor any more");
        }
        Ok(())
    })
}

pub fn state(args: StateArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = client
            .get(&format!("/api/v1/jobs/{}/state", args.job))
            .await?;
        if json {
            print_json(&answer);
        } else {
            let rows: Vec<Vec<String>> = answer["state"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(key, value)| vec![key.clone(), cell(value)])
                .collect();
            print_table(&["KEY", "VALUE"], &rows);
        }
        Ok(())
    })
}
