//! What the console's dashboard reads: runs by hour over the last day, the
//! start lateness of recent scheduled runs, runs in progress and the jobs
//! that failed most. Each query is bounded by a time window on indexed
//! columns or by a row limit.

use super::rows::decode;
use super::*;

/// Run counts of one hour (or any bucket), by how the runs stand.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketCounts {
    pub success: i64,
    pub failed: i64,
    pub running: i64,
    pub cancelled: i64,
}

/// `tenant = $n OR everyone` for the operator's view: only placeholders go
/// into the text, which is why the queries below assert it safe.
fn tenant_clause(n: usize) -> String {
    format!("(tenant = ${n} OR ${} = 1)", n + 1)
}

impl Store {
    /// Runs written in [`from_ms`, `to_ms`) of `tenant` (every tenant for
    /// `None`), counted per `bucket_ms`-wide bucket from `from_ms`.
    pub async fn run_counts_by_bucket(
        &self,
        tenant: Option<&str>,
        from_ms: i64,
        to_ms: i64,
        bucket_ms: i64,
    ) -> Result<Vec<(i64, BucketCounts)>, StoreError> {
        let sql = format!(
            "SELECT (created_at_ms - $1) / $2 AS bucket, status, COUNT(*) AS n FROM run \
             WHERE created_at_ms >= $1 AND created_at_ms < $3 AND {} \
             GROUP BY bucket, status ORDER BY bucket",
            tenant_clause(4)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(from_ms)
            .bind(bucket_ms)
            .bind(to_ms)
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .fetch_all(&self.pool)
            .await?;
        let mut buckets: Vec<(i64, BucketCounts)> = Vec::new();
        for row in rows {
            let bucket: i64 = row.try_get("bucket")?;
            let status: RunStatus = decode(&row, "status")?;
            let n: i64 = row.try_get("n")?;
            if buckets.last().is_none_or(|(last, _)| *last != bucket) {
                buckets.push((bucket, BucketCounts::default()));
            }
            let counts = &mut buckets.last_mut().expect("pushed above").1;
            match status {
                RunStatus::Success => counts.success += n,
                RunStatus::Failed => counts.failed += n,
                RunStatus::Pending | RunStatus::Dispatched => counts.running += n,
                RunStatus::Cancelled => counts.cancelled += n,
            }
        }
        Ok(buckets)
    }

    /// How late the newest `limit` scheduled runs written since `since_ms`
    /// started (start minus planned instant, ms), in no order.
    pub async fn recent_start_lateness(
        &self,
        tenant: Option<&str>,
        since_ms: i64,
        limit: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let sql = format!(
            "SELECT started_at_ms - scheduled_at_ms AS late FROM run \
             WHERE created_at_ms >= $1 AND kind = $2 AND started_at_ms IS NOT NULL AND {} \
             ORDER BY id DESC LIMIT $5",
            tenant_clause(3)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(since_ms)
            .bind(TriggerKind::Schedule.as_str())
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| row.try_get::<i64, _>("late"))
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// Runs running now, or due by `now_ms` and waiting to be sent (not
    /// the fires written ahead of their instant).
    pub async fn runs_in_progress(
        &self,
        tenant: Option<&str>,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let sql = format!(
            "SELECT COUNT(*) AS n FROM run WHERE status IN ('pending', 'dispatched') AND (status = $1 OR (status = $2 AND \
             scheduled_at_ms <= $5)) AND {}",
            tenant_clause(3)
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(RunStatus::Dispatched.as_str())
            .bind(RunStatus::Pending.as_str())
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .bind(now_ms)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get("n")?)
    }

    /// The `limit` jobs with the most failed runs written since `since_ms`:
    /// (job id, its name or empty if it is gone, failures), most first.
    pub async fn most_failing_jobs(
        &self,
        tenant: Option<&str>,
        since_ms: i64,
        limit: i64,
    ) -> Result<Vec<(JobId, String, i64)>, StoreError> {
        let sql = format!(
            "SELECT job_id, COUNT(*) AS failures, \
             COALESCE((SELECT name FROM job WHERE job.id = run.job_id), '') AS name \
             FROM run WHERE created_at_ms >= $1 AND status = $2 AND {} \
             GROUP BY job_id ORDER BY failures DESC, job_id LIMIT $5",
            tenant_clause(3)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(since_ms)
            .bind(RunStatus::Failed.as_str())
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    JobId(row.try_get::<i64, _>("job_id")?),
                    row.try_get("name")?,
                    row.try_get("failures")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }
}

impl Store {
    /// Daily reports from `from_day` to `to_day` (inclusive, `YYYY-MM-DD`)
    /// of `tenant`, or summed over every tenant for `None`; oldest first.
    pub async fn daily_report_totals(
        &self,
        tenant: Option<&str>,
        from_day: &str,
        to_day: &str,
    ) -> Result<Vec<DailyReport>, StoreError> {
        let sql = format!(
            "SELECT day, CAST(SUM(success) AS BIGINT) AS success, \
             CAST(SUM(failed) AS BIGINT) AS failed, CAST(SUM(running) AS BIGINT) AS running, \
             CAST(SUM(cancelled) AS BIGINT) AS cancelled FROM daily_report \
             WHERE day >= $1 AND day <= $2 AND {} GROUP BY day ORDER BY day",
            tenant_clause(3)
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(from_day)
            .bind(to_day)
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(DailyReport {
                    day: row.try_get("day")?,
                    success: row.try_get("success")?,
                    failed: row.try_get("failed")?,
                    running: row.try_get("running")?,
                    cancelled: row.try_get("cancelled")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }
}
