//! What a hostile developer of a tenant, an anonymous caller and a stolen
//! token tried, each through the API as the attack went: a workflow that
//! takes over an admin's job, templates that make the admin parse without
//! bound, and the deletion of a job that reads secrets.

use super::*;

/// A developer's workflow with a module node named like an admin's job
/// (`flow.step`, which reads a secret) is refused naming the node, and
/// the job stays as the admin saved it; the workflow's own job of a
/// removed node goes with the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_never_takes_over_a_job_it_did_not_make() {
    let admin = admin().await;
    let (owner, developer) = admin.acme_admin_and_developer().await;
    let (status, body) = owner
        .call(
            Method::PUT,
            "/api/v1/secrets/API_KEY",
            Some(json!({ "value": "the-secret-value" })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        owner.upload("?name=reader", jobs::bytes("hello")).await.0,
        201
    );
    assert_eq!(
        developer
            .upload("?name=mine", jobs::bytes("counter"))
            .await
            .0,
        201
    );
    let mut reads_secret = a_job("flow.step", "reader");
    reads_secret["secrets"] = json!(["API_KEY"]);
    reads_secret["retry_count"] = json!(2);
    let (status, job) = owner
        .call(Method::POST, "/api/v1/jobs", Some(reads_secret))
        .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();

    let takeover = json!({ "nodes": [{ "name": "step", "module": "mine" }] });
    let (status, body) = developer
        .call(
            Method::PUT,
            "/api/v1/workflows/flow",
            Some(takeover.clone()),
        )
        .await;
    assert_eq!(
        (status, &body["field"]),
        (422, &json!("nodes[0].name")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("does not own"),
        "{body}"
    );
    let (status, after) = owner.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(status, 200);
    for field in [
        "module_digest",
        "secrets",
        "retry_count",
        "enabled",
        "schedule_type",
    ] {
        assert_eq!(after[field], job[field], "{field} of the admin's job");
    }
    // Nor when an admin saves it: the job is not the workflow's.
    let (status, _) = owner
        .call(Method::PUT, "/api/v1/workflows/flow", Some(takeover))
        .await;
    assert_eq!(status, 422);

    // The workflow's own job is its to update, and goes with its node.
    let own = json!({ "nodes": [{ "name": "other", "module": "mine" }] });
    let (status, body) = developer
        .call(Method::PUT, "/api/v1/workflows/flow", Some(own.clone()))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = developer
        .call(Method::PUT, "/api/v1/workflows/flow", Some(own))
        .await;
    assert_eq!(status, 200, "saved again: {body}");
    let renamed = json!({ "nodes": [{ "name": "again", "module": "mine" }] });
    let (status, body) = developer
        .call(Method::PUT, "/api/v1/workflows/flow", Some(renamed))
        .await;
    assert_eq!(status, 200, "{body}");
    let names: Vec<String> = owner
        .api
        .jobs(&cronbox_api::JobQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|listed| listed.job.name)
        .collect();
    assert!(names.contains(&"flow.again".to_owned()), "{names:?}");
    assert!(!names.contains(&"flow.other".to_owned()), "{names:?}");
    assert!(names.contains(&"flow.step".to_owned()), "{names:?}");
}

/// A node's param of more holes than the bound is refused at save, naming
/// the node's field; one at the bound is saved. (What rendering the most
/// holes for the most elements costs the admin is the workflow
/// benchmark's: BENCHMARKS.md.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_is_bounded_in_holes() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    assert_eq!(
        acme.upload("?name=hello", jobs::bytes("hello")).await.0,
        201
    );
    for name in ["first", "each"] {
        let (status, body) = acme
            .call(Method::POST, "/api/v1/jobs", Some(a_job(name, "hello")))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let holes = |count: usize| "{{ nodes.first.output }}".repeat(count);
    let definition = |param: String| {
        json!({
            "nodes": [
                { "name": "first", "job": "first" },
                { "name": "each", "job": "each", "for_each": "input.items", "param": param }
            ],
            "edges": [{ "from": "first", "to": "each" }]
        })
    };
    let max = cronbox_api::WorkflowSpec::MAX_TEMPLATE_HOLES;
    let (status, body) = acme
        .call(
            Method::PUT,
            "/api/v1/workflows/holes",
            Some(definition(holes(max + 1))),
        )
        .await;
    assert_eq!(
        (status, &body["field"]),
        (422, &json!("nodes[1].param")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("more than 1000"),
        "{body}"
    );
    let (status, body) = acme
        .call(
            Method::PUT,
            "/api/v1/workflows/holes",
            Some(definition(holes(max))),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

/// Another tenant's workflows, workflow runs and audit entries answer as
/// absent by name or id, whichever the route, and asking for another
/// tenant's audit log reads one's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_tenants_workflows_runs_and_audit_are_absent_by_id() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    let rival = admin.tenant("rival").await;
    assert_eq!(
        acme.upload("?name=hello", jobs::bytes("hello")).await.0,
        201
    );
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(a_job("greet", "hello")))
        .await;
    assert_eq!(status, 201, "{body}");
    let flow = json!({ "nodes": [{ "name": "n", "job": "greet" }] });
    let (status, body) = acme
        .call(Method::PUT, "/api/v1/workflows/flow", Some(flow.clone()))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, run) = acme
        .call(Method::POST, "/api/v1/workflows/flow/runs", Some(json!({})))
        .await;
    assert_eq!(status, 201, "{run}");
    let id = run["id"].as_i64().unwrap();
    for (method, path, body) in [
        (Method::GET, "/api/v1/workflows/flow".to_owned(), None),
        (Method::PUT, "/api/v1/workflows/flow".to_owned(), Some(flow)),
        (Method::DELETE, "/api/v1/workflows/flow".to_owned(), None),
        (Method::GET, format!("/api/v1/workflow-runs/{id}"), None),
        (
            Method::POST,
            format!("/api/v1/workflow-runs/{id}/cancel"),
            None,
        ),
        (
            Method::POST,
            format!("/api/v1/workflow-runs/{id}/retry"),
            None,
        ),
    ] {
        let (status, answer) = rival.call(method.clone(), &path, body).await;
        // A PUT of a name the rival does not have makes its own workflow,
        // which then fails: the rival has no job "greet".
        let expected = if method == Method::PUT { 422 } else { 404 };
        assert_eq!(status, expected, "{method} {path}: {answer}");
    }
    let (status, still) = acme.get(&format!("/api/v1/workflow-runs/{id}")).await;
    assert_eq!(status, 200, "{still}");
    let (status, page) = rival.get("/api/v1/audit?tenant=acme").await;
    assert_eq!(status, 200, "{page}");
    let entries = page["entries"].as_array().unwrap();
    assert!(!entries.is_empty(), "{page}");
    assert!(
        entries.iter().all(|entry| entry["tenant"] == "rival"),
        "{page}"
    );
}
