//! How runs end and are marked dispatched: many ends (or marks) in one
//! statement bound as one JSON value, a run's dispatch mark folded into its
//! end, state commits checked for conflicts and quotas, and each tenant's
//! usage of the day charged in the same transaction.

use super::quotas::state_over_quota;
use super::runs::*;
use super::*;

/// The first key of `base` whose revision in job `run_id`'s state is no
/// longer the one the run based its view on: (key, the run's base, now).
pub(super) async fn state_conflict(
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

/// Ends each of `ends`' runs that is still waiting or running (or was
/// cancelled while its dispatch was on its way, and ran after all: what it
/// did is recorded then), all in one statement; answers the ended runs by
/// id (a run that had ended already is absent). A run with a dispatch mark
/// among `marks` gets what the mark would have written (its dispatch time;
/// its executor, if the end names none) in the same row write.
pub(super) async fn end_runs(
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
pub(super) async fn end_runs_in(
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
        trace: Option<&'a str>,
    }
    const FIELDS: [(&str, &str); 16] = [
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
        ("trace", "TEXT"),
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
                trace: end
                    .traceparent
                    .as_deref()
                    .and_then(cronbox_protocol::trace_context::trace_id),
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
         peak_memory_bytes = end_peak, trace_id = COALESCE(end_trace, trace_id), \
         lease_owner = NULL, lease_until_ms = NULL \
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
        .bind(json_text("rows", &values)?);
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
pub(super) async fn mark_runs_in(
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
        .bind(json_text("rows", &values)?);
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
pub(super) async fn write_marks(
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
pub(super) fn were_pending(written: &[(RunId, bool)]) -> u64 {
    written.iter().filter(|(_, pending)| *pending).count() as u64
}

/// The class of PostgreSQL's two-key advisory locks a state commit takes
/// with its job's id (a space of its own: one-key locks do not meet it).
pub(super) const STATE_COMMIT_LOCKS: i32 = 0x6373_7461; // "csta"

/// The charges of the runs among `ends` that `ended` (answered in the same
/// order), added up per tenant and day, in tenant and day order.
pub(super) fn day_charges(ends: &[RunEnd], ended: &[Option<RunRow>]) -> Vec<DayUsage> {
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

impl Store {
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
}
