//! Workflows in the console: a definition written in the editor (a
//! refusal shown next to it, naming the edge), the graph drawn, a run
//! started from the workflow's page and followed on the run's page until
//! every node shows its output; a run cancelled and retried from its
//! page; a fanned-out node's elements listed on its run's page and a
//! conditional edge drawn as one.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_writes_draws_and_runs_a_workflow() {
    let _turn = TESTS.turn();
    let up = start();
    let browser = Browser::start(&screenshots()).await;
    browser.goto(&format!("{}/", up.base)).await;
    log_in(&browser, "admin", &up.admin_password).await;
    browser.goto(&format!("{}/#/workflows", up.base)).await;
    browser.element("#workflows").await;

    // A cycle is refused next to the definition, naming where.
    let cycle = json!({
        "nodes": [{ "name": "a", "job": "hello" }, { "name": "b", "job": "hello" }],
        "edges": [{ "from": "a", "to": "b" }, { "from": "b", "to": "a" }]
    });
    browser.fill("#workflow-name", "greetings").await;
    browser
        .fill("#workflow-definition", &cycle.to_string())
        .await;
    browser.click("#workflow-form button[type=submit]").await;
    let refused = browser
        .text_until("#workflow-error", "the refusal is shown", |text| {
            !text.is_empty()
        })
        .await;
    assert_eq!(refused, "edges: the edges form a cycle through node \"a\"");

    // A good one is saved and drawn: two boxes, one arrow.
    let good = json!({
        "description": "greets, then greets the greeting",
        "nodes": [
            { "name": "first", "job": "hello", "param": "{{ input.who }}" },
            { "name": "second", "job": "hello", "param": "again: {{ nodes.first.output }}" }
        ],
        "edges": [{ "from": "first", "to": "second" }]
    });
    browser
        .fill("#workflow-definition", &good.to_string())
        .await;
    browser.click("#workflow-form button[type=submit]").await;
    browser.element("#workflow[data-name='greetings']").await;
    assert_eq!(
        browser
            .all("#workflow svg.workflow-graph g.node")
            .await
            .len(),
        2
    );
    assert_eq!(
        browser
            .all("#workflow svg.workflow-graph line.edge")
            .await
            .len(),
        1
    );
    browser.screenshot("workflow").await;

    // Run it with an input; its page follows it to the end.
    browser.fill("#workflow-input", r#"{"who": "ada"}"#).await;
    browser.click("#workflow-run button[type=submit]").await;
    let run = id_in_address(&browser, "workflow run").await;
    browser
        .element("#workflow-run[data-status='succeeded']")
        .await;
    let second = browser
        .text_until(
            "tr[data-node='second'] td.output",
            "the last node's output",
            |text| text != "—",
        )
        .await;
    assert_eq!(second, "hello, again: hello, ada");
    assert_eq!(
        browser
            .all("#workflow-run svg g.node.succeeded")
            .await
            .len(),
        2,
        "both boxes show the nodes' ends"
    );
    browser.screenshot("workflow-run").await;
    // The same run through the API.
    let answered = up.operator.api.workflow_run(run).await.unwrap();
    assert_eq!(answered.status, cronbox_api::WorkflowRunStatus::Succeeded);

    // A slow run cancelled from its page, then retried from it.
    up.operator
        .job(
            "nap",
            cronbox_example_jobs::bytes("sleeper"),
            json!({ "param": "30000" }),
        )
        .await;
    let slow: cronbox_api::WorkflowSpec =
        serde_json::from_value(json!({ "nodes": [{ "name": "nap", "job": "nap" }] })).unwrap();
    up.operator.api.put_workflow("slow", &slow).await.unwrap();
    let slow = up
        .operator
        .api
        .start_workflow_run("slow", None)
        .await
        .unwrap();
    browser
        .goto(&format!("{}/#/workflow-runs/{}", up.base, slow.id))
        .await;
    browser.click("#workflow-cancel").await;
    browser
        .element("#workflow-run[data-status='cancelled']")
        .await;
    browser
        .element("tr[data-node='nap'] .status-cancelled")
        .await;
    browser.click("#workflow-retry").await;
    browser
        .element("#workflow-run[data-status='running']")
        .await;
    let retried = up.operator.api.workflow_run(slow.id).await.unwrap();
    assert_ne!(
        retried.nodes[0].run_id, slow.nodes[0].run_id,
        "the node runs again"
    );

    // A node fanned out over the input, after a conditional edge: the run
    // page lists its elements; the graph draws the edge as conditional.
    let fan: cronbox_api::WorkflowSpec = serde_json::from_value(json!({
        "nodes": [
            { "name": "first", "job": "hello", "param": "list" },
            { "name": "each", "job": "hello", "for_each": "input.who", "param": "{{ item }}" }
        ],
        "edges": [{ "from": "first", "to": "each", "when": "input.go == true" }]
    }))
    .unwrap();
    up.operator.api.put_workflow("fan", &fan).await.unwrap();
    let fanned = up
        .operator
        .api
        .start_workflow_run("fan", Some(r#"{"go": true, "who": ["ada", "bo", "cy"]}"#))
        .await
        .unwrap();
    browser
        .goto(&format!("{}/#/workflow-runs/{}", up.base, fanned.id))
        .await;
    browser
        .element("#workflow-run[data-status='succeeded']")
        .await;
    let status = browser
        .text_until(
            "tr[data-node='each'] td .status",
            "the fan-out's count",
            |text| text.contains("3/3"),
        )
        .await;
    assert_eq!(status, "succeeded 3/3");
    let items = browser
        .all("section[data-items='each'] tr[data-item] td.output")
        .await;
    assert_eq!(items.len(), 3);
    assert_eq!(
        browser
            .text_until(
                "section[data-items='each'] tr[data-item='2'] td.output",
                "the last element's output",
                |text| text != "—"
            )
            .await,
        "hello, cy"
    );
    assert_eq!(
        browser
            .all("#workflow-run svg line.edge.conditional")
            .await
            .len(),
        1
    );
    browser.screenshot("workflow-fan-out").await;
}
