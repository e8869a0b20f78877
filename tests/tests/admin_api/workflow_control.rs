//! Workflow control flow through the API a user calls: a node fanned out
//! over an upstream array within its concurrency, its outputs joined in
//! order, a failed element failing the node with the rest never started;
//! edge conditions choosing a branch, and one that reads nothing failing
//! its node; what a scheduled fire does while a run is in progress (the
//! overlap policy), on a manual clock; a module node run as a job the
//! workflow owns.

use cronbox_api::{NodeStatus, WorkflowRunStatus};

use super::workflows::{ended, node, refused_field, run_to_end, save};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_fans_out_within_its_concurrency_and_its_outputs_join_in_order() {
    let stack = stack(SchedulerConfig::default()).await;
    stack
        .job(
            "extract",
            "config-echo",
            json!({ "param": "out", "config": { "out": r#"{"items": ["a", "b", "c", "d", "e"], "n": 3}"# } }),
        )
        .await;
    let greet = stack.job("greet", "hello", json!({})).await;
    stack.job("join", "hello", json!({})).await;
    stack.job("burn", "fuel-burner", json!({})).await;
    save(
        &stack,
        "fan",
        json!({
            "nodes": [
                { "name": "extract", "job": "extract" },
                { "name": "each", "job": "greet", "for_each": "nodes.extract.output.items",
                  "param": "{{ index }}-{{ item }}", "concurrency": 2 },
                { "name": "join", "job": "join", "param": "{{ nodes.each.output.4 }} of {{ nodes.each.output }}" }
            ],
            "edges": [{ "from": "extract", "to": "each" }, { "from": "each", "to": "join" }]
        }),
    )
    .await;
    let run = run_to_end(&stack, "fan", None).await;
    assert_eq!(run.status, WorkflowRunStatus::Succeeded, "{run:#?}");
    let each = node(&run, "each");
    assert_eq!(
        each.output.as_deref(),
        Some(r#"["hello, 0-a","hello, 1-b","hello, 2-c","hello, 3-d","hello, 4-e"]"#)
    );
    let counts = each.items.unwrap();
    assert_eq!((counts.total, counts.succeeded), (5, 5));
    assert_eq!(
        node(&run, "join").output.as_deref(),
        Some(
            r#"hello, hello, 4-e of ["hello, 0-a","hello, 1-b","hello, 2-c","hello, 3-d","hello, 4-e"]"#
        )
    );
    // Each element: one run of the node's job, kind workflow, in order.
    let items = stack
        .api
        .api
        .workflow_node_items(run.id, "each")
        .await
        .unwrap();
    assert_eq!(
        items
            .iter()
            .map(|item| item.input.as_str())
            .collect::<Vec<_>>(),
        ["0-a", "1-b", "2-c", "3-d", "4-e"]
    );
    let runs = stack.api.api.job_runs(greet, None, 100).await.unwrap();
    assert_eq!(runs.len(), 5, "{runs:?}");
    assert!(runs.iter().all(|run| run.kind == TriggerKind::Workflow));
    let mut item_runs: Vec<_> = items.iter().map(|item| item.run_id.unwrap()).collect();
    item_runs.sort();
    let mut job_runs: Vec<_> = runs.iter().map(|run| run.id).collect();
    job_runs.sort();
    assert_eq!(item_runs, job_runs);
    // Never more than two in progress: each run was written while at
    // most one other had not finished.
    for run in &runs {
        let in_progress = runs
            .iter()
            .filter(|other| {
                other.created_at_ms <= run.created_at_ms
                    && other.finished_at_ms.unwrap() > run.created_at_ms
            })
            .count();
        assert!(in_progress <= 2, "{in_progress} in progress: {runs:#?}");
    }
    // The items of a node the run does not have: 404.
    let (status, _) = stack
        .call(
            reqwest::Method::GET,
            &format!("/api/v1/workflow-runs/{}/nodes/nope/items", run.id),
            None,
        )
        .await;
    assert_eq!(status, 404);

    // An element fails: no more start, the node fails naming it.
    save(
        &stack,
        "burns",
        json!({
            "nodes": [{ "name": "burn", "job": "burn", "for_each": "input.rounds", "concurrency": 1 }]
        }),
    )
    .await;
    let run = run_to_end(
        &stack,
        "burns",
        Some(r#"{"rounds": ["10", "x", "20", "30"]}"#),
    )
    .await;
    assert_eq!(run.status, WorkflowRunStatus::Failed, "{run:#?}");
    let burn = node(&run, "burn");
    assert!(
        burn.message
            .as_deref()
            .unwrap()
            .starts_with("element 1 of 4 failed: "),
        "{burn:?}"
    );
    let items = stack
        .api
        .api
        .workflow_node_items(run.id, "burn")
        .await
        .unwrap();
    assert_eq!(
        items.iter().map(|item| item.status).collect::<Vec<_>>(),
        [
            NodeStatus::Succeeded,
            NodeStatus::Failed,
            NodeStatus::Skipped,
            NodeStatus::Skipped
        ]
    );
    // Over something that is not an array: the node fails saying so, and
    // an empty array succeeds with `[]` at once.
    for (input, status, said) in [
        (
            r#"{"rounds": 3}"#,
            NodeStatus::Failed,
            "for_each: `input.rounds` is a number, not an array",
        ),
        (r#"{"rounds": []}"#, NodeStatus::Succeeded, "[]"),
    ] {
        let run = run_to_end(&stack, "burns", Some(input)).await;
        let burn = node(&run, "burn");
        assert_eq!(burn.status, status, "{burn:?}");
        assert_eq!(
            burn.message.as_deref().or(burn.output.as_deref()),
            Some(said)
        );
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_conditions_choose_a_branch_and_one_that_reads_nothing_fails_its_node() {
    let stack = stack(SchedulerConfig::default()).await;
    stack
        .job(
            "check",
            "config-echo",
            json!({ "param": "out", "config": { "out": r#"{"count": 3}"# } }),
        )
        .await;
    stack.job("greet", "hello", json!({})).await;
    save(
        &stack,
        "branch",
        json!({
            "nodes": [
                { "name": "check", "job": "check" },
                { "name": "big", "job": "greet" },
                { "name": "small", "job": "greet", "param": "{{ nodes.check.output.count }} rows" },
                { "name": "broken", "job": "greet" }
            ],
            "edges": [
                { "from": "check", "to": "big", "when": "nodes.check.output.count > 10" },
                { "from": "check", "to": "small",
                  "when": "nodes.check.output.count <= 10 && input.mode == 'full'" },
                { "from": "check", "to": "broken", "when": "nodes.check.output.rows > 0" }
            ]
        }),
    )
    .await;
    let run = run_to_end(&stack, "branch", Some(r#"{"mode": "full"}"#)).await;
    assert_eq!(node(&run, "big").status, NodeStatus::Skipped);
    assert_eq!(node(&run, "small").output.as_deref(), Some("hello, 3 rows"));
    let broken = node(&run, "broken");
    assert_eq!(broken.status, NodeStatus::Failed);
    assert_eq!(
        broken.message.as_deref(),
        Some(
            "the condition of the edge from \"check\": `nodes.check.output.rows` is missing: \
             no `rows` in an object with count"
        )
    );
    // Nothing handled broken's failure: the run failed.
    assert_eq!(run.status, WorkflowRunStatus::Failed);
    // A condition that does not parse is refused when saved.
    assert_eq!(
        refused_field(
            &stack,
            reqwest::Method::PUT,
            "/api/v1/workflows/refused",
            json!({
                "nodes": [{ "name": "a", "job": "greet" }, { "name": "b", "job": "greet" }],
                "edges": [{ "from": "a", "to": "b", "when": "nodes.a.output ==" }]
            })
        )
        .await,
        "edges[0].when"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_while_a_run_is_in_progress_follows_the_overlap_policy() {
    let minute = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(minute + 30_000).await;
    stack
        .job("slow", "sleeper", json!({ "param": "120000" }))
        .await;
    for policy in ["SKIP", "BUFFER_ONE", "CANCEL_OTHER"] {
        save(
            &stack,
            &policy.to_lowercase(),
            json!({
                "nodes": [{ "name": "slow", "job": "slow" }],
                "schedule": { "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
                              "overlap": policy }
            }),
        )
        .await;
    }
    let runs_of = |name: &'static str| {
        let stack = &stack;
        async move { stack.api.api.workflow_runs(name).await.unwrap() }
    };
    let fire = |at: i64, expected: [usize; 3]| {
        let (stack, clock) = (&stack, &clock);
        async move {
            clock.set(at);
            until("each workflow's fire is taken", || async {
                let mut counts = [0; 3];
                for (i, name) in ["skip", "buffer_one", "cancel_other"]
                    .into_iter()
                    .enumerate()
                {
                    let workflow = stack.api.api.workflow(name).await.unwrap();
                    if workflow.next_fire_at_ms <= Some(at) {
                        return None;
                    }
                    counts[i] = stack.api.api.workflow_runs(name).await.unwrap().len();
                }
                (counts == expected).then_some(())
            })
            .await;
        }
    };
    // The first fire starts a run of each.
    fire(minute + 60_000, [1, 1, 1]).await;
    // The second, with those runs in progress: SKIP starts none,
    // BUFFER_ONE waits, CANCEL_OTHER cancels its run and starts another.
    fire(minute + 120_000, [1, 1, 2]).await;
    let cancel_other = runs_of("cancel_other").await;
    let replaced = ended(&stack, cancel_other[1].id).await;
    assert_eq!(replaced.status, WorkflowRunStatus::Cancelled);
    assert_eq!(
        node(&replaced, "slow").message.as_deref(),
        Some("cancelled by its workflow's next scheduled fire")
    );
    // A third: BUFFER_ONE still holds one fire only.
    fire(minute + 180_000, [1, 1, 3]).await;
    // Its run ends: the buffered fire starts, once.
    let buffered = runs_of("buffer_one").await;
    stack
        .api
        .api
        .cancel_workflow_run(buffered[0].id)
        .await
        .unwrap();
    until("the buffered fire starts", || async {
        (runs_of("buffer_one").await.len() == 2).then_some(())
    })
    .await;
    let after = runs_of("buffer_one").await;
    assert_eq!(after[0].kind, TriggerKind::Schedule);
    assert_eq!(runs_of("skip").await.len(), 1);
    for name in ["skip", "buffer_one", "cancel_other"] {
        for run in runs_of(name).await {
            if run.status == WorkflowRunStatus::Running {
                stack.api.api.cancel_workflow_run(run.id).await.unwrap();
            }
        }
    }
    stack.shutdown().await;
}

/// The job named `name`, if there is one.
async fn job_named(stack: &Stack, name: &str) -> Option<cronbox_api::Job> {
    let query = cronbox_api::JobQuery {
        name: Some(name.to_owned()),
        ..Default::default()
    };
    let listed = stack.api.api.jobs(&query).await.unwrap();
    listed
        .into_iter()
        .map(|listed| listed.job)
        .find(|job| job.name == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_node_runs_its_module_as_a_job_the_workflow_owns() {
    let stack = stack(SchedulerConfig::default()).await;
    stack
        .api
        .api
        .upload(
            cronbox_example_jobs::bytes("config-echo"),
            Some("echo"),
            &[],
        )
        .await
        .unwrap();
    let definition = |greeting: &str| {
        json!({
            "nodes": [{ "name": "say", "module": "echo", "param": "greeting",
                        "settings": { "config": { "greeting": greeting }, "timeout_ms": 5000 } }]
        })
    };
    save(&stack, "modular", definition("hi from settings")).await;
    let owned = job_named(&stack, "modular.say").await.unwrap();
    assert_eq!(owned.timeout_ms, 5000);
    let run = run_to_end(&stack, "modular", None).await;
    assert_eq!(
        node(&run, "say").output.as_deref(),
        Some("hi from settings")
    );
    // Saved again: the same job, its settings brought up to date.
    save(&stack, "modular", definition("hi again")).await;
    assert_eq!(job_named(&stack, "modular.say").await.unwrap().id, owned.id);
    let run = run_to_end(&stack, "modular", None).await;
    assert_eq!(node(&run, "say").output.as_deref(), Some("hi again"));
    // What a module node's settings may not give, and a bad setting, are
    // refused naming the field; a job and a module both, too.
    for (node, field) in [
        (
            json!({ "name": "say", "module": "echo", "settings": { "secrets": ["TOKEN"] } }),
            "nodes[0].settings.secrets",
        ),
        (
            json!({ "name": "say", "module": "echo", "settings": { "timeout_ms": -5 } }),
            "nodes[0].settings.timeout_ms",
        ),
        (
            json!({ "name": "say", "module": "nope" }),
            "nodes[0].module",
        ),
        (
            json!({ "name": "say", "module": "echo", "job": "x" }),
            "nodes[0].module",
        ),
    ] {
        assert_eq!(
            refused_field(
                &stack,
                reqwest::Method::PUT,
                "/api/v1/workflows/modular",
                json!({ "nodes": [node] })
            )
            .await,
            field
        );
    }
    // Deleted with its workflow.
    stack.api.api.delete_workflow("modular").await.unwrap();
    assert!(job_named(&stack, "modular.say").await.is_none());
    stack.shutdown().await;
}

/// A workflow run of 25,000 elements (25 nodes fanned out over 1,000
/// each, one at a time, their elements' inputs near a kilobyte) is
/// cancelled in one request: the answer is the cancelled run, every
/// element ends cancelled and each running element's run is killed.
/// Deleting a workflow cancels its run in progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_many_elements_is_cancelled_and_deleting_its_workflow_stops_one() {
    let stack = stack(SchedulerConfig::default()).await;
    let nap = stack
        .job(
            "nap",
            "sleeper",
            json!({ "block_strategy": "CONCURRENT", "max_concurrency": 25 }),
        )
        .await;
    let nodes: Vec<Value> = (0..25)
        .map(|i| {
            json!({ "name": format!("each-{i}"), "job": "nap", "for_each": "input.items",
                    "concurrency": 1, "param": "{{ input.pad }} {{ item }}" })
        })
        .collect();
    save(&stack, "wide", json!({ "nodes": nodes })).await;
    // Each element's input is the padding and its number (not a number
    // the sleeper reads: it naps 60 s), 900 KB in all, under the bound.
    let items: Vec<u32> = (0..1000).collect();
    let input = json!({ "items": items, "pad": "p".repeat(900) }).to_string();
    let started = stack
        .api
        .api
        .start_workflow_run("wide", Some(&input))
        .await
        .unwrap();
    let database = stack.admin_database().await;
    let count = |status: &'static str| {
        let database = database.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM workflow_item WHERE workflow_run_id = $1 AND status = $2",
            )
            .bind(started.id)
            .bind(status)
            .fetch_one(&database)
            .await
            .unwrap()
        }
    };
    until("every node fanned out", || async {
        (count("pending").await + count("running").await == 25_000).then_some(())
    })
    .await;
    let cancelled = stack.api.api.cancel_workflow_run(started.id).await.unwrap();
    assert_eq!(cancelled.status, WorkflowRunStatus::Cancelled);
    assert_eq!(count("cancelled").await, 25_000);
    until("the running elements' runs are killed", || async {
        let runs = stack.api.runs(nap).await;
        runs.iter().all(|run| !run.status.is_open()).then_some(())
    })
    .await;

    // A run in progress when its workflow is deleted is cancelled.
    let one_nap = json!({ "nodes": [{ "name": "n", "job": "nap", "param": "60000" }] });
    save(&stack, "doomed", one_nap).await;
    let doomed = stack
        .api
        .api
        .start_workflow_run("doomed", None)
        .await
        .unwrap();
    stack.api.api.delete_workflow("doomed").await.unwrap();
    let after = stack.api.api.workflow_run(doomed.id).await.unwrap();
    assert_eq!(after.status, WorkflowRunStatus::Cancelled, "{after:?}");
    stack.shutdown().await;
}
