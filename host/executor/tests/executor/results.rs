//! Logs, results and the spool, refused requests, shutdown and metrics.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_log_is_read_in_pages() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("chatty"));
    assert!(f.run(&command(11, 1, &digest, "6000")).await.accepted);
    let mut offset = 0;
    let mut pages_while_running = 0;
    let mut lines = Vec::new();
    loop {
        let page: LogResponse = f
            .post(
                executor_paths::LOG,
                &json!({ "run_id": 1, "offset": offset, "limit": 400 }),
            )
            .await
            .json()
            .await
            .unwrap();
        assert!(page.lines.len() <= 400);
        if !page.finished && !page.lines.is_empty() {
            pages_while_running += 1;
        }
        offset = page.next_offset;
        lines.extend(page.lines);
        if page.finished {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        pages_while_running >= 2,
        "{pages_while_running} pages while running"
    );
    let result = f.admin.result_of(1, WAIT).await;
    assert_eq!(lines, result.log, "the pages add up to the final log");
    let unknown = f.post(executor_paths::LOG, &json!({ "run_id": 999 })).await;
    assert_eq!(unknown.status(), 404);
    f.executor.shutdown().await;
}

/// The logs of finished runs stay readable within a byte budget, not only
/// a run count: past it the oldest are forgotten, and the executor's
/// metric shows what is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_logs_are_kept_within_a_byte_budget() {
    const BUDGET: usize = 600 << 10;
    let f = fixture_with(|config| config.retained_log_bytes = BUDGET).await;
    let digest = f.admin.add_module(jobs::bytes("chatty"));
    // Each run's log is about 160 kB charged (2,000 short lines, each its
    // text plus the per-line overhead): three fit in the budget, the
    // fourth pushes out the first.
    for run in 1..=4 {
        assert!(f.run(&command(12, run, &digest, "2000")).await.accepted);
        f.admin.result_of(run, WAIT).await;
    }
    let fixture = &f;
    let readable = |run: u64| async move {
        fixture
            .post(executor_paths::LOG, &json!({ "run_id": run }))
            .await
            .status()
            .as_u16()
    };
    assert_eq!(readable(1).await, 404, "the oldest log was forgotten");
    assert_eq!(readable(4).await, 200, "the newest stays readable");
    let metrics = f.metrics().await;
    let kept: usize = metrics
        .lines()
        .find(|line| line.starts_with("cronbox_executor_retained_log_bytes "))
        .and_then(|line| line.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no retained_log_bytes in {metrics}"));
    assert!(kept > 0 && kept <= BUDGET, "{kept} bytes kept");
    f.executor.shutdown().await;
}

/// A run with a 4 MiB log: its result serialized is about 3.5 MiB, over
/// the stand-in admin's 2 MiB body limit.
fn big_log_command(run_id: u64, digest: &str) -> RunCommand {
    let mut big = command(13, run_id, digest, "60000");
    big.limits.log_bytes = 4 << 20;
    big
}

/// A result no admin accepts (413) is sent alone, then quarantined:
/// replaced by a small failure that says so; the results behind it are
/// delivered, not stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_every_admin_refuses_is_quarantined_and_the_rest_delivered() {
    let f = fixture_with(|config| config.max_result_bytes = 16 << 20).await;
    let chatty = f.admin.add_module(jobs::bytes("chatty"));
    let hello = f.admin.add_module(jobs::bytes("hello"));
    assert!(f.run(&big_log_command(1, &chatty)).await.accepted);
    // The same job, so it runs (and its result is spooled) after the
    // big one.
    assert!(f.run(&command(13, 2, &hello, "behind")).await.accepted);
    let behind = f.admin.result_of(2, WAIT).await;
    assert!(behind.outcome.is_success(), "{behind:?}");
    let replaced = f.admin.result_of(1, WAIT).await;
    let Outcome::Failed { message } = &replaced.outcome else {
        panic!("{replaced:?}")
    };
    assert!(
        message.contains("refused by every admin (413)"),
        "{message}"
    );
    assert!(replaced.log.is_empty());
    assert!(
        f.metrics()
            .await
            .contains("cronbox_executor_results_quarantined_total 1"),
        "{}",
        f.metrics().await
    );
    f.executor.shutdown().await;
}

/// With the default limit, the same run's result is cut to fit: the run
/// keeps its outcome, its log loses its tail behind a marker line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_result_is_cut_to_fit_and_delivered() {
    let f = fixture().await;
    let chatty = f.admin.add_module(jobs::bytes("chatty"));
    assert!(f.run(&big_log_command(1, &chatty)).await.accepted);
    let result = f.admin.result_of(1, WAIT).await;
    assert_eq!(
        result.outcome,
        Outcome::Success {
            message: "wrote 60000 lines".into()
        }
    );
    assert!(result.log_truncated);
    let marker = result.log.last().unwrap();
    assert!(marker.text.starts_with("log cut:"), "{}", marker.text);
    assert!(serde_json::to_vec(&result).unwrap().len() <= 3 << 19);
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_and_malformed_requests_are_refused_clearly() {
    let f = fixture_with(|config| config.max_request_bytes = 64 << 10).await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    let body = command(12, 1, &digest, "");

    let missing = f
        .http
        .post(f.url(executor_paths::RUN))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);
    let missing: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(missing["code"], "unauthorized");
    assert!(
        missing["message"]
            .as_str()
            .unwrap()
            .contains("missing token")
    );

    let wrong = f
        .http
        .post(f.url(executor_paths::RUN))
        .bearer_auth("not-the-token")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        wrong.json::<serde_json::Value>().await.unwrap()["message"],
        "wrong token"
    );

    let malformed = f
        .http
        .post(f.url(executor_paths::RUN))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    assert_eq!(
        malformed.json::<serde_json::Value>().await.unwrap()["code"],
        "malformed_json"
    );

    let unknown_strategy = f
        .post(executor_paths::RUN, &{
            let mut value = serde_json::to_value(&body).unwrap();
            value["block_strategy"] = json!("WHENEVER");
            value
        })
        .await;
    assert_eq!(unknown_strategy.status(), 422);
    let error: serde_json::Value = unknown_strategy.json().await.unwrap();
    assert_eq!(error["code"], "invalid_request");
    assert!(
        error["message"].as_str().unwrap().contains("WHENEVER"),
        "{error}"
    );

    let bad_digest = f
        .post(executor_paths::RUN, &command(12, 2, "abc", ""))
        .await;
    assert_eq!(bad_digest.status(), 400);
    let error: serde_json::Value = bad_digest.json().await.unwrap();
    assert_eq!(error["field"], "module_digest");

    let mut bad_shard = command(12, 3, &digest, "");
    bad_shard.trigger.shard_index = 3;
    bad_shard.trigger.shard_total = 3;
    let error: serde_json::Value = f
        .post(executor_paths::RUN, &bad_shard)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(error["field"], "trigger.shard_index");

    let mut huge = command(12, 4, &digest, "");
    huge.trigger.param = "x".repeat(100 << 10);
    let too_large = f.post(executor_paths::RUN, &huge).await;
    assert_eq!(too_large.status(), 413);
    assert_eq!(
        too_large.json::<serde_json::Value>().await.unwrap()["code"],
        "payload_too_large"
    );

    // None of the refused requests ran anything: a run of the same job
    // accepted after them (its runs go one at a time, their results in
    // order) is the only result.
    assert!(f.run(&command(12, 5, &digest, "")).await.accepted);
    f.admin.result_of(5, WAIT).await;
    let ran: Vec<u64> = f.admin.results().iter().map(|r| r.run_id).collect();
    assert_eq!(ran, [5]);
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_wait_in_the_spool_while_the_admin_is_down() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    // Load the module first: a down admin cannot serve it either.
    assert!(f.run(&command(14, 1, &digest, "warm")).await.accepted);
    f.admin.result_of(1, WAIT).await;
    f.admin.set_available(false);
    for run_id in 2..=6 {
        assert!(
            f.run(&command(14, run_id, &digest, "spooled"))
                .await
                .accepted
        );
    }
    until("the five results wait in the spool", || async {
        (f.executor.pending_results() >= 5).then_some(())
    })
    .await;
    assert_eq!(f.admin.results().len(), 1);
    f.admin.set_available(true);
    let results = f.admin.wait_for_results(6, WAIT).await;
    let mut ids: Vec<u64> = results.iter().map(|r| r.run_id).collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3, 4, 5, 6], "each result exactly once");
    assert!(
        f.metrics()
            .await
            .contains("cronbox_executor_callback_failures_total")
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_running_runs_and_reports_queued_ones() {
    let f = fixture_with(|config| config.shutdown_grace = Duration::from_secs(5)).await;
    let digest = f.admin.add_module(jobs::bytes("sleeper"));
    assert!(f.run(&command(15, 1, &digest, "300")).await.accepted);
    f.wait_until_running(15).await;
    assert!(f.run(&command(15, 2, &digest, "300")).await.accepted);
    let Fixture {
        admin, executor, ..
    } = f;
    executor.shutdown().await;
    let finished = admin.result_of(1, WAIT).await;
    assert_eq!(
        finished.outcome,
        Outcome::Success {
            message: "slept 300 ms".into()
        }
    );
    match admin.result_of(2, WAIT).await.outcome {
        Outcome::Rejected { reason } => assert!(reason.contains("shut down"), "{reason}"),
        other => panic!("expected rejected, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_runs_by_outcome() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    assert!(f.run(&command(16, 1, &digest, "")).await.accepted);
    f.admin.result_of(1, WAIT).await;
    let text = f.metrics().await;
    assert!(
        text.contains("cronbox_executor_runs_total{outcome=\"success\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("cronbox_executor_run_duration_seconds_count 1"),
        "{text}"
    );
    assert!(text.contains("cronbox_executor_pool_free_slots"), "{text}");
    for figure in [
        "cronbox_executor_idle_instances",
        "cronbox_executor_instances_evicted_total",
        "cronbox_executor_memory_budget_free_bytes",
    ] {
        assert!(text.contains(figure), "{figure} missing: {text}");
    }
    f.executor.shutdown().await;
}
