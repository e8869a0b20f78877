//! What users rely on: broadcast retries and quotas, FIX_DELAY chains, stops and kills, state conflicts, phases, trigger kinds, quota defaults.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_retry_reruns_only_the_failed_shard() {
    let _turn = TESTS.turn();
    let stack = Stack::start(2).await;
    let job = stack
        .job(
            "broadcast",
            "sharded",
            json!({ "route": "SHARDING_BROADCAST", "retry_count": 2, "param": "fail-shard=1" }),
        )
        .await;
    stack.trigger(job, json!({})).await;
    let runs = until("the failed shard is retried", || async {
        let runs = stack.runs(job).await;
        let retried = runs
            .iter()
            .any(|r| r.kind == TriggerKind::Retry && r.status == RunStatus::Success);
        (retried && runs.iter().all(ended)).then_some(runs)
    })
    .await;
    let mut seen: Vec<(String, i64, i64, i64, String)> = runs
        .iter()
        .map(|r| {
            (
                r.kind.to_string(),
                r.attempt,
                r.shard_index,
                r.shard_total,
                r.status.to_string(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("api".to_owned(), 0, 0, 2, "success".to_owned()),
            ("api".to_owned(), 0, 1, 2, "failed".to_owned()),
            ("retry".to_owned(), 1, 1, 2, "success".to_owned()),
        ],
        "one retry, of shard 1 of 2 only"
    );
}

/// A broadcast counts every shard it sends against the tenant's runs in
/// progress: with a quota of two, a fan-out to two executors fills it, and
/// the next fire is refused at once, not only once the admin rereads its
/// counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_counts_each_shard_against_the_running_runs_quota() {
    let _turn = TESTS.turn();
    let stack = Stack::start(2).await;
    let (status, answer) = stack
        .call(
            Method::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "running_runs": 2 })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let job = stack
        .job(
            "fan-out",
            "sleeper",
            json!({ "route": "SHARDING_BROADCAST", "param": "600000", "timeout_ms": 600_000 }),
        )
        .await;
    stack.trigger(job, json!({})).await;
    until("both shards are at their executors", || async {
        let runs = stack.runs(job).await;
        (runs
            .iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .count()
            == 2)
            .then_some(())
    })
    .await;
    let next = stack.trigger(job, json!({})).await;
    let refused = stack.ended(next).await;
    assert_eq!(
        refused.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{refused:?}"
    );
    assert!(refused.executor.is_none(), "never sent: {refused:?}");
    let (status, _) = stack
        .call(Method::POST, &format!("/api/v1/jobs/{job}/kill"), None)
        .await;
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_delay_carries_on_through_failed_dispatches_with_one_chain() {
    let _turn = TESTS.turn();
    // No executor yet: every dispatch fails.
    let mut stack = Stack::start(0).await;
    let job = stack
        .job(
            "delay",
            "hello",
            json!({ "schedule_type": "FIX_DELAY", "schedule_conf": "1" }),
        )
        .await;
    let (status, _) = stack
        .call(Method::POST, &format!("/api/v1/jobs/{job}/start"), None)
        .await;
    assert_eq!(status, 200);
    until("two fires fail for want of an executor", || async {
        let runs = stack.runs(job).await;
        (runs
            .iter()
            .filter(|r| r.status == RunStatus::Failed && r.kind == TriggerKind::Schedule)
            .count()
            >= 2)
            .then_some(())
    })
    .await;
    stack.add_executor().await;
    // A manual run in between must not start a second chain.
    let manual = stack.trigger(job, json!({ "kind": "manual" })).await;
    assert_eq!(stack.ended(manual).await.kind, TriggerKind::Manual);
    let runs = until("three scheduled runs succeed", || async {
        let runs = stack.runs(job).await;
        (runs
            .iter()
            .filter(|r| r.status == RunStatus::Success && r.kind == TriggerKind::Schedule)
            .count()
            >= 3)
            .then_some(runs)
    })
    .await;
    let mut chain: Vec<(i64, i64)> = runs
        .iter()
        .filter(|r| r.kind == TriggerKind::Schedule && ended(r))
        .map(|r| (r.scheduled_at_ms, r.finished_at_ms.unwrap()))
        .collect();
    chain.sort();
    for pair in chain.windows(2) {
        let ((_, finished), (next, _)) = (pair[0], pair[1]);
        assert!(
            next >= finished + 1000,
            "each fire follows the previous one's end by the delay: {chain:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_job_cancels_its_waiting_fires_without_alarms() {
    let _turn = TESTS.turn();
    let stack = Stack::start(1).await;
    let webhook = cronbox_tests::WebhookReceiver::start(200).await;
    let job = stack
        .job(
            "every-second",
            "hello",
            json!({
                "schedule_type": "CRON", "schedule_conf": "* * * * * ?",
                "alarm_url": webhook.url(), "retry_count": 3,
            }),
        )
        .await;
    stack
        .call(Method::POST, &format!("/api/v1/jobs/{job}/start"), None)
        .await;
    // The pre-read writes the next five seconds of fires ahead.
    until("fires wait ahead", || async {
        let pending = stack
            .runs(job)
            .await
            .iter()
            .filter(|r| r.status == RunStatus::Pending)
            .count();
        (pending >= 3).then_some(())
    })
    .await;
    let (status, stopped) = stack
        .call(Method::POST, &format!("/api/v1/jobs/{job}/stop"), None)
        .await;
    assert_eq!((status, &stopped["enabled"]), (200, &json!(false)));
    let runs = until("every run has ended", || async {
        let runs = stack.runs(job).await;
        runs.iter().all(ended).then_some(runs)
    })
    .await;
    let cancelled: Vec<&Run> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Cancelled)
        .collect();
    assert!(cancelled.len() >= 3, "{runs:?}");
    for run in &runs {
        assert_ne!(run.status, RunStatus::Failed, "{run:?}");
        assert_eq!(run.alarm_status, AlarmState::None, "{run:?}");
    }
    for run in cancelled {
        assert_eq!(
            run.outcome.map(cronbox_api::RunOutcome::as_str),
            Some("cancelled")
        );
        assert_eq!(run.kind, TriggerKind::Schedule);
    }
    assert!(
        stack
            .runs(job)
            .await
            .iter()
            .all(|r| r.kind != TriggerKind::Retry),
        "a cancelled fire is not retried"
    );
    assert!(webhook.bodies().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_executors_writing_one_key_lose_no_update() {
    let _turn = TESTS.turn();
    let stack = Stack::start(2).await;
    let job = stack
        .job(
            "counter",
            "counter",
            json!({ "route": "ROUND", "retry_count": 30 }),
        )
        .await;
    // Ten runs back to back: each is dispatched with the state read then,
    // so runs on the two executors start from the same count.
    for _ in 0..10 {
        stack.trigger(job, json!({})).await;
    }
    let runs = until("ten runs have counted", || async {
        let runs = stack.runs(job).await;
        let successes = runs
            .iter()
            .filter(|r| r.status == RunStatus::Success)
            .count();
        (successes >= 10 && runs.iter().all(ended)).then_some(runs)
    })
    .await;
    let successes = runs
        .iter()
        .filter(|r| r.status == RunStatus::Success)
        .count();
    let conflicts = runs
        .iter()
        .filter(|r| r.outcome.map(cronbox_api::RunOutcome::as_str) == Some("state_conflict"))
        .count();
    let executors: std::collections::HashSet<&str> =
        runs.iter().filter_map(|r| r.executor.as_deref()).collect();
    assert_eq!(executors.len(), 2, "both executors ran the job");
    let (_, state) = stack
        .call(Method::GET, &format!("/api/v1/jobs/{job}/state"), None)
        .await;
    assert_eq!(
        state["state"]["count"],
        json!(successes.to_string()),
        "every successful run's increment is in the count ({conflicts} conflicts retried)"
    );
    assert_eq!(successes, 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_name_known_groups_and_edits_keep_a_fixed_rate_phase() {
    let _turn = TESTS.turn();
    let stack = Stack::start(0).await;
    let (_, uploaded) = stack.upload("", cronbox_example_jobs::bytes("hello")).await;
    let digest = uploaded["digest"].clone();
    let spec = json!({
        "name": "rate", "module_digest": digest, "group": "nowhere",
        "schedule_type": "FIX_RATE", "schedule_conf": "3600",
    });
    let (status, refused) = stack
        .call(Method::POST, "/api/v1/jobs", Some(spec.clone()))
        .await;
    assert_eq!((status, &refused["field"]), (422, &json!("group")));
    assert!(
        refused["message"].as_str().unwrap().contains("nowhere"),
        "{refused}"
    );
    let (_, jobs) = stack.call(Method::GET, "/api/v1/jobs", None).await;
    assert_eq!(jobs, json!([]), "nothing stored");

    // The default group exists from the start.
    let mut spec = spec;
    spec["group"] = json!("default");
    let (status, job) = stack
        .call(Method::POST, "/api/v1/jobs", Some(spec.clone()))
        .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();
    let (_, started) = stack
        .call(Method::POST, &format!("/api/v1/jobs/{id}/start"), None)
        .await;
    let next = started["next_fire_at_ms"].as_i64().unwrap();

    // Anything but the schedule changes: the phase stays.
    spec["param"] = json!("edited");
    let (status, updated) = stack
        .call(
            Method::PUT,
            &format!("/api/v1/jobs/{id}"),
            Some(spec.clone()),
        )
        .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["next_fire_at_ms"], json!(next));
    // An update may not move the job to an unknown group either.
    spec["group"] = json!("nowhere");
    let (status, refused) = stack
        .call(
            Method::PUT,
            &format!("/api/v1/jobs/{id}"),
            Some(spec.clone()),
        )
        .await;
    assert_eq!((status, &refused["field"]), (422, &json!("group")));
    // The schedule changes: planned again.
    spec["group"] = json!("default");
    spec["schedule_conf"] = json!("1800");
    let (_, updated) = stack
        .call(Method::PUT, &format!("/api/v1/jobs/{id}"), Some(spec))
        .await;
    assert_ne!(updated["next_fire_at_ms"], json!(next));
    assert!(updated["next_fire_at_ms"].as_i64().unwrap() < next);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_job_stops_its_runs_queued_runs_and_pending_retries() {
    let _turn = TESTS.turn();
    let stack = Stack::start(1).await;
    let sleeper = stack
        .job(
            "sleeper",
            "sleeper",
            json!({ "param": "60000", "retry_count": 3 }),
        )
        .await;
    let first = stack.trigger(sleeper, json!({})).await;
    let second = stack.trigger(sleeper, json!({})).await;
    until("both are at the executor", || async {
        let runs = stack.runs(sleeper).await;
        runs.iter()
            .all(|r| r.status == RunStatus::Dispatched)
            .then_some(())
    })
    .await;
    let panicker = stack
        .job(
            "panicker",
            "panicker",
            json!({ "retry_count": 3, "retry_interval_ms": 600000 }),
        )
        .await;
    let failed = stack.trigger(panicker, json!({})).await;
    assert_eq!(stack.ended(failed).await.status, RunStatus::Failed);
    let retry = until("a retry waits ten minutes ahead", || async {
        let runs = stack.runs(panicker).await;
        runs.iter()
            .find(|r| r.kind == TriggerKind::Retry && r.status == RunStatus::Pending)
            .map(|r| r.id)
    })
    .await;

    let said = stack.cli(&["kill", "--job", &sleeper.to_string()]);
    assert!(said.contains("2 runs killed"), "{said}");
    for run in [first, second] {
        let run = stack.ended(run).await;
        assert_eq!(
            (
                run.outcome.map(cronbox_api::RunOutcome::as_str),
                run.alarm_status
            ),
            (Some("killed"), AlarmState::None),
            "{run:?}"
        );
    }
    let said = stack.cli(&["kill", "--job", &panicker.to_string()]);
    assert!(said.contains("1 waiting runs cancelled"), "{said}");
    assert_eq!(stack.run(retry).await.status, RunStatus::Cancelled);
    // Killed runs are not retried.
    assert!(
        stack
            .runs(sleeper)
            .await
            .iter()
            .all(|r| r.kind != TriggerKind::Retry),
        "{:?}",
        stack.runs(sleeper).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_say_who_started_them_and_jobs_may_ask_for_fresh_instances() {
    let _turn = TESTS.turn();
    let stack = Stack::start(1).await;
    let warm = stack.job("warm", "counter", json!({})).await;
    let fresh = stack
        .job("fresh", "counter", json!({ "fresh_instance": true }))
        .await;
    // Through the API: `api`; through the CLI, by a person: `manual`.
    let by_api = stack.trigger(warm, json!({})).await;
    assert_eq!(stack.ended(by_api).await.kind, TriggerKind::Api);
    let said = stack.cli(&["job", "trigger", &warm.to_string()]);
    let by_person: RunId = said.trim().parse().unwrap();
    let run = stack.ended(by_person).await;
    assert_eq!(run.kind, TriggerKind::Manual);
    assert!(
        run.message.as_deref().unwrap().ends_with("instance_runs=2"),
        "a warm instance served both: {run:?}"
    );
    for _ in 0..2 {
        let run = stack.trigger(fresh, json!({})).await;
        let run = stack.ended(run).await;
        assert!(
            run.message.as_deref().unwrap().ends_with("instance_runs=1"),
            "a new instance for every run: {run:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_defaults_come_from_flags_and_the_cli_changes_a_tenants() {
    let _turn = TESTS.turn();
    let stack = Stack::start_with(
        0,
        &[
            "--quota-default",
            "min_interval_ms=1m",
            "--quota-default",
            "jobs=7",
        ],
    )
    .await;
    let row = |table: &str, quota: &str| -> Vec<String> {
        table
            .lines()
            .find(|line| line.split_whitespace().next() == Some(quota))
            .unwrap_or_else(|| panic!("no {quota} in {table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let shown = stack.cli(&["quota", "show"]);
    assert_eq!(
        row(&shown, "min_interval_ms"),
        ["min_interval_ms", "60000", "default", "-"]
    );
    assert_eq!(row(&shown, "jobs"), ["jobs", "7", "default", "0"]);

    let set = stack.cli(&["quota", "set", "default", "jobs=2", "state_bytes=1KiB"]);
    assert_eq!(row(&set, "jobs"), ["jobs", "2", "tenant", "0"]);
    assert_eq!(
        row(&set, "state_bytes"),
        ["state_bytes", "1024", "tenant", "0"]
    );
    // One changed, the other kept.
    let set = stack.cli(&["quota", "set", "default", "jobs=default"]);
    assert_eq!(row(&set, "jobs"), ["jobs", "7", "default", "0"]);
    assert_eq!(
        row(&set, "state_bytes"),
        ["state_bytes", "1024", "tenant", "0"]
    );
    let json: Value = serde_json::from_str(&stack.cli(&["quota", "show", "--json"])).unwrap();
    assert_eq!(json["tenant"], "default");

    for (bad, says) in [
        ("jobz=1", "jobz"),
        ("jobs=lots", "jobs"),
        ("state_bytes=huge", "state_bytes"),
        ("jobs", "NAME=VALUE"),
    ] {
        let output = stack.try_cli(&["quota", "set", "default", bad]);
        assert!(!output.status.success(), "{bad} refused");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{bad}: {stderr}");
    }
}
