//! Workflow runs driven: a run is written with every node pending, then
//! advanced — the planner (`crate::workflow::progress`) says which nodes
//! start and which are skipped, each started node's input is rendered and
//! its run written in the same transaction that moves it out of pending
//! (so a node starts once, whichever admin advances), and the run ends
//! once every node has. A node's run that ends advances the workflow run
//! again: its output is its success message; a failure is retried as the
//! job's retries say (the retry follows the same node) before the node
//! fails. Child jobs of a node's job are not triggered: inside a
//! workflow, its edges say what follows. A fanned-out node's elements are
//! driven in `workflow_fan_out.rs`, schedules in `workflow_fires.rs`.

use cronbox_api::{NodeStatus, Workflow, WorkflowRun, WorkflowSpec};
use serde_json::Value;

use super::*;
use crate::store::{NodeEnd, NodeOfRun};
use crate::workflow::path::{Outputs, Values};
use crate::workflow::{Graph, Step, next_steps, outcome};

/// What a workflow run's templates and conditions read: its input and
/// the outputs of its nodes that have one, each parsed once.
pub(super) struct RunValues {
    pub input: Value,
    pub outputs: Outputs,
}

impl RunValues {
    /// Read from `run`; an input that does not parse (it was checked when
    /// the run started, so it was damaged since) is named, never read as
    /// empty.
    pub fn of(run: &WorkflowRun) -> Result<RunValues, String> {
        let input = serde_json::from_str(&run.input)
            .map_err(|error| format!("the workflow run's stored input does not parse: {error}"))?;
        let outputs = run
            .nodes
            .iter()
            .filter_map(|node| Some((node.node.as_str(), node.output.as_deref()?)))
            .collect();
        Ok(RunValues { input, outputs })
    }

    pub fn values(&self) -> Values<'_> {
        Values {
            input: &self.input,
            outputs: &self.outputs,
            item: None,
        }
    }
}

/// A node's failure saying `message`.
pub(super) fn failed(message: String) -> NodeEnd {
    NodeEnd {
        status: NodeStatus::Failed,
        output: None,
        message: Some(message),
    }
}

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
        let mut values = match RunValues::of(&stored.run) {
            Ok(values) => values,
            Err(why) => {
                tracing::error!(workflow_run = id, why, "a workflow run cannot advance");
                self.store
                    .end_workflow_run(id, cronbox_api::WorkflowRunStatus::Failed, self.now_ms())
                    .await?;
                return Ok(());
            }
        };
        // Fanned-out nodes in progress: start what their concurrency
        // allows, end those whose elements all ended (an admin may have
        // stopped between the two).
        for (spec, status) in graph.nodes.iter().zip(status.iter_mut()) {
            if *status == NodeStatus::Running && spec.for_each.is_some() {
                let ended = self.progress_fan_out(&stored.run, spec, None).await?;
                if let Some(end) = ended {
                    *status = end.status;
                    if let Some(output) = end.output {
                        values.outputs.insert(spec.name.clone(), &output);
                    }
                }
            }
        }
        loop {
            let when = |edge: usize| {
                let Some(condition) = &graph.edges[edge].when else {
                    return Ok(true);
                };
                condition
                    .holds(&values.values())
                    .map_err(|error| error.to_string())
            };
            let steps = next_steps(&graph, &status, &when);
            if steps.is_empty() {
                if let Some(ended) = outcome(&graph, &status, &when) {
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
                    Step::Fail(node, why) => {
                        self.store
                            .end_workflow_node(
                                id,
                                &graph.nodes[node].name,
                                &failed(why),
                                self.now_ms(),
                            )
                            .await?;
                        status[node] = NodeStatus::Failed;
                    }
                    Step::Start(node) => {
                        let end = self.start_node(&stored.run, &values, &graph, node).await?;
                        status[node] = end.status;
                        if let Some(output) = end.output {
                            values
                                .outputs
                                .insert(graph.nodes[node].name.clone(), &output);
                        }
                    }
                }
            }
        }
    }

    /// Starts `node` of `run`: its job looked up by name, its input
    /// rendered, its run written (once) and dispatched — or, fanned out,
    /// its elements written and the first of them started. A job that no
    /// longer exists or an input that does not render fails the node,
    /// naming why. How the node is after (running, or ended at once with
    /// its output).
    async fn start_node(
        self: &Arc<Self>,
        run: &WorkflowRun,
        values: &RunValues,
        graph: &Graph,
        node: usize,
    ) -> Result<NodeEnd, StoreError> {
        let spec = &graph.nodes[node];
        let name = &spec.name;
        let job = match self
            .node_job(&run.tenant, &spec.job_name(&run.workflow_name))
            .await?
        {
            Ok(job) => job,
            Err(why) => return self.end_node(run.id, name, failed(why)).await,
        };
        if spec.for_each.is_some() {
            return self.start_fan_out(run, values, spec, job).await;
        }
        let param = match &spec.param {
            None => Ok(job.param.clone()),
            Some(template) => template
                .render(&values.values())
                .map_err(|error| format!("its input does not render: {error}")),
        };
        let param = match param {
            Ok(param) => param,
            Err(why) => return self.end_node(run.id, name, failed(why)).await,
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
            self.dispatch_node_run(run_id, &new_run, job, now);
        }
        // Started here, or by another admin a moment before.
        Ok(NodeEnd {
            status: NodeStatus::Running,
            output: None,
            message: None,
        })
    }

    /// The job a node runs, by name in `tenant`; why not, if there is
    /// not exactly one.
    pub(super) async fn node_job(
        &self,
        tenant: &str,
        name: &str,
    ) -> Result<Result<JobRow, String>, StoreError> {
        Ok(match self.store.jobs_named(tenant, name).await?[..] {
            [ref job] => Ok(job.clone()),
            [] => Err(format!("no job {name:?}")),
            _ => Err(format!("several jobs are named {name:?}")),
        })
    }

    /// Ends node `name` of workflow run `workflow_run` as `end` (if it had
    /// not ended); `end`, for the caller's view.
    pub(super) async fn end_node(
        &self,
        workflow_run: i64,
        name: &str,
        end: NodeEnd,
    ) -> Result<NodeEnd, StoreError> {
        self.store
            .end_workflow_node(workflow_run, name, &end, self.now_ms())
            .await?;
        Ok(end)
    }

    /// Dispatches `new_run` of `job`, written as `run_id` for a node or an
    /// element.
    pub(super) fn dispatch_node_run(
        self: &Arc<Self>,
        run_id: RunId,
        new_run: &NewRun,
        job: JobRow,
        now: i64,
    ) {
        let row = planner::written_run(run_id, &job.tenant, new_run, now);
        let leased_until = self.store.leases().write_until(row.scheduled_at_ms, now);
        self.clone()
            .dispatch_now(row, leased_until, Known::Job(Box::new(job)), None);
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
        let Some(of_run) = self.store.workflow_node_of_run(run.id).await? else {
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
            let retried = match of_run.item {
                None => self.store.retry_workflow_node(run.id, &retry, now).await?,
                Some(_) => self.store.retry_workflow_item(run.id, &retry, now).await?,
            };
            if let Some(id) = retried
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
        let NodeOfRun {
            workflow_run,
            node,
            item,
        } = of_run;
        let advance = match item {
            None => {
                self.store
                    .end_workflow_node(workflow_run, &node, &end, self.now_ms())
                    .await?
            }
            Some(index) => {
                self.store
                    .end_workflow_item(workflow_run, &node, index, &end, self.now_ms())
                    .await?
                    && self.fan_out_item_ended(workflow_run, &node, job).await?
            }
        };
        if advance {
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
    pub(super) async fn stop_workflow(
        self: &Arc<Self>,
        id: i64,
        status: cronbox_api::WorkflowRunStatus,
        why: &str,
    ) -> Result<bool, StoreError> {
        let now = self.now_ms();
        let Some(running) = self.store.stop_workflow_run(id, status, why, now).await? else {
            return Ok(false);
        };
        for run in self.store.runs_by_id(&running).await?.into_values() {
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
        // Stopped within the last hour: a stop's later steps are seconds
        // behind its first.
        let since = self.now_ms() - 3_600_000;
        for id in self.store.stopped_runs_with_open_items(since).await? {
            tracing::warn!(
                workflow_run = id,
                "cancelling the elements a stopped workflow run left"
            );
            let why = "cancelled with its workflow run";
            self.store.cancel_left_items(id, why, self.now_ms()).await?;
        }
        Ok(())
    }
}

/// How long a workflow run's end or step may wait for the admin that
/// wrote the step before it, before any admin takes it up.
pub const WORKFLOW_SWEEP_AFTER: std::time::Duration = std::time::Duration::from_secs(5);
