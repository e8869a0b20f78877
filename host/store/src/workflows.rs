//! Workflows, their runs and their runs' nodes. A definition is kept as
//! its JSON (the latest version by name); a run copies the definition it
//! started with. A node moves out of `pending` once, by a conditional
//! update in the transaction that writes its run, so admins advancing the
//! same workflow run never start a node twice; it ends once the same way.

use cronbox_api::{NodeRun, NodeStatus, Workflow, WorkflowRun, WorkflowRunStatus, WorkflowSpec};
use cronbox_protocol::TriggerKind;

use super::*;
use rows::json_column;

/// A status enum as its wire name (`running`, `succeeded`, ...).
pub(super) fn status_text<T: serde::Serialize>(status: T) -> Result<String, sqlx::Error> {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(text)) => Ok(text),
        _ => Err(sqlx::Error::Encode("a status without a name".into())),
    }
}

/// A status column decoded; an unknown name is an error naming the column.
pub(super) fn status_column<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    column: &str,
) -> Result<T, sqlx::Error> {
    let text: String = row.try_get(column)?;
    serde_json::from_value(serde_json::Value::String(text)).map_err(|error| {
        sqlx::Error::ColumnDecode {
            index: column.to_owned(),
            source: Box::new(error),
        }
    })
}

pub(super) fn workflow_from_row(row: &AnyRow) -> Result<Workflow, sqlx::Error> {
    Ok(Workflow {
        id: row.try_get("id")?,
        tenant: row.try_get("tenant")?,
        name: row.try_get("name")?,
        version: row.try_get("version")?,
        definition: json_column(row, "definition")?,
        next_fire_at_ms: row.try_get("next_fire_at_ms")?,
        next_run_at_ms: None,
        created_at_ms: row.try_get("created_at_ms")?,
        updated_at_ms: row.try_get("updated_at_ms")?,
    })
}

pub(super) const WORKFLOW_COLUMNS: &str =
    "id, tenant, name, version, definition, next_fire_at_ms, created_at_ms, updated_at_ms";

fn node_from_row(row: &AnyRow) -> Result<NodeRun, sqlx::Error> {
    Ok(NodeRun {
        node: row.try_get("node")?,
        status: status_column(row, "status")?,
        run_id: row.try_get::<Option<i64>, _>("run_id")?.map(RunId),
        input: row.try_get("input")?,
        output: row.try_get("output")?,
        message: row.try_get("message")?,
        started_at_ms: row.try_get("started_at_ms")?,
        ended_at_ms: row.try_get("ended_at_ms")?,
        items: None,
    })
}

const WORKFLOW_RUN_COLUMNS: &str = "id, tenant, workflow_id, workflow_name, version, definition, \
     input, kind, status, fire_at_ms, started_at_ms, deadline_at_ms, ended_at_ms";

/// A workflow run as stored, with the definition it follows.
#[derive(Debug, Clone)]
pub struct StoredWorkflowRun {
    pub run: WorkflowRun,
    pub definition: WorkflowSpec,
}

fn workflow_run_from_row(row: &AnyRow) -> Result<StoredWorkflowRun, sqlx::Error> {
    Ok(StoredWorkflowRun {
        run: WorkflowRun {
            id: row.try_get("id")?,
            tenant: row.try_get("tenant")?,
            workflow_id: row.try_get("workflow_id")?,
            workflow_name: row.try_get("workflow_name")?,
            version: row.try_get("version")?,
            kind: rows::decode(row, "kind")?,
            status: status_column(row, "status")?,
            input: row.try_get("input")?,
            fire_at_ms: row.try_get("fire_at_ms")?,
            started_at_ms: row.try_get("started_at_ms")?,
            deadline_at_ms: row.try_get("deadline_at_ms")?,
            ended_at_ms: row.try_get("ended_at_ms")?,
            nodes: Vec::new(),
        },
        definition: json_column(row, "definition")?,
    })
}

/// How a node ended.
#[derive(Debug, Clone)]
pub struct NodeEnd {
    pub status: NodeStatus,
    pub output: Option<String>,
    pub message: Option<String>,
}

impl Store {
    /// Saves `spec` as workflow `name` of `tenant`: version 1 if new, the
    /// next version otherwise, its schedule's next fire `next_fire_at_ms`.
    /// The workflow as saved.
    pub async fn save_workflow(
        &self,
        tenant: &str,
        name: &str,
        spec: &WorkflowSpec,
        next_fire_at_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<Workflow, StoreError> {
        let definition = json_text("definition", spec)?;
        let sql = format!(
            "INSERT INTO workflow (tenant, name, version, definition, next_fire_at_ms, \
             created_at_ms, updated_at_ms) VALUES ($1, $2, 1, $3, $5, $4, $4) \
             ON CONFLICT (tenant, name) DO UPDATE SET version = workflow.version + 1, \
             definition = excluded.definition, next_fire_at_ms = excluded.next_fire_at_ms, \
             updated_at_ms = excluded.updated_at_ms, delay_after_run = NULL \
             RETURNING {WORKFLOW_COLUMNS}"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(name)
            .bind(definition)
            .bind(now_ms)
            .bind(next_fire_at_ms)
            .fetch_one(&self.writer)
            .await?;
        Ok(workflow_from_row(&row)?)
    }

    /// Workflow `name` of `tenant`.
    pub async fn workflow(&self, tenant: &str, name: &str) -> Result<Option<Workflow>, StoreError> {
        let sql =
            format!("SELECT {WORKFLOW_COLUMNS} FROM workflow WHERE tenant = $1 AND name = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(workflow_from_row).transpose()?)
    }

    /// The workflows of `tenant` (every tenant's for `None`), by name.
    pub async fn workflows(&self, tenant: Option<&str>) -> Result<Vec<Workflow>, StoreError> {
        let sql = format!(
            "SELECT {WORKFLOW_COLUMNS} FROM workflow WHERE (tenant = $1 OR $2 = 1) \
             ORDER BY tenant, name"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant.unwrap_or(""))
            .bind(i64::from(tenant.is_none()))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(workflow_from_row)
            .collect::<Result<_, _>>()?)
    }

    /// Deletes workflow `name` of `tenant` (its runs stay as history);
    /// false if there was none.
    pub async fn delete_workflow(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        Ok(
            sqlx::query("DELETE FROM workflow WHERE tenant = $1 AND name = $2")
                .bind(tenant)
                .bind(name)
                .execute(&self.writer)
                .await?
                .rows_affected()
                == 1,
        )
    }

    /// Writes a run of `workflow` with `input`, started by `kind`, every
    /// node pending; its id.
    pub async fn create_workflow_run(
        &self,
        workflow: &Workflow,
        input: &str,
        kind: TriggerKind,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let mut tx = self.writer.begin().await?;
        let id = insert_workflow_run(&mut tx, workflow, input, kind, None, now_ms)
            .await?
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))?;
        tx.commit().await?;
        Ok(id)
    }

    /// Workflow run `id` and the definition it follows, without its
    /// nodes.
    pub async fn workflow_run_alone(
        &self,
        id: i64,
    ) -> Result<Option<StoredWorkflowRun>, StoreError> {
        let sql = format!("SELECT {WORKFLOW_RUN_COLUMNS} FROM workflow_run WHERE id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.as_ref().map(workflow_run_from_row).transpose()?)
    }

    /// Workflow run `id` with its nodes (in the definition's order) and
    /// the definition it follows.
    pub async fn workflow_run(&self, id: i64) -> Result<Option<StoredWorkflowRun>, StoreError> {
        let sql = format!("SELECT {WORKFLOW_RUN_COLUMNS} FROM workflow_run WHERE id = $1");
        let Some(row) = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let mut stored = workflow_run_from_row(&row)?;
        let nodes = sqlx::query(
            "SELECT node, status, run_id, input, output, message, started_at_ms, ended_at_ms \
             FROM workflow_node WHERE workflow_run_id = $1 ORDER BY position",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        stored.run.nodes = nodes.iter().map(node_from_row).collect::<Result<_, _>>()?;
        for (node, counts) in self.workflow_item_counts(id).await? {
            if let Some(node) = stored.run.nodes.iter_mut().find(|n| n.node == node) {
                node.items = Some(counts);
            }
        }
        Ok(Some(stored))
    }

    /// The runs of workflow `workflow_id`, newest first, at most `limit`
    /// (without their nodes).
    pub async fn workflow_runs(
        &self,
        workflow_id: i64,
        limit: i64,
    ) -> Result<Vec<WorkflowRun>, StoreError> {
        let sql = format!(
            "SELECT {WORKFLOW_RUN_COLUMNS} FROM workflow_run WHERE workflow_id = $1 \
             ORDER BY id DESC LIMIT $2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(workflow_id)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| workflow_run_from_row(row).map(|stored| stored.run))
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// Starts node `node` of workflow run `workflow_run`: if it is still
    /// pending, marks it running with `input` and writes `run` in the same
    /// transaction. The run's id, or `None` if the node had left pending
    /// (another admin started or ended it).
    pub async fn start_workflow_node(
        &self,
        workflow_run: i64,
        node: &str,
        input: &str,
        run: &NewRun,
        now_ms: i64,
    ) -> Result<Option<RunId>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let moved = sqlx::query(
            "UPDATE workflow_node SET status = $4, input = $3, started_at_ms = $5 \
             WHERE workflow_run_id = $1 AND node = $2 AND status = $6",
        )
        .bind(workflow_run)
        .bind(node)
        .bind(input)
        .bind(status_text(NodeStatus::Running)?)
        .bind(now_ms)
        .bind(status_text(NodeStatus::Pending)?)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if moved != 1 {
            return Ok(None);
        }
        let id = runs::insert_run(tx.as_mut(), run, &self.owner, self.leases, now_ms, false)
            .await?
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))?;
        sqlx::query(
            "UPDATE workflow_node SET run_id = $3 WHERE workflow_run_id = $1 AND node = $2",
        )
        .bind(workflow_run)
        .bind(node)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(id))
    }

    /// Moves a running node from run `from` to its retry `run`, written in
    /// the same transaction; the retry's id, or `None` if the node no
    /// longer follows `from` (another admin retried or ended it).
    pub async fn retry_workflow_node(
        &self,
        from: RunId,
        run: &NewRun,
        now_ms: i64,
    ) -> Result<Option<RunId>, StoreError> {
        self.move_to_retry("workflow_node", from, run, now_ms).await
    }

    /// Moves the running node or element of `table` (`workflow_node` or
    /// `workflow_item`) that follows run `from` to its retry `run`,
    /// written in the same transaction; the retry's id, or `None` if none
    /// follows `from` any more.
    pub(super) async fn move_to_retry(
        &self,
        table: &'static str,
        from: RunId,
        run: &NewRun,
        now_ms: i64,
    ) -> Result<Option<RunId>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let id = runs::insert_run(tx.as_mut(), run, &self.owner, self.leases, now_ms, false)
            .await?
            .ok_or(StoreError::Database(sqlx::Error::RowNotFound))?;
        let moved = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET run_id = $2 WHERE run_id = $1 AND status = $3"
        )))
        .bind(from)
        .bind(id)
        .bind(status_text(NodeStatus::Running)?)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if moved != 1 {
            // Dropped with the transaction: the retry is not written.
            return Ok(None);
        }
        tx.commit().await?;
        Ok(Some(id))
    }

    /// Ends node `node` of workflow run `workflow_run` as `end` says, if
    /// it has not ended; false if it had.
    pub async fn end_workflow_node(
        &self,
        workflow_run: i64,
        node: &str,
        end: &NodeEnd,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        self.end_step(workflow_run, node, None, end, now_ms).await
    }

    /// Ends node `node` of workflow run `workflow_run` — or, with `item`,
    /// that element of it — as `end` says, if it has not ended; false if
    /// it had.
    pub(super) async fn end_step(
        &self,
        workflow_run: i64,
        node: &str,
        item: Option<i64>,
        end: &NodeEnd,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let (table, of_item) = match item {
            None => ("workflow_node", ""),
            Some(_) => ("workflow_item", " AND idx = $9"),
        };
        Ok(sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET status = $3, output = $4, message = $5, ended_at_ms = $6 \
             WHERE workflow_run_id = $1 AND node = $2 AND status IN ($7, $8){of_item}"
        )))
        .bind(workflow_run)
        .bind(node)
        .bind(status_text(end.status)?)
        .bind(end.output.as_deref())
        .bind(end.message.as_deref())
        .bind(now_ms)
        .bind(status_text(NodeStatus::Pending)?)
        .bind(status_text(NodeStatus::Running)?)
        .bind(item)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// The runs of nodes still marked running whose run ended before
    /// `before_ms`: ends nobody followed (an admin stopped between writing
    /// the run's end and advancing its workflow run).
    pub async fn unfollowed_workflow_node_runs(
        &self,
        before_ms: i64,
    ) -> Result<Vec<RunId>, StoreError> {
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT n.run_id FROM workflow_run w \
             JOIN workflow_node n ON n.workflow_run_id = w.id \
             JOIN run r ON r.id = n.run_id \
             WHERE w.status = $1 AND n.status = $5 AND r.status NOT IN ($2, $3) \
             AND r.finished_at_ms < $4 \
             UNION ALL \
             SELECT i.run_id FROM workflow_run w \
             JOIN workflow_item i ON i.workflow_run_id = w.id \
             JOIN run r ON r.id = i.run_id \
             WHERE w.status = $1 AND i.status = $5 AND r.status NOT IN ($2, $3) \
             AND r.finished_at_ms < $4",
        )
        .bind(status_text(WorkflowRunStatus::Running)?)
        .bind(RunStatus::Pending.as_str())
        .bind(RunStatus::Dispatched.as_str())
        .bind(before_ms)
        .bind(status_text(NodeStatus::Running)?)
        .fetch_all(&self.pool)
        .await?;
        Ok(ids.into_iter().map(RunId).collect())
    }
}

/// Writes a run of `workflow` and its pending nodes within `tx`, for the
/// schedule's instant `fire_at_ms` if it has one; its id, or `None` for a
/// backfill of an instant already backfilled.
pub(super) async fn insert_workflow_run(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    workflow: &Workflow,
    input: &str,
    kind: TriggerKind,
    fire_at_ms: Option<i64>,
    now_ms: i64,
) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(
        "INSERT INTO workflow_run (tenant, workflow_id, workflow_name, version, definition, \
         input, kind, status, started_at_ms, deadline_at_ms, fire_at_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (workflow_id, fire_at_ms) WHERE kind = 'backfill' DO NOTHING \
         RETURNING id",
    )
    .bind(&workflow.tenant)
    .bind(workflow.id)
    .bind(&workflow.name)
    .bind(workflow.version)
    .bind(json_text("definition", &workflow.definition)?)
    .bind(input)
    .bind(kind.as_str())
    .bind(status_text(WorkflowRunStatus::Running)?)
    .bind(now_ms)
    .bind(
        workflow
            .definition
            .deadline_ms
            .map(|deadline| now_ms.saturating_add(deadline)),
    )
    .bind(fire_at_ms)
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let id: i64 = row.try_get("id")?;
    let pending = status_text(NodeStatus::Pending)?;
    for (position, node) in workflow.definition.nodes.iter().enumerate() {
        sqlx::query(
            "INSERT INTO workflow_node (workflow_run_id, node, position, status) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(&node.name)
        .bind(position as i64)
        .bind(&pending)
        .execute(&mut **tx)
        .await?;
    }
    Ok(Some(id))
}
