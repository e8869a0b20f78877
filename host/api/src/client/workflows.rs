//! The client's workflow methods: definitions saved, read, listed and
//! deleted; runs started, read, listed, cancelled and retried.

use reqwest::Method;

use super::{Client, ClientError};
use crate::{ItemRun, Workflow, WorkflowRun, WorkflowRunRequest, WorkflowSpec};

impl Client {
    /// The caller's tenant's workflows (every tenant's for the operator).
    pub async fn workflows(&self) -> Result<Vec<Workflow>, ClientError> {
        self.call(Method::GET, "/api/v1/workflows", None::<&()>)
            .await
    }

    /// Workflow `name` of the caller's tenant.
    pub async fn workflow(&self, name: &str) -> Result<Workflow, ClientError> {
        self.call(
            Method::GET,
            &format!("/api/v1/workflows/{name}"),
            None::<&()>,
        )
        .await
    }

    /// Saves workflow `name` (created, or its next version).
    pub async fn put_workflow(
        &self,
        name: &str,
        spec: &WorkflowSpec,
    ) -> Result<Workflow, ClientError> {
        self.call(
            Method::PUT,
            &format!("/api/v1/workflows/{name}"),
            Some(spec),
        )
        .await
    }

    /// Deletes workflow `name` (its runs stay).
    pub async fn delete_workflow(&self, name: &str) -> Result<Workflow, ClientError> {
        self.call(
            Method::DELETE,
            &format!("/api/v1/workflows/{name}"),
            None::<&()>,
        )
        .await
    }

    /// Starts a run of workflow `name` with `input` (JSON text).
    pub async fn start_workflow_run(
        &self,
        name: &str,
        input: Option<&str>,
    ) -> Result<WorkflowRun, ClientError> {
        let body = WorkflowRunRequest {
            input: input.map(str::to_owned),
        };
        self.call(
            Method::POST,
            &format!("/api/v1/workflows/{name}/runs"),
            Some(&body),
        )
        .await
    }

    /// The latest runs of workflow `name`, newest first.
    pub async fn workflow_runs(&self, name: &str) -> Result<Vec<WorkflowRun>, ClientError> {
        self.call(
            Method::GET,
            &format!("/api/v1/workflows/{name}/runs"),
            None::<&()>,
        )
        .await
    }

    /// Workflow run `id` with its nodes.
    pub async fn workflow_run(&self, id: i64) -> Result<WorkflowRun, ClientError> {
        self.call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{id}"),
            None::<&()>,
        )
        .await
    }

    /// Runs workflow `name`'s schedule's instants in a past range.
    pub async fn backfill_workflow(
        &self,
        name: &str,
        request: &crate::WorkflowBackfillRequest,
    ) -> Result<crate::WorkflowBackfill, ClientError> {
        self.call(
            Method::POST,
            &format!("/api/v1/workflows/{name}/backfill"),
            Some(request),
        )
        .await
    }

    /// The elements of fanned-out node `node` of workflow run `id`.
    pub async fn workflow_node_items(
        &self,
        id: i64,
        node: &str,
    ) -> Result<Vec<ItemRun>, ClientError> {
        self.call(
            Method::GET,
            &format!("/api/v1/workflow-runs/{id}/nodes/{node}/items"),
            None::<&()>,
        )
        .await
    }

    /// Cancels workflow run `id`.
    pub async fn cancel_workflow_run(&self, id: i64) -> Result<WorkflowRun, ClientError> {
        self.call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{id}/cancel"),
            None::<&()>,
        )
        .await
    }

    /// Retries workflow run `id` from its nodes that did not succeed.
    pub async fn retry_workflow_run(&self, id: i64) -> Result<WorkflowRun, ClientError> {
        self.call(
            Method::POST,
            &format!("/api/v1/workflow-runs/{id}/retry"),
            None::<&()>,
        )
        .await
    }
}
