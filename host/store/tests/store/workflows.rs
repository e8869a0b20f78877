//! Workflows in the store, on both engines: each save a new version, a run
//! keeping the definition it started with, a node started once however
//! many advance it, a retry followed by its node, a node and a run ended
//! once; a fanned-out node's elements written once and started within
//! its concurrency; a buffered fire started once.

use cronbox_api::{NodeStatus, WorkflowRunStatus, WorkflowSpec};
use cronbox_store::{Fire, NodeEnd, NodeOfRun};

use super::*;

fn spec(job: &str) -> WorkflowSpec {
    serde_json::from_value(serde_json::json!({
        "nodes": [{ "name": "a", "job": job }, { "name": "b", "job": job }],
        "edges": [{ "from": "a", "to": "b" }]
    }))
    .unwrap()
}

async fn workflows_and_their_runs(store: &Store) {
    let job_id = store.insert_job(&job(), 0).await.unwrap();
    let first = store
        .save_workflow("default", "etl", &spec("job"), None, 10)
        .await
        .unwrap();
    assert_eq!((first.version, first.created_at_ms), (1, 10));
    let run_id = store
        .create_workflow_run(&first, "{}", cronbox_protocol::TriggerKind::Api, 20)
        .await
        .unwrap();
    // Saved again: version 2; the run keeps version 1's definition.
    let second = store
        .save_workflow("default", "etl", &spec("other"), Some(100), 30)
        .await
        .unwrap();
    assert_eq!(
        (second.id, second.version, second.created_at_ms),
        (first.id, 2, 10)
    );
    let stored = store.workflow_run(run_id).await.unwrap().unwrap();
    assert_eq!(stored.run.version, 1);
    assert_eq!(stored.definition.nodes[0].job, "job");
    assert_eq!(
        stored
            .run
            .nodes
            .iter()
            .map(|node| (node.node.as_str(), node.status))
            .collect::<Vec<_>>(),
        [("a", NodeStatus::Pending), ("b", NodeStatus::Pending)]
    );
    assert_eq!(store.workflows(Some("default")).await.unwrap().len(), 1);
    assert!(store.workflows(Some("acme")).await.unwrap().is_empty());

    // A node starts once: the second start finds it running and writes
    // no run.
    let mut new_run = fire(job_id, 40);
    new_run.kind = cronbox_protocol::TriggerKind::Workflow;
    let started = store
        .start_workflow_node(run_id, "a", "in", &new_run, 40)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .start_workflow_node(run_id, "a", "in", &new_run, 41)
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.runs_of_job(job_id).await.unwrap().len(), 1);
    assert_eq!(
        store.workflow_node_of_run(started).await.unwrap(),
        Some(NodeOfRun {
            workflow_run: run_id,
            node: "a".to_owned(),
            item: None
        })
    );
    // A retry moves the node to the new run, once.
    let mut retry = new_run.clone();
    retry.attempt = 1;
    let retried = store
        .retry_workflow_node(started, &retry, 50)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .retry_workflow_node(started, &retry, 51)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.runs_of_job(job_id).await.unwrap().len(),
        2,
        "a refused retry writes no run"
    );
    assert_eq!(store.workflow_node_of_run(started).await.unwrap(), None);
    assert_eq!(
        store.workflow_node_of_run(retried).await.unwrap(),
        Some(NodeOfRun {
            workflow_run: run_id,
            node: "a".to_owned(),
            item: None
        })
    );
    // Ended once, with its output.
    let end = NodeEnd {
        status: NodeStatus::Succeeded,
        output: Some(r#"{"rows": 3}"#.to_owned()),
        message: None,
    };
    assert!(
        store
            .end_workflow_node(run_id, "a", &end, 60)
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_workflow_node(run_id, "a", &end, 61)
            .await
            .unwrap()
    );
    let node = &store.workflow_run(run_id).await.unwrap().unwrap().run.nodes[0];
    assert_eq!(
        (
            node.status,
            node.run_id,
            node.input.as_deref(),
            node.output.as_deref()
        ),
        (
            NodeStatus::Succeeded,
            Some(retried),
            Some("in"),
            Some(r#"{"rows": 3}"#)
        )
    );
    assert!(
        store
            .end_workflow_run(run_id, WorkflowRunStatus::Succeeded, 70)
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_workflow_run(run_id, WorkflowRunStatus::Failed, 71)
            .await
            .unwrap()
    );
    let runs = store.workflow_runs(first.id, 10).await.unwrap();
    assert_eq!(
        runs.iter()
            .map(|run| (run.id, run.status, run.ended_at_ms))
            .collect::<Vec<_>>(),
        [(run_id, WorkflowRunStatus::Succeeded, Some(70))]
    );
    // A scheduled fire is claimed once: the claim moves the next fire and
    // writes the run together.
    assert_eq!(store.due_workflows(99).await.unwrap().len(), 0);
    let due = store.due_workflows(100).await.unwrap();
    assert_eq!(due.len(), 1);
    let fire = Fire::Start(cronbox_protocol::TriggerKind::Schedule, "{}");
    let fired = store
        .claim_workflow_fire(&due[0], 100, Some(200), fire, 100)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .claim_workflow_fire(&due[0], 100, Some(200), fire, 100)
            .await
            .unwrap(),
        None
    );
    let fired = store.workflow_run(fired).await.unwrap().unwrap().run;
    assert_eq!(
        (fired.kind, fired.version),
        (cronbox_protocol::TriggerKind::Schedule, 2)
    );
    assert_eq!(
        store
            .workflow("default", "etl")
            .await
            .unwrap()
            .unwrap()
            .next_fire_at_ms,
        Some(200)
    );
    assert!(store.delete_workflow("default", "etl").await.unwrap());
    assert!(store.workflow("default", "etl").await.unwrap().is_none());
    assert!(
        store.workflow_run(run_id).await.unwrap().is_some(),
        "runs stay as history"
    );
}

async fn fan_out_and_buffered_fires(store: &Store) {
    let job_id = store.insert_job(&job(), 0).await.unwrap();
    let workflow = store
        .save_workflow("default", "each", &spec("job"), None, 10)
        .await
        .unwrap();
    let run_id = store
        .create_workflow_run(&workflow, "{}", cronbox_protocol::TriggerKind::Api, 20)
        .await
        .unwrap();
    let inputs: Vec<String> = (0..5).map(|i| format!("in-{i}")).collect();
    assert!(
        store
            .expand_workflow_node(run_id, "a", &inputs, 30)
            .await
            .unwrap()
    );
    assert!(
        !store
            .expand_workflow_node(run_id, "a", &inputs, 31)
            .await
            .unwrap(),
        "a node expands once"
    );
    let template = store.job(job_id).await.unwrap().unwrap();
    let element_run = NewRun::of_job(&template, cronbox_protocol::TriggerKind::Workflow, 40);
    // Within the concurrency, in order; a second fill finds no room.
    let first = store
        .start_workflow_items(run_id, "a", 2, &element_run, 40)
        .await
        .unwrap();
    assert_eq!(
        first
            .iter()
            .map(|(_, run)| run.param.as_str())
            .collect::<Vec<_>>(),
        ["in-0", "in-1"]
    );
    assert!(
        store
            .start_workflow_items(run_id, "a", 2, &element_run, 41)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.workflow_node_of_run(first[1].0).await.unwrap(),
        Some(NodeOfRun {
            workflow_run: run_id,
            node: "a".to_owned(),
            item: Some(1)
        })
    );
    // One ends: room for one more.
    let end = NodeEnd {
        status: NodeStatus::Succeeded,
        output: Some("out-0".to_owned()),
        message: None,
    };
    assert!(
        store
            .end_workflow_item(run_id, "a", 0, &end, 50)
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_workflow_item(run_id, "a", 0, &end, 51)
            .await
            .unwrap()
    );
    let next = store
        .start_workflow_items(run_id, "a", 2, &element_run, 52)
        .await
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].1.param, "in-2");
    let counts = store.workflow_node_item_counts(run_id, "a").await.unwrap();
    assert_eq!(
        (
            counts.total,
            counts.running,
            counts.succeeded,
            counts.failed
        ),
        (5, 2, 1, 0)
    );
    // One fails: nothing more starts; the rest can be skipped.
    let failed = NodeEnd {
        status: NodeStatus::Failed,
        output: None,
        message: Some("boom".to_owned()),
    };
    assert!(
        store
            .end_workflow_item(run_id, "a", 1, &failed, 60)
            .await
            .unwrap()
    );
    assert!(
        store
            .start_workflow_items(run_id, "a", 5, &element_run, 61)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .skip_pending_items(run_id, "a", "another element failed", 62)
        .await
        .unwrap();
    let items = store.workflow_items(run_id, "a").await.unwrap();
    assert_eq!(
        items.iter().map(|item| item.status).collect::<Vec<_>>(),
        [
            NodeStatus::Succeeded,
            NodeStatus::Failed,
            NodeStatus::Running,
            NodeStatus::Skipped,
            NodeStatus::Skipped
        ]
    );
    let stored = store.workflow_run(run_id).await.unwrap().unwrap();
    assert_eq!(stored.run.nodes[0].items.unwrap().total, 5);
    // Stopping the run names the running element's run to kill.
    let running = store
        .stop_workflow_run(run_id, WorkflowRunStatus::Cancelled, "stop", 70)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running, [next[0].0]);
    // A retry expands the node again.
    assert!(store.reopen_workflow_run(run_id, 80).await.unwrap());
    assert!(store.workflow_items(run_id, "a").await.unwrap().is_empty());
    assert_eq!(store.runs_of_job(job_id).await.unwrap().len(), 3);

    // A buffered fire waits for the runs in progress, and starts once.
    let scheduled = store
        .save_workflow("default", "each", &spec("job"), Some(100), 90)
        .await
        .unwrap();
    let in_progress = store.workflow_runs_in_progress(scheduled.id).await.unwrap();
    assert_eq!(in_progress, [run_id]);
    assert_eq!(
        store
            .claim_workflow_fire(&scheduled, 100, Some(200), Fire::Buffer, 100)
            .await
            .unwrap(),
        Some(None)
    );
    assert!(store.workflow_fire_buffered(scheduled.id).await.unwrap());
    assert!(
        store
            .workflows_with_a_fire_to_start()
            .await
            .unwrap()
            .is_empty()
    );
    store
        .end_workflow_run(run_id, WorkflowRunStatus::Succeeded, 110)
        .await
        .unwrap();
    let waiting = store.workflows_with_a_fire_to_start().await.unwrap();
    assert_eq!(waiting.len(), 1);
    // Started with the next fire waiting for its end (FIX_DELAY).
    let started = store
        .start_buffered_fire(&waiting[0], "{}", true, 120)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .start_buffered_fire(&waiting[0], "{}", true, 121)
            .await
            .unwrap(),
        None
    );
    let buffered_run = store.workflow_run(started).await.unwrap().unwrap().run;
    assert_eq!(buffered_run.fire_at_ms, Some(100), "the buffered instant");
    assert!(store.workflows_done_waiting().await.unwrap().is_empty());
    store
        .end_workflow_run(started, WorkflowRunStatus::Succeeded, 130)
        .await
        .unwrap();
    let done = store.workflows_done_waiting().await.unwrap();
    assert_eq!((done.len(), done[0].1, done[0].2), (1, started, 130));
    assert!(
        store
            .resume_after_run(scheduled.id, started, Some(160))
            .await
            .unwrap()
    );
    assert!(
        !store
            .resume_after_run(scheduled.id, started, Some(170))
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .workflow("default", "each")
            .await
            .unwrap()
            .unwrap()
            .next_fire_at_ms,
        Some(160)
    );
    // A backfill runs each instant once, however often it is asked.
    let first = store
        .backfill_workflow(&scheduled, &[10, 20, 30], "{}", 140)
        .await
        .unwrap();
    assert_eq!(first.len(), 3);
    let again = store
        .backfill_workflow(&scheduled, &[20, 30, 40], "{}", 150)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    let run = store.workflow_run(again[0]).await.unwrap().unwrap().run;
    assert_eq!(
        (run.kind, run.fire_at_ms),
        (cronbox_protocol::TriggerKind::Backfill, Some(40))
    );
    assert!(!store.workflow_fire_buffered(scheduled.id).await.unwrap());
}

on_both_engines! {
    sqlite_fanned_out_nodes_start_within_their_concurrency_and_buffered_fires_once,
        postgres_fanned_out_nodes_start_within_their_concurrency_and_buffered_fires_once => fan_out_and_buffered_fires;
}

on_both_engines! {
    sqlite_workflows_keep_versions_and_start_each_node_once,
        postgres_workflows_keep_versions_and_start_each_node_once => workflows_and_their_runs;
}
