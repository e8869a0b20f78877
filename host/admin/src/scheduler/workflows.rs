//! Workflow runs driven: a run is written with every node pending, then
//! advanced — the planner (`crate::workflow::progress`) says which nodes
//! start and which are skipped, each started node's input is rendered and
//! its run written in the same transaction that moves it out of pending
//! (so a node starts once, whichever admin advances), and the run ends
//! once every node has. A node's run that ends advances the workflow run
//! again: its output is its success message; a failure is retried as the
//! job's retries say (the retry follows the same node) before the node
//! fails. Child jobs of a node's job are not triggered: inside a
//! workflow, its edges say what follows.

use std::collections::HashMap;

use cronbox_api::{NodeStatus, Workflow, WorkflowSpec};

use super::*;
use crate::store::NodeEnd;
use crate::workflow::{Graph, Step, firing, next_steps, outcome};

impl Scheduler {
    /// Starts a run of `workflow` with `input` (JSON text, checked by the
    /// caller), started by `kind`; its id.
    pub async fn start_workflow(
        self: &Arc<Self>,
        workflow: &Workflow,
        input: &str,
        kind: TriggerKind,
    ) -> Result<i64, StoreError> {
        let id = self
            .store
            .create_workflow_run(workflow, input, kind, self.now_ms())
            .await?;
        self.advance_workflow(id).await?;
        Ok(id)
    }

    /// Takes every step due in workflow run `id` (starts, skips) until
    /// none is left, then ends the run if every node has ended. The run is
    /// read once and followed in memory: every write is conditional, so a
    /// view another admin has moved on from only makes a write that
    /// changes nothing (and that admin advances the run itself).
    pub(super) async fn advance_workflow(self: &Arc<Self>, id: i64) -> Result<(), StoreError> {
        let Some(stored) = self.store.workflow_run(id).await? else {
            return Ok(());
        };
        if stored.run.status != cronbox_api::WorkflowRunStatus::Running {
            return Ok(());
        }
        let graph = match Graph::check(&stored.definition) {
            Ok(graph) => graph,
            Err(error) => {
                // Saved definitions are checked: this one was damaged in
                // the database. The run fails rather than guess.
                tracing::error!(workflow_run = id, %error, "a stored workflow definition does not check");
                self.store
                    .end_workflow_run(id, cronbox_api::WorkflowRunStatus::Failed, self.now_ms())
                    .await?;
                return Ok(());
            }
        };
        let mut status: Vec<NodeStatus> = stored.run.nodes.iter().map(|node| node.status).collect();
        loop {
            let steps = next_steps(&graph, &status);
            if steps.is_empty() {
                if let Some(ended) = outcome(&graph, &status) {
                    self.store
                        .end_workflow_run(id, ended, self.now_ms())
                        .await?;
                }
                return Ok(());
            }
            for step in steps {
                match step {
                    Step::Skip(node, why) => {
                        let end = NodeEnd {
                            status: NodeStatus::Skipped,
                            output: None,
                            message: Some(why),
                        };
                        self.store
                            .end_workflow_node(id, &graph.nodes[node].name, &end, self.now_ms())
                            .await?;
                        status[node] = NodeStatus::Skipped;
                    }
                    Step::Start(node) => {
                        status[node] = self.start_node(&stored.run, &graph, node).await?;
                    }
                }
            }
        }
    }

    /// Starts `node` of `run`: its job looked up by name, its input
    /// rendered, its run written (once) and dispatched. A job that no
    /// longer exists or an input that does not render fails the node,
    /// naming why. The node's status after.
    async fn start_node(
        self: &Arc<Self>,
        run: &cronbox_api::WorkflowRun,
        graph: &Graph,
        node: usize,
    ) -> Result<NodeStatus, StoreError> {
        let name = &graph.nodes[node].name;
        let fail = |message: String| NodeEnd {
            status: NodeStatus::Failed,
            output: None,
            message: Some(message),
        };
        let job = match self
            .store
            .jobs_named(&run.tenant, &graph.nodes[node].job)
            .await?[..]
        {
            [ref job] => job.clone(),
            [] => {
                let end = fail(format!("no job {:?}", graph.nodes[node].job));
                self.store
                    .end_workflow_node(run.id, name, &end, self.now_ms())
                    .await?;
                return Ok(NodeStatus::Failed);
            }
            _ => {
                let end = fail(format!(
                    "several jobs are named {:?}",
                    graph.nodes[node].job
                ));
                self.store
                    .end_workflow_node(run.id, name, &end, self.now_ms())
                    .await?;
                return Ok(NodeStatus::Failed);
            }
        };
        let param = match &graph.nodes[node].param {
            None => Ok(job.param.clone()),
            Some(template) => match serde_json::from_str(&run.input) {
                // Checked when the run started: a stored input that does
                // not parse was damaged since, and is named, never read
                // as empty.
                Err(error) => Err(format!(
                    "the workflow run's stored input does not parse: {error}"
                )),
                Ok(input) => {
                    let outputs: HashMap<String, String> = run
                        .nodes
                        .iter()
                        .filter_map(|node| Some((node.node.clone(), node.output.clone()?)))
                        .collect();
                    template
                        .render(&input, &outputs)
                        .map_err(|error| format!("its input does not render: {error}"))
                }
            },
        };
        let param = match param {
            Ok(param) => param,
            Err(why) => {
                let end = fail(why);
                self.store
                    .end_workflow_node(run.id, name, &end, self.now_ms())
                    .await?;
                return Ok(NodeStatus::Failed);
            }
        };
        let now = self.now_ms();
        let new_run = NewRun {
            param: param.clone(),
            ..NewRun::of_job(&job, TriggerKind::Workflow, now)
        };
        if let Some(run_id) = self
            .store
            .start_workflow_node(run.id, name, &param, &new_run, now)
            .await?
        {
            let row = planner::written_run(run_id, &job.tenant, &new_run, now);
            let leased_until = write_lease_until(row.scheduled_at_ms, now);
            self.clone()
                .dispatch_now(row, leased_until, Known::Job(Box::new(job)), None);
        }
        // Started here, or by another admin a moment before.
        Ok(NodeStatus::Running)
    }

    /// What follows the end of a workflow node's `run` of `job` (`None`:
    /// deleted meanwhile): a retry while the job's retries allow (the node
    /// follows it), else the node ends — succeeded with the run's message
    /// as its output, or failed — and the workflow run advances.
    pub(super) async fn workflow_node_ended(
        self: &Arc<Self>,
        run: &RunRow,
        job: Option<&JobRow>,
    ) -> Result<(), StoreError> {
        let Some((workflow_run, node)) = self.store.workflow_node_of_run(run.id).await? else {
            return Ok(());
        };
        let succeeded = run.status == RunStatus::Success;
        if let Some(job) = job
            && !succeeded
            && !run.outcome.is_some_and(RunOutcome::is_deliberate)
            && run.attempt < job.retry_count
        {
            let backoff = job
                .retry_interval_ms
                .saturating_mul(1_i64 << run.attempt.min(20));
            let now = self.now_ms();
            let retry = NewRun {
                kind: TriggerKind::Workflow,
                scheduled_at_ms: now + backoff,
                attempt: run.attempt + 1,
                param: run.param.clone(),
                ..NewRun::of_job(job, TriggerKind::Workflow, now)
            };
            if let Some(id) = self.store.retry_workflow_node(run.id, &retry, now).await?
                && let Some(row) = self.store.run(id).await?
            {
                self.clone().dispatch_at(row, Lease::Written);
            }
            return Ok(());
        }
        let end = if succeeded {
            let output = run.message.clone().unwrap_or_default();
            if output.len() > WorkflowSpec::MAX_INPUT_BYTES {
                NodeEnd {
                    status: NodeStatus::Failed,
                    output: None,
                    message: Some(format!(
                        "its output is {} bytes, over the {} a node's output may have",
                        output.len(),
                        WorkflowSpec::MAX_INPUT_BYTES
                    )),
                }
            } else {
                NodeEnd {
                    status: NodeStatus::Succeeded,
                    output: Some(output),
                    message: None,
                }
            }
        } else {
            NodeEnd {
                status: NodeStatus::Failed,
                output: None,
                message: run.message.clone(),
            }
        };
        if self
            .store
            .end_workflow_node(workflow_run, &node, &end, self.now_ms())
            .await?
        {
            self.advance_workflow(workflow_run).await?;
        }
        Ok(())
    }

    /// Cancels workflow run `id` if it is running: nodes not started never
    /// will be, and the runs of those running are killed (or cancelled
    /// before their dispatch). False if it was not running.
    pub async fn cancel_workflow(self: &Arc<Self>, id: i64) -> Result<bool, StoreError> {
        self.stop_workflow(
            id,
            cronbox_api::WorkflowRunStatus::Cancelled,
            "cancelled with its workflow run",
        )
        .await
    }

    /// Fails the running workflow runs past their deadline, as a cancel
    /// does but failed.
    pub(super) async fn fail_overdue_workflows(self: &Arc<Self>) -> Result<(), StoreError> {
        for id in self
            .store
            .workflow_runs_past_deadline(self.now_ms())
            .await?
        {
            tracing::info!(workflow_run = id, "a workflow run passed its deadline");
            self.stop_workflow(
                id,
                cronbox_api::WorkflowRunStatus::Failed,
                "its workflow run passed its deadline",
            )
            .await?;
        }
        Ok(())
    }

    /// Ends workflow run `id` as `status` if it is running, its nodes
    /// that had not ended cancelled saying `why`, their runs killed (or
    /// cancelled before their dispatch). False if it was not running.
    async fn stop_workflow(
        self: &Arc<Self>,
        id: i64,
        status: cronbox_api::WorkflowRunStatus,
        why: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let Some(running) = self.store.stop_workflow_run(id, status, why, now).await? else {
            return Ok(false);
        };
        for run_id in running {
            let Some(run) = self.store.run(run_id).await? else {
                continue;
            };
            // Sent moments ago, its dispatch mark not yet written: it is
            // on its executor, to be killed there.
            let run = self.as_known(run);
            match run.status {
                RunStatus::Pending => {
                    let end = RunEnd::cancelled(run.id, why, now);
                    if let Some(ended) = self.store.finish_run(&end).await? {
                        self.sink.events.send(|| RunEvent::ended(&ended));
                    }
                }
                RunStatus::Dispatched => {
                    if let Err(error) = self.kill(&run).await {
                        tracing::warn!(run = %run.id, %error, "a stopped workflow's node run could not be killed");
                    }
                }
                _ => {}
            }
        }
        Ok(true)
    }

    /// Runs a failed or cancelled workflow run again from the nodes that
    /// did not succeed, keeping the outputs of those that did. False if it
    /// had not failed nor been cancelled.
    pub async fn retry_workflow(self: &Arc<Self>, id: i64) -> Result<bool, StoreError> {
        if !self.store.reopen_workflow_run(id, self.now_ms()).await? {
            return Ok(false);
        }
        self.advance_workflow(id).await?;
        Ok(true)
    }

    /// Fires the workflows whose schedule is due: each fire claimed once
    /// (the claim moves the next fire and writes the run in one
    /// transaction, so admins racing for it start one run), then advanced.
    pub(super) async fn fire_due_workflows(self: &Arc<Self>) -> Result<(), StoreError> {
        let now = self.now_ms();
        for workflow in self.store.due_workflows(now).await? {
            let (Some(planned), Some(schedule)) =
                (workflow.next_fire_at_ms, &workflow.definition.schedule)
            else {
                continue;
            };
            let parsed = match crate::schedule::Schedule::parse(
                schedule.schedule_type,
                &schedule.schedule_conf,
                &schedule.time_zone,
            ) {
                Ok(parsed) => parsed,
                Err(error) => {
                    // Checked when saved: damaged since. It stops firing,
                    // and says why.
                    tracing::error!(workflow = %workflow.name, %error, "a stored workflow schedule does not parse; it stops");
                    self.store
                        .claim_workflow_fire(&workflow, planned, None, None, now)
                        .await?;
                    continue;
                }
            };
            let (kind, next) = firing::due_fire(&parsed, schedule.misfire, planned, now);
            let input = schedule.input.as_deref().unwrap_or("{}");
            let fire = kind.map(|kind| (kind, input));
            if let Some(Some(run)) = self
                .store
                .claim_workflow_fire(&workflow, planned, next, fire, now)
                .await?
            {
                self.advance_workflow(run).await?;
            }
        }
        Ok(())
    }

    /// Takes up what no admin followed (one stopped between two writes of
    /// a workflow run): node runs that ended over [`WORKFLOW_SWEEP_AFTER`]
    /// ago with their node still running, and running workflow runs where
    /// nothing runs and nothing changed for as long. Every step it takes
    /// is conditional, so racing another admin starts or ends nothing
    /// twice.
    pub(super) async fn follow_stalled_workflows(self: &Arc<Self>) -> Result<(), StoreError> {
        let before = self.now_ms() - WORKFLOW_SWEEP_AFTER.as_millis() as i64;
        for run_id in self.store.unfollowed_workflow_node_runs(before).await? {
            if let Some(run) = self.store.run(run_id).await? {
                tracing::warn!(run = %run_id, "following a workflow node's end no admin followed");
                let job = self.store.job(run.job_id).await?;
                self.workflow_node_ended(&run, job.as_ref()).await?;
            }
        }
        for id in self.store.idle_workflow_runs(before).await? {
            tracing::warn!(
                workflow_run = id,
                "taking the steps of a workflow run no admin took"
            );
            self.advance_workflow(id).await?;
        }
        Ok(())
    }
}

/// How long a workflow run's end or step may wait for the admin that
/// wrote the step before it, before any admin takes it up.
pub const WORKFLOW_SWEEP_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
