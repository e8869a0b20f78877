//! Runs across restarts and failures: written before a crash, state and retries, kills and logs, lost runs.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_written_before_a_crash_is_dispatched_after_restart() {
    let _turn = TESTS.turn();
    // The restarted admin takes the fire over once the lease the first
    // one wrote runs out: the shortest dispatch lease, 4 s, and 5 s more.
    let mut cluster = Cluster::start_with(&["--dispatch-lease", "4s"]).await;
    let hello = cluster.upload("hello").await;
    let at = chrono_like_rfc3339(3_500);
    let shot = cluster
        .create(
            json!({ "name": "survivor", "module_digest": hello, "schedule_type": "ONE_SHOT",
                        "schedule_conf": at, "param": "after the crash" }),
        )
        .await;
    cluster
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{shot}/start"),
            None,
        )
        .await;
    // Within the pre-read window the fire is written as a pending run...
    let deadline = Instant::now() + WAIT;
    loop {
        let runs = cluster.runs(shot).await;
        if runs.iter().any(|r| r.status == RunStatus::Pending) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fire was never written: {runs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ...then the admin dies before its instant.
    cluster.restart_admin(&[]).await;
    let runs = cluster.wait_runs(shot, 1).await;
    assert_eq!(runs.len(), 1, "recovered once, not fired again: {runs:?}");
    assert_eq!(runs[0].status, RunStatus::Success);
    assert_eq!(runs[0].message.as_deref(), Some("hello, after the crash"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_commits_on_success_only_and_retries_and_children_follow_results() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start().await;
    let counter = cluster.upload("counter").await;
    let burner = cluster.upload("fuel-burner").await;
    let hello = cluster.upload("hello").await;

    let count = cluster
        .create(json!({ "name": "count", "module_digest": counter }))
        .await;
    let first = cluster.trigger(count, json!({})).await;
    assert_eq!(
        cluster.run(first).await.message.as_deref(),
        Some("count=1 instance_runs=1")
    );
    let failing = cluster.trigger(count, json!({ "param": "fail" })).await;
    assert_eq!(cluster.run(failing).await.status, RunStatus::Failed);
    let third = cluster.trigger(count, json!({})).await;
    assert!(
        cluster
            .run(third)
            .await
            .message
            .unwrap()
            .starts_with("count=2 "),
        "the failed run's write was not committed"
    );

    let retried = cluster
        .create(
            json!({ "name": "retried", "module_digest": burner, "param": "not-a-number",
                        "retry_count": 2, "retry_interval_ms": 300 }),
        )
        .await;
    cluster.trigger(retried, json!({})).await;
    let runs = cluster.wait_runs(retried, 3).await;
    assert_eq!(runs.len(), 3, "{runs:?}");
    let kinds: Vec<&str> = runs.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["api", "retry", "retry"]);
    let attempts: Vec<i64> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [0, 1, 2]);
    let gap = |a: &Run, b: &Run| b.scheduled_at_ms - a.finished_at_ms.unwrap();
    assert!(
        gap(&runs[0], &runs[1]) >= 290,
        "first retry after the interval"
    );
    assert!(
        gap(&runs[1], &runs[2]) >= 590,
        "second retry after twice the interval (backoff)"
    );

    let child = cluster
        .create(json!({ "name": "child", "module_digest": hello, "param": "from parent" }))
        .await;
    let parent = cluster
        .create(json!({ "name": "parent", "module_digest": hello, "children": [child] }))
        .await;
    cluster.trigger(parent, json!({})).await;
    let child_runs = cluster.wait_runs(child, 1).await;
    assert_eq!(child_runs[0].kind, TriggerKind::Parent);
    assert_eq!(child_runs[0].message.as_deref(), Some("hello, from parent"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_killed_and_its_log_read_through_the_admin() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start().await;
    let runaway = cluster.upload("runaway").await;
    let job = cluster
        .create(json!({ "name": "spin", "module_digest": runaway }))
        .await;
    let run = cluster.trigger(job, json!({})).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, page) = cluster
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/runs/{run}/log?offset=0"),
                None,
            )
            .await;
        if status == 200
            && page["lines"]
                .as_array()
                .is_some_and(|lines| !lines.is_empty())
        {
            assert_eq!(page["lines"][0]["text"], "spinning forever");
            assert_eq!(page["finished"], false, "read live from the executor");
            break;
        }
        assert!(Instant::now() < deadline, "no live log: {page}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, killed) = cluster
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/runs/{run}/kill"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{killed}");
    assert_eq!(killed["killed"], true);
    let ended = cluster.run(run).await;
    assert_eq!(
        ended.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("killed")
    );
    let (_, stored) = cluster
        .call(
            reqwest::Method::GET,
            &format!("/api/v1/runs/{run}/log"),
            None,
        )
        .await;
    assert_eq!(stored["lines"][0]["text"], "spinning forever");
    assert_eq!(stored["finished"], true, "read from the store once ended");
    let (status, again) = cluster
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/runs/{run}/kill"),
            None,
        )
        .await;
    assert_eq!(status, 409, "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_lost_with_its_executor_is_failed_and_retried_elsewhere() {
    let _turn = TESTS.turn();
    let mut cluster = Cluster::start_with(&["--dead-after", "2s", "--lost-after", "1s"]).await;
    let sleeper = cluster.upload("sleeper").await;
    let job = cluster
        .create(
            json!({ "name": "lost", "module_digest": sleeper, "param": "3000", "retry_count": 1 }),
        )
        .await;
    let run = cluster.trigger(job, json!({})).await;
    // Awaited on the run's event stream, not polled.
    let mut follower = cluster.api.api.follow(run, 0).await.unwrap();
    let dispatched = async {
        loop {
            match follower.next().await.unwrap() {
                Some(cronbox_api::FollowEvent::Run(row)) if row.status == RunStatus::Dispatched => {
                    break;
                }
                Some(_) => {}
                None => panic!("the run's events ended before it was dispatched"),
            }
        }
    };
    tokio::time::timeout(WAIT, dispatched)
        .await
        .expect("never dispatched");
    drop(follower);
    drop(cluster.executor.take()); // SIGKILL the executor mid-run
    let _second = spawn_executor(
        cluster.admin_addr,
        &cluster.data.path().join("executor-2"),
        &[],
    );
    let lost = cluster.run(run).await;
    assert_eq!(lost.status, RunStatus::Failed);
    assert_eq!(
        lost.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("lost"),
        "{lost:?}"
    );
    let runs = cluster.wait_runs(job, 2).await;
    let retry = &runs[1];
    assert_eq!(retry.kind, TriggerKind::Retry);
    assert_eq!(retry.status, RunStatus::Success, "{retry:?}");
    assert_ne!(
        retry.executor, lost.executor,
        "retried on the live executor"
    );
}
