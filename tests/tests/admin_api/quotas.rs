//! Tenants' quotas: refused at save naming the quota, runs past a run-time quota.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saving_past_a_quota_is_refused_naming_it_and_usage_is_readable() {
    // The operator's default: a job may fire at most once a minute.
    let config = SchedulerConfig {
        quota_defaults: cronbox_admin::quotas::QuotaDefaults::default()
            .with(&serde_json::from_value(json!({ "min_interval_ms": 60_000 })).unwrap()),
        ..SchedulerConfig::default()
    };
    let stack = stack(config).await;
    let token = tenant(&stack, "team-q").await;
    use reqwest::Method as M;

    // The tenant reads its own quotas, not another's, and cannot set them.
    let path = "/api/v1/tenants/team-q/quotas";
    let (status, report) = stack.call_as(&token, M::GET, path, None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(quota(&report, "min_interval_ms")["limit"], 60_000);
    assert_eq!(quota(&report, "min_interval_ms")["own"], false);
    assert_eq!(quota(&report, "jobs")["used"], 0);
    let (status, _) = stack
        .call_as(&token, M::GET, "/api/v1/tenants/default/quotas", None)
        .await;
    assert_eq!(status, 404);
    let (status, answer) = stack
        .call_as(&token, M::PUT, path, Some(json!({ "jobs": 100 })))
        .await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = stack.call(M::PUT, path, Some(json!({ "jobz": 1 }))).await;
    assert_eq!(status, 400, "an unknown quota is named: {answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("jobz"),
        "{answer}"
    );

    // One job, one module name, room for hello's bytes and a little more.
    let hello = jobs::bytes("hello");
    let report = set_quotas(
        &stack,
        "team-q",
        json!({ "jobs": 1, "modules": 1, "module_bytes": hello.len() + 1000 }),
    )
    .await;
    assert_eq!(quota(&report, "jobs")["own"], true);
    assert_eq!(quota(&report, "jobs")["limit"], 1);
    let (status, pushed) = stack.upload_as(&token, "?name=hello", hello.clone()).await;
    assert_eq!(status, 201, "{pushed}");
    // A new version of a module it has: not a new module, not new bytes.
    let (status, pushed) = stack.upload_as(&token, "?name=hello", hello.clone()).await;
    assert_eq!(status, 201, "{pushed}");
    let (status, answer) = stack.upload_as(&token, "?name=other", hello.clone()).await;
    assert_quota_refusal(status, &answer, "modules");
    let (status, answer) = stack.upload_as(&token, "", jobs::bytes("counter")).await;
    assert_quota_refusal(status, &answer, "module_bytes");

    // Schedules firing more often than the shortest interval, at create
    // and at update (cron checked over its next fires: the 0 and 30 s
    // fires are 30 s apart).
    let create = |spec: Value| {
        let token = token.clone();
        let stack = &stack;
        async move {
            stack
                .call_as(&token, M::POST, "/api/v1/jobs", Some(spec))
                .await
        }
    };
    for schedule in [
        json!({ "schedule_type": "CRON", "schedule_conf": "0,30 * * * * ?" }),
        json!({ "schedule_type": "FIX_RATE", "schedule_conf": "10" }),
    ] {
        let mut spec = json!({ "name": "often", "module": "hello" });
        spec.as_object_mut()
            .unwrap()
            .extend(schedule.as_object().unwrap().clone());
        let (status, answer) = create(spec).await;
        assert_quota_refusal(status, &answer, "min_interval_ms");
    }
    let (status, job) = create(json!({
        "name": "minutely", "module": "hello",
        "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
    }))
    .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();
    let (status, answer) = stack
        .call_as(
            &token,
            M::PUT,
            &format!("/api/v1/jobs/{id}"),
            Some(json!({
                "name": "minutely", "module": "hello",
                "schedule_type": "FIX_RATE", "schedule_conf": "1",
            })),
        )
        .await;
    assert_quota_refusal(status, &answer, "min_interval_ms");
    let (status, answer) = create(json!({ "name": "second", "module": "hello" })).await;
    assert_quota_refusal(status, &answer, "jobs");

    // Usage as the tenant reads it, and as metrics.
    let (_, report) = stack.call_as(&token, M::GET, path, None).await;
    assert_eq!(quota(&report, "jobs")["used"], 1);
    assert_eq!(quota(&report, "modules")["used"], 1);
    assert_eq!(quota(&report, "module_bytes")["used"], hello.len());
    assert_eq!(quota(&report, "executor_instances")["used"], Value::Null);
    let metrics = stack.api.metrics().await;
    for line in [
        "cronbox_admin_tenant_quota_used{tenant=\"team-q\",quota=\"jobs\"} 1".to_owned(),
        "cronbox_admin_tenant_quota_limit{tenant=\"team-q\",quota=\"jobs\"} 1".to_owned(),
        format!(
            "cronbox_admin_tenant_quota_used{{tenant=\"team-q\",quota=\"module_bytes\"}} {}",
            hello.len()
        ),
    ] {
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }

    // Back to the defaults: a second job is accepted.
    set_quotas(&stack, "team-q", json!({})).await;
    let (status, job) = create(json!({ "name": "second", "module": "hello" })).await;
    assert_eq!(status, 201, "{job}");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_past_a_run_time_quota_end_quota_exceeded() {
    let stack = stack(SchedulerConfig::default()).await;
    let token = tenant(&stack, "team-r").await;
    let counter = stack.job_as(&token, "counter", "counter", json!({})).await;
    let run = stack.run_to_end_as(&token, counter, "").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(job_state(&stack, counter).await, json!({ "count": "1" }));

    // State bytes: "count" and one digit are 6 bytes; the counter may go
    // on to 9 (the same size), and "10" would make 7: refused, with its
    // changes dropped.
    set_quotas(&stack, "team-r", json!({ "state_bytes": 6 })).await;
    for count in 2..=9 {
        let run = stack.run_to_end_as(&token, counter, "").await;
        assert_eq!(run.status, RunStatus::Success, "count {count}: {run:?}");
    }
    let run = stack.run_to_end_as(&token, counter, "").await;
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded")
    );
    let message = run.message.unwrap();
    assert!(message.contains("state_bytes"), "{message}");
    assert_eq!(job_state(&stack, counter).await, json!({ "count": "9" }));

    // Runs in progress across the cluster: none allowed.
    set_quotas(&stack, "team-r", json!({ "running_runs": 0 })).await;
    let run = stack.run_to_end_as(&token, counter, "").await;
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{run:?}"
    );
    assert!(run.executor.is_none(), "never sent: {run:?}");
    assert!(run.message.unwrap().contains("running_runs"));

    // Run time per day: a sleeper's 20 ms are past a limit of 1 ms.
    set_quotas(&stack, "team-r", json!({})).await;
    let sleeper = stack.job_as(&token, "sleeper", "sleeper", json!({})).await;
    let run = stack.run_to_end_as(&token, sleeper, "20").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    set_quotas(&stack, "team-r", json!({ "run_ms_per_day": 1 })).await;
    let run = stack.run_to_end_as(&token, sleeper, "20").await;
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{run:?}"
    );
    assert!(run.message.unwrap().contains("run_ms_per_day"));

    // Log bytes per day: a chatty run's log is cut at what is left, and
    // the next run is not dispatched.
    let chatty = stack.job_as(&token, "chatty", "chatty", json!({})).await;
    let (_, report) = stack.get("/api/v1/tenants/team-r/quotas").await;
    let logged = quota(&report, "log_bytes_per_day")["used"]
        .as_u64()
        .unwrap();
    assert!(logged > 0, "{report}");
    set_quotas(
        &stack,
        "team-r",
        json!({ "log_bytes_per_day": logged + 4000 }),
    )
    .await;
    let run = stack.run_to_end_as(&token, chatty, "1000").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    let (_, log) = stack.get(&format!("/api/v1/runs/{}/log", run.id)).await;
    let lines = log["lines"].as_array().unwrap();
    assert!(lines.len() < 1000, "cut: {} lines", lines.len());
    let marker = lines.last().unwrap()["text"].as_str().unwrap();
    assert!(marker.contains("log_bytes_per_day"), "{marker}");
    let run = stack.run_to_end_as(&token, chatty, "1").await;
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{run:?}"
    );
    assert!(run.message.unwrap().contains("log_bytes_per_day"));

    let metrics = stack.api.metrics().await;
    assert!(
        metrics.contains("cronbox_admin_runs_total{outcome=\"quota_exceeded\"}"),
        "{metrics}"
    );
    stack.shutdown().await;
}

/// What a tenant's workflows and backfills store is bounded like jobs:
/// past `workflow_runs` a run is refused (403 naming the quota), a node
/// fanning out past `workflow_items` fails saying so, a backfill past
/// `backfill_runs` is refused; each quota's use is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflow_runs_elements_and_backfill_runs_are_counted_and_bounded() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let token = tenant(&stack, "team-w").await;
    set_quotas(
        &stack,
        "team-w",
        json!({ "workflow_runs": 2, "workflow_items": 5, "backfill_runs": 3 }),
    )
    .await;
    let nap = stack
        .job_as(
            &token,
            "nap",
            "sleeper",
            json!({ "block_strategy": "CONCURRENT", "max_concurrency": 10 }),
        )
        .await;
    let flow = json!({
        "nodes": [{ "name": "each", "job": "nap", "for_each": "input.items", "param": "60000" }]
    });
    let (status, body) = stack
        .call_as(&token, M::PUT, "/api/v1/workflows/fan", Some(flow))
        .await;
    assert_eq!(status, 200, "{body}");
    let start = |items: usize| {
        let input = json!({ "items": vec![1; items] }).to_string();
        let token = token.clone();
        let stack = &stack;
        async move {
            stack
                .call_as(
                    &token,
                    M::POST,
                    "/api/v1/workflows/fan/runs",
                    Some(json!({ "input": input })),
                )
                .await
        }
    };
    // Six elements: past the five the tenant may hold; the node fails.
    let (status, over) = start(6).await;
    assert_eq!(status, 201, "{over}");
    let failed = until("the over-quota node fails", || async {
        let run = stack
            .api
            .api
            .workflow_run(over["id"].as_i64()?)
            .await
            .ok()?;
        (run.status == cronbox_api::WorkflowRunStatus::Failed).then_some(run)
    })
    .await;
    let message = failed.nodes[0].message.clone().unwrap_or_default();
    assert!(message.contains("workflow_items"), "{failed:?}");
    // Two runs of three elements each: the second's elements pass five.
    let (status, first) = start(3).await;
    assert_eq!(status, 201, "{first}");
    let (status, second) = start(1).await;
    assert_eq!(status, 201, "{second}");
    // A third run while two are in progress is refused.
    let (status, answer) = start(1).await;
    assert_quota_refusal(status, &answer, "workflow_runs");
    let (_, report) = stack
        .call_as(&token, M::GET, "/api/v1/tenants/team-w/quotas", None)
        .await;
    assert_eq!(quota(&report, "workflow_runs")["used"], 2, "{report}");
    assert_eq!(quota(&report, "workflow_items")["used"], 4, "{report}");

    // A backfill of five past fires, past the three allowed.
    let every_minute = stack
        .job_as(
            &token,
            "minutely",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * * ?" }),
        )
        .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (status, answer) = stack
        .call_as(
            &token,
            M::POST,
            &format!("/api/v1/jobs/{every_minute}/backfill"),
            Some(json!({ "from_ms": now - 5 * 60_000 - 30_000, "to_ms": now - 30_000 })),
        )
        .await;
    assert_quota_refusal(status, &answer, "backfill_runs");
    // The naps are stopped with their runs.
    for run in [&first, &second] {
        stack
            .api
            .api
            .cancel_workflow_run(run["id"].as_i64().unwrap())
            .await
            .unwrap();
    }
    assert!(!stack.api.runs(nap).await.is_empty());
    stack.shutdown().await;
}
