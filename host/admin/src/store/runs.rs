//! Runs: writing them, leases for dispatch, dispatch marks, ending them
//! once (with the state commit and its conflict check), cancelling what
//! waits, and the lost-run query.

use super::quotas::state_over_quota;
use super::*;

/// Ends the pending runs of `job_id` (of `kinds`, or all) as cancelled: no
/// alarm, no retry. Returns their ids.
pub(super) async fn cancel_waiting(
    conn: &mut sqlx::AnyConnection,
    job_id: JobId,
    kinds: Option<&[TriggerKind]>,
    message: &str,
    now_ms: i64,
) -> Result<Vec<RunId>, StoreError> {
    let kinds_clause = match kinds {
        Some(kinds) => format!(
            " AND kind IN ({})",
            (0..kinds.len())
                .map(|n| format!("${}", n + 6))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => String::new(),
    };
    let sql = format!(
        "UPDATE run SET status = $1, outcome = $1, code = 0, message = $2, finished_at_ms = $3, \
         alarm_status = $4, lease_owner = NULL, lease_until_ms = NULL WHERE job_id = $5 AND status IN ('pending', 'dispatched') AND status = 'pending'{kinds_clause} \
         RETURNING id"
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(RunStatus::Cancelled.as_str())
        .bind(message)
        .bind(now_ms)
        .bind(AlarmState::None.as_str())
        .bind(job_id);
    for kind in kinds.unwrap_or_default() {
        query = query.bind(kind.as_str());
    }
    let mut ids: Vec<RunId> = query
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| row.try_get("id"))
        .collect::<Result<_, _>>()?;
    ids.sort_unstable();
    Ok(ids)
}

/// The first key of `base` whose revision in job `run_id`'s state is no
/// longer the one the run based its view on: (key, the run's base, now).
async fn state_conflict(
    conn: &mut sqlx::AnyConnection,
    run_id: RunId,
    base: &std::collections::BTreeMap<String, StateRevision>,
) -> Result<Option<(String, StateRevision, StateRevision)>, StoreError> {
    for (key, based_on) in base {
        let current: StateRevision = sqlx::query(
            "SELECT revision FROM job_state WHERE key = $2 \
             AND job_id = (SELECT job_id FROM run WHERE id = $1)",
        )
        .bind(run_id)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.try_get("revision"))
        .transpose()?
        .unwrap_or(ABSENT_REVISION);
        if current != *based_on {
            return Ok(Some((key.clone(), *based_on, current)));
        }
    }
    Ok(None)
}

pub(super) async fn insert_run(
    conn: &mut sqlx::AnyConnection,
    run: &NewRun,
    owner: &str,
    now_ms: i64,
    skip_duplicates: bool,
) -> Result<Option<RunId>, StoreError> {
    macro_rules! insert {
        ($conflict:literal) => {
            concat!(
                "INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, shard_index, shard_total, \
                 attempt, param, status, module_digest, module_sha, created_at_ms, lease_owner, \
                 lease_until_ms) \
                 VALUES (COALESCE((SELECT tenant FROM job WHERE id = $1), 'default'), $1, $2, $3, \
                 $4, $5, $6, $7, $8, '', $9, $10, $11, $12)",
                $conflict,
                " RETURNING id"
            )
        };
    }
    let sql = if skip_duplicates {
        insert!(" ON CONFLICT DO NOTHING")
    } else {
        insert!("")
    };
    let row = bind_new_run(sqlx::query(sql), run, owner, now_ms)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.map(|row| row.try_get("id")).transpose()?)
}

/// Ends each of `ends`' runs that is still waiting or running (or was
/// cancelled while its dispatch was on its way, and ran after all: what it
/// did is recorded then), all in one statement; answers the ended runs by
/// id (a run that had ended already is absent). A run with a dispatch mark
/// among `marks` gets what the mark would have written (its dispatch time;
/// its executor, if the end names none) in the same row write.
async fn end_runs(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    ends: &[&RunEnd],
    marks: &HashMap<RunId, &DispatchMark>,
) -> Result<HashMap<RunId, RunRow>, StoreError> {
    let range = scheduled_range(ends.iter().map(|end| end.scheduled_at_ms));
    let mut ended = end_runs_in(conn, backend, ends, marks, range).await?;
    if range.is_some() && ended.len() < ends.len() {
        // Ended before, or a hint that missed: by id alone.
        let missed: Vec<&RunEnd> = ends
            .iter()
            .copied()
            .filter(|end| !ended.contains_key(&end.run_id))
            .collect();
        ended.extend(end_runs_in(conn, backend, &missed, marks, None).await?);
    }
    Ok(ended)
}

/// [`end_runs`] of the runs among `ends` scheduled within `range`
/// (inclusive; `None`: wherever they are), the ends bound as one JSON value
/// (see `Backend::json_rows`).
async fn end_runs_in(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    ends: &[&RunEnd],
    marks: &HashMap<RunId, &DispatchMark>,
    range: Option<(i64, i64)>,
) -> Result<HashMap<RunId, RunRow>, StoreError> {
    /// An end as the statement reads it.
    #[derive(serde::Serialize)]
    struct EndValues<'a> {
        id: RunId,
        status: &'a str,
        outcome: &'a str,
        code: i64,
        message: std::borrow::Cow<'a, str>,
        log: &'a str,
        executor: Option<&'a str>,
        started: Option<i64>,
        finished: i64,
        alarm: &'a str,
        digest: Option<&'a str>,
        fuel: Option<i64>,
        peak: Option<i64>,
        dispatched: Option<i64>,
        marked_by: Option<&'a str>,
    }
    const FIELDS: [(&str, &str); 15] = [
        ("id", "BIGINT"),
        ("status", "TEXT"),
        ("outcome", "TEXT"),
        ("code", "BIGINT"),
        ("message", "TEXT"),
        ("log", "TEXT"),
        ("executor", "TEXT"),
        ("started", "BIGINT"),
        ("finished", "BIGINT"),
        ("alarm", "TEXT"),
        ("digest", "TEXT"),
        ("fuel", "BIGINT"),
        ("peak", "BIGINT"),
        ("dispatched", "BIGINT"),
        ("marked_by", "TEXT"),
    ];
    let values: Vec<EndValues<'_>> = ends
        .iter()
        .map(|end| {
            let status = if end.success {
                RunStatus::Success
            } else if end.outcome == RunOutcome::Cancelled {
                RunStatus::Cancelled
            } else {
                RunStatus::Failed
            };
            let alarm = if end.success || end.outcome.is_deliberate() {
                AlarmState::None
            } else {
                AlarmState::Due
            };
            EndValues {
                id: end.run_id,
                status: status.as_str(),
                outcome: end.outcome.as_str(),
                code: end.code,
                message: storable_text(&end.message),
                log: &end.log,
                executor: end.executor.as_deref(),
                started: end.started_at_ms,
                finished: end.finished_at_ms,
                alarm: alarm.as_str(),
                // Only a digest: anything else the executor sent is
                // ignored, and the run keeps the module it was written with.
                digest: end
                    .module_digest
                    .as_deref()
                    .filter(|digest| digest.parse::<Digest>().is_ok()),
                fuel: end.fuel_consumed,
                peak: end.peak_memory_bytes,
                dispatched: marks.get(&end.run_id).map(|mark| mark.at_ms),
                marked_by: marks.get(&end.run_id).map(|mark| mark.executor.as_str()),
            }
        })
        .collect();
    // $1 pending, $2 dispatched, $3 cancelled, $4 the ends. Only fixed
    // names and placeholders go into the text. A folded mark writes what
    // `mark_runs_in` would have: the dispatch time where there is none,
    // the executor where nothing else names one.
    let sql = format!(
        "UPDATE run SET status = end_status, outcome = end_outcome, code = end_code, \
         message = end_message, log = end_log, \
         executor = COALESCE(end_executor, executor, end_marked_by), \
         dispatched_at_ms = COALESCE(dispatched_at_ms, end_dispatched), \
         started_at_ms = end_started, finished_at_ms = end_finished, alarm_status = end_alarm, \
         module_sha = COALESCE({}, module_sha), fuel_consumed = end_fuel, \
         peak_memory_bytes = end_peak, lease_owner = NULL, lease_until_ms = NULL \
         FROM ({}) AS ends \
         WHERE run.id = end_id{} \
         AND (run.status IN ($1, $2) OR (run.status = $3 AND end_started IS NOT NULL)) \
         RETURNING {}",
        backend.bytes_of_hex("end_digest"),
        backend.json_rows(4, &FIELDS, "end_"),
        scheduled_between(range, 5),
        run_columns!(),
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(RunStatus::Pending.as_str())
        .bind(RunStatus::Dispatched.as_str())
        .bind(RunStatus::Cancelled.as_str())
        .bind(json_value(&values)?);
    if let Some((earliest, latest)) = range {
        query = query.bind(earliest).bind(latest);
    }
    let mut ended = HashMap::with_capacity(ends.len());
    for row in query.fetch_all(&mut *conn).await? {
        let run = run_from_row(&row)?;
        ended.insert(run.id, run);
    }
    Ok(ended)
}

/// Marks the pending runs among `marks` scheduled within `range`
/// (inclusive; `None`: wherever they are) dispatched, the marks bound as
/// one JSON value (see `Backend::json_rows`). A run whose result came
/// before its mark (the executor's callback beat the batched mark) keeps
/// the status and executor its end wrote and gets its dispatch time, which
/// it had none of. Answers the ids of the runs written, each with whether
/// it was pending.
async fn mark_runs_in(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    marks: &[&DispatchMark],
    range: Option<(i64, i64)>,
) -> Result<Vec<(RunId, bool)>, StoreError> {
    /// A mark as the statement reads it.
    #[derive(serde::Serialize)]
    struct MarkValues<'a> {
        id: RunId,
        executor: &'a str,
        at: i64,
    }
    const FIELDS: [(&str, &str); 3] = [("id", "BIGINT"), ("executor", "TEXT"), ("at", "BIGINT")];
    let values: Vec<MarkValues<'_>> = marks
        .iter()
        .map(|mark| MarkValues {
            id: mark.run_id,
            executor: &mark.executor,
            at: mark.at_ms,
        })
        .collect();
    // $1 dispatched, $2 pending, $3 the marks. Only fixed names and
    // placeholders go into the text. A dispatched run always has its
    // dispatch time, so no run is marked twice; a run that ended keeps
    // its lease columns empty as its end left them.
    let sql = format!(
        "UPDATE run SET status = CASE WHEN run.status = $2 THEN $1 ELSE run.status END, \
         executor = CASE WHEN run.status = $2 THEN mark_executor \
         ELSE COALESCE(run.executor, mark_executor) END, \
         dispatched_at_ms = mark_at, lease_owner = NULL, lease_until_ms = NULL \
         FROM ({}) AS marks WHERE run.id = mark_id \
         AND (run.status = $2 OR run.dispatched_at_ms IS NULL){} RETURNING id, status",
        backend.json_rows(3, &FIELDS, "mark_"),
        scheduled_between(range, 4),
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(RunStatus::Dispatched.as_str())
        .bind(RunStatus::Pending.as_str())
        .bind(json_value(&values)?);
    if let Some((earliest, latest)) = range {
        query = query.bind(earliest).bind(latest);
    }
    let dispatched = RunStatus::Dispatched.as_str();
    Ok(query
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|row| {
            let status: &str = row.try_get("status")?;
            Ok((row.try_get("id")?, status == dispatched))
        })
        .collect::<Result<_, sqlx::Error>>()?)
}

/// Marks `marks`' pending runs dispatched (see [`mark_runs_in`]), many in
/// one statement; answers how many were still pending. Rows are taken in
/// id order, as every batch writer takes them, so that two admins' batches
/// cannot deadlock on each other.
async fn write_marks(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    mut marks: Vec<&DispatchMark>,
) -> Result<u64, StoreError> {
    /// Marks per statement (bound together as one value).
    const MARKS_PER_UPDATE: usize = 1_000;
    marks.sort_by_key(|mark| mark.run_id);
    let mut marked = 0;
    for chunk in marks.chunks(MARKS_PER_UPDATE) {
        let range = scheduled_range(chunk.iter().map(|mark| mark.scheduled_at_ms));
        let done = mark_runs_in(conn, backend, chunk, range).await?;
        marked += were_pending(&done);
        if range.is_some() && done.len() < chunk.len() {
            // Not pending any more, or a hint that missed: by id alone.
            let done: std::collections::HashSet<RunId> = done.iter().map(|(id, _)| *id).collect();
            let missed: Vec<&DispatchMark> = chunk
                .iter()
                .copied()
                .filter(|mark| !done.contains(&mark.run_id))
                .collect();
            marked += were_pending(&mark_runs_in(conn, backend, &missed, None).await?);
        }
    }
    Ok(marked)
}

/// How many of the runs [`mark_runs_in`] wrote were pending.
fn were_pending(written: &[(RunId, bool)]) -> u64 {
    written.iter().filter(|(_, pending)| *pending).count() as u64
}

/// A value a run filter's condition binds.
enum Bound {
    Text(String),
    Number(i64),
}

/// A run filter's conditions, each with the value it binds: those that
/// select runs through an index (tenant, job, cursor, an open status),
/// then those that narrow what they select (group, another status, kind,
/// scheduled time). Each `?` becomes its placeholder, numbered from `$1`
/// in that order, the order [`bind_all`] binds them in.
struct RunConditions {
    selecting: Vec<(String, Bound)>,
    narrowing: Vec<(String, Bound)>,
}

impl RunConditions {
    fn of(filter: &RunFilter) -> RunConditions {
        let mut selecting = Vec::new();
        if let Some(tenant) = &filter.tenant {
            selecting.push(("tenant = ?", Bound::Text(tenant.clone())));
        }
        if let Some(job_id) = filter.job_id {
            selecting.push(("job_id = ?", Bound::Number(job_id.0)));
        }
        if let Some(before) = filter.before_id {
            selecting.push(("id < ?", Bound::Number(before.0)));
        }
        // Runs still open are few and indexed (`run_by_status`, partial:
        // its condition is repeated for the planners): they select; any
        // other status narrows.
        let (open, closed) = match filter.status {
            Some(status) if status.is_open() => (Some(status), None),
            other => (None, other),
        };
        if let Some(status) = open {
            selecting.push((
                "status IN ('pending', 'dispatched') AND status = ?",
                Bound::Text(status.as_str().to_owned()),
            ));
        }
        let mut narrowing = Vec::new();
        if let Some(group) = &filter.group {
            narrowing.push((
                "job_id IN (SELECT id FROM job WHERE group_name = ?)",
                Bound::Text(group.clone()),
            ));
        }
        if let Some(status) = closed {
            narrowing.push(("status = ?", Bound::Text(status.as_str().to_owned())));
        }
        if let Some(kind) = filter.kind {
            narrowing.push(("kind = ?", Bound::Text(kind.as_str().to_owned())));
        }
        if let Some(from) = filter.from_ms {
            narrowing.push(("scheduled_at_ms >= ?", Bound::Number(from)));
        }
        if let Some(to) = filter.to_ms {
            narrowing.push(("scheduled_at_ms < ?", Bound::Number(to)));
        }
        let mut next = 0;
        let mut number = |conditions: Vec<(&str, Bound)>| -> Vec<(String, Bound)> {
            conditions
                .into_iter()
                .map(|(text, value)| {
                    next += 1;
                    (text.replace('?', &format!("${next}")), value)
                })
                .collect()
        };
        let selecting = number(selecting);
        let narrowing = number(narrowing);
        RunConditions {
            selecting,
            narrowing,
        }
    }

    /// How many placeholders the conditions use.
    fn len(&self) -> usize {
        self.selecting.len() + self.narrowing.len()
    }
}

/// ` WHERE a AND b ...`, or nothing for no conditions.
fn where_all<'a>(conditions: impl IntoIterator<Item = &'a (String, Bound)>) -> String {
    let texts: Vec<&str> = conditions
        .into_iter()
        .map(|(text, _)| text.as_str())
        .collect();
    if texts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", texts.join(" AND "))
    }
}

/// The ids of the `$limit` newest runs the selecting conditions choose, as
/// a subquery (read from an index, or the table's ids, alone).
fn newest_ids(conditions: &RunConditions, limit: usize) -> String {
    format!(
        "(SELECT id FROM run{} ORDER BY id DESC LIMIT ${limit}) AS window_runs",
        where_all(&conditions.selecting)
    )
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>;

/// Binds the values of `conditions`, in their placeholders' order.
fn bind_all<'q, 'a>(
    mut query: AnyQuery<'q>,
    conditions: impl IntoIterator<Item = &'a (String, Bound)>,
) -> AnyQuery<'q> {
    for (_, value) in conditions {
        query = match value {
            Bound::Text(text) => query.bind(text.clone()),
            Bound::Number(number) => query.bind(*number),
        };
    }
    query
}

/// ` AND scheduled_at_ms BETWEEN $first AND $first+1` when there is a
/// range to name (bound after the statement's other values), else nothing.
fn scheduled_between(range: Option<(i64, i64)>, first: usize) -> String {
    match range {
        Some(_) => format!(" AND scheduled_at_ms BETWEEN ${first} AND ${}", first + 1),
        None => String::new(),
    }
}

/// Binds a new pending run's columns from `job_id` on, in the order
/// [`insert_run`] names them: job, kind, scheduled time, shard index and
/// total, attempt, parameter, status, digest, creation time, lease owner
/// and end.
fn bind_new_run<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    run: &'q NewRun,
    owner: &'q str,
    now_ms: i64,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    query
        .bind(run.job_id)
        .bind(run.kind.as_str())
        .bind(run.scheduled_at_ms)
        .bind(run.shard_index)
        .bind(run.shard_total)
        .bind(run.attempt)
        .bind(&run.param)
        .bind(RunStatus::Pending.as_str())
        .bind(digest_bytes(&run.module_digest))
        .bind(now_ms)
        .bind(owner)
        .bind(write_lease_until(run.scheduled_at_ms, now_ms))
}

/// When the lease of the admin that writes a run scheduled at
/// `scheduled_at_ms` at `written_at_ms` (its `created_at_ms`) runs out.
pub fn write_lease_until(scheduled_at_ms: i64, written_at_ms: i64) -> i64 {
    scheduled_at_ms.max(written_at_ms) + WRITE_LEASE_MS
}

/// The class of PostgreSQL's two-key advisory locks a state commit takes
/// with its job's id (a space of its own: one-key locks do not meet it).
const STATE_COMMIT_LOCKS: i32 = 0x6373_7461; // "csta"

/// The charges of the runs among `ends` that `ended` (answered in the same
/// order), added up per tenant and day, in tenant and day order.
fn day_charges(ends: &[RunEnd], ended: &[Option<RunRow>]) -> Vec<DayUsage> {
    let mut days: std::collections::BTreeMap<(&str, i64), RunCharge> = Default::default();
    for (end, run) in ends.iter().zip(ended) {
        if let (Some(charge), Some(run)) = (end.charge, run) {
            let day = days
                .entry((&run.tenant, end.finished_at_ms.div_euclid(DAY_MS)))
                .or_default();
            day.run_ms = day.run_ms.saturating_add(charge.run_ms);
            day.log_bytes = day.log_bytes.saturating_add(charge.log_bytes);
        }
    }
    days.into_iter()
        .map(|((tenant, day), charge)| DayUsage {
            tenant: tenant.to_owned(),
            day,
            run_ms: charge.run_ms,
            log_bytes: charge.log_bytes,
        })
        .collect()
}

/// Most fires written by one `INSERT` (bound together as one value).
const FIRES_PER_INSERT: usize = 500;

/// Writes `fires` (each with its job's tenant) as pending runs leased to
/// `owner`, many rows per statement bound as one JSON value (see
/// `Backend::json_rows`; a statement per fire was a round trip to the
/// database per fire); a fire already written is dropped by the unique key
/// of a job's fires. Answers each fire's new run id, in order (`None`:
/// dropped).
pub(super) async fn insert_fires(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    fires: &[(&str, &NewRun)],
    owner: &str,
    now_ms: i64,
) -> Result<Vec<Option<RunId>>, StoreError> {
    /// A fire as the statement reads it.
    #[derive(serde::Serialize)]
    struct FireValues<'a> {
        tenant: &'a str,
        job: JobId,
        kind: &'a str,
        scheduled: i64,
        shard_index: i64,
        shard_total: i64,
        attempt: i64,
        param: &'a str,
        digest: &'a Digest,
        lease_until: i64,
    }
    const FIELDS: [(&str, &str); 10] = [
        ("tenant", "TEXT"),
        ("job", "BIGINT"),
        ("kind", "TEXT"),
        ("scheduled", "BIGINT"),
        ("shard_index", "BIGINT"),
        ("shard_total", "BIGINT"),
        ("attempt", "BIGINT"),
        ("param", "TEXT"),
        ("digest", "TEXT"),
        ("lease_until", "BIGINT"),
    ];
    // $1 pending, $2 created, $3 lease owner, $4 the fires. `WHERE true`:
    // SQLite would read `ON CONFLICT` after a bare `FROM` as a join's `ON`.
    // Only fixed names and placeholders go into the text.
    // A fire's digest is a `Digest`: hex, as `bytes_of_hex` needs.
    let sql = format!(
        "INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, shard_index, shard_total, \
         attempt, param, status, module_digest, module_sha, created_at_ms, lease_owner, \
         lease_until_ms) \
         SELECT fire_tenant, fire_job, fire_kind, fire_scheduled, fire_shard_index, \
         fire_shard_total, fire_attempt, fire_param, $1, '', {}, $2, $3, fire_lease_until \
         FROM ({}) AS fires WHERE true \
         ON CONFLICT DO NOTHING RETURNING id, job_id, scheduled_at_ms, shard_index",
        backend.bytes_of_hex("fire_digest"),
        backend.json_rows(4, &FIELDS, "fire_"),
    );
    let mut ids = Vec::with_capacity(fires.len());
    for chunk in fires.chunks(FIRES_PER_INSERT) {
        let values: Vec<FireValues<'_>> = chunk
            .iter()
            .map(|(tenant, run)| FireValues {
                tenant,
                job: run.job_id,
                kind: run.kind.as_str(),
                scheduled: run.scheduled_at_ms,
                shard_index: run.shard_index,
                shard_total: run.shard_total,
                attempt: run.attempt,
                param: &run.param,
                digest: &run.module_digest,
                lease_until: write_lease_until(run.scheduled_at_ms, now_ms),
            })
            .collect();
        let query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(RunStatus::Pending.as_str())
            .bind(now_ms)
            .bind(owner)
            .bind(json_value(&values)?);
        // Rows come back in no promised order: matched by the fire's key.
        let mut written: HashMap<(JobId, i64, i64), RunId> = HashMap::new();
        for row in query.fetch_all(&mut *conn).await? {
            let key = (
                row.try_get("job_id")?,
                row.try_get("scheduled_at_ms")?,
                row.try_get("shard_index")?,
            );
            written.insert(key, row.try_get("id")?);
        }
        ids.extend(chunk.iter().map(|(_, run)| {
            written
                .get(&(run.job_id, run.scheduled_at_ms, run.shard_index))
                .copied()
        }));
    }
    Ok(ids)
}

impl Store {
    /// Writes a run outside the schedule (manual, API, retry, parent).
    pub async fn insert_run(&self, run: &NewRun, now_ms: i64) -> Result<RunId, StoreError> {
        let mut conn = self.writer.acquire().await?;
        let id = insert_run(&mut conn, run, &self.owner, now_ms, false).await?;
        id.ok_or_else(|| StoreError::Database(sqlx::Error::RowNotFound))
    }

    /// A run by id.
    pub async fn run(&self, id: RunId) -> Result<Option<RunRow>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(run_from_row).transpose()?)
    }

    /// A page of a job's runs, oldest first: those after run `after`, at
    /// most `limit` (an indexed read of one page).
    pub async fn runs_of_job_page(
        &self,
        job_id: JobId,
        after: Option<RunId>,
        limit: i64,
    ) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        ))
        .bind(job_id)
        .bind(after.unwrap_or_default())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Every run of a job, oldest first (tests and tools; the API reads
    /// pages).
    pub async fn runs_of_job(&self, job_id: JobId) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE job_id = $1 ORDER BY id"
        ))
        .bind(job_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Runs matching `filter`, newest first, at most `filter.limit`; with
    /// `filter.examine`, found among that many of the newest runs the
    /// tenant, job and cursor select (see [`Store::oldest_examined`]).
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let conditions = RunConditions::of(filter);
        let window = filter.examine.filter(|_| !conditions.narrowing.is_empty());
        let all = conditions.selecting.iter().chain(&conditions.narrowing);
        // Only placeholders and fixed column names go into the text.
        let sql = match window {
            // The window's oldest id comes from an index (or the table's
            // ids) alone; then the runs are read newest first, down to it
            // at most, and the read stops at the page's limit.
            Some(_) => format!(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM run{} id >= (SELECT COALESCE(MIN(id), 0) FROM {}) \
                     ORDER BY id DESC LIMIT ${}"
                ),
                where_all(all.clone()) + " AND",
                newest_ids(&conditions, conditions.len() + 1),
                conditions.len() + 2,
            ),
            None => format!(
                concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM run{} ORDER BY id DESC LIMIT ${}"
                ),
                where_all(all.clone()),
                conditions.len() + 1,
            ),
        };
        let mut query = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), all);
        if let Some(examine) = window {
            query = query.bind(examine);
        }
        let rows = query.bind(filter.limit).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Where the next page of `filter` begins when [`Store::list_runs`]
    /// returned fewer than `filter.limit` runs because it examined its
    /// `filter.examine` newest: the oldest run examined (the next page's
    /// cursor). `None` when every run was examined, or nothing bounded
    /// the page.
    pub async fn oldest_examined(&self, filter: &RunFilter) -> Result<Option<RunId>, StoreError> {
        let conditions = RunConditions::of(filter);
        let Some(examine) = filter.examine.filter(|_| !conditions.narrowing.is_empty()) else {
            return Ok(None);
        };
        // Only placeholders go into the text.
        let sql = format!(
            "SELECT CAST(MIN(id) AS BIGINT) AS oldest, CAST(COUNT(*) AS BIGINT) AS examined \
             FROM {}",
            newest_ids(&conditions, conditions.selecting.len() + 1),
        );
        let row = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), &conditions.selecting)
            .bind(examine)
            .fetch_one(&self.pool)
            .await?;
        let examined: i64 = row.try_get("examined")?;
        Ok(if examined >= examine {
            row.try_get::<Option<RunId>, _>("oldest")?
        } else {
            None
        })
    }

    /// Records that a broadcast fire became shard `index` of `total`.
    pub async fn set_shard(&self, run_id: RunId, index: i64, total: i64) -> Result<(), StoreError> {
        sqlx::query("UPDATE run SET shard_index = $1, shard_total = $2 WHERE id = $3")
            .bind(index)
            .bind(total)
            .bind(run_id)
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Takes the right to dispatch the runs among `runs` (each id with its
    /// scheduled time, as its row has it) that are still pending and whose
    /// lease is this admin's or has run out; returns their ids. Several
    /// admins may ask at once: each run goes to one.
    pub async fn take_leases(
        &self,
        runs: &[(RunId, i64)],
        now_ms: i64,
    ) -> Result<Vec<RunId>, StoreError> {
        let mut taken = Vec::with_capacity(runs.len());
        let mut runs = runs.to_vec();
        runs.sort_unstable();
        for chunk in runs.chunks(self.backend.rows_per_statement(IN_LIST_CHUNK, 1)) {
            // $1 owner, $2 until, $3 now, $4 pending, $5 and $6 the range
            // of scheduled times (the partitions to visit), then the ids.
            let ids: Vec<String> = (0..chunk.len()).map(|n| format!("${}", n + 7)).collect();
            let sql = format!(
                "UPDATE run SET lease_owner = $1, lease_until_ms = $2 WHERE status = $4 \
                 AND (lease_owner = $1 OR lease_until_ms IS NULL OR lease_until_ms < $3) \
                 AND scheduled_at_ms BETWEEN $5 AND $6 AND id IN ({}) RETURNING id",
                ids.join(", ")
            );
            let (earliest, latest) =
                scheduled_range(chunk.iter().map(|(_, at)| Some(*at))).unwrap_or_default();
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(self.owner.to_string())
                .bind(now_ms + DISPATCH_LEASE_MS)
                .bind(now_ms)
                .bind(RunStatus::Pending.as_str())
                .bind(earliest)
                .bind(latest);
            for (id, _) in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.writer).await? {
                taken.push(row.try_get("id")?);
            }
        }
        Ok(taken)
    }

    /// Pending runs whose lease ran out before `now_ms`: their admin died
    /// (or fell far behind) before dispatching them.
    pub async fn orphaned_runs(&self, now_ms: i64, limit: i64) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE status IN ('pending', 'dispatched') AND status = $1 AND lease_until_ms < $2 \
             ORDER BY scheduled_at_ms LIMIT $3"
        ))
        .bind(RunStatus::Pending.as_str())
        .bind(now_ms)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Pending runs leased to the admin instance `owner` (see
    /// [`Store::instance`]): the fires it would lose by dying now, until
    /// their leases run out and another admin takes them over.
    pub async fn pending_leased_to(&self, owner: &str) -> Result<Vec<RunId>, StoreError> {
        let rows = sqlx::query(
            "SELECT id FROM run WHERE status IN ('pending', 'dispatched') AND status = $1 \
                 AND lease_owner = $2 ORDER BY id",
        )
        .bind(RunStatus::Pending.as_str())
        .bind(owner)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|row| row.try_get("id"))
            .collect::<Result<_, _>>()?)
    }

    /// Runs written but not dispatched (to recover after a crash).
    pub async fn pending_runs(&self) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE status IN ('pending', 'dispatched') AND status = $1 ORDER BY scheduled_at_ms"
        ))
        .bind(RunStatus::Pending.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// Marks a pending run dispatched to `executor` (false if it was not
    /// pending any more: another admin dispatched it, or its result came
    /// first).
    pub async fn mark_dispatched(
        &self,
        run_id: RunId,
        executor: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mark = DispatchMark {
            run_id,
            executor: executor.to_owned(),
            at_ms: now_ms,
            scheduled_at_ms: None,
        };
        Ok(self
            .mark_dispatched_many(std::slice::from_ref(&mark))
            .await?
            == 1)
    }

    /// Marks several pending runs dispatched, many in one statement (and
    /// gives runs that ended before their mark their dispatch time);
    /// returns how many were still pending.
    pub async fn mark_dispatched_many(&self, marks: &[DispatchMark]) -> Result<u64, StoreError> {
        let mut tx = self.writer.begin().await?;
        let marked = write_marks(&mut tx, self.backend, marks.iter().collect()).await?;
        tx.commit().await?;
        Ok(marked)
    }

    /// Ends every run of a job that waits to be dispatched, whatever its
    /// kind, as cancelled (a kill of the whole job); returns their ids.
    pub async fn cancel_waiting_runs(
        &self,
        job_id: JobId,
        message: &str,
        now_ms: i64,
    ) -> Result<Vec<RunId>, StoreError> {
        let mut conn = self.writer.acquire().await?;
        cancel_waiting(&mut conn, job_id, None, message, now_ms).await
    }

    /// The executors holding dispatched runs of a job.
    /// How many fires of `run`'s job planned before it still wait to be
    /// sent (BUFFER_ONE: one such fire is held already).
    pub async fn earlier_waiting_fires(&self, run: &RunRow) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM run WHERE job_id = $1 AND status IN ('pending', 'dispatched') AND status = $2 \
             AND id <> $3 \
             AND scheduled_at_ms < $4 AND kind IN ($5, $6, $7)",
        )
        .bind(run.job_id)
        .bind(RunStatus::Pending.as_str())
        .bind(run.id)
        .bind(run.scheduled_at_ms)
        .bind(TriggerKind::Schedule.as_str())
        .bind(TriggerKind::Misfire.as_str())
        .bind(TriggerKind::Backfill.as_str())
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("n")?)
    }

    /// The runs of `job_id` an executor is running now.
    pub async fn running_runs(&self, job_id: JobId) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE job_id = $1 AND status IN ('pending', 'dispatched') AND status = $2"
        ))
        .bind(job_id)
        .bind(RunStatus::Dispatched.as_str())
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    pub async fn executors_of_running(&self, job_id: JobId) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query(
            "SELECT DISTINCT executor FROM run WHERE job_id = $1 AND status IN ('pending', 'dispatched') \
             AND status = $2 \
             AND executor IS NOT NULL",
        )
        .bind(job_id)
        .bind(RunStatus::Dispatched.as_str())
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| row.try_get("executor"))
        .collect::<Result<_, sqlx::Error>>()?)
    }

    /// Ends a run with its result, once: a second result for a finished run
    /// changes nothing (returns `None`). A successful run's state changes
    /// are committed in the same transaction. Returns the ended run.
    pub async fn finish_run(&self, end: &RunEnd) -> Result<Option<RunRow>, StoreError> {
        Ok(self
            .finish_runs(std::slice::from_ref(end))
            .await?
            .pop()
            .flatten())
    }

    /// [`Store::finish_run`] for several runs in one transaction (a
    /// callback batch): for each, the ended run or `None` if it had already
    /// ended.
    pub async fn finish_runs(&self, ends: &[RunEnd]) -> Result<Vec<Option<RunRow>>, StoreError> {
        self.finish_runs_marking(&[], ends).await
    }

    /// [`Store::finish_runs`] with dispatch marks written in the same
    /// transaction (see [`Store::mark_dispatched_many`]). A mark whose run
    /// one of `ends` ends is written by that end, in the same row write:
    /// a quick run's mark and end, written apart, were two writes of the
    /// row and of its indexes, in two transactions. On PostgreSQL the
    /// other marks go first in a transaction of their own, so that one
    /// transaction never takes two lists of rows, each in id order, that
    /// another admin's could take the other way round.
    pub async fn finish_runs_marking(
        &self,
        marks: &[DispatchMark],
        ends: &[RunEnd],
    ) -> Result<Vec<Option<RunRow>>, StoreError> {
        /// Ends per statement (bound together as one value).
        const ENDS_PER_UPDATE: usize = 500;
        // Rows in id order (see `write_marks`); answers in the callers'
        // order. Ends that commit state go one at a time, each checked
        // against the state the one before it wrote; the others end
        // together, many per statement.
        let mut order: Vec<usize> = (0..ends.len()).collect();
        order.sort_by_key(|index| ends[*index].run_id);
        let (committing, plain): (Vec<usize>, Vec<usize>) = order
            .into_iter()
            .partition(|index| ends[*index].success && !ends[*index].state_changes.is_empty());
        let ended_together: std::collections::HashSet<RunId> =
            plain.iter().map(|index| ends[*index].run_id).collect();
        // A run's first mark goes with its end (a mark sent again changes
        // nothing once the first is written).
        let (folded, mut apart): (Vec<&DispatchMark>, Vec<&DispatchMark>) = marks
            .iter()
            .partition(|mark| ended_together.contains(&mark.run_id));
        let mut first_marks: HashMap<RunId, &DispatchMark> = HashMap::new();
        for mark in &folded {
            first_marks.entry(mark.run_id).or_insert(mark);
        }
        if self.backend == Backend::Postgres && !apart.is_empty() {
            let mut tx = self.writer.begin().await?;
            write_marks(&mut tx, self.backend, std::mem::take(&mut apart)).await?;
            tx.commit().await?;
        }
        let mut tx = self.writer.begin().await?;
        write_marks(&mut tx, self.backend, apart).await?;
        let mut ended = vec![None; ends.len()];
        for index in committing {
            ended[index] = self.finish_committing_state(&mut tx, &ends[index]).await?;
        }
        for chunk in plain.chunks(ENDS_PER_UPDATE) {
            let together: Vec<&RunEnd> = chunk.iter().map(|index| &ends[*index]).collect();
            let mut rows = end_runs(&mut tx, self.backend, &together, &first_marks).await?;
            for index in chunk {
                // A run named twice ends once: the first answer has it.
                ended[*index] = rows.remove(&ends[*index].run_id);
            }
        }
        // A mark whose end ended nothing (the run had ended before) is
        // written as a mark: the run still gets its dispatch time.
        let ended_now: std::collections::HashSet<RunId> =
            ended.iter().flatten().map(|run| run.id).collect();
        let unwritten: Vec<&DispatchMark> = folded
            .into_iter()
            .filter(|mark| !ended_now.contains(&mark.run_id))
            .collect();
        write_marks(&mut tx, self.backend, unwritten).await?;
        super::quotas::add_day_usage(&mut tx, &day_charges(ends, &ended)).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// Ends a successful run that changed its job's state: the changes are
    /// committed only over the state the run saw and within the tenant's
    /// state quota, or the run fails saying which.
    async fn finish_committing_state(
        &self,
        tx: &mut sqlx::AnyConnection,
        end: &RunEnd,
    ) -> Result<Option<RunRow>, StoreError> {
        if self.backend == Backend::Postgres {
            // Ends of one job's runs commit its state one after the other:
            // two callbacks at once (from two executors, or two batches of
            // one) would otherwise both read the revision before either
            // wrote. SQLite's single writer serializes them already.
            sqlx::query(
                "SELECT pg_advisory_xact_lock($1, \
                 CAST((SELECT job_id FROM run WHERE id = $2) % 2147483647 AS INTEGER))",
            )
            .bind(STATE_COMMIT_LOCKS)
            .bind(end.run_id)
            .execute(&mut *tx)
            .await?;
        }
        let mut end = std::borrow::Cow::Borrowed(end);
        let unstorable = end.state_changes.iter().find(|(key, value)| {
            key.contains('\0') || value.as_deref().is_some_and(|value| value.contains('\0'))
        });
        // Why its changes cannot be committed, if they cannot: the run
        // fails with that outcome and message instead.
        let refused = if let Some((key, _)) = unstorable {
            Some((
                RunOutcome::StateUnstorable,
                format!(
                    "state not committed: key {:?} or its value holds the character U+0000, \
                     which cannot be stored; the run's changes were dropped",
                    storable_text(key)
                ),
            ))
        } else if let Some((key, based_on, now)) =
            state_conflict(&mut *tx, end.run_id, &end.state_base).await?
        {
            Some((
                RunOutcome::StateConflict,
                format!(
                    "state not committed: key {key:?} changed after this run read it \
                     (revision {based_on}, now {now}); the run's changes were dropped"
                ),
            ))
        } else if let Some((tenant, limit)) = &end.state_quota {
            state_over_quota(&mut *tx, self.backend, end.as_ref(), tenant, *limit)
                .await?
                .map(|message| (RunOutcome::QuotaExceeded, message))
        } else {
            None
        };
        if let Some((outcome, message)) = refused {
            let failed = end.to_mut();
            failed.success = false;
            failed.outcome = outcome;
            failed.code = 500;
            failed.message = message;
            failed.state_changes.clear();
        }
        let end = end.as_ref();
        let Some(run) = end_runs(&mut *tx, self.backend, &[end], &HashMap::new())
            .await?
            .remove(&end.run_id)
        else {
            return Ok(None);
        };
        if end.success {
            for (key, value) in &end.state_changes {
                match value {
                    Some(value) => {
                        sqlx::query(
                            "INSERT INTO job_state (job_id, key, value, revision) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, key) DO UPDATE \
                             SET value = excluded.value, revision = excluded.revision",
                        )
                        .bind(run.job_id)
                        .bind(key)
                        .bind(value)
                        .bind(run.id)
                        .execute(&mut *tx)
                        .await?;
                    }
                    None => {
                        sqlx::query("DELETE FROM job_state WHERE job_id = $1 AND key = $2")
                            .bind(run.job_id)
                            .bind(key)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
            }
        }
        Ok(Some(run))
    }

    /// Runs dispatched before `dispatched_before_ms` to an executor that has
    /// not beaten since `alive_since_ms` (the lost-run monitor's query).
    pub async fn lost_runs(
        &self,
        dispatched_before_ms: i64,
        alive_since_ms: i64,
    ) -> Result<Vec<RunRow>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            " FROM run WHERE status IN ('pending', 'dispatched') AND status = $1 AND dispatched_at_ms < $2 AND NOT EXISTS \
             (SELECT 1 FROM registry WHERE registry.address = run.executor \
              AND registry.updated_at_ms >= $3)"
        ))
        .bind(RunStatus::Dispatched.as_str())
        .bind(dispatched_before_ms)
        .bind(alive_since_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(run_from_row).collect::<Result<_, _>>()?)
    }

    /// A finished run's stored log (JSON lines), if any.
    pub async fn run_log(&self, run_id: RunId) -> Result<Option<String>, StoreError> {
        Ok(sqlx::query("SELECT log FROM run WHERE id = $1")
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| row.try_get::<Option<String>, _>("log"))
            .transpose()?
            .flatten())
    }
}
