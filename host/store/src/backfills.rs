//! Backfills: a job's schedule run over a past range, a few instants a
//! second, with their progress; and the runs they write, each instant of a
//! job once.

use cronbox_api::Backfill;

use super::*;

fn backfill_from_row(row: &AnyRow) -> Result<Backfill, sqlx::Error> {
    Ok(Backfill {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        job_id: JobId(row.try_get("job_id")?),
        from_ms: row.try_get("from_ms")?,
        to_ms: row.try_get("to_ms")?,
        per_second: row.try_get("per_second")?,
        planned: row.try_get("planned")?,
        written: row.try_get("written")?,
        status: row.try_get("status")?,
        created_by: row.try_get("created_by")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

const BACKFILL_COLUMNS: &str = "id, tenant, job_id, from_ms, to_ms, per_second, planned, \
     written, status, created_by, created_at_ms";

impl Store {
    /// Records a new running backfill; returns it.
    pub async fn create_backfill(&self, backfill: &Backfill) -> Result<Backfill, StoreError> {
        let row = sqlx::query(
            "INSERT INTO backfill (tenant, job_id, from_ms, to_ms, per_second, planned, written, \
             next_ms, status, created_by, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5, $6, 0, $3, $7, $8, $9) RETURNING id",
        )
        .bind(&backfill.tenant)
        .bind(backfill.job_id)
        .bind(backfill.from_ms)
        .bind(backfill.to_ms)
        .bind(backfill.per_second)
        .bind(backfill.planned)
        .bind(&backfill.status)
        .bind(&backfill.created_by)
        .bind(backfill.created_at_ms)
        .fetch_one(&self.writer)
        .await?;
        Ok(Backfill {
            id: row.try_get("id")?,
            ..backfill.clone()
        })
    }

    pub async fn backfill(&self, id: i64) -> Result<Option<Backfill>, StoreError> {
        let sql = format!("SELECT {BACKFILL_COLUMNS} FROM backfill WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(backfill_from_row).transpose()?)
    }

    /// Backfills of `tenant` (every tenant's for `None`), of one job if
    /// given, newest first, at most 100.
    pub async fn backfills(
        &self,
        tenant: Option<&str>,
        job_id: Option<JobId>,
    ) -> Result<Vec<Backfill>, StoreError> {
        let sql = format!(
            "SELECT {BACKFILL_COLUMNS} FROM backfill WHERE (tenant = $1 OR $2 = 1) \
             AND (job_id = $3 OR $4 = 1) ORDER BY id DESC LIMIT 100"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .bind(job_id.unwrap_or_default())
            .bind(i64::from(job_id.is_none()))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(backfill_from_row)
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// Records how far a backfill has written: instants up to `next_ms`,
    /// `written` runs more; false if it is no longer running (cancelled).
    pub async fn advance_backfill(
        &self,
        id: i64,
        next_ms: i64,
        written: i64,
        done: bool,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE backfill SET next_ms = $2, written = written + $3, \
             status = CASE WHEN $4 = 1 THEN 'done' ELSE status END \
             WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .bind(next_ms)
        .bind(written)
        .bind(i64::from(done))
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Cancels a running backfill: no more runs are written for it. False
    /// if it was not running.
    pub async fn cancel_backfill(&self, id: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE backfill SET status = 'cancelled' WHERE id = $1 AND status = 'running'",
        )
        .bind(id)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Writes a backfill's run unless the job already has one for that
    /// instant; its id, or `None` for a duplicate.
    pub async fn insert_backfill_run(
        &self,
        run: &NewRun,
        now_ms: i64,
    ) -> Result<Option<RunId>, StoreError> {
        let mut conn = self.writer.acquire().await?;
        insert_run(&mut conn, run, &self.owner, self.leases, now_ms, true).await
    }
}
