//! Each job's durable state, with its revisions.

use super::*;

impl Store {
    /// The durable state of each job among `job_ids` (empty for a job
    /// without state), with each key's revision.
    pub async fn job_states(
        &self,
        job_ids: &[JobId],
    ) -> Result<HashMap<JobId, JobState>, StoreError> {
        let mut states: HashMap<JobId, JobState> = job_ids
            .iter()
            .map(|id| (*id, JobState::default()))
            .collect();
        if job_ids.is_empty() {
            return Ok(states);
        }
        let sql = format!(
            "SELECT job_id, key, value, revision FROM job_state WHERE job_id IN ({})",
            self.backend.ids_in(1)
        );
        for row in sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(json_text("rows", job_ids)?)
            .fetch_all(&self.pool)
            .await?
        {
            states.entry(row.try_get("job_id")?).or_default().insert(
                row.try_get("key")?,
                row.try_get("value")?,
                row.try_get("revision")?,
            );
        }
        Ok(states)
    }

    /// A job's durable state, with each key's revision.
    pub async fn job_state(&self, job_id: JobId) -> Result<JobState, StoreError> {
        Ok(self
            .job_states(&[job_id])
            .await?
            .remove(&job_id)
            .unwrap_or_default())
    }

    /// Replaces a job's durable state (an operator's edit): every key it
    /// sets gets a new revision, so a run that read the old state cannot
    /// commit over the edit.
    pub async fn replace_job_state(
        &self,
        job_id: JobId,
        state: &HashMap<String, String>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut tx = self.writer.begin().await?;
        sqlx::query("DELETE FROM job_state WHERE job_id = $1")
            .bind(job_id)
            .execute(&mut *tx)
            .await?;
        for (key, value) in state {
            sqlx::query(
                "INSERT INTO job_state (job_id, key, value, revision) VALUES ($1, $2, $3, $4)",
            )
            .bind(job_id)
            .bind(key)
            .bind(value)
            .bind(-now_ms.max(1))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }
}
