//! Workflows through the API a user calls: saved with their refusals
//! naming the node or edge, run with outputs passed downstream through
//! templates, joins that run once, failure edges, a node whose input does
//! not render, and runs that keep the definition they started with. How
//! runs start and stop is `workflow_runs.rs`; the helpers here serve both.

use cronbox_api::{NodeStatus, WorkflowRun, WorkflowRunStatus, WorkflowSpec};

use super::*;

/// The workflow run `id` once it has ended.
pub(super) async fn ended(stack: &Stack, id: i64) -> WorkflowRun {
    until("the workflow run ends", || async {
        let run = stack.api.api.workflow_run(id).await.unwrap();
        (run.status != WorkflowRunStatus::Running).then_some(run)
    })
    .await
}

/// The newest run of workflow `name` (one its schedule started), once it
/// has ended.
pub(super) async fn newest_ended(stack: &Stack, name: &str) -> WorkflowRun {
    until(&format!("a run of {name} ends"), || async {
        let runs = stack.api.api.workflow_runs(name).await.unwrap();
        let run = stack.api.api.workflow_run(runs.first()?.id).await.unwrap();
        (run.status != WorkflowRunStatus::Running).then_some(run)
    })
    .await
}

/// A run of workflow `name` started with `input`, once it has ended.
pub(super) async fn run_to_end(stack: &Stack, name: &str, input: Option<&str>) -> WorkflowRun {
    let started = stack.api.api.start_workflow_run(name, input).await.unwrap();
    ended(stack, started.id).await
}

/// The field a request refused with 422 names.
pub(super) async fn refused_field(
    stack: &Stack,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> String {
    let (status, answer) = stack.call(method, path, Some(body)).await;
    assert_eq!(status, 422, "{answer}");
    answer["field"].as_str().unwrap_or_default().to_owned()
}

pub(super) fn spec(value: Value) -> WorkflowSpec {
    serde_json::from_value(value).unwrap()
}

/// Saves workflow `name` from its definition as JSON.
pub(super) async fn save(stack: &Stack, name: &str, definition: Value) -> cronbox_api::Workflow {
    stack
        .api
        .api
        .put_workflow(name, &spec(definition))
        .await
        .unwrap()
}

pub(super) fn node<'r>(run: &'r WorkflowRun, name: &str) -> &'r cronbox_api::NodeRun {
    run.nodes.iter().find(|node| node.node == name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_flow_downstream_and_a_join_of_two_parents_runs_once() {
    let stack = stack(SchedulerConfig::default()).await;
    stack
        .job(
            "extract",
            "config-echo",
            json!({ "param": "out", "config": { "out": r#"{"name": "acme", "rows": [4, 5]}"# } }),
        )
        .await;
    stack.job("greet", "hello", json!({})).await;
    let join = stack.job("join", "hello", json!({})).await;
    let workflow = save(&stack, "etl", json!({
                "nodes": [
                    { "name": "extract", "job": "extract" },
                    { "name": "left", "job": "greet", "param": "{{ nodes.extract.output.name }}" },
                    { "name": "right", "job": "greet", "param": "row {{ nodes.extract.output.rows.1 }} of {{ input.day }}" },
                    { "name": "join", "job": "join", "param": "{{ nodes.left.output }} + {{ nodes.right.output }}" }
                ],
                "edges": [
                    { "from": "extract", "to": "left" },
                    { "from": "extract", "to": "right" },
                    { "from": "left", "to": "join" },
                    { "from": "right", "to": "join" }
                ]
            })).await;
    assert_eq!(workflow.version, 1);
    let started = stack
        .api
        .api
        .start_workflow_run("etl", Some(r#"{"day": "2026-11-28"}"#))
        .await
        .unwrap();
    let run = ended(&stack, started.id).await;
    assert_eq!(run.status, WorkflowRunStatus::Succeeded, "{run:#?}");
    assert!(
        run.nodes
            .iter()
            .all(|node| node.status == NodeStatus::Succeeded)
    );
    assert_eq!(node(&run, "left").output.as_deref(), Some("hello, acme"));
    assert_eq!(
        node(&run, "right").output.as_deref(),
        Some("hello, row 5 of 2026-11-28")
    );
    assert_eq!(
        node(&run, "join").input.as_deref(),
        Some("hello, acme + hello, row 5 of 2026-11-28")
    );
    // The join ran once, as a workflow node, though two parents ended.
    let runs = stack.api.api.job_runs(join, None, 100).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].kind, TriggerKind::Workflow);
    assert_eq!(node(&run, "join").run_id, Some(runs[0].id));
    // Listed among the workflow's runs.
    let listed = stack.api.api.workflow_runs("etl").await.unwrap();
    assert_eq!(
        listed.iter().map(|run| run.id).collect::<Vec<_>>(),
        [run.id]
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_takes_its_edge_and_an_input_that_does_not_render_fails_its_node() {
    let stack = stack(SchedulerConfig::default()).await;
    stack
        .job("burn", "fuel-burner", json!({ "param": "not-a-number" }))
        .await;
    let next = stack.job("next", "hello", json!({})).await;
    stack.job("notify", "hello", json!({})).await;
    save(
        &stack,
        "guarded",
        json!({
            "nodes": [
                { "name": "burn", "job": "burn" },
                { "name": "next", "job": "next" },
                { "name": "notify", "job": "notify", "param": "burn failed" }
            ],
            "edges": [
                { "from": "burn", "to": "next" },
                { "from": "burn", "to": "notify", "on": "failure" }
            ]
        }),
    )
    .await;
    let started = stack
        .api
        .api
        .start_workflow_run("guarded", None)
        .await
        .unwrap();
    let run = ended(&stack, started.id).await;
    // The failure was handled: the run succeeded, `next` never ran.
    assert_eq!(run.status, WorkflowRunStatus::Succeeded, "{run:#?}");
    assert_eq!(node(&run, "burn").status, NodeStatus::Failed);
    assert!(
        node(&run, "burn")
            .message
            .as_deref()
            .unwrap_or("")
            .contains("param must be a number"),
        "{run:#?}"
    );
    assert_eq!(node(&run, "next").status, NodeStatus::Skipped);
    assert_eq!(
        node(&run, "notify").output.as_deref(),
        Some("hello, burn failed")
    );
    assert!(
        stack
            .api
            .api
            .job_runs(next, None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A template naming a field the output lacks fails that node, naming
    // the path, and writes no run for it.
    stack.job("extract", "hello", json!({ "param": "x" })).await;
    let load = stack.job("load", "hello", json!({})).await;
    save(
        &stack,
        "broken",
        json!({
            "nodes": [
                { "name": "extract", "job": "extract" },
                { "name": "load", "job": "load", "param": "{{ nodes.extract.output.rows }}" }
            ],
            "edges": [{ "from": "extract", "to": "load" }]
        }),
    )
    .await;
    let started = stack
        .api
        .api
        .start_workflow_run("broken", None)
        .await
        .unwrap();
    let run = ended(&stack, started.id).await;
    assert_eq!(run.status, WorkflowRunStatus::Failed, "{run:#?}");
    let load_node = node(&run, "load");
    assert_eq!(load_node.status, NodeStatus::Failed);
    assert_eq!(load_node.run_id, None);
    assert_eq!(
        load_node.message.as_deref(),
        Some(
            "its input does not render: `{{ nodes.extract.output.rows }}` is missing: \
             no `rows` in a string"
        )
    );
    assert!(
        stack
            .api
            .api
            .job_runs(load, None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saving_refuses_what_cannot_run_naming_the_node_or_edge() {
    let stack = stack(SchedulerConfig::default()).await;
    stack.job("a", "hello", json!({})).await;
    for (body, field, message) in [
        (
            json!({ "nodes": [{ "name": "x", "job": "a" }, { "name": "y", "job": "a" }],
                    "edges": [{ "from": "x", "to": "y" }, { "from": "y", "to": "x" }] }),
            "edges",
            "the edges form a cycle through node \"x\"",
        ),
        (
            json!({ "nodes": [{ "name": "x", "job": "a" }], "edges": [{ "from": "x", "to": "gone" }] }),
            "edges[0].to",
            "edge x → gone: no node \"gone\"",
        ),
        (
            json!({ "nodes": [{ "name": "x", "job": "nope" }] }),
            "nodes[0].job",
            "node \"x\": no job \"nope\" (`cronbox job list` lists this tenant's jobs)",
        ),
        (
            json!({ "nodes": [{ "name": "x", "job": "a", "param": "{{ env.HOME }}" }] }),
            "nodes[0].param",
            "node \"x\": `{{ env.HOME }}` names nothing",
        ),
    ] {
        let (status, answer) = stack
            .call(reqwest::Method::PUT, "/api/v1/workflows/w", Some(body))
            .await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["code"], "invalid_workflow", "{answer}");
        assert_eq!(answer["field"], field, "{answer}");
        let text = answer["message"].as_str().unwrap();
        assert!(text.starts_with(message), "{text}");
    }
    // Nothing was saved; a bad input is refused before a run starts.
    let (status, _) = stack.get("/api/v1/workflows/w").await;
    assert_eq!(status, 404);
    save(
        &stack,
        "w",
        json!({ "nodes": [{ "name": "x", "job": "a" }] }),
    )
    .await;
    assert_eq!(
        refused_field(
            &stack,
            reqwest::Method::POST,
            "/api/v1/workflows/w/runs",
            json!({ "input": "{not json" })
        )
        .await,
        "input"
    );
    assert!(stack.api.api.workflow_runs("w").await.unwrap().is_empty());
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_keeps_the_definition_it_started_with() {
    let stack = stack(SchedulerConfig::default()).await;
    stack.job("nap", "sleeper", json!({ "param": "800" })).await;
    stack.job("after", "hello", json!({})).await;
    let definition = |param: &str| {
        spec(json!({
            "nodes": [
                { "name": "nap", "job": "nap" },
                { "name": "after", "job": "after", "param": param }
            ],
            "edges": [{ "from": "nap", "to": "after" }]
        }))
    };
    stack
        .api
        .api
        .put_workflow("edited", &definition("first"))
        .await
        .unwrap();
    let started = stack
        .api
        .api
        .start_workflow_run("edited", None)
        .await
        .unwrap();
    assert_eq!(node(&started, "nap").status, NodeStatus::Running);
    // Edited while its first node runs: the run goes on as version 1.
    let saved = stack
        .api
        .api
        .put_workflow("edited", &definition("second"))
        .await
        .unwrap();
    assert_eq!(saved.version, 2);
    let run = ended(&stack, started.id).await;
    assert_eq!(run.status, WorkflowRunStatus::Succeeded, "{run:#?}");
    assert_eq!(run.version, 1);
    assert_eq!(node(&run, "after").output.as_deref(), Some("hello, first"));
    // The next run follows version 2.
    let started = stack
        .api
        .api
        .start_workflow_run("edited", None)
        .await
        .unwrap();
    let run = ended(&stack, started.id).await;
    assert_eq!(
        (run.version, node(&run, "after").output.as_deref()),
        (2, Some("hello, second"))
    );
    stack.shutdown().await;
}

/// `cronbox dev` sources are code: a workflow's node never sends them to a
/// job that reads secrets (only an admin's trigger may); its run is
/// refused and the node fails saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_never_sends_dev_sources_to_a_job_that_reads_secrets() {
    let stack = stack(SchedulerConfig {
        secrets: Some(std::sync::Arc::new(cronbox_admin::secrets::SecretBox::new(
            &[7; 32],
        ))),
        ..SchedulerConfig::default()
    })
    .await;
    let (status, body) = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/secrets/API_KEY",
            Some(json!({ "value": "the-value" })),
        )
        .await;
    assert!(status < 300, "{body}");
    stack
        .job("reader", "hello", json!({ "secrets": ["API_KEY"] }))
        .await;
    save(
        &stack,
        "sneaky",
        json!({ "nodes": [{
            "name": "run",
            "job": "reader",
            "param": "{\"cronbox_dev\": {\"files\": {\"app.py\": \"print(1)\"} } }"
        }] }),
    )
    .await;
    let started = stack
        .api
        .api
        .start_workflow_run("sneaky", None)
        .await
        .unwrap();
    let run = ended(&stack, started.id).await;
    assert_eq!(run.status, WorkflowRunStatus::Failed, "{run:#?}");
    let message = node(&run, "run").message.clone().unwrap_or_default();
    assert!(message.contains("cronbox dev"), "{run:#?}");
}
