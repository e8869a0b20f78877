//! A workflow's schedule kept: its due fires, each claimed once (the
//! claim moves the next fire and writes the run, or buffers the fire, in
//! one transaction, so admins racing for it start one run); the fire
//! buffered by overlap BUFFER_ONE, started once no run is in progress; a
//! FIX_DELAY schedule's next fire planned once the run it waits for
//! ended; backfills, each instant run once.

use cronbox_api::{Workflow, WorkflowRunStatus};
use cronbox_protocol::TriggerKind;

use super::workflows::{WORKFLOW_COLUMNS, insert_workflow_run, status_text, workflow_from_row};
use super::*;

/// What a claimed fire does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fire<'a> {
    /// Writes a run of this kind with this input.
    Start(TriggerKind, &'a str),
    /// Writes a run, and the schedule's next fire waits for its end
    /// (FIX_DELAY).
    StartThenWait(TriggerKind, &'a str),
    /// Waits for the runs in progress (unless a fire already waits).
    Buffer,
    /// Starts nothing.
    Skip,
}

impl Store {
    /// The workflows whose schedule's next fire is due by `now_ms`.
    pub async fn due_workflows(&self, now_ms: i64) -> Result<Vec<Workflow>, StoreError> {
        let sql = format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflow WHERE next_fire_at_ms <= $1 \
             ORDER BY next_fire_at_ms LIMIT 1000"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now_ms)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(workflow_from_row)
            .collect::<Result<_, _>>()?)
    }

    /// Claims `workflow`'s fire planned at `planned_ms`: moves its next
    /// fire to `next_ms` and does what `fire` says in the same
    /// transaction — writes the run it starts, buffers it (unless a fire
    /// already waits), or nothing. `None` if another admin claimed it
    /// first; else the run's id, if one was written.
    pub async fn claim_workflow_fire(
        &self,
        workflow: &Workflow,
        planned_ms: i64,
        next_ms: Option<i64>,
        fire: Fire<'_>,
        now_ms: i64,
    ) -> Result<Option<Option<i64>>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let claimed = sqlx::query(
            "UPDATE workflow SET next_fire_at_ms = $3 WHERE id = $1 AND next_fire_at_ms = $2",
        )
        .bind(workflow.id)
        .bind(planned_ms)
        .bind(next_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if claimed != 1 {
            return Ok(None);
        }
        let run = match fire {
            Fire::Start(kind, input) => {
                insert_workflow_run(&mut tx, workflow, input, kind, Some(planned_ms), now_ms)
                    .await?
            }
            Fire::StartThenWait(kind, input) => {
                let run =
                    insert_workflow_run(&mut tx, workflow, input, kind, Some(planned_ms), now_ms)
                        .await?;
                wait_for_run(&mut tx, workflow.id, run).await?;
                run
            }
            Fire::Buffer => {
                sqlx::query(
                    "UPDATE workflow SET buffered_fire_at_ms = $2 \
                     WHERE id = $1 AND buffered_fire_at_ms IS NULL",
                )
                .bind(workflow.id)
                .bind(planned_ms)
                .execute(&mut *tx)
                .await?;
                None
            }
            Fire::Skip => None,
        };
        tx.commit().await?;
        Ok(Some(run))
    }

    /// The ids of `workflow_id`'s runs in progress.
    pub async fn workflow_runs_in_progress(
        &self,
        workflow_id: i64,
    ) -> Result<Vec<i64>, StoreError> {
        Ok(
            sqlx::query_scalar(
                "SELECT id FROM workflow_run WHERE workflow_id = $1 AND status = $2",
            )
            .bind(workflow_id)
            .bind(status_text(WorkflowRunStatus::Running)?)
            .fetch_all(&self.writer)
            .await?,
        )
    }

    /// Whether a fire of `workflow_id` waits for its runs to end.
    pub async fn workflow_fire_buffered(&self, workflow_id: i64) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT buffered_fire_at_ms FROM workflow WHERE id = $1")
            .bind(workflow_id)
            .fetch_optional(&self.writer)
            .await?;
        Ok(match row {
            Some(row) => row
                .try_get::<Option<i64>, _>("buffered_fire_at_ms")?
                .is_some(),
            None => false,
        })
    }

    /// The workflows with a buffered fire and no run in progress.
    pub async fn workflows_with_a_fire_to_start(&self) -> Result<Vec<Workflow>, StoreError> {
        let sql = format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflow w WHERE buffered_fire_at_ms IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM workflow_run r WHERE r.workflow_id = w.id \
             AND r.status = $1)"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(status_text(WorkflowRunStatus::Running)?)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(workflow_from_row)
            .collect::<Result<_, _>>()?)
    }

    /// Starts `workflow`'s buffered fire, once: the buffer cleared and
    /// the run (kind `schedule`, with `input`, for the buffered instant)
    /// written in one transaction; with `then_wait` (FIX_DELAY), the next
    /// fire waits for its end. The run's id, or `None` if no fire waited
    /// (another admin started it).
    pub async fn start_buffered_fire(
        &self,
        workflow: &Workflow,
        input: &str,
        then_wait: bool,
        now_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let buffered: Option<i64> =
            sqlx::query_scalar("SELECT buffered_fire_at_ms FROM workflow WHERE id = $1")
                .bind(workflow.id)
                .fetch_optional(&mut *tx)
                .await?
                .flatten();
        let Some(fire_at) = buffered else {
            return Ok(None);
        };
        let cleared = sqlx::query(
            "UPDATE workflow SET buffered_fire_at_ms = NULL \
             WHERE id = $1 AND buffered_fire_at_ms = $2",
        )
        .bind(workflow.id)
        .bind(fire_at)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if cleared != 1 {
            return Ok(None);
        }
        let run = insert_workflow_run(
            &mut tx,
            workflow,
            input,
            TriggerKind::Schedule,
            Some(fire_at),
            now_ms,
        )
        .await?;
        if then_wait {
            wait_for_run(&mut tx, workflow.id, run).await?;
        }
        tx.commit().await?;
        Ok(run)
    }

    /// The FIX_DELAY workflows whose awaited run has ended, with its id
    /// and end.
    pub async fn workflows_done_waiting(&self) -> Result<Vec<(Workflow, i64, i64)>, StoreError> {
        let columns = WORKFLOW_COLUMNS
            .split(", ")
            .map(|column| format!("w.{column}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT {columns}, r.id AS awaited, r.ended_at_ms AS awaited_end \
             FROM workflow w JOIN workflow_run r ON r.id = w.delay_after_run \
             WHERE w.delay_after_run IS NOT NULL AND r.status <> $1"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(status_text(WorkflowRunStatus::Running)?)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    workflow_from_row(row)?,
                    row.try_get("awaited")?,
                    row.try_get::<Option<i64>, _>("awaited_end")?
                        .unwrap_or_default(),
                ))
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Plans `workflow_id`'s next fire at `next_ms` once the run `awaited`
    /// ended, once; false if another admin did.
    pub async fn resume_after_run(
        &self,
        workflow_id: i64,
        awaited: i64,
        next_ms: Option<i64>,
    ) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "UPDATE workflow SET next_fire_at_ms = $3, delay_after_run = NULL \
             WHERE id = $1 AND delay_after_run = $2",
        )
        .bind(workflow_id)
        .bind(awaited)
        .bind(next_ms)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// Writes a run of `workflow` (kind `backfill`, with `input`) for each
    /// instant of `fires` not backfilled before, in one transaction; the
    /// runs written.
    pub async fn backfill_workflow(
        &self,
        workflow: &Workflow,
        fires: &[i64],
        input: &str,
        now_ms: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let mut written = Vec::new();
        for &fire in fires {
            let run = insert_workflow_run(
                &mut tx,
                workflow,
                input,
                TriggerKind::Backfill,
                Some(fire),
                now_ms,
            )
            .await?;
            written.extend(run);
        }
        tx.commit().await?;
        Ok(written)
    }
}

/// Within `tx`: workflow `workflow_id`'s next fire waits for the end of
/// run `run` (FIX_DELAY).
async fn wait_for_run(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    workflow_id: i64,
    run: Option<i64>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE workflow SET delay_after_run = $2 WHERE id = $1")
        .bind(workflow_id)
        .bind(run)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
