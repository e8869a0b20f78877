//! Runs: listings by filter and page, daily reports, retention, the dashboard.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_listed_by_filter_and_page() {
    let stack = stack(SchedulerConfig::default()).await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let burner = stack.job("burner", "fuel-burner", json!({})).await;
    for i in 0..5 {
        stack.run_to_end(hello, &format!("n{i}")).await;
    }
    let failed = stack.run_to_end(burner, "not-a-number").await;
    assert_eq!(failed.status, RunStatus::Failed);

    let (status, page) = stack
        .get(&format!("/api/v1/runs?job={hello}&limit=2"))
        .await;
    assert_eq!(status, 200, "{page}");
    let ids = |page: &Value| -> Vec<i64> {
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["id"].as_i64().unwrap())
            .collect()
    };
    let mut seen = ids(&page);
    assert_eq!(seen.len(), 2);
    assert!(seen[0] > seen[1], "newest first");
    let mut cursor = page["next_before"].as_i64();
    while let Some(before) = cursor {
        let (_, page) = stack
            .get(&format!("/api/v1/runs?job={hello}&limit=2&before={before}"))
            .await;
        seen.extend(ids(&page));
        cursor = page["next_before"].as_i64();
    }
    assert_eq!(seen.len(), 5, "every hello run once across pages: {seen:?}");

    // A job's runs, oldest first, a page at a time.
    let (_, first) = stack
        .get(&format!("/api/v1/jobs/{hello}/runs?limit=3"))
        .await;
    let first: Vec<i64> = first
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(first.len(), 3);
    assert!(
        first.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {first:?}"
    );
    let (_, rest) = stack
        .get(&format!("/api/v1/jobs/{hello}/runs?after={}", first[2]))
        .await;
    assert_eq!(
        rest.as_array().unwrap().len(),
        2,
        "the two after the cursor: {rest}"
    );
    let (status, error) = stack
        .get(&format!("/api/v1/jobs/{hello}/runs?limit=1001"))
        .await;
    assert_eq!((status, &error["field"]), (400, &json!("limit")), "{error}");

    let (_, failures) = stack.get("/api/v1/runs?status=failed").await;
    assert_eq!(ids(&failures), [failed.id.0]);
    let scheduled = failed.scheduled_at_ms;
    let (_, window) = stack
        .get(&format!(
            "/api/v1/runs?from_ms={scheduled}&to_ms={}",
            scheduled + 1
        ))
        .await;
    assert_eq!(ids(&window), [failed.id.0]);

    // Past 50,000 newer runs, a page filtered by status reads those and
    // stops: an empty page whose cursor leads on to the failure.
    let pool = stack.admin_database().await;
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000) \
         INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, param, status, module_digest, \
         module_sha, created_at_ms) SELECT tenant, job_id, kind, scheduled_at_ms, param, status, \
         module_digest, module_sha, created_at_ms FROM n, (SELECT * FROM run WHERE job_id = $1 LIMIT 1)",
    )
    .bind(hello.0)
    .execute(&pool)
    .await
    .unwrap();
    let (_, page) = stack.get("/api/v1/runs?status=failed").await;
    assert_eq!(ids(&page), [] as [i64; 0], "{page}");
    let before = page["next_before"]
        .as_i64()
        .expect("a cursor past what was read");
    let (_, page) = stack
        .get(&format!("/api/v1/runs?status=failed&before={before}"))
        .await;
    assert_eq!(ids(&page), [failed.id.0]);
    assert_eq!(page["next_before"], Value::Null, "{page}");

    for (query, field) in [
        ("status=exploded", "status"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("job=seven", "job"),
        ("colour=red", "colour"),
    ] {
        let (status, error) = stack.get(&format!("/api/v1/runs?{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
        assert_eq!(error["field"], field, "{query}: {error}");
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_reports_count_each_day() {
    let stack = stack(SchedulerConfig {
        housekeeping_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    })
    .await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let burner = stack.job("burner", "fuel-burner", json!({})).await;
    for _ in 0..3 {
        stack.run_to_end(hello, "x").await;
    }
    stack.run_to_end(burner, "nope").await;
    let deadline = Instant::now() + WAIT;
    let report = loop {
        let (status, report) = stack.get("/api/v1/reports").await;
        assert_eq!(status, 200, "{report}");
        if report["totals"]["success"] == 3 && report["totals"]["failed"] == 1 {
            break report;
        }
        assert!(Instant::now() < deadline, "report never counted: {report}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let today = report["days"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (today["success"].as_i64(), today["failed"].as_i64()),
        (Some(3), Some(1))
    );
    let (status, error) = stack.get("/api/v1/reports?from=yesterday").await;
    assert_eq!((status, error["field"].as_str()), (400, Some("from")));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_runs_past_retention_are_deleted_and_stay_counted() {
    // Successes kept a second, failures a day.
    let stack = stack(SchedulerConfig {
        success_retention: Some(Duration::from_secs(1)),
        run_retention: Duration::from_secs(24 * 3600),
        housekeeping_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    })
    .await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let burner = stack.job("burner", "fuel-burner", json!({})).await;
    let failed = stack.run_to_end(burner, "nope").await.id.0;
    let succeeded = stack.run_to_end(hello, "old").await.id.0;
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, _) = stack.get(&format!("/api/v1/runs/{succeeded}")).await;
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a run past retention was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, run) = stack.get(&format!("/api/v1/runs/{failed}")).await;
    assert_eq!((status, &run["status"]), (200, &json!("failed")), "{run}");
    // A run of the same day ending after the deletion counts on top.
    stack.run_to_end(hello, "new").await;
    let report = until("both successes counted", || async {
        let (_, report) = stack.get("/api/v1/reports").await;
        (report["totals"]["success"] == 2).then_some(report)
    })
    .await;
    assert_eq!(report["totals"]["failed"], 1, "{report}");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_counts_runs_and_a_schedule_is_previewed_before_it_is_saved() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    let hello = stack
        .job(
            "hello",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?" }),
        )
        .await;
    let panicker = stack.job("panicker", "panicker", json!({})).await;
    let failed = api.trigger(panicker, json!({})).await;
    assert_eq!(api.ended(failed).await.status, RunStatus::Failed);
    let manual = api.trigger(hello, json!({ "param": "x" })).await;
    assert_eq!(api.ended(manual).await.status, RunStatus::Success);
    api.api.start_job(hello).await.unwrap();
    let scheduled = until("a scheduled run succeeds", || async {
        api.runs(hello)
            .await
            .into_iter()
            .find(|run| run.kind == TriggerKind::Schedule && run.status == RunStatus::Success)
    })
    .await;
    api.api.stop_job(hello).await.unwrap();

    let (status, dashboard) = api.get("/api/v1/dashboard").await;
    assert_eq!(status, 200, "{dashboard}");
    let hours = dashboard["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 24);
    let sum = |key: &str| {
        hours
            .iter()
            .map(|hour| hour[key].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!(sum("failed"), 1, "{dashboard}");
    let successes = sum("success");
    assert!(successes >= 2, "{dashboard}");
    let rate = dashboard["success_rate"].as_f64().unwrap();
    assert!(
        (rate - successes as f64 / (successes + 1) as f64).abs() < 1e-9,
        "{dashboard}"
    );
    assert_eq!(dashboard["days"].as_array().unwrap().len(), 30);
    assert_eq!(
        dashboard["top_failing"],
        json!([{ "job_id": panicker, "name": "panicker", "failures": 1 }])
    );
    assert!(
        dashboard["lateness_sample"].as_i64().unwrap() >= 1,
        "{dashboard}"
    );
    let p50 = dashboard["lateness_p50_ms"].as_i64().unwrap();
    assert!(p50 >= 0 && p50 <= dashboard["lateness_p99_ms"].as_i64().unwrap());
    assert_eq!(dashboard["executors_online"], 1);
    // The runs filter by kind.
    let (_, page) = api
        .get(&format!("/api/v1/runs?job={hello}&kind=schedule"))
        .await;
    let kinds: Vec<&Value> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| &run["kind"])
        .collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|kind| **kind == "schedule"),
        "{page}"
    );
    assert!(
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|run| run["id"] == scheduled.id.0)
    );
    let (status, refused) = api.get("/api/v1/runs?kind=cosmic").await;
    assert_eq!((status, &refused["field"]), (400, &json!("kind")));

    // A schedule previewed in its zone before any job has it.
    let (status, preview) = api
        .get("/api/v1/schedule-preview?schedule_conf=0%2030%209%20*%20*%20%3F&time_zone=Asia/Tokyo&count=3")
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["time_zone"], "Asia/Tokyo");
    let local = preview["local"].as_array().unwrap();
    assert_eq!(local.len(), 3);
    assert!(
        local
            .iter()
            .all(|at| at.as_str().unwrap().ends_with("T09:30:00.000+09:00")),
        "{preview}"
    );
    assert!(
        preview["fires"][0]
            .as_str()
            .unwrap()
            .ends_with("T00:30:00.000Z"),
        "{preview}"
    );
    // A window and a holiday calendar, previewed and saved.
    let (status, preview) = api
        .get(
            "/api/v1/schedule-preview?schedule_conf=0%200%2012%20*%20*%20%3F&count=3\
             &starts_at_ms=1893456000000&exclude_dates=2030-01-02",
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["fires"],
        json!([
            "2030-01-01T12:00:00.000Z",
            "2030-01-03T12:00:00.000Z",
            "2030-01-04T12:00:00.000Z"
        ])
    );
    let ruled = stack
        .job(
            "ruled",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "0 0 12 * * ?",
                    "schedule_rules": { "starts_at_ms": 1893456000000_i64,
                                        "exclude_dates": ["2030-01-03", "2030-01-02"] } }),
        )
        .await;
    let (_, fires) = api
        .get(&format!("/api/v1/jobs/{ruled}/next-fires?count=2"))
        .await;
    assert_eq!(
        fires,
        json!(["2030-01-01T12:00:00.000Z", "2030-01-04T12:00:00.000Z"])
    );
    let (_, saved) = api.get(&format!("/api/v1/jobs/{ruled}")).await;
    assert_eq!(
        saved["schedule_rules"]["exclude_dates"],
        json!(["2030-01-02", "2030-01-03"]),
        "stored sorted"
    );
    let (status, refused) = api
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{ruled}"),
            Some(
                json!({ "name": "ruled", "module_digest": saved["module_digest"],
                         "schedule_rules": { "exclude_dates": ["someday"] } }),
            ),
        )
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("schedule_rules")),
        "{refused}"
    );
    // Quartz's last-day and n-th-weekday forms, as a migrating xxl-job user
    // writes them.
    let (status, preview) = api
        .get("/api/v1/schedule-preview?schedule_conf=0%200%200%20L%202%20%3F&count=1")
        .await;
    assert_eq!(status, 200, "{preview}");
    let last = preview["fires"][0].as_str().unwrap();
    assert!(
        last.ends_with("-02-28T00:00:00.000Z") || last.ends_with("-02-29T00:00:00.000Z"),
        "{last}"
    );
    let (status, refused) = api
        .get("/api/v1/schedule-preview?schedule_conf=0%200%200%2015X%20*%20%3F")
        .await;
    assert_eq!(status, 422);
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("day-of-month field: \"15X\""), "{message}");
    for (query, field) in [
        ("schedule_conf=61%20*%20*%20*%20*%20%3F", "schedule_conf"),
        (
            "schedule_conf=*%20*%20*%20*%20*&time_zone=Mars/Olympus",
            "time_zone",
        ),
        ("schedule_type=HOURLY", "schedule_type"),
        ("schedule_type=FIX_RATE&schedule_conf=0", "schedule_conf"),
    ] {
        let (status, refused) = api.get(&format!("/api/v1/schedule-preview?{query}")).await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!(field)),
            "{query}: {refused}"
        );
    }
    stack.shutdown().await;
}
