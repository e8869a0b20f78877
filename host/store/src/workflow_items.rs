//! A fanned-out workflow node's elements. The node moves out of `pending`
//! once, in the transaction that writes every element (pending, with its
//! rendered input); elements start by a conditional update in the
//! transaction that writes their run, under a lock on their node's row,
//! so admins filling the node's concurrency never start one twice nor
//! start more than the concurrency allows.

use cronbox_api::{ItemCounts, ItemRun, NodeStatus};

use super::workflows::{NodeEnd, status_column, status_text};
use super::*;

/// A run of a workflow node, or of one element of a fanned-out node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOfRun {
    pub workflow_run: i64,
    pub node: String,
    /// The element's index, for a fanned-out node's run.
    pub item: Option<i64>,
}

fn item_from_row(row: &AnyRow) -> Result<ItemRun, sqlx::Error> {
    Ok(ItemRun {
        index: row.try_get("idx")?,
        status: status_column(row, "status")?,
        run_id: row.try_get::<Option<i64>, _>("run_id")?.map(RunId),
        input: row.try_get("input")?,
        output: row.try_get("output")?,
        message: row.try_get("message")?,
    })
}

impl Store {
    /// Starts fanned-out node `node` of workflow run `workflow_run`: if it
    /// is still pending, marks it running and writes one pending element
    /// per input, in one transaction. False if the node had left pending.
    pub async fn expand_workflow_node(
        &self,
        workflow_run: i64,
        node: &str,
        inputs: &[String],
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let mut tx = self.writer.begin().await?;
        let moved = sqlx::query(
            "UPDATE workflow_node SET status = $3, input = $4, started_at_ms = $5 \
             WHERE workflow_run_id = $1 AND node = $2 AND status = $6",
        )
        .bind(workflow_run)
        .bind(node)
        .bind(status_text(NodeStatus::Running)?)
        .bind(format!("for each of {} elements", inputs.len()))
        .bind(now_ms)
        .bind(status_text(NodeStatus::Pending)?)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if moved != 1 {
            return Ok(false);
        }
        let pending = status_text(NodeStatus::Pending)?;
        for (index, input) in inputs.iter().enumerate() {
            sqlx::query(
                "INSERT INTO workflow_item (workflow_run_id, node, idx, status, input) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(workflow_run)
            .bind(node)
            .bind(index as i64)
            .bind(&pending)
            .bind(input)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Starts the next pending elements of fanned-out node `node` while
    /// fewer than `concurrency` run and none failed: each moved to running
    /// with its run (`template` with the element's input as its parameter)
    /// written in the same transaction. The runs written, with their index.
    pub async fn start_workflow_items(
        &self,
        workflow_run: i64,
        node: &str,
        concurrency: usize,
        template: &NewRun,
        now_ms: i64,
    ) -> Result<Vec<(RunId, NewRun)>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let running = status_text(NodeStatus::Running)?;
        // Locks the node's row: admins filling it take turns, each
        // counting what the one before it started.
        let locked = sqlx::query(
            "UPDATE workflow_node SET status = status \
             WHERE workflow_run_id = $1 AND node = $2 AND status = $3",
        )
        .bind(workflow_run)
        .bind(node)
        .bind(&running)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if locked != 1 {
            return Ok(Vec::new());
        }
        let counts = item_counts(&mut *tx, workflow_run, node).await?;
        let room = concurrency.saturating_sub(counts.running as usize);
        if counts.failed > 0 || room == 0 {
            return Ok(Vec::new());
        }
        let next = sqlx::query(
            "SELECT idx, input FROM workflow_item WHERE workflow_run_id = $1 AND node = $2 \
             AND status = $3 ORDER BY idx LIMIT $4",
        )
        .bind(workflow_run)
        .bind(node)
        .bind(status_text(NodeStatus::Pending)?)
        .bind(room as i64)
        .fetch_all(&mut *tx)
        .await?;
        let mut started = Vec::with_capacity(next.len());
        for row in next {
            let index: i64 = row.try_get("idx")?;
            let input: String = row.try_get("input")?;
            let run = NewRun {
                param: input,
                ..template.clone()
            };
            let id = runs::insert_run(tx.as_mut(), &run, &self.owner, self.leases, now_ms, false)
                .await?
                .ok_or(StoreError::Database(sqlx::Error::RowNotFound))?;
            sqlx::query(
                "UPDATE workflow_item SET status = $4, run_id = $5, started_at_ms = $6 \
                 WHERE workflow_run_id = $1 AND node = $2 AND idx = $3",
            )
            .bind(workflow_run)
            .bind(node)
            .bind(index)
            .bind(&running)
            .bind(id)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
            started.push((id, run));
        }
        tx.commit().await?;
        Ok(started)
    }

    /// The node (and element) run `run_id` belongs to, if any.
    pub async fn workflow_node_of_run(
        &self,
        run_id: RunId,
    ) -> Result<Option<NodeOfRun>, StoreError> {
        let row = sqlx::query(
            "SELECT workflow_run_id, node, NULL AS idx FROM workflow_node WHERE run_id = $1 \
             UNION ALL \
             SELECT workflow_run_id, node, idx FROM workflow_item WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.writer)
        .await?;
        Ok(row
            .map(|row| {
                Ok::<_, sqlx::Error>(NodeOfRun {
                    workflow_run: row.try_get("workflow_run_id")?,
                    node: row.try_get("node")?,
                    item: row.try_get("idx")?,
                })
            })
            .transpose()?)
    }

    /// Moves a running element from run `from` to its retry `run`,
    /// written in the same transaction; the retry's id, or `None` if the
    /// element no longer follows `from`.
    pub async fn retry_workflow_item(
        &self,
        from: RunId,
        run: &NewRun,
        now_ms: i64,
    ) -> Result<Option<RunId>, StoreError> {
        self.move_to_retry("workflow_item", from, run, now_ms).await
    }

    /// Ends element `index` of node `node` as `end` says, if it has not
    /// ended; false if it had.
    pub async fn end_workflow_item(
        &self,
        workflow_run: i64,
        node: &str,
        index: i64,
        end: &NodeEnd,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.end_step(workflow_run, node, Some(index), end, now_ms)
            .await
    }

    /// Skips the elements of `node` that have not started, saying `why`
    /// (an element failed: the rest never start).
    pub async fn skip_pending_items(
        &self,
        workflow_run: i64,
        node: &str,
        why: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE workflow_item SET status = $3, message = $4, ended_at_ms = $5 \
             WHERE workflow_run_id = $1 AND node = $2 AND status = $6",
        )
        .bind(workflow_run)
        .bind(node)
        .bind(status_text(NodeStatus::Skipped)?)
        .bind(why)
        .bind(now_ms)
        .bind(status_text(NodeStatus::Pending)?)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The elements of node `node` of workflow run `workflow_run`, by
    /// index.
    pub async fn workflow_items(
        &self,
        workflow_run: i64,
        node: &str,
    ) -> Result<Vec<ItemRun>, StoreError> {
        let rows = sqlx::query(
            "SELECT idx, status, run_id, input, output, message FROM workflow_item \
             WHERE workflow_run_id = $1 AND node = $2 ORDER BY idx",
        )
        .bind(workflow_run)
        .bind(node)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(item_from_row).collect::<Result<_, _>>()?)
    }

    /// Where the elements of fanned-out node `node` are.
    pub async fn workflow_node_item_counts(
        &self,
        workflow_run: i64,
        node: &str,
    ) -> Result<ItemCounts, StoreError> {
        item_counts(&self.writer, workflow_run, node).await
    }

    /// How many elements of each fanned-out node of `workflow_run` there
    /// are, and where they are.
    pub async fn workflow_item_counts(
        &self,
        workflow_run: i64,
    ) -> Result<Vec<(String, ItemCounts)>, StoreError> {
        let rows = sqlx::query(
            "SELECT node, status, COUNT(*) AS n FROM workflow_item WHERE workflow_run_id = $1 \
             GROUP BY node, status",
        )
        .bind(workflow_run)
        .fetch_all(&self.pool)
        .await?;
        let mut counts: Vec<(String, ItemCounts)> = Vec::new();
        for row in rows {
            let node: String = row.try_get("node")?;
            let status: NodeStatus = status_column(&row, "status")?;
            let n: i64 = row.try_get("n")?;
            let at = match counts.iter().position(|(name, _)| *name == node) {
                Some(at) => at,
                None => {
                    counts.push((node, ItemCounts::default()));
                    counts.len() - 1
                }
            };
            count_into(&mut counts[at].1, status, n);
        }
        Ok(counts)
    }
}

fn count_into(counts: &mut ItemCounts, status: NodeStatus, n: i64) {
    counts.total += n;
    match status {
        NodeStatus::Running => counts.running += n,
        NodeStatus::Succeeded => counts.succeeded += n,
        NodeStatus::Failed => counts.failed += n,
        _ => {}
    }
}

/// Where the elements of `node` are, read through `executor`.
async fn item_counts<'e>(
    executor: impl sqlx::Executor<'e, Database = sqlx::Any>,
    workflow_run: i64,
    node: &str,
) -> Result<ItemCounts, StoreError> {
    let rows = sqlx::query(
        "SELECT status, COUNT(*) AS n FROM workflow_item WHERE workflow_run_id = $1 \
         AND node = $2 GROUP BY status",
    )
    .bind(workflow_run)
    .bind(node)
    .fetch_all(executor)
    .await?;
    let mut counts = ItemCounts::default();
    for row in rows {
        count_into(
            &mut counts,
            status_column(&row, "status")?,
            row.try_get("n")?,
        );
    }
    Ok(counts)
}
