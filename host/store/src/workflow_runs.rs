//! A workflow run as a whole: ended once (by its last node, a stop or
//! its deadline), found past its deadline or idle, stopped with what it
//! has running, reopened. Its nodes are `workflows.rs`'.

use cronbox_api::{NodeStatus, WorkflowRunStatus};

use super::workflows::status_text;
use super::*;

impl Store {
    /// Ends workflow run `id` as `status`, if it is running; false if it
    /// had ended.
    pub async fn end_workflow_run(
        &self,
        id: i64,
        status: WorkflowRunStatus,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        end_if_running(&self.writer, id, status, now_ms).await
    }

    /// The running runs of workflow `workflow_id`.
    pub async fn running_runs_of_workflow(&self, workflow_id: i64) -> Result<Vec<i64>, StoreError> {
        Ok(
            sqlx::query_scalar(
                "SELECT id FROM workflow_run WHERE workflow_id = $1 AND status = $2",
            )
            .bind(workflow_id)
            .bind(status_text(WorkflowRunStatus::Running)?)
            .fetch_all(&self.pool)
            .await?,
        )
    }

    /// Running workflow runs past their deadline at `now_ms`.
    pub async fn workflow_runs_past_deadline(&self, now_ms: i64) -> Result<Vec<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM workflow_run WHERE status = $1 AND deadline_at_ms <= $2",
        )
        .bind(status_text(WorkflowRunStatus::Running)?)
        .bind(now_ms)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Running workflow runs in which no run is in progress and nothing
    /// changed since `before_ms`: steps nobody took (an admin stopped
    /// between two of a run's writes). A fanned-out node that is running
    /// with none of its elements running counts as nothing in progress.
    pub async fn idle_workflow_runs(&self, before_ms: i64) -> Result<Vec<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT w.id FROM workflow_run w WHERE w.status = $1 AND w.started_at_ms < $2 \
             AND NOT EXISTS (SELECT 1 FROM workflow_node n WHERE n.workflow_run_id = w.id \
             AND (n.ended_at_ms >= $2 OR n.started_at_ms >= $2 OR (n.status = $3 \
             AND NOT EXISTS (SELECT 1 FROM workflow_item f WHERE f.workflow_run_id = w.id \
             AND f.node = n.node)))) \
             AND NOT EXISTS (SELECT 1 FROM workflow_item i WHERE i.workflow_run_id = w.id \
             AND (i.status = $3 OR i.ended_at_ms >= $2))",
        )
        .bind(status_text(WorkflowRunStatus::Running)?)
        .bind(before_ms)
        .bind(status_text(NodeStatus::Running)?)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Stops workflow run `id` if it is running: the run ends as
    /// `status` (cancelled, or failed past its deadline) and every node
    /// and element that had not ended is cancelled, saying `why`. The runs
    /// of the nodes and elements that were running (to be killed), or
    /// `None` if it was not running.
    ///
    /// The run and its nodes end in one transaction; then each fanned-out
    /// node's elements (at most [`cronbox_api::WorkflowSpec::MAX_FAN_OUT`]) in one of
    /// their own, so that no write is larger than one node's: a run of
    /// hundreds of thousands of elements is stopped in bounded steps.
    /// Nothing starts an element of an ended run meanwhile, and elements a
    /// stop left (its admin stopped between two steps) are cancelled by
    /// any admin's sweep (see [`Store::stopped_runs_with_open_items`]).
    pub async fn stop_workflow_run(
        &self,
        id: i64,
        status: WorkflowRunStatus,
        why: &str,
        now_ms: i64,
    ) -> Result<Option<Vec<RunId>>, StoreError> {
        let mut tx = self.writer.begin().await?;
        if !end_if_running(&mut *tx, id, status, now_ms).await? {
            return Ok(None);
        }
        let running: Vec<RunId> = sqlx::query_scalar(
            "SELECT run_id FROM workflow_node WHERE workflow_run_id = $1 AND status = $2 \
             AND run_id IS NOT NULL \
             UNION ALL \
             SELECT run_id FROM workflow_item WHERE workflow_run_id = $1 AND status = $2",
        )
        .bind(id)
        .bind(status_text(NodeStatus::Running)?)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(RunId)
        .collect();
        sqlx::query(
            "UPDATE workflow_node SET status = $2, ended_at_ms = $3, message = $6 \
             WHERE workflow_run_id = $1 AND status IN ($4, $5)",
        )
        .bind(id)
        .bind(status_text(NodeStatus::Cancelled)?)
        .bind(now_ms)
        .bind(status_text(NodeStatus::Pending)?)
        .bind(status_text(NodeStatus::Running)?)
        .bind(why)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        self.cancel_left_items(id, why, now_ms).await?;
        Ok(Some(running))
    }

    /// Workflow runs stopped since `since_ms` with elements not ended (an
    /// admin stopped between a stop's steps), a hundred at most.
    pub async fn stopped_runs_with_open_items(
        &self,
        since_ms: i64,
    ) -> Result<Vec<i64>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT w.id FROM workflow_run w WHERE w.status IN ($1, $2) AND w.ended_at_ms >= $3 \
             AND EXISTS (SELECT 1 FROM workflow_item i WHERE i.workflow_run_id = w.id \
             AND i.status IN ($4, $5)) LIMIT 100",
        )
        .bind(status_text(WorkflowRunStatus::Cancelled)?)
        .bind(status_text(WorkflowRunStatus::Failed)?)
        .bind(since_ms)
        .bind(status_text(NodeStatus::Pending)?)
        .bind(status_text(NodeStatus::Running)?)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Cancels, one fanned-out node at a time, the elements of ended
    /// workflow run `id` that had not ended, saying `why`.
    pub async fn cancel_left_items(
        &self,
        id: i64,
        why: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let nodes: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT node FROM workflow_item WHERE workflow_run_id = $1 \
             AND status IN ($2, $3)",
        )
        .bind(id)
        .bind(status_text(NodeStatus::Pending)?)
        .bind(status_text(NodeStatus::Running)?)
        .fetch_all(&self.pool)
        .await?;
        for node in nodes {
            sqlx::query(
                "UPDATE workflow_item SET status = $3, ended_at_ms = $4, message = $7 \
                 WHERE workflow_run_id = $1 AND node = $2 AND status IN ($5, $6)",
            )
            .bind(id)
            .bind(&node)
            .bind(status_text(NodeStatus::Cancelled)?)
            .bind(now_ms)
            .bind(status_text(NodeStatus::Pending)?)
            .bind(status_text(NodeStatus::Running)?)
            .bind(why)
            .execute(&self.writer)
            .await?;
        }
        Ok(())
    }

    /// Opens workflow run `id` again if it failed or was cancelled: its
    /// nodes that did not succeed become pending (their earlier runs stay
    /// as history), those that succeeded keep their outputs, and a
    /// deadline counts again from `now_ms`. False if it had not failed nor
    /// been cancelled.
    pub async fn reopen_workflow_run(&self, id: i64, now_ms: i64) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        // A deadline counts again from the retry.
        let reopened = sqlx::query(
            "UPDATE workflow_run SET status = $2, ended_at_ms = NULL, \
             deadline_at_ms = $5 + (deadline_at_ms - started_at_ms) \
             WHERE id = $1 AND status IN ($3, $4)",
        )
        .bind(id)
        .bind(status_text(WorkflowRunStatus::Running)?)
        .bind(status_text(WorkflowRunStatus::Failed)?)
        .bind(status_text(WorkflowRunStatus::Cancelled)?)
        .bind(now_ms)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if reopened != 1 {
            return Ok(false);
        }
        // A fanned-out node that did not succeed expands again.
        sqlx::query(
            "DELETE FROM workflow_item WHERE workflow_run_id = $1 AND node IN \
             (SELECT node FROM workflow_node WHERE workflow_run_id = $1 AND status <> $2)",
        )
        .bind(id)
        .bind(status_text(NodeStatus::Succeeded)?)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "UPDATE workflow_node SET status = $2, run_id = NULL, input = NULL, output = NULL, \
             message = NULL, started_at_ms = NULL, ended_at_ms = NULL \
             WHERE workflow_run_id = $1 AND status <> $3",
        )
        .bind(id)
        .bind(status_text(NodeStatus::Pending)?)
        .bind(status_text(NodeStatus::Succeeded)?)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }
}

/// Ends workflow run `id` as `status` through `executor`, if it is
/// running; whether it was.
async fn end_if_running<'e>(
    executor: impl sqlx::Executor<'e, Database = sqlx::Any>,
    id: i64,
    status: WorkflowRunStatus,
    now_ms: i64,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "UPDATE workflow_run SET status = $2, ended_at_ms = $3 WHERE id = $1 AND status = $4",
    )
    .bind(id)
    .bind(status_text(status)?)
    .bind(now_ms)
    .bind(status_text(WorkflowRunStatus::Running)?)
    .execute(executor)
    .await?
    .rows_affected()
        == 1)
}
