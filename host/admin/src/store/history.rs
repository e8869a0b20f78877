//! What is kept after runs end: alarms and their delivery, daily reports,
//! run retention.

use super::*;

impl Store {
    /// Failed runs whose alarm is due, with their job's webhook (empty if
    /// the job has none or is gone); also puts back claims older than
    /// `stale_before_ms` (an admin died while sending).
    pub async fn due_alarms(
        &self,
        stale_before_ms: i64,
        limit: i64,
    ) -> Result<Vec<(RunRow, String, String)>, StoreError> {
        sqlx::query(
            "UPDATE run SET alarm_status = $1 WHERE alarm_status = $2 AND alarm_claimed_at_ms < $3",
        )
        .bind(AlarmState::Due.as_str())
        .bind(AlarmState::Sending.as_str())
        .bind(stale_before_ms)
        .execute(&self.writer)
        .await?;
        let rows = sqlx::query(concat!(
            "SELECT ",
            run_columns!(),
            ", COALESCE((SELECT alarm_url FROM job WHERE job.id = run.job_id), '') AS alarm_url, \
             COALESCE((SELECT name FROM job WHERE job.id = run.job_id), '') AS job_name \
             FROM run WHERE alarm_status = $1 ORDER BY id LIMIT $2"
        ))
        .bind(AlarmState::Due.as_str())
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    run_from_row(row)?,
                    row.try_get("alarm_url")?,
                    row.try_get("job_name")?,
                ))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Claims a due alarm for this admin: true for exactly one claimant.
    pub async fn claim_alarm(&self, run_id: RunId, now_ms: i64) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE run SET alarm_status = $1, alarm_claimed_at_ms = $2 \
             WHERE id = $3 AND alarm_status = $4",
        )
        .bind(AlarmState::Sending.as_str())
        .bind(now_ms)
        .bind(run_id)
        .bind(AlarmState::Due.as_str())
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Records how an alarm ended (`from` is the state it must be in).
    pub async fn finish_alarm(
        &self,
        run_id: RunId,
        from: AlarmState,
        to: AlarmState,
        message: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE run SET alarm_status = $1, alarm_message = $2 WHERE id = $3 AND alarm_status = $4",
        )
        .bind(to.as_str())
        .bind(message)
        .bind(run_id)
        .bind(from.as_str())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// Recounts the daily report of `day` (`YYYY-MM-DD`, UTC) from the runs
    /// written in [`from_ms`, `to_ms`), per tenant: succeeded, failed, and
    /// not yet ended.
    pub async fn refresh_daily_report(
        &self,
        day: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, \
             SUM(CASE WHEN status = $1 THEN 1 ELSE 0 END) AS success, \
             SUM(CASE WHEN status = $2 THEN 1 ELSE 0 END) AS failed, \
             SUM(CASE WHEN status IN ($3, $4) THEN 1 ELSE 0 END) AS running, \
             SUM(CASE WHEN status = $7 THEN 1 ELSE 0 END) AS cancelled \
             FROM run WHERE created_at_ms >= $5 AND created_at_ms < $6 GROUP BY tenant",
        )
        .bind(RunStatus::Success.as_str())
        .bind(RunStatus::Failed.as_str())
        .bind(RunStatus::Pending.as_str())
        .bind(RunStatus::Dispatched.as_str())
        .bind(from_ms)
        .bind(to_ms)
        .bind(RunStatus::Cancelled.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut tx = self.writer.begin().await?;
        for row in rows {
            let tenant: String = row.try_get("tenant")?;
            sqlx::query(
                "INSERT INTO daily_report (tenant, day, success, failed, running, cancelled) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant, day) DO UPDATE SET \
                 success = excluded.success, failed = excluded.failed, \
                 running = excluded.running, cancelled = excluded.cancelled",
            )
            .bind(tenant)
            .bind(day)
            .bind(row.try_get::<i64, _>("success")?)
            .bind(row.try_get::<i64, _>("failed")?)
            .bind(row.try_get::<i64, _>("running")?)
            .bind(row.try_get::<i64, _>("cancelled")?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Daily reports of `tenant` from `from_day` to `to_day` (inclusive,
    /// `YYYY-MM-DD`), oldest first.
    pub async fn daily_reports(
        &self,
        tenant: &str,
        from_day: &str,
        to_day: &str,
    ) -> Result<Vec<DailyReport>, StoreError> {
        self.daily_report_totals(Some(tenant), from_day, to_day)
            .await
    }

    /// Deletes ended runs written before `before_ms` (run retention);
    /// returns how many.
    pub async fn delete_runs_before(&self, before_ms: i64) -> Result<u64, StoreError> {
        Ok(
            sqlx::query("DELETE FROM run WHERE created_at_ms < $1 AND status IN ($2, $3, $4)")
                .bind(before_ms)
                .bind(RunStatus::Success.as_str())
                .bind(RunStatus::Failed.as_str())
                .bind(RunStatus::Cancelled.as_str())
                .execute(&self.writer)
                .await?
                .rows_affected(),
        )
    }
}
