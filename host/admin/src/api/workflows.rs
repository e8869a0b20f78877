//! Workflows: definitions saved by name (each save a new version), read,
//! listed and deleted; runs started, listed and read with their nodes.

use cronbox_api::{WorkflowRunRequest, WorkflowSpec};

use super::*;
use crate::service::workflows;

/// The caller's tenant's workflows (every tenant's for the operator).
async fn list_workflows(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
) -> Result<impl IntoResponse, Failure> {
    let scope = caller.scope();
    Ok(Json(
        workflows::list(&state.services, scope.only_tenant()).await?,
    ))
}

async fn get_workflow(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.services.store();
    let workflow = workflows::named(store, &caller.tenant, &name).await?;
    Ok(Json(workflows::with_next_run(&state.services, workflow)))
}

/// Saves a workflow of the caller's tenant: created, or its next version
/// (runs in progress keep the version they started with).
async fn put_workflow(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(spec): ApiJson<WorkflowSpec>,
) -> Result<impl IntoResponse, Failure> {
    let saved = workflows::save(&state.services, &caller.tenant, &name, &spec).await?;
    Ok(Json(workflows::with_next_run(&state.services, saved)))
}

async fn delete_workflow(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(
        workflows::delete(&state.services, &caller.tenant, &name).await?,
    ))
}

/// Starts a run of a workflow now; the run as it is once its first nodes
/// started.
async fn start_workflow_run(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    // The body may be absent (no input).
    let request: WorkflowRunRequest = optional_json(&body)?;
    let store = state.services.store();
    let workflow = workflows::named(store, &caller.tenant, &name).await?;
    let id = workflows::start(&state.services, &workflow, &request).await?;
    let stored = caller.scope().workflow_run(store, id).await?;
    Ok((StatusCode::CREATED, Json(stored.run)))
}

/// A workflow's runs, newest first (without their nodes).
async fn list_workflow_runs(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.services.store();
    let workflow = workflows::named(store, &caller.tenant, &name).await?;
    Ok(Json(workflows::runs_of(store, &workflow).await?))
}

async fn get_workflow_run(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    run_as_it_is(&state, &caller, id).await
}

/// The elements of a fanned-out node of a workflow run, by index (404 for
/// a node the run does not have).
async fn list_node_items(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path((id, node)): Path<(i64, String)>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.services.store();
    let run = caller.scope().workflow_run(store, id).await?.run;
    Ok(Json(workflows::node_items(store, &run, &node).await?))
}

/// Runs the workflow's schedule's instants in a past range, once each.
async fn backfill_workflow(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(name): Path<String>,
    ApiJson(request): ApiJson<cronbox_api::WorkflowBackfillRequest>,
) -> Result<impl IntoResponse, Failure> {
    let workflow = workflows::named(state.services.store(), &caller.tenant, &name).await?;
    let backfill = workflows::backfill(&state.services, &workflow, &request).await?;
    Ok((StatusCode::CREATED, Json(backfill)))
}

/// Cancels a running workflow run: its running nodes are killed, the
/// others never start; the run as it is then.
async fn cancel_workflow_run(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    workflows::cancel(&state.services, &caller.scope(), id).await?;
    run_as_it_is(&state, &caller, id).await
}

/// Retries a failed or cancelled workflow run from the nodes that did
/// not succeed; the run as it is once they started.
async fn retry_workflow_run(
    State(state): State<Arc<AdminState>>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    workflows::retry(&state.services, &caller.scope(), id).await?;
    run_as_it_is(&state, &caller, id).await
}

/// Workflow run `id` with its nodes, as the caller may see it.
async fn run_as_it_is(
    state: &AdminState,
    caller: &Caller,
    id: i64,
) -> Result<Json<cronbox_api::WorkflowRun>, Failure> {
    let store = state.services.store();
    Ok(Json(caller.scope().workflow_run(store, id).await?.run))
}

/// This file's routes: each one's document, the access it needs and its
/// handler.
pub(super) fn routes(table: &mut Routes) {
    let operation = op(
        "get",
        "/api/v1/workflows",
        "workflows",
        "The caller's tenant's workflows (every tenant's for the operator)",
        None,
        "200",
        array_of(schema("Workflow")),
    );
    table.route(operation, VIEWER, list_workflows);
    let operation = op(
        "get",
        "/api/v1/workflows/{name}",
        "workflows",
        "A workflow of the caller's tenant: its latest definition",
        None,
        "200",
        schema("Workflow"),
    );
    table.route(operation, VIEWER, get_workflow);
    let operation = op(
        "put",
        "/api/v1/workflows/{name}",
        "workflows",
        "Save a workflow of the caller's tenant (created, or its next version; runs in progress keep theirs). Refuses a cycle, an edge to a missing node, a node whose job is not one of the tenant's, a template reading a node that is not an ancestor, naming the node or edge",
        Some(schema("WorkflowSpec")),
        "200",
        schema("Workflow"),
    );
    table.route(operation, DEVELOPER, put_workflow);
    let operation = op(
        "delete",
        "/api/v1/workflows/{name}",
        "workflows",
        "Delete a workflow (its runs stay as history)",
        None,
        "200",
        schema("Workflow"),
    );
    table.route(operation, DEVELOPER, delete_workflow);
    let operation = op(
        "post",
        "/api/v1/workflows/{name}/runs",
        "workflows",
        "Start a run of the workflow now, with an input (JSON text) its nodes' templates read",
        Some(schema("WorkflowRunRequest")),
        "201",
        schema("WorkflowRun"),
    )
    .body_optional();
    table.route(operation, DEVELOPER, start_workflow_run);
    let operation = op(
        "get",
        "/api/v1/workflows/{name}/runs",
        "workflows",
        "The workflow's latest runs (at most 100), newest first, without their nodes",
        None,
        "200",
        array_of(schema("WorkflowRun")),
    );
    table.route(operation, VIEWER, list_workflow_runs);
    let operation = op(
        "post",
        "/api/v1/workflows/{name}/backfill",
        "workflows",
        "Run the workflow's schedule's instants in a past range (from_ms exclusive, to_ms inclusive; at most 100), one run each (kind backfill); an instant a backfill ran before is not run again",
        Some(schema("WorkflowBackfillRequest")),
        "201",
        schema("WorkflowBackfill"),
    );
    table.route(operation, DEVELOPER, backfill_workflow);
    let operation = op(
        "get",
        "/api/v1/workflow-runs/{id}",
        "workflows",
        "A workflow run with each node's status, input, output and run",
        None,
        "200",
        schema("WorkflowRun"),
    );
    table.route(operation, VIEWER, get_workflow_run);
    let operation = op(
        "get",
        "/api/v1/workflow-runs/{id}/nodes/{node}/items",
        "workflows",
        "The elements of a fanned-out node of a workflow run, by index: each one's status, input, output and run",
        None,
        "200",
        array_of(schema("ItemRun")),
    );
    table.route(operation, VIEWER, list_node_items);
    let operation = op(
        "post",
        "/api/v1/workflow-runs/{id}/cancel",
        "workflows",
        "Cancel a running workflow run: its running nodes' runs are killed, the nodes not started never start (409 unless it is running)",
        None,
        "200",
        schema("WorkflowRun"),
    );
    table.route(operation, DEVELOPER, cancel_workflow_run);
    let operation = op(
        "post",
        "/api/v1/workflow-runs/{id}/retry",
        "workflows",
        "Run a failed or cancelled workflow run again from its nodes that did not succeed, keeping the outputs of those that did (409 otherwise)",
        None,
        "200",
        schema("WorkflowRun"),
    );
    table.route(operation, DEVELOPER, retry_workflow_run);
}
