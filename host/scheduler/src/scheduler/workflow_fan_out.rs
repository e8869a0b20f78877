//! A fanned-out workflow node driven: its elements written when it starts
//! (their inputs rendered by `crate::workflow::fan_out`), started while
//! fewer than its concurrency run, each element's run retried as its
//! job's retries say, and the node ended once every element has —
//! succeeded with their outputs as one array, or failed once the elements
//! running when one failed have ended (the rest never start).

use cronbox_api::{NodeStatus, WorkflowRun, WorkflowSpec};

use super::workflows::{RunValues, failed};
use super::*;
use crate::store::NodeEnd;
use crate::workflow::definition::{GraphNode, owned_job_name};
use crate::workflow::fan_out::{self, FanOut};

/// A node still in progress.
fn running() -> NodeEnd {
    NodeEnd {
        status: NodeStatus::Running,
        output: None,
        message: None,
    }
}

/// What a fanned-out node needs to start its next elements.
pub(super) struct FanOutNode<'a> {
    pub workflow_run: i64,
    pub tenant: &'a str,
    pub name: &'a str,
    pub job: String,
    pub concurrency: usize,
}

impl<'a> FanOutNode<'a> {
    /// Node `spec` of workflow run `run`.
    fn of(run: &'a WorkflowRun, spec: &'a GraphNode) -> FanOutNode<'a> {
        FanOutNode {
            workflow_run: run.id,
            tenant: &run.tenant,
            name: &spec.name,
            job: spec.job_name(&run.workflow_name),
            concurrency: spec.concurrency,
        }
    }
}

impl Scheduler {
    /// Starts fanned-out node `spec` of `run` with `job`: its elements'
    /// inputs rendered and written, then the first of them started. An
    /// empty array succeeds at once with `[]`; one that cannot fan out
    /// fails the node saying why.
    pub(super) async fn start_fan_out(
        self: &Arc<Self>,
        run: &WorkflowRun,
        values: &RunValues,
        spec: &GraphNode,
        job: JobRow,
    ) -> Result<NodeEnd, StoreError> {
        let inputs = match fan_out::expand(spec, &values.values()) {
            Ok(inputs) => inputs,
            Err(why) => return self.end_node(run.id, &spec.name, failed(why)).await,
        };
        if inputs.is_empty() {
            let end = NodeEnd {
                status: NodeStatus::Succeeded,
                output: Some("[]".to_owned()),
                message: None,
            };
            return self.end_node(run.id, &spec.name, end).await;
        }
        // The elements stored at once are the tenant's to account for.
        let items = cronbox_api::Quota::WorkflowItems;
        let adding = inputs.len() as u64;
        let now = self.now_ms();
        if let Err(over) = self
            .quotas
            .check_more(&self.store, &run.tenant, items, adding, now)
            .await?
        {
            return self
                .end_node(run.id, &spec.name, failed(over.to_string()))
                .await;
        }
        if !self
            .store
            .expand_workflow_node(run.id, &spec.name, &inputs, self.now_ms())
            .await?
        {
            // Another admin started it a moment before.
            return Ok(running());
        }
        Ok(self
            .step_fan_out(&FanOutNode::of(run, spec), Some(job))
            .await?
            .unwrap_or_else(running))
    }

    /// Takes the next step of running fanned-out node `spec` of `run`:
    /// what [`Scheduler::step_fan_out`] does. Its end, if it ended here.
    pub(super) async fn progress_fan_out(
        self: &Arc<Self>,
        run: &WorkflowRun,
        spec: &GraphNode,
        job: Option<JobRow>,
    ) -> Result<Option<NodeEnd>, StoreError> {
        self.step_fan_out(&FanOutNode::of(run, spec), job).await
    }

    /// After an element of fanned-out node `name` of `workflow_run`
    /// ended: the node's next step. Whether the node ended here (its
    /// workflow run is to advance).
    pub(super) async fn fan_out_item_ended(
        self: &Arc<Self>,
        workflow_run: i64,
        name: &str,
        job: Option<&JobRow>,
    ) -> Result<bool, StoreError> {
        let Some(stored) = self.store.workflow_run_alone(workflow_run).await? else {
            return Ok(false);
        };
        if stored.run.status != cronbox_api::WorkflowRunStatus::Running {
            return Ok(false);
        }
        let Some(spec) = stored
            .definition
            .nodes
            .iter()
            .find(|node| node.name == name)
        else {
            return Ok(false);
        };
        let node = FanOutNode {
            workflow_run,
            tenant: &stored.run.tenant,
            name,
            job: match spec.module {
                Some(_) => owned_job_name(&stored.run.workflow_name, name),
                None => spec.job.clone(),
            },
            concurrency: spec
                .concurrency
                .unwrap_or(WorkflowSpec::DEFAULT_CONCURRENCY) as usize,
        };
        Ok(self.step_fan_out(&node, job.cloned()).await?.is_some())
    }

    /// Starts the elements of `node` its concurrency has room for (none
    /// once one failed); once every element ended (or, after a failure,
    /// every one running), ends the node. Its end, if it ended here.
    async fn step_fan_out(
        self: &Arc<Self>,
        node: &FanOutNode<'_>,
        job: Option<JobRow>,
    ) -> Result<Option<NodeEnd>, StoreError> {
        let job = match job {
            Some(job) => job,
            None => match self.node_job(node.tenant, &node.job).await? {
                Ok(job) => job,
                Err(why) => {
                    self.store
                        .skip_pending_items(node.workflow_run, node.name, &why, self.now_ms())
                        .await?;
                    let end = self
                        .end_node(node.workflow_run, node.name, failed(why))
                        .await?;
                    return Ok(Some(end));
                }
            },
        };
        let now = self.now_ms();
        let started = self
            .store
            .start_workflow_items(
                node.workflow_run,
                node.name,
                node.concurrency,
                &NewRun::of_job(&job, TriggerKind::Workflow, now),
                now,
            )
            .await?;
        if !started.is_empty() {
            for (run_id, new_run) in &started {
                self.dispatch_node_run(*run_id, new_run, job.clone(), now);
            }
            return Ok(None);
        }
        let counts = self
            .store
            .workflow_node_item_counts(node.workflow_run, node.name)
            .await?;
        if fan_out::state(&counts) != FanOut::Done {
            return Ok(None);
        }
        if counts.failed > 0 {
            self.store
                .skip_pending_items(node.workflow_run, node.name, "another element failed", now)
                .await?;
        }
        let items = self
            .store
            .workflow_items(node.workflow_run, node.name)
            .await?;
        let end = match fan_out::gather(&items) {
            Ok(output) => NodeEnd {
                status: NodeStatus::Succeeded,
                output: Some(output),
                message: None,
            },
            Err(why) => failed(why),
        };
        Ok(self
            .store
            .end_workflow_node(node.workflow_run, node.name, &end, now)
            .await?
            .then_some(end))
    }
}
