//! What is kept after runs end: alarms and their delivery, daily reports,
//! run retention.

use super::*;

/// The advisory lock an admin folding `run_end` holds (PostgreSQL).
const REPORT_FOLD_LOCK: i64 = 0x6372_6f6e_666f_6c64; // "cronfold"

/// Rows of `run_end` folded into the daily reports per transaction.
pub const REPORT_FOLD_BATCH: i64 = 20_000;

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
            "UPDATE run SET alarm_status = $1 WHERE alarm_status IN ('due', 'sending') \
             AND alarm_status = $2 AND alarm_claimed_at_ms < $3",
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
             FROM run WHERE alarm_status IN ('due', 'sending') AND alarm_status = $1 ORDER BY id LIMIT $2"
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

    /// Folds up to `limit` of the rows runs leave in `run_end` as they end
    /// (+1 of how one ended; -1 cancelled for a cancelled run that ran
    /// after all) into the daily reports, deleting them in the same transaction (so
    /// each is counted once, whichever admin folds it); returns how many.
    ///
    /// Summed by the database, not read out: 20,000 rows a batch returned
    /// row by row held SQLite's writer long enough to make firing at
    /// 5,000 runs/s seconds late each minute.
    pub async fn fold_run_ends(&self, limit: i64) -> Result<u64, StoreError> {
        let mut tx = self.writer.begin().await?;
        if self.backend == Backend::Postgres {
            // One admin folds at a time: the sums are read before the rows
            // are deleted, and a second admin reading them meanwhile would
            // count them again. (SQLite has one writer.)
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(REPORT_FOLD_LOCK)
                .execute(&mut *tx)
                .await?;
        }
        // The batch: the `limit` oldest rows, those up to its newest id.
        let newest: Option<i64> = sqlx::query_scalar(
            "SELECT CAST(MAX(id) AS BIGINT) FROM \
             (SELECT id FROM run_end ORDER BY id LIMIT $1) AS batch",
        )
        .bind(limit)
        .fetch_one(&mut *tx)
        .await?;
        let Some(newest) = newest else {
            return Ok(0);
        };
        sqlx::query(
            "INSERT INTO daily_report (tenant, day, success, failed, running, cancelled) \
             SELECT tenant, day, \
             SUM(CASE WHEN status = $2 THEN delta ELSE 0 END), \
             SUM(CASE WHEN status = $3 THEN delta ELSE 0 END), 0, \
             SUM(CASE WHEN status = $4 THEN delta ELSE 0 END) \
             FROM run_end WHERE id <= $1 AND status IN ($2, $3, $4) GROUP BY tenant, day \
             ON CONFLICT (tenant, day) DO UPDATE SET \
             success = daily_report.success + excluded.success, \
             failed = daily_report.failed + excluded.failed, \
             cancelled = daily_report.cancelled + excluded.cancelled",
        )
        .bind(newest)
        .bind(RunStatus::Success.as_str())
        .bind(RunStatus::Failed.as_str())
        .bind(RunStatus::Cancelled.as_str())
        .execute(&mut *tx)
        .await?;
        let folded = sqlx::query("DELETE FROM run_end WHERE id <= $1")
            .bind(newest)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(folded)
    }

    /// Sets each daily report's `running` to the runs written that day
    /// that have not ended (few: read through the index of open runs).
    pub async fn count_open_runs(&self) -> Result<(), StoreError> {
        let rows = sqlx::query(
            "SELECT tenant, CAST(created_at_ms / 86400000 AS BIGINT) AS day_number, \
             CAST(COUNT(*) AS BIGINT) AS open FROM run WHERE status IN ('pending', 'dispatched') AND status IN ($1, $2) \
             GROUP BY tenant, day_number",
        )
        .bind(RunStatus::Pending.as_str())
        .bind(RunStatus::Dispatched.as_str())
        .fetch_all(&self.pool)
        .await?;
        let mut tx = self.writer.begin().await?;
        sqlx::query("UPDATE daily_report SET running = 0 WHERE running <> 0")
            .execute(&mut *tx)
            .await?;
        for row in rows {
            let day_number: i64 = row.try_get("day_number")?;
            let day = chrono::DateTime::from_timestamp_millis(day_number.saturating_mul(DAY_MS))
                .unwrap_or_default()
                .format("%Y-%m-%d")
                .to_string();
            sqlx::query(
                "INSERT INTO daily_report (tenant, day, running) VALUES ($1, $2, $3) \
                 ON CONFLICT (tenant, day) DO UPDATE SET running = excluded.running",
            )
            .bind(row.try_get::<String, _>("tenant")?)
            .bind(day)
            .bind(row.try_get::<i64, _>("open")?)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Brings the daily reports up to date: every ended run folded, the
    /// open ones counted (tests; housekeeping does the same in steps).
    pub async fn update_daily_reports(&self) -> Result<(), StoreError> {
        while self.fold_run_ends(REPORT_FOLD_BATCH).await? == REPORT_FOLD_BATCH as u64 {}
        self.count_open_runs().await
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

    /// Deletes up to `limit` runs written before `before_ms` that ended
    /// with one of `statuses` (run retention, in bounded batches); returns
    /// how many. The daily reports keep counting them.
    pub async fn delete_ended_runs(
        &self,
        before_ms: i64,
        statuses: &[RunStatus],
        limit: i64,
    ) -> Result<u64, StoreError> {
        debug_assert!(statuses.iter().all(|status| !status.is_open()));
        let sql = format!(
            "DELETE FROM run WHERE id IN (SELECT id FROM run WHERE created_at_ms < $1 \
             AND status IN ({}) LIMIT ${})",
            (2..2 + statuses.len())
                .map(|n| format!("${n}"))
                .collect::<Vec<_>>()
                .join(", "),
            2 + statuses.len()
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(before_ms);
        for status in statuses {
            query = query.bind(status.as_str());
        }
        Ok(query
            .bind(limit)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }
}
