//! The management commands: `module`, `job`, `runs`, `logs`, `kill`,
//! `state` and `quota`, each a thin layer over the admin's API ([`ApiClient`]).
//!
//! Output is a readable table or summary by default and the admin's JSON
//! with `--json`. Errors print one line naming what went wrong and exit 1.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use cronbox_api::{
    Client, Job, JobBatch, JobId, JobQuery, JobSpec, JobsCreated, LogSource, Quota, QuotaSettings,
    Role, RunId, RunQuery, RunStatus, TriggerRequest, TriggerSource, UserSpec,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

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
    fn open(&self) -> anyhow::Result<(Client, bool, tokio::runtime::Runtime)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        Ok((self.client()?, self.json, runtime))
    }

    fn client(&self) -> anyhow::Result<Client> {
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
        Ok(Client::new(&self.admin, &token))
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
    job: Option<JobId>,
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
    run: RunId,
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
    run: Option<RunId>,
    /// Kill every run of this job instead.
    #[arg(long)]
    job: Option<JobId>,
}

/// Print a job's durable state.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  cronbox state 3")]
pub struct StateArgs {
    #[command(flatten)]
    connection: Connection,
    job: JobId,
}

/// Set, list and delete your tenant's secrets (values are write-only).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  printf %s \"$SLACK_TOKEN\" | cronbox secret set SLACK_TOKEN\n  \
                        cronbox secret set DB_PASSWORD --file ./db-password\n  cronbox secret list\n  \
                        cronbox secret delete SLACK_TOKEN [--force]\n\nA job reads a secret it references \
                        (\"secrets\": [\"SLACK_TOKEN\"] in its definition, or --secret on job \
                        create|update) with ctx.secret(\"SLACK_TOKEN\")."
)]
pub struct SecretArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: SecretCommand,
}

#[derive(Debug, Subcommand)]
enum SecretCommand {
    /// Set a secret from stdin (or --file), replacing any value it had;
    /// runs dispatched from now on read the new value.
    Set {
        name: String,
        /// Read the value from this file instead of stdin (taken as is,
        /// with no trailing newline removed).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Names, dates and the jobs referencing each; never values.
    List,
    /// Delete a secret (refused while a job references it).
    Delete {
        name: String,
        /// Delete even while jobs reference it.
        #[arg(long)]
        force: bool,
    },
}

pub fn secret(args: SecretArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            SecretCommand::Set { name, file } => {
                let value = read_input(file.as_ref(), "the secret")?;
                let secret = client.set_secret(&name, &value).await?;
                show(json, &secret, |secret| {
                    outln!("secret {} set ({} bytes)", secret.name, value.len());
                })
            }
            SecretCommand::List => {
                let secrets = client.secrets().await?;
                show(json, &secrets, |secrets| {
                    for secret in secrets {
                        let used: Vec<String> = secret.used_by.iter().map(i64::to_string).collect();
                        outln!(
                            "{:<10} {:<32} updated {}  jobs: {}",
                            secret.tenant,
                            crate::out::printable(&secret.name, false),
                            time(Some(secret.updated_at_ms)),
                            if used.is_empty() {
                                "-".to_owned()
                            } else {
                                used.join(", ")
                            }
                        );
                    }
                })
            }
            SecretCommand::Delete { name, force } => {
                let deleted = client.delete_secret(&name, force).await?;
                show(json, &deleted, |deleted| {
                    outln!("secret {} deleted", deleted.name);
                    if !deleted.still_referenced_by.is_empty() {
                        let ids: Vec<String> = deleted
                            .still_referenced_by
                            .iter()
                            .map(i64::to_string)
                            .collect();
                        outln!(
                            "still referenced by job(s) {}: they read nothing under it",
                            ids.join(", ")
                        );
                    }
                })
            }
        }
    })
}

/// Add, list, remove users and set their passwords (what people log in to
/// the console with).
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  printf %s \"$PASSWORD\" | cronbox user add ada --role developer\n  \
                        cronbox user add ops --tenant acme --role admin --password-file ./pw\n  \
                        cronbox user list\n  cronbox user passwd ada --password-file ./new-pw\n  \
                        cronbox user remove ada\n\nRoles: viewer (reads), developer (modules, jobs, \
                        runs, state), admin (and users, tokens, secrets), operator (every tenant; \
                        users of tenant default only)."
)]
pub struct UserArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(Debug, Subcommand)]
enum UserCommand {
    /// Add a user; its password is read from stdin (or --password-file).
    Add {
        /// 1 to 63 of a-z 0-9 . _ - (unique across tenants).
        name: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// The user's tenant (default: the caller's own).
        #[arg(long)]
        tenant: Option<String>,
        /// Read the password from this file (its trailing newline dropped).
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// The users you manage.
    List {
        /// Only this tenant's (operator).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Set a user's password from stdin (or --password-file); its sessions end.
    Passwd {
        name: String,
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
    /// Remove a user, ending its sessions and revoking its tokens.
    Remove { name: String },
}

fn parse_role(text: &str) -> Result<Role, String> {
    cronbox_api::parse_ignoring_case(text)
        .map_err(|_| format!("{text:?} is not a role: viewer, developer, admin or operator"))
}

/// The text of `file`, or of stdin without one, as it is; `what` names it
/// in an error.
fn read_input(file: Option<&PathBuf>, what: &str) -> anyhow::Result<String> {
    match file {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        }
        None => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .with_context(|| format!("cannot read {what} from stdin"))?;
            Ok(text)
        }
    }
}

/// A password from a file or stdin, without the line end a shell or an
/// editor adds.
fn read_password(file: Option<&PathBuf>) -> anyhow::Result<String> {
    let text = read_input(file, "the password")?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

pub fn user(args: UserArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            UserCommand::Add {
                name,
                role,
                tenant,
                password_file,
            } => {
                let spec = UserSpec {
                    name,
                    tenant,
                    role,
                    password: read_password(password_file.as_ref())?,
                };
                let user = client.create_user(&spec).await?;
                show(json, &user, |user| {
                    outln!(
                        "user {} added to tenant {} as {}",
                        user.name,
                        user.tenant,
                        user.role
                    );
                })
            }
            UserCommand::List { tenant } => {
                let users = client.users(tenant.as_deref()).await?;
                show(json, &users, |users| {
                    for user in users {
                        outln!(
                            "{:<10} {:<24} {:<10} since {}",
                            user.tenant,
                            user.name,
                            user.role,
                            time(Some(user.created_at_ms))
                        );
                    }
                })
            }
            UserCommand::Passwd {
                name,
                password_file,
            } => {
                let password = read_password(password_file.as_ref())?;
                let changed = client.set_password(&name, &password).await?;
                show(json, &changed, |changed| {
                    outln!(
                        "password of {} set; {} session(s) ended",
                        changed.name,
                        changed.sessions_ended
                    );
                })
            }
            UserCommand::Remove { name } => {
                let changed = client.remove_user(&name).await?;
                show(json, &changed, |changed| {
                    outln!(
                        "user {} removed; {} session(s) ended, {} token(s) revoked",
                        changed.name,
                        changed.sessions_ended,
                        changed.tokens_revoked
                    );
                })
            }
        }
    })
}

/// Show or set the origins a tenant's jobs may be granted for HTTP.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  cronbox ceiling acme\n  cronbox ceiling acme --set \
                        'https://*.example.com' https://hooks.slack.com\n  cronbox ceiling acme --clear"
)]
pub struct CeilingArgs {
    #[command(flatten)]
    connection: Connection,
    /// The tenant (`default` for the operator's own jobs).
    tenant: String,
    /// Replace the ceiling with these origins (operator token).
    #[arg(long, num_args = 1.., value_name = "ORIGIN")]
    set: Vec<String>,
    /// Allow no origin at all (operator token).
    #[arg(long, conflicts_with = "set")]
    clear: bool,
}

pub fn ceiling(args: CeilingArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = if args.set.is_empty() && !args.clear {
            client.http_ceiling(&args.tenant).await?
        } else {
            let ceiling = cronbox_api::HttpCeiling { origins: args.set };
            client.set_http_ceiling(&args.tenant, &ceiling).await?
        };
        show(json, &answer, |answer| {
            if answer.origins.is_empty() {
                outln!("tenant {}: no origin (jobs may not use HTTP)", args.tenant);
            }
            for origin in &answer.origins {
                outln!("{origin}");
            }
        })
    })
}

/// Show or set a tenant's quotas.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  cronbox quota show acme\n  cronbox quota set acme jobs=500 \
                        state_bytes=64MiB min_interval_ms=1m running_runs=default"
)]
pub struct QuotaArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: QuotaCommand,
}

#[derive(Debug, Subcommand)]
enum QuotaCommand {
    /// Every quota of a tenant: its limit, whether the tenant has its own,
    /// and its use.
    Show {
        /// The tenant (a tenant's token may read its own).
        #[arg(default_value = "default")]
        tenant: String,
    },
    /// Set some of a tenant's quotas (operator token); `NAME=default`
    /// returns one to the operator's default.
    Set {
        tenant: String,
        /// `NAME=VALUE`: a number, a size for the byte quotas (`64MiB`), a
        /// duration for the millisecond ones (`1m`), or `default`.
        #[arg(required = true, value_parser = parse_quota_change)]
        changes: Vec<(Quota, Option<u64>)>,
    },
}

/// `NAME=VALUE` for a quota: a number; a size (`64MiB`) for the byte
/// quotas; a duration (`1m`, `2h`) for the millisecond ones; `default`
/// for none of the tenant's own.
pub(crate) fn parse_quota_change(text: &str) -> Result<(Quota, Option<u64>), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    let quota: Quota = name.trim().parse().map_err(|error| format!("{error}"))?;
    let value = value.trim();
    if value == "default" {
        return Ok((quota, None));
    }
    if let Ok(number) = value.parse::<u64>() {
        return Ok((quota, Some(number)));
    }
    let unit = quota.as_str();
    let parsed = if unit.contains("bytes") {
        value
            .parse::<bytesize::ByteSize>()
            .map(|size| size.as_u64())
            .map_err(|_| "a number of bytes or a size such as 64MiB")
    } else if unit.contains("ms") {
        humantime::parse_duration(value)
            .map(|duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
            .map_err(|_| "a number of milliseconds or a duration such as 1m")
    } else {
        Err("a number")
    };
    parsed
        .map(|limit| (quota, Some(limit)))
        .map_err(|expected| format!("quota {quota}: {value:?} is not {expected}"))
}

pub fn quota(args: QuotaArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let answer = match args.command {
            QuotaCommand::Show { tenant } => client.quotas(&tenant).await?,
            QuotaCommand::Set { tenant, changes } => {
                // The tenant's own quotas stay unless changed (the API
                // replaces them all).
                let mut own = QuotaSettings::default();
                for quota in client.quotas(&tenant).await?.quotas {
                    if quota.own {
                        own.set(quota.quota, Some(quota.limit));
                    }
                }
                for (quota, limit) in changes {
                    own.set(quota, limit);
                }
                client.set_quotas(&tenant, &own).await?
            }
        };
        show(json, &answer, |answer| {
            outln!("tenant {}", answer.tenant);
            let rows: Vec<Vec<String>> = answer
                .quotas
                .iter()
                .map(|quota| {
                    vec![
                        quota.quota.to_string(),
                        quota.limit.to_string(),
                        if quota.own { "tenant" } else { "default" }.to_owned(),
                        or_dash(quota.used),
                    ]
                })
                .collect();
            print_table(&["QUOTA", "LIMIT", "SET BY", "USED"], &rows);
        })
    })
}

fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints an answer as the admin sent it (`--json`), or as `human` has it.
fn show<T: Serialize>(json: bool, answer: &T, human: impl FnOnce(&T)) -> anyhow::Result<()> {
    if json {
        print_json(answer)
    } else {
        human(answer);
        Ok(())
    }
}

/// Prints rows under a header, columns padded to their widest cell; a
/// cell's control characters are shown escaped ([`crate::out::printable`]).
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| crate::out::printable(cell, false).into_owned())
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
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
        line(row);
    }
}

/// Prints a list as the admin sent it (`--json`), or as a table with one
/// `row` per element.
fn print_list<T: Serialize>(
    json: bool,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> anyhow::Result<()> {
    show(json, &items, |items| {
        let rows: Vec<Vec<String>> = items.iter().map(row).collect();
        print_table(header, &rows);
    })
}

/// An optional value as table text.
fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

/// Milliseconds since the epoch as a UTC time.
fn time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || "-".to_owned(),
            |at| at.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        )
}

fn labels(labels: &[String]) -> String {
    if labels.is_empty() {
        "-".to_owned()
    } else {
        labels.join(",")
    }
}

pub fn module(args: ModuleArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            ModuleCommand::Push { name, file, labels } => {
                let bytes = std::fs::read(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                eprintln!("uploading {} ({} bytes)…", file.display(), bytes.len());
                let answer = client.upload(bytes, Some(&name), &labels).await?;
                show(json, &answer, |answer| {
                    outln!(
                        "{} version {} ({}), {} job(s) moved to it",
                        name,
                        or_dash(answer.version),
                        answer.digest.short(),
                        or_dash(answer.jobs_moved)
                    );
                })
            }
            ModuleCommand::List => print_list(
                json,
                &client.modules().await?,
                &["NAME", "LATEST", "DIGEST", "LABELS", "PUSHED (UTC)"],
                |m| {
                    let latest = &m.latest;
                    vec![
                        latest.name.clone(),
                        latest.version.to_string(),
                        latest.digest.short().to_owned(),
                        labels(&latest.labels),
                        time(Some(latest.created_at_ms)),
                    ]
                },
            ),
            ModuleCommand::Versions { name } => print_list(
                json,
                &client.module_versions(&name).await?,
                &["VERSION", "DIGEST", "LABELS", "NOTE", "BY", "PUSHED (UTC)"],
                |v| {
                    vec![
                        v.version.to_string(),
                        v.digest.short().to_owned(),
                        labels(&v.labels),
                        if v.note.is_empty() { "-".to_owned() } else { v.note.clone() },
                        if v.pushed_by.is_empty() { "-".to_owned() } else { v.pushed_by.clone() },
                        time(Some(v.created_at_ms)),
                    ]
                },
            ),
            ModuleCommand::Rollback { name, version } => {
                let answer = client.rollback(&name, version).await?;
                show(json, &answer, |answer| {
                    outln!(
                        "{name} rolled back to version {version}: now version {} ({}), {} job(s) moved",
                        answer.version.version,
                        answer.version.digest.short(),
                        answer.jobs_moved
                    );
                })
            }
        }
    })
}

/// What runs a job: the module it follows, or its digest.
fn module_of(job: &Job) -> String {
    match (&job.module_name, job.module_version) {
        (Some(name), Some(version)) => format!("{name}@{version}"),
        (Some(name), None) => name.clone(),
        (None, _) => job.module_digest.short().to_owned(),
    }
}

fn started(job: &Job) -> String {
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
                let mut job = client.create_job(&definition.spec()?).await?;
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
                ],
                |job| {
                    vec![
                        job.id.to_string(),
                        job.name.clone(),
                        format!("{} {}", job.schedule_type, job.schedule_conf)
                            .trim()
                            .to_owned(),
                        module_of(job),
                        started(job).to_owned(),
                        time(job.next_fire_at_ms),
                    ]
                },
            ),
            JobCommand::Show { id } => {
                let job = client.job(id).await?;
                let fires = client.next_fires(id, 5).await?;
                if json {
                    print_json(&json!({ "job": job, "next_fires": fires }))
                } else {
                    show_job(false, &job)?;
                    for fire in fires {
                        outln!("  next: {fire}");
                    }
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
                let mut query = JobQuery::default();
                loop {
                    let page = client.jobs(&query).await?;
                    let Some(last) = page.last() else {
                        return Ok(());
                    };
                    query.after = Some(last.id);
                    for job in page {
                        outln!("{}", serde_json::to_string(&JobSpec::from(job))?);
                    }
                }
            }
            JobCommand::Delete { id } => {
                let answer = client.delete_job(id).await?;
                show(json, &answer, |_| outln!("job {id} deleted"))
            }
        }
    })
}

/// Pages `cronbox runs` reads to fill its list (each reads at most 50,000
/// runs for a status filter).
const RUNS_PAGES_AT_MOST: usize = 20;

pub fn runs(args: RunsArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let status = args
            .status
            .as_deref()
            .map(str::parse::<RunStatus>)
            .transpose()
            .map_err(|error| {
                anyhow::anyhow!("{error}: use pending, dispatched, success, failed or cancelled")
            })?;
        let mut query = RunQuery {
            job: args.job,
            status,
            limit: Some(args.limit),
            ..RunQuery::default()
        };
        // A page reads a bounded number of runs for its status: go on from
        // its cursor until the newest `limit` are found, a few pages at
        // most (the answer's `next_before` says where the rest begin).
        let mut page = client.runs(&query).await?;
        for _ in 1..RUNS_PAGES_AT_MOST {
            let (Some(before), true) = (page.next_before, page.runs.len() < args.limit as usize)
            else {
                break;
            };
            query.before = Some(before);
            query.limit = Some(args.limit - page.runs.len() as u32);
            let more = client.runs(&query).await?;
            page.runs.extend(more.runs);
            page.next_before = more.next_before;
        }
        show(json, &page, |page| {
            let rows: Vec<Vec<String>> = page
                .runs
                .iter()
                .map(|run| {
                    vec![
                        run.id.to_string(),
                        run.job_id.to_string(),
                        run.kind.to_string(),
                        time(Some(run.scheduled_at_ms)),
                        run.status.to_string(),
                        or_dash(run.outcome.as_ref()),
                        or_dash(run.message.as_ref()).chars().take(60).collect(),
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
        })
    })
}

/// How often `logs --follow` asks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

pub fn logs(args: LogsArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let mut offset = 0;
        loop {
            let page = client.log(args.run, offset).await?;
            let mut out = std::io::stdout().lock();
            for line in &page.lines {
                if json {
                    writeln!(out, "{}", serde_json::to_string(line)?)?;
                } else {
                    let (source, level) = source_and_level(line.source);
                    let text = crate::out::printable(&line.text, true);
                    writeln!(out, "{source:<6} {level:<5} {text}")?;
                }
            }
            out.flush()?;
            offset = page.next_offset;
            if !args.follow || (page.finished && page.lines.is_empty()) {
                break;
            }
            if page.finished {
                continue; // read what is left
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        if args.follow {
            let run = client.run(args.run).await?;
            eprintln!(
                "run {} ended: {} ({})",
                args.run,
                or_dash(run.outcome.as_ref()),
                or_dash(run.message.as_ref())
            );
        }
        Ok(())
    })
}

/// A log line's source and level as the admin's JSON names them.
fn source_and_level(source: LogSource) -> (&'static str, String) {
    match source {
        LogSource::Stdout => ("stdout", "-".to_owned()),
        LogSource::Stderr => ("stderr", "-".to_owned()),
        LogSource::Guest(level) => ("guest", level.to_string().to_ascii_lowercase()),
        LogSource::Host => ("host", "-".to_owned()),
    }
}

pub fn kill(args: KillArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        if let Some(job) = args.job {
            let answer = client.kill_job(job).await?;
            return show(json, &answer, |answer| {
                outln!(
                    "job {job}: {} runs killed, {} waiting runs cancelled",
                    answer.outcome.killed.len(),
                    answer.outcome.cancelled.len()
                );
                for executor in &answer.outcome.unreachable {
                    outln!("  not reached: {executor}");
                }
            });
        }
        let run = args.run.context("name a run, or --job")?;
        let answer = client.kill_run(run).await?;
        if json {
            print_json(&answer)
        } else if answer.killed {
            outln!("run {run} killed");
            Ok(())
        } else {
            bail!("run {run} was not running on its executor any more");
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
