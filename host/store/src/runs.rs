//! Runs: writing them, leases for dispatch, reading them, cancelling what
//! waits, and the lost-run query. Ending them and their dispatch marks is
//! `run_ends.rs`; listing them by filter, `run_lists.rs`.

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

pub(super) async fn insert_run(
    conn: &mut sqlx::AnyConnection,
    run: &NewRun,
    owner: &str,
    leases: Leases,
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
    let row = bind_new_run(sqlx::query(sql), run, owner, leases, now_ms)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.map(|row| row.try_get("id")).transpose()?)
}

/// ` AND scheduled_at_ms BETWEEN $first AND $first+1` when there is a
/// range to name (bound after the statement's other values), else nothing.
pub(super) fn scheduled_between(range: Option<(i64, i64)>, first: usize) -> String {
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
    leases: Leases,
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
        .bind(leases.write_until(run.scheduled_at_ms, now_ms))
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
    leases: Leases,
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
                lease_until: leases.write_until(run.scheduled_at_ms, now_ms),
            })
            .collect();
        let query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(RunStatus::Pending.as_str())
            .bind(now_ms)
            .bind(owner)
            .bind(json_text("rows", &values)?);
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
        let id = insert_run(&mut conn, run, &self.owner, self.leases, now_ms, false).await?;
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

    /// The runs of `ids` that exist, by id: one query, whatever their
    /// number.
    pub async fn runs_by_id(&self, ids: &[RunId]) -> Result<HashMap<RunId, RunRow>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            concat!("SELECT ", run_columns!(), " FROM run WHERE id IN ({})"),
            self.backend.ids_in(1)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(json_text("rows", ids)?)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let run = run_from_row(row)?;
                Ok((run.id, run))
            })
            .collect()
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
                .bind(now_ms + self.leases.dispatch_ms())
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
