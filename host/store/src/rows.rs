//! The rows the store reads and writes, and how they are decoded.

use super::*;
use cronbox_schedule::{Rules, Schedule, ScheduleError};

/// A job as stored: the API's [`Job`](cronbox_api::Job), which the
/// store reads and writes whole.
pub type JobRow = cronbox_api::Job;

/// The columns of a job, as a literal for `concat!` (queries stay static).
macro_rules! job_columns {
    () => {
        "id, tenant, group_name, name, module_digest, schedule_type, schedule_conf, time_zone, \
         misfire, misfire_threshold_ms, route, block_strategy, max_concurrency, timeout_ms, fuel, \
         memory_bytes, retry_count, retry_interval_ms, param, enabled, next_fire_at_ms, \
         module_name, module_version, alarm_url, fresh_instance, config, http, secrets, \
         schedule_rules, pause, executor_handler, xxl_job_id"
    };
}

/// [`decode`] for a column that may be NULL.
pub(super) fn decode_optional<T>(row: &AnyRow, column: &str) -> Result<Option<T>, sqlx::Error>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| {
        text.parse()
            .map_err(|error: T::Err| sqlx::Error::ColumnDecode {
                index: column.to_owned(),
                source: Box::new(error),
            })
    })
    .transpose()
}

/// A text column decoded into one of the domain's enums: an unknown value
/// is an error naming the column, never a default.
pub(super) fn decode<T>(row: &AnyRow, column: &str) -> Result<T, sqlx::Error>
where
    T: std::str::FromStr,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    decode_optional(row, column)?.ok_or_else(|| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: "NULL where a value is required".into(),
    })
}

/// A job as the pre-read claims it: what planning its fires and writing
/// their runs reads, and nothing else (11 of a job's 30 columns, no JSON
/// but the schedule's rules). Claims run on the one writer connection, and
/// reading whole jobs there was two fifths of a claim's time. The schedule
/// and its rules are parsed as the row is read: a stored value that does
/// not parse is a decode error naming its column (the job is stopped),
/// never a fallback.
#[derive(Debug, Clone)]
pub struct DueJob {
    pub id: JobId,
    pub tenant: String,
    pub module_digest: Digest,
    pub schedule: Schedule,
    /// The job's own rules (its zone, window, dates and jitter); the
    /// tenant calendars named in `calendars` are added when planning.
    pub rules: Rules,
    pub calendars: Vec<String>,
    pub misfire: MisfirePolicy,
    pub misfire_threshold_ms: i64,
    pub param: String,
    /// The fire the job is due for (`None`: none).
    pub next_fire_at_ms: Option<i64>,
}

/// The columns of a [`DueJob`], as a literal for `concat!`.
macro_rules! due_job_columns {
    () => {
        "id, tenant, module_digest, schedule_type, schedule_conf, time_zone, misfire, \
         misfire_threshold_ms, param, next_fire_at_ms, schedule_rules"
    };
}

impl TryFrom<&JobRow> for DueJob {
    type Error = sqlx::Error;

    /// The job as the pre-read would read it from its row.
    fn try_from(job: &JobRow) -> Result<DueJob, sqlx::Error> {
        let (schedule, rules) = stored_schedule(
            job.id,
            job.schedule_type,
            &job.schedule_conf,
            &job.time_zone,
            &job.schedule_rules,
        )?;
        Ok(DueJob {
            id: job.id,
            tenant: job.tenant.clone(),
            module_digest: job.module_digest.clone(),
            schedule,
            rules,
            calendars: job.schedule_rules.calendars.clone(),
            misfire: job.misfire,
            misfire_threshold_ms: job.misfire_threshold_ms,
            param: job.param.clone(),
            next_fire_at_ms: job.next_fire_at_ms,
        })
    }
}

/// A job's stored schedule and rules, parsed; a decode error naming the
/// column at fault (`time_zone`, `schedule_conf`, `schedule_rules`).
pub fn stored_schedule(
    id: JobId,
    kind: cronbox_api::ScheduleType,
    conf: &str,
    time_zone: &str,
    rules: &cronbox_api::ScheduleRules,
) -> Result<(Schedule, Rules), sqlx::Error> {
    let undecodable = |column: &str, message: String| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: message.into(),
    };
    let rules = stored_schedule_rules(rules, time_zone, id)?;
    let schedule = Schedule::parse(kind, conf, time_zone)
        .map_err(|error| undecodable("schedule_conf", error.to_string()))?;
    Ok((schedule, rules))
}

/// A job's stored rules in its stored zone, parsed; a decode error naming
/// the column at fault (`time_zone` or `schedule_rules`).
pub fn stored_schedule_rules(
    rules: &cronbox_api::ScheduleRules,
    time_zone: &str,
    id: JobId,
) -> Result<Rules, sqlx::Error> {
    let zone: chrono_tz::Tz = time_zone.parse().map_err(|_| sqlx::Error::ColumnDecode {
        index: "time_zone".to_owned(),
        source: ScheduleError::UnknownTimeZone(time_zone.to_owned())
            .to_string()
            .into(),
    })?;
    Rules::parse(rules, zone, id.0).map_err(|refused| sqlx::Error::ColumnDecode {
        index: "schedule_rules".to_owned(),
        source: refused.message.into(),
    })
}

fn due_job_from_row(row: &AnyRow) -> Result<DueJob, sqlx::Error> {
    let id: JobId = row.try_get("id")?;
    let rules: cronbox_api::ScheduleRules = json_column(row, "schedule_rules")?;
    let time_zone: String = row.try_get("time_zone")?;
    let schedule_conf: String = row.try_get("schedule_conf")?;
    let (schedule, parsed_rules) = stored_schedule(
        id,
        decode(row, "schedule_type")?,
        &schedule_conf,
        &time_zone,
        &rules,
    )?;
    Ok(DueJob {
        id,
        tenant: row.try_get("tenant")?,
        module_digest: row.try_get("module_digest")?,
        schedule,
        rules: parsed_rules,
        calendars: rules.calendars,
        misfire: decode(row, "misfire")?,
        misfire_threshold_ms: row.try_get("misfire_threshold_ms")?,
        param: row.try_get("param")?,
        next_fire_at_ms: row.try_get("next_fire_at_ms")?,
    })
}

/// Decodes due jobs one by one: a row that does not decode (an unknown
/// stored value) is logged with its column and its id returned apart, so
/// that one corrupt job is stopped instead of stalling every other.
pub(super) fn decode_due_jobs(rows: &[AnyRow]) -> (Vec<DueJob>, Vec<JobId>) {
    let mut jobs = Vec::with_capacity(rows.len());
    let mut corrupt = Vec::new();
    for row in rows {
        match due_job_from_row(row) {
            Ok(job) => jobs.push(job),
            Err(error) => {
                let id: JobId = row.try_get("id").unwrap_or_default();
                tracing::error!(job = %id, %error, "job row does not decode; job stopped");
                corrupt.push(id);
            }
        }
    }
    (jobs, corrupt)
}

/// The `http` column of a job.
#[derive(serde::Deserialize)]
struct StoredHttp {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    limits: cronbox_api::HttpLimits,
}

/// A JSON text column decoded; an error naming the column if it does not
/// parse.
pub(super) fn json_column<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    column: &str,
) -> Result<T, sqlx::Error> {
    let text: String = row.try_get(column)?;
    serde_json::from_str(&text).map_err(|error| sqlx::Error::ColumnDecode {
        index: column.to_owned(),
        source: Box::new(error),
    })
}

/// The `time_zone` column, checked to name a zone (a decode error if it
/// does not: never read as UTC).
fn time_zone_column(row: &AnyRow) -> Result<String, sqlx::Error> {
    let zone: String = row.try_get("time_zone")?;
    match zone.parse::<chrono_tz::Tz>() {
        Ok(_) => Ok(zone),
        Err(_) => Err(sqlx::Error::ColumnDecode {
            index: "time_zone".to_owned(),
            source: ScheduleError::UnknownTimeZone(zone).to_string().into(),
        }),
    }
}

pub(super) fn job_from_row(row: &AnyRow) -> Result<JobRow, sqlx::Error> {
    let mut job = JobRow {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        group_name: row.try_get("group_name")?,
        name: row.try_get("name")?,
        module_digest: row.try_get("module_digest")?,
        schedule_type: decode(row, "schedule_type")?,
        schedule_conf: row.try_get("schedule_conf")?,
        time_zone: time_zone_column(row)?,
        misfire: decode(row, "misfire")?,
        misfire_threshold_ms: row.try_get("misfire_threshold_ms")?,
        route: decode(row, "route")?,
        block_strategy: decode(row, "block_strategy")?,
        max_concurrency: row.try_get("max_concurrency")?,
        timeout_ms: row.try_get("timeout_ms")?,
        fuel: row.try_get("fuel")?,
        memory_bytes: row.try_get("memory_bytes")?,
        retry_count: row.try_get("retry_count")?,
        retry_interval_ms: row.try_get("retry_interval_ms")?,
        children: Vec::new(),
        param: row.try_get("param")?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        next_fire_at_ms: row.try_get("next_fire_at_ms")?,
        module_name: row.try_get("module_name")?,
        module_version: row.try_get("module_version")?,
        alarm_url: row.try_get("alarm_url")?,
        fresh_instance: row.try_get::<i64, _>("fresh_instance")? != 0,
        config: json_column(row, "config")?,
        http_allow: Vec::new(),
        http_limits: Default::default(),
        secrets: json_column(row, "secrets")?,
        schedule_rules: json_column(row, "schedule_rules")?,
        pause: match row.try_get::<Option<String>, _>("pause")? {
            None => None,
            Some(_) => Some(json_column(row, "pause")?),
        },
        executor_handler: row.try_get("executor_handler")?,
        xxl_job_id: row.try_get("xxl_job_id")?,
    };
    let http: StoredHttp = json_column(row, "http")?;
    job.http_allow = http.allow;
    job.http_limits = http.limits;
    Ok(job)
}

/// A run as stored: the API's [`Run`](cronbox_api::Run).
pub type RunRow = cronbox_api::Run;

/// The columns of a run, as a literal for `concat!`.
macro_rules! run_columns {
    () => {
        "id, tenant, job_id, kind, scheduled_at_ms, shard_index, shard_total, attempt, param, \
         status, executor, module_digest, module_sha, outcome, code, message, created_at_ms, \
         dispatched_at_ms, started_at_ms, finished_at_ms, alarm_status, alarm_message, \
         fuel_consumed, peak_memory_bytes, trace_id"
    };
}

/// The module a run ran, in hex: from `module_sha`'s 32 bytes (how runs
/// are written since migration 0019), or the 64 characters of
/// `module_digest` of a run written before.
fn run_digest(row: &AnyRow) -> Result<Digest, sqlx::Error> {
    match row.try_get::<Option<Vec<u8>>, _>("module_sha")? {
        Some(bytes) if bytes.len() == 32 => Ok(Digest::from_sha256(&bytes)),
        // A legacy run: no module.
        Some(bytes) if bytes.is_empty() => Ok(Digest::default()),
        Some(bytes) => Err(sqlx::Error::ColumnDecode {
            index: "module_sha".to_owned(),
            source: format!("{} bytes, where a sha256 is 32", bytes.len()).into(),
        }),
        None => row.try_get("module_digest"),
    }
}

/// A digest as a run's `module_sha` stores it.
pub(super) fn digest_bytes(digest: &Digest) -> Vec<u8> {
    hex::decode(digest.as_str()).expect("a Digest is 64 hex digits")
}

pub(super) fn run_from_row(row: &AnyRow) -> Result<RunRow, sqlx::Error> {
    Ok(RunRow {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        job_id: row.try_get("job_id")?,
        job_name: None,
        module: None,
        kind: decode(row, "kind")?,
        scheduled_at_ms: row.try_get("scheduled_at_ms")?,
        shard_index: row.try_get("shard_index")?,
        shard_total: row.try_get("shard_total")?,
        attempt: row.try_get("attempt")?,
        param: row.try_get("param")?,
        status: decode(row, "status")?,
        executor: row.try_get("executor")?,
        module_digest: run_digest(row)?,
        outcome: decode_optional(row, "outcome")?,
        code: row.try_get("code")?,
        message: row.try_get("message")?,
        created_at_ms: row.try_get("created_at_ms")?,
        dispatched_at_ms: row.try_get("dispatched_at_ms")?,
        started_at_ms: row.try_get("started_at_ms")?,
        finished_at_ms: row.try_get("finished_at_ms")?,
        alarm_status: decode(row, "alarm_status")?,
        alarm_message: row.try_get("alarm_message")?,
        fuel_consumed: row.try_get("fuel_consumed")?,
        peak_memory_bytes: row.try_get("peak_memory_bytes")?,
        trace_id: row.try_get("trace_id")?,
        trace_url: None,
    })
}

/// A run to write before it is dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRun {
    pub job_id: JobId,
    pub kind: TriggerKind,
    pub scheduled_at_ms: i64,
    pub shard_index: i64,
    pub shard_total: i64,
    pub attempt: i64,
    pub param: String,
    pub module_digest: Digest,
}

impl NewRun {
    /// A first attempt of `job` for `scheduled_at_ms`: one shard, the
    /// job's parameter and module.
    pub fn of_job(job: &JobRow, kind: TriggerKind, scheduled_at_ms: i64) -> NewRun {
        NewRun::first_attempt(
            job.id,
            &job.param,
            &job.module_digest,
            kind,
            scheduled_at_ms,
        )
    }

    /// [`NewRun::of_job`] for a job the pre-read claimed.
    pub fn of_due_job(job: &DueJob, kind: TriggerKind, scheduled_at_ms: i64) -> NewRun {
        NewRun::first_attempt(
            job.id,
            &job.param,
            &job.module_digest,
            kind,
            scheduled_at_ms,
        )
    }

    fn first_attempt(
        job_id: JobId,
        param: &str,
        module_digest: &Digest,
        kind: TriggerKind,
        scheduled_at_ms: i64,
    ) -> NewRun {
        NewRun {
            job_id,
            kind,
            scheduled_at_ms,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            param: param.to_owned(),
            module_digest: module_digest.clone(),
        }
    }
}

/// A run accepted by an executor, to be recorded as dispatched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchMark {
    pub run_id: RunId,
    pub executor: String,
    pub at_ms: i64,
    /// The run's scheduled time, when known: on PostgreSQL it tells which
    /// partitions hold the batch's runs (see `scheduled_range`).
    pub scheduled_at_ms: Option<i64>,
}

/// The earliest and latest of `times` (inclusive), if there is at least
/// one and every one is known.
///
/// A batch update by run id whose rows all carry their run's scheduled
/// time names this range too, so that PostgreSQL visits only the day
/// partitions holding them instead of each of the run table's partitions
/// (a month of them); a run the range misses (a wrong or stale time) is
/// updated again by id alone, so a time can make an update faster but
/// never lose it.
pub(super) fn scheduled_range(times: impl IntoIterator<Item = Option<i64>>) -> Option<(i64, i64)> {
    let mut range: Option<(i64, i64)> = None;
    for at in times {
        let at = at?;
        range = Some(range.map_or((at, at), |(low, high)| (low.min(at), high.max(at))));
    }
    range
}

/// How a run ended, to be recorded once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunEnd {
    pub run_id: RunId,
    pub success: bool,
    pub outcome: RunOutcome,
    pub code: i64,
    pub message: String,
    /// The run's log as stored (see [`logs::encode`](super::logs::encode)).
    pub log: String,
    /// The executor that ran it, when known.
    pub executor: Option<String>,
    pub started_at_ms: Option<i64>,
    /// Committed only when `success`, and only if every key in
    /// `state_base` is still at the revision the run based it on.
    pub state_changes: StateChanges,
    /// The revisions the run's reads and writes were based on (empty: not
    /// checked, as from an executor that predates revisions).
    pub state_base: std::collections::BTreeMap<String, StateRevision>,
    pub finished_at_ms: i64,
    /// The module that ran, when it differs from the one written (a job
    /// moved to another version between the fire and its dispatch).
    pub module_digest: Option<String>,
    /// Fuel it consumed, when it had a budget.
    pub fuel_consumed: Option<i64>,
    /// The most linear memory its instance held, when it ran.
    pub peak_memory_bytes: Option<i64>,
    /// The run's scheduled time as its trigger said, when the executor
    /// sent it back (a hint: see `scheduled_range`).
    pub scheduled_at_ms: Option<i64>,
    /// What the run adds to its tenant's usage of the day of
    /// `finished_at_ms`, added in the transaction that ends it (nothing if
    /// it had ended already): one write for a callback batch, not a
    /// transaction of its own after it.
    pub charge: Option<RunCharge>,
    /// The run's tenant and its state bytes quota: state changes that
    /// would grow the tenant's state past it are not committed (the run
    /// fails `quota_exceeded`). `None`: not checked.
    pub state_quota: Option<(String, u64)>,
    /// The `traceparent` the run was sent with, when traces are on: its
    /// trace id is stored with the end.
    pub traceparent: Option<String>,
}

/// What an ended run costs its tenant for the day (see
/// [`RunEnd::charge`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCharge {
    pub run_ms: i64,
    pub log_bytes: i64,
}

impl RunEnd {
    /// A run that ended without a result from a guest (not dispatched,
    /// refused, lost): `outcome` says which.
    pub fn failed(run_id: RunId, outcome: RunOutcome, message: &str, now_ms: i64) -> RunEnd {
        RunEnd {
            run_id,
            success: false,
            outcome,
            code: 500,
            message: message.to_owned(),
            finished_at_ms: now_ms,
            ..RunEnd::default()
        }
    }

    /// A run that will not run: its job was stopped or killed while it
    /// waited (status `cancelled`: no alarm, no retry).
    pub fn cancelled(run_id: RunId, message: &str, now_ms: i64) -> RunEnd {
        RunEnd {
            code: 0,
            ..RunEnd::failed(run_id, RunOutcome::Cancelled, message, now_ms)
        }
    }
}

/// Which jobs to list: every field narrows; in id order, a page at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Jobs of this tenant only (`None`: every tenant's).
    pub tenant: Option<String>,
    pub group: Option<String>,
    /// Exactly this name.
    pub name: Option<String>,
    /// Names containing this text, in any letter case.
    pub search: Option<String>,
    /// Jobs following or pinned to this named module.
    pub module: Option<String>,
    pub schedule_type: Option<cronbox_api::ScheduleType>,
    pub enabled: Option<bool>,
    /// Ids above this one (the cursor of the next page).
    pub after_id: Option<JobId>,
    pub limit: i64,
}

/// Which runs to list: every field narrows; newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Runs of this tenant only (`None`: every tenant's).
    pub tenant: Option<String>,
    pub job_id: Option<JobId>,
    /// Runs of the jobs of this executor group.
    pub group: Option<String>,
    pub status: Option<RunStatus>,
    /// Runs of this trigger kind.
    pub kind: Option<TriggerKind>,
    /// Scheduled at or after.
    pub from_ms: Option<i64>,
    /// Scheduled before.
    pub to_ms: Option<i64>,
    /// Ids below this one (the cursor of the next page).
    pub before_id: Option<RunId>,
    pub limit: i64,
    /// At most this many runs, the newest of those the tenant, job and
    /// cursor select, are read for the other conditions (`None`: as many
    /// as it takes). A page of a filter that matches few runs then costs
    /// a bounded read, and may hold fewer than `limit` runs, even none:
    /// [`Store::oldest_examined`](super::Store::oldest_examined) says
    /// where the next begins.
    pub examine: Option<i64>,
}

pub use cronbox_api::DailyReport;

/// A job claimed by [`Store::claim_due`] and the fires written for it.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    pub job: DueJob,
    /// Each fire with the id of its run (`None`: it already existed).
    pub written: Vec<(Option<RunId>, NewRun)>,
}

/// A job's durable state with the revision of each key (see
/// [`cronbox_protocol::StateRevision`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobState {
    pub values: HashMap<String, String>,
    pub revisions: HashMap<String, StateRevision>,
}

impl JobState {
    pub(super) fn insert(&mut self, key: String, value: String, revision: StateRevision) {
        self.revisions.insert(key.clone(), revision);
        self.values.insert(key, value);
    }
}
