//! The claims that turn due jobs into written fires: the earliest due
//! fire, and claiming a batch of due jobs with their next fires.

use super::*;

impl Store {
    /// The earliest next fire among started jobs (`None`: no job is
    /// scheduled), read from the due index alone on a reading connection:
    /// where the pre-read's next step of claims starts.
    pub async fn earliest_due(&self) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query(
            "SELECT next_fire_at_ms FROM job WHERE enabled = 1 AND next_fire_at_ms IS NOT NULL \
             ORDER BY next_fire_at_ms LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some(row) => Some(row.try_get("next_fire_at_ms")?),
            None => None,
        })
    }

    /// Jobs the pre-read claims per transaction: on SQLite, where every
    /// claim waits in line for the one writer behind dispatch marks and
    /// run ends, 1,000 (at 5,000 runs/s a claim of 200 waited ~25 ms for
    /// ~15 ms of work, and a second of fires took 25 of them); on
    /// PostgreSQL 200, so that several admins share the due jobs between
    /// them (`FOR UPDATE SKIP LOCKED` locks a whole batch).
    pub fn claim_batch(&self) -> usize {
        match self.backend {
            Backend::Sqlite => 1_000,
            Backend::Postgres => 200,
        }
    }

    /// Claims up to `limit` jobs due by `until_ms` in a transaction left
    /// open: the caller plans each job's fires and writes them with
    /// [`DueClaim::write`], which commits. On PostgreSQL the jobs are
    /// those no other admin is claiming right now (`FOR UPDATE SKIP
    /// LOCKED`), so several admins each take a disjoint share; on SQLite
    /// the single writer connection serializes claims (plan quickly: the
    /// writer waits).
    pub async fn claim_due(&self, until_ms: i64, limit: i64) -> Result<DueClaim<'_>, StoreError> {
        macro_rules! due {
            ($lock:literal) => {
                concat!(
                    "SELECT ",
                    due_job_columns!(),
                    " FROM job WHERE enabled = 1 AND next_fire_at_ms IS NOT NULL \
                     AND next_fire_at_ms <= $1 ORDER BY next_fire_at_ms LIMIT $2",
                    $lock
                )
            };
        }
        let due = match self.backend {
            Backend::Sqlite => due!(""),
            Backend::Postgres => due!(" FOR UPDATE SKIP LOCKED"),
        };
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query(due)
            .bind(until_ms)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let (jobs, undecodable) = decode_due_jobs(&rows);
        Ok(DueClaim {
            store: self,
            tx,
            jobs,
            undecodable,
        })
    }
}

/// Due jobs claimed in an open transaction (see [`Store::claim_due`]).
pub struct DueClaim<'a> {
    store: &'a Store,
    tx: sqlx::Transaction<'static, sqlx::Any>,
    jobs: Vec<DueJob>,
    /// Jobs whose row does not decode: stopped by the write.
    undecodable: Vec<JobId>,
}

impl std::fmt::Debug for DueClaim<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueClaim")
            .field("jobs", &self.jobs)
            .field("undecodable", &self.undecodable)
            .finish_non_exhaustive()
    }
}

impl DueClaim<'_> {
    /// The jobs claimed, nearest due first.
    pub fn jobs(&self) -> &[DueJob] {
        &self.jobs
    }

    /// Writes `plans` — for each of [`jobs`](Self::jobs), in order, its
    /// fires and next fire, or `None`: the job cannot be scheduled and is
    /// stopped — and commits (a job left without a plan is left as it was,
    /// due). Returns the claimed jobs with the id of each
    /// fire written (`None` where the unique key dropped one).
    pub async fn write(
        self,
        plans: Vec<Option<(Vec<NewRun>, Option<i64>)>>,
        now_ms: i64,
    ) -> Result<Vec<ClaimedJob>, StoreError> {
        let DueClaim {
            store,
            mut tx,
            jobs,
            mut undecodable,
        } = self;
        debug_assert_eq!(plans.len(), jobs.len(), "one plan per claimed job");
        // Each statement below covers the whole batch: a statement per job
        // or fire was a round trip to the database each.
        let mut moves = Vec::with_capacity(jobs.len());
        let mut planned = Vec::with_capacity(jobs.len());
        for (job, plan) in jobs.into_iter().zip(plans) {
            match plan {
                Some((fires, next)) => {
                    moves.push((job.id, next));
                    planned.push((job, fires));
                }
                None => undecodable.push(job.id),
            }
        }
        let stopped = undecodable;
        for chunk in stopped.chunks(IN_LIST_CHUNK) {
            let sql = format!(
                "UPDATE job SET enabled = 0, next_fire_at_ms = NULL WHERE id IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                query = query.bind(*id);
            }
            query.execute(&mut *tx).await?;
        }
        move_next_fires(&mut tx, store.backend, &moves).await?;
        let fires: Vec<(&str, &NewRun)> = planned
            .iter()
            .flat_map(|(job, fires)| fires.iter().map(|fire| (job.tenant.as_str(), fire)))
            .collect();
        let mut ids = insert_fires(
            &mut tx,
            store.backend,
            &fires,
            &store.owner,
            store.leases,
            now_ms,
        )
        .await?
        .into_iter();
        tx.commit().await?;
        Ok(planned
            .into_iter()
            .map(|(job, fires)| ClaimedJob {
                written: fires
                    .into_iter()
                    .map(|fire| (ids.next().flatten(), fire))
                    .collect(),
                job,
            })
            .collect())
    }
}

/// Sets each job's next fire (`None`: none), the moves bound as one value
/// (see `Backend::json_rows`): a claim of 1,000 jobs is one statement,
/// where binding each value was eight on SQLite (see
/// `SQLITE_VALUES_PER_STATEMENT`), each a hop to SQLite's thread and back
/// with the writer's connection held.
async fn move_next_fires(
    conn: &mut sqlx::AnyConnection,
    backend: Backend,
    moves: &[(JobId, Option<i64>)],
) -> Result<(), StoreError> {
    /// A move as the statement reads it.
    #[derive(serde::Serialize)]
    struct MoveValues {
        id: JobId,
        next: Option<i64>,
    }
    /// Moves per statement (bound together as one value).
    const MOVES_PER_UPDATE: usize = 1_000;
    const FIELDS: [(&str, &str); 2] = [("id", "BIGINT"), ("next", "BIGINT")];
    // Only fixed names and placeholders go into the text.
    let sql = format!(
        "UPDATE job SET next_fire_at_ms = move_next FROM ({}) AS moves WHERE job.id = move_id",
        backend.json_rows(1, &FIELDS, "move_")
    );
    for chunk in moves.chunks(MOVES_PER_UPDATE) {
        let values: Vec<MoveValues> = chunk
            .iter()
            .map(|(id, next)| MoveValues {
                id: *id,
                next: *next,
            })
            .collect();
        sqlx::query(sqlx::AssertSqlSafe(sql.clone()))
            .bind(json_text("rows", &values)?)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
