//! What follows a run across admins and executors: a run lost with its
//! executor and retried elsewhere, alarms and retries sent once by racing
//! admins, workflows (a fanned-out node among them) carried on by the
//! admin that survives.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_killed_executor_is_lost_and_retried_on_another() {
    let _turn = TESTS.turn();
    let mut cluster = Cluster::start(&[&[], &[]], 2).await;
    cluster.push("sleeper", "sleeper").await;
    let job = cluster
        .create(
            0,
            json!({ "name": "nap", "module": "sleeper", "param": "6000",
                    "retry_count": 1, "retry_interval_ms": 100 }),
        )
        .await;
    let run = cluster.trigger(1, job).await;
    let store = Store::connect(&cluster.url).await.unwrap();
    let executor = until_within(WAIT, "the run is dispatched", || async {
        let row = store.run(run).await.unwrap().unwrap();
        row.dispatched_at_ms.and(row.executor)
    })
    .await;
    let index = cluster
        .executor_urls
        .iter()
        .position(|url| *url == executor)
        .unwrap_or_else(|| panic!("no executor process serves {executor}"));
    cluster.executors[index].as_mut().unwrap().kill();
    let (first, retry) = until_within(WAIT, "the run and its retry end", || async {
        let runs = store.runs_of_job(job).await.unwrap();
        let ended = runs
            .iter()
            .all(|r| r.status == RunStatus::Success || r.status == RunStatus::Failed);
        (runs.len() == 2 && ended).then(|| (runs[0].clone(), runs[1].clone()))
    })
    .await;
    assert_eq!(
        (
            first.status.as_str(),
            first.outcome.map(cronbox_api::RunOutcome::as_str)
        ),
        ("failed", Some("lost")),
        "{first:?}"
    );
    assert_eq!((retry.kind.as_str(), retry.attempt), ("retry", 1));
    assert_eq!(retry.status.as_str(), "success", "{retry:?}");
    assert_ne!(
        retry.executor, first.executor,
        "retried on the other executor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_admins_send_each_alarm_and_retry_once() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start(&[&[], &[]], 1).await;
    let receiver = WebhookReceiver::start(200).await;
    cluster.push("burner", "fuel-burner").await;
    let job = cluster
        .create(
            0,
            json!({ "name": "failing", "module": "burner", "param": "not-a-number",
                    "retry_count": 2, "retry_interval_ms": 200, "alarm_url": receiver.url() }),
        )
        .await;
    for i in 0..5 {
        cluster.trigger(i % 2, job).await;
    }
    let store = Store::connect(&cluster.url).await.unwrap();
    let runs = until_within(WAIT, "every run ended and alarmed", || async {
        let runs = store.runs_of_job(job).await.unwrap();
        let settled = runs.len() >= 15
            && runs.iter().all(|r| {
                r.status == RunStatus::Failed
                    && r.alarm_status != AlarmState::Due
                    && r.alarm_status != AlarmState::Sending
            });
        settled.then_some(runs)
    })
    .await;
    // Every run ended and alarmed: every result was handled (a retry is
    // written by the one admin that recorded the failure it follows, right
    // after), so a duplicate would show now.
    let runs_now = store.runs_of_job(job).await.unwrap();
    assert_eq!(runs_now.len(), 15, "5 runs and 2 retries each, no more");
    let attempts: Vec<i64> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(
        attempts.iter().filter(|a| **a == 2).count(),
        5,
        "{attempts:?}"
    );
    let mut alarmed: Vec<i64> = receiver
        .bodies()
        .iter()
        .map(|alarm| alarm["run"]["id"].as_i64().unwrap())
        .collect();
    alarmed.sort();
    let mut failed: Vec<i64> = runs.iter().map(|r| r.id.0).collect();
    failed.sort();
    assert_eq!(alarmed, failed, "one alarm per failed run");
    assert!(runs.iter().all(|r| r.alarm_status == AlarmState::Sent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_outlive_a_killed_admin_and_start_each_node_once() {
    let _turn = TESTS.turn();
    let mut cluster = Cluster::start(&[&[], &[]], 1).await;
    cluster.push("sleeper", "sleeper").await;
    cluster.push("hello", "hello").await;
    let nap = cluster
        .create(
            0,
            json!({ "name": "nap", "module": "sleeper", "param": "1500",
                    "block_strategy": "CONCURRENT", "max_concurrency": 10 }),
        )
        .await;
    let mut greeters = Vec::new();
    let each = cluster
        .create(0, json!({ "name": "each", "module": "hello" }))
        .await;
    for name in ["left", "right", "join"] {
        greeters.push(
            cluster
                .create(0, json!({ "name": name, "module": "hello" }))
                .await,
        );
    }
    let diamond: cronbox_api::WorkflowSpec = serde_json::from_value(json!({
        "nodes": [
            { "name": "nap", "job": "nap" },
            { "name": "left", "job": "left", "param": "L" },
            { "name": "right", "job": "right", "param": "R" },
            { "name": "join", "job": "join",
              "param": "{{ nodes.left.output }} and {{ nodes.right.output }}" },
            { "name": "each", "job": "each", "for_each": "input.items", "concurrency": 2 }
        ],
        "edges": [
            { "from": "nap", "to": "left" }, { "from": "nap", "to": "right" },
            { "from": "left", "to": "join" }, { "from": "right", "to": "join" },
            { "from": "nap", "to": "each" }
        ]
    }))
    .unwrap();
    cluster
        .api(0)
        .put_workflow("diamond", &diamond)
        .await
        .unwrap();
    // Ten runs started through both admins; then the first admin dies
    // while their naps run (side by side, not queued one after another),
    // and the other carries every run to its end.
    let mut runs = Vec::new();
    for i in 0..10 {
        let started = cluster
            .api(i % 2)
            .start_workflow_run("diamond", Some(r#"{"items": ["a", "b", "c", "d", "e"]}"#))
            .await
            .unwrap();
        runs.push(started.id);
    }
    cluster.admins[0].process.take().unwrap().kill();
    for id in &runs {
        let run = cluster.workflow_ended(1, *id).await;
        assert_eq!(
            run.status,
            cronbox_api::WorkflowRunStatus::Succeeded,
            "{run:#?}"
        );
        assert_eq!(
            run.nodes[3].input.as_deref(),
            Some("hello, L and hello, R"),
            "{run:#?}"
        );
        assert_eq!(
            run.nodes[4].output.as_deref(),
            Some(r#"["hello, a","hello, b","hello, c","hello, d","hello, e"]"#),
            "{run:#?}"
        );
    }
    // Each node ran once per workflow run, whichever admin advanced it.
    let store = Store::connect(&cluster.url).await.unwrap();
    for job in std::iter::once(nap).chain(greeters) {
        let ran = store.runs_of_job(job).await.unwrap();
        assert_eq!(ran.len(), runs.len(), "job {job}: {ran:?}");
        assert!(
            ran.iter().all(|run| run.status == RunStatus::Success),
            "{ran:?}"
        );
    }
    // Each element of the fanned-out node ran once per workflow run.
    let ran = store.runs_of_job(each).await.unwrap();
    assert_eq!(ran.len(), 5 * runs.len(), "{ran:?}");
}
