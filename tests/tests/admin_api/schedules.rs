//! Around a job's schedule and state: pauses, backfills, shared calendars, state edits.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_says_who_and_why_and_resumes_by_itself() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;
    let job = stack.started_minutely_hello().await;
    let path = format!("/api/v1/jobs/{job}/pause");
    let pause = |body: Value| api.call(reqwest::Method::POST, &path, Some(body));

    // Refused: an end in the past, a note too long.
    let (status, refused) = pause(json!({ "until_ms": start - 1 })).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("until_ms")),
        "{refused}"
    );
    let (status, refused) = pause(json!({ "note": "x".repeat(1025) })).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("note")),
        "{refused}"
    );

    // Paused for three minutes: no fire until its first one after that.
    let resume_at = start + 180_000;
    let (status, paused) =
        pause(json!({ "note": "database migration", "until_ms": resume_at })).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(
        paused["pause"],
        json!({ "by": "operator token", "note": "database migration",
                "paused_at_ms": start, "until_ms": resume_at })
    );
    assert_eq!(paused["next_fire_at_ms"], resume_at + 60_000);
    clock.advance(Duration::from_secs(241));
    let first = until("the job resumes by itself", || async {
        api.runs(job).await.into_iter().next()
    })
    .await;
    assert_eq!(
        first.scheduled_at_ms,
        resume_at + 60_000,
        "nothing fired during the pause"
    );

    // Paused with no end: stopped until started, which clears the pause.
    let (_, paused) = pause(json!({ "note": "on hold" })).await;
    assert_eq!(
        (&paused["enabled"], &paused["pause"]["note"]),
        (&json!(false), &json!("on hold"))
    );
    assert!(paused["next_fire_at_ms"].is_null());
    let (_, fires) = api.get(&format!("/api/v1/jobs/{job}/next-fires")).await;
    assert_eq!(
        fires,
        json!([]),
        "a job paused with no end shows no next fire"
    );
    let started = api.api.start_job(job).await.unwrap();
    assert!(started.enabled && started.pause.is_none(), "{started:?}");
    stack.shutdown().await;
}

/// A day of a per-minute job backfilled at 100 runs a second of the
/// admin's clock: every instant once, a second backfill over the same
/// range adds nothing, a cancel stops the writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_runs_each_past_instant_once_at_its_rate() {
    let start = next_whole_minute() - 60_000;
    let (stack, clock) = stack_on_manual_clock(start + 1).await;
    let api = &stack.api;
    let job = stack
        .job(
            "minutely",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
                    "block_strategy": "DISCARD_LATER" }),
        )
        .await;
    let path = format!("/api/v1/jobs/{job}/backfill");
    let backfill = |from: i64, to: i64, per_second: i64| {
        api.call(
            reqwest::Method::POST,
            &path,
            Some(json!({ "from_ms": from, "to_ms": to, "per_second": per_second })),
        )
    };
    let progress = |id: i64| async move {
        let (status, backfill) = api.get(&format!("/api/v1/backfills/{id}")).await;
        assert_eq!(status, 200, "{backfill}");
        backfill
    };
    let written_is = |id: i64, written: i64| {
        let what = format!("backfill {id} has written {written}");
        async move {
            until(&what, || async move {
                let backfill = progress(id).await;
                (backfill["written"] == written).then_some(backfill)
            })
            .await
        }
    };

    // Refused: a range in the future, a rate past the maximum.
    let (status, refused) = backfill(start - 60_000, start + 600_000, 10).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("to_ms")),
        "{refused}"
    );
    let (status, refused) = backfill(start - 60_000, start, 5_000).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("per_second")),
        "{refused}"
    );

    let day = 86_400_000;
    let (status, first) = backfill(start - day, start, 100).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (&first["planned"], &first["status"]),
        (&json!(1440), &json!("running"))
    );
    let id = first["id"].as_i64().unwrap();
    // A second's worth, and no more until the admin's clock moves on.
    written_is(id, 100).await;
    assert_eq!(progress(id).await["written"], 100, "the rate holds");
    for second in 2..=15 {
        clock.advance(Duration::from_secs(1));
        written_is(id, (second * 100).min(1440)).await;
    }
    assert_eq!(progress(id).await["status"], "done");
    let mut runs: Vec<Run> = Vec::new();
    loop {
        let after = runs.last().map(|run| run.id);
        let page = api.api.job_runs(job, after, 1000).await.unwrap();
        if page.is_empty() {
            break;
        }
        runs.extend(page);
    }
    runs.retain(|run| run.kind == TriggerKind::Backfill);
    let instants: std::collections::BTreeSet<i64> =
        runs.iter().map(|run| run.scheduled_at_ms).collect();
    assert_eq!(
        (runs.len(), instants.len()),
        (1440, 1440),
        "each instant once"
    );
    assert!(
        instants
            .iter()
            .all(|at| at % 60_000 == 0 && *at > start - day && *at <= start)
    );

    // The same range again: every instant was run, none is written twice.
    let (_, again) = backfill(start - day / 2, start, 1_000).await;
    let again = again["id"].as_i64().unwrap();
    until("the second backfill is done", || async {
        (progress(again).await["status"] == "done").then_some(())
    })
    .await;
    assert_eq!(progress(again).await["written"], 0);

    // A cancel stops the writing.
    let (_, older) = backfill(start - 3 * day, start - 2 * day, 10).await;
    let older = older["id"].as_i64().unwrap();
    written_is(older, 10).await;
    let (status, cancelled) = api
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/backfills/{older}"),
            None,
        )
        .await;
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")));
    clock.advance(Duration::from_secs(5));
    let (_, listed) = api.get(&format!("/api/v1/backfills?job={job}")).await;
    assert_eq!(listed.as_array().unwrap().len(), 3);
    assert_eq!(
        progress(older).await["written"],
        10,
        "nothing after the cancel"
    );
    api.api.kill_job(job).await.unwrap();
    stack.shutdown().await;
}

/// A tenant's shared calendar: every job naming it skips its dates; a
/// change reaches them at once; a name the tenant lacks is refused; another
/// tenant neither sees nor uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_calendar_skips_its_dates_for_each_job_naming_it() {
    let owned = stack(SchedulerConfig::default()).await;
    let stack = &owned;
    let api = &stack.api;
    let put = |dates: Value| {
        api.call(
            reqwest::Method::PUT,
            "/api/v1/calendars/holidays",
            Some(json!({ "dates": dates })),
        )
    };
    let (status, calendar) = put(json!(["2030-01-03", "2030-01-02", "2030-01-02"])).await;
    assert_eq!(status, 200, "{calendar}");
    assert_eq!(calendar["dates"], json!(["2030-01-02", "2030-01-03"]));
    let rules = json!({ "starts_at_ms": 1893456000000_i64, "calendars": ["holidays"] });
    let noon = |name: &'static str| {
        let rules = rules.clone();
        async move {
            stack
                .job(
                    name,
                    "hello",
                    json!({ "schedule_type": "CRON", "schedule_conf": "0 0 12 * * ?",
                            "schedule_rules": rules }),
                )
                .await
        }
    };
    let (first, second) = (noon("first").await, noon("second").await);
    let fires = |job: JobId| async move {
        api.get(&format!("/api/v1/jobs/{job}/next-fires?count=2"))
            .await
            .1
    };
    for job in [first, second] {
        assert_eq!(
            fires(job).await,
            json!(["2030-01-01T12:00:00.000Z", "2030-01-04T12:00:00.000Z"])
        );
    }
    let (_, preview) = api
        .get(
            "/api/v1/schedule-preview?schedule_conf=0%200%2012%20*%20*%20%3F&count=2\
             &starts_at_ms=1893456000000&calendars=holidays",
        )
        .await;
    assert_eq!(
        preview["fires"],
        json!(["2030-01-01T12:00:00.000Z", "2030-01-04T12:00:00.000Z"])
    );
    // A change reaches every job naming the calendar.
    put(json!(["2030-01-01"])).await;
    assert_eq!(
        fires(second).await,
        json!(["2030-01-02T12:00:00.000Z", "2030-01-03T12:00:00.000Z"])
    );
    // A calendar whose stored dates no longer parse allows no fire (never
    // none of its exclusions); read again when this admin changes one.
    let pool = stack.admin_database().await;
    sqlx::query("UPDATE calendar SET dates = '[\"2030-02-30\"]' WHERE name = 'holidays'")
        .execute(&pool)
        .await
        .unwrap();
    let (status, _) = api
        .call(
            reqwest::Method::PUT,
            "/api/v1/calendars/spare",
            Some(json!({ "dates": [] })),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        fires(second).await,
        json!([]),
        "a damaged calendar fires nothing"
    );
    put(json!(["2030-01-01"])).await;
    // A name the tenant has no calendar of is refused.
    let spec = json!({ "name": "third", "module_digest": "0".repeat(64),
                       "schedule_rules": { "calendars": ["vacations"] } });
    let (status, refused) = api
        .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("schedule_rules")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no calendar \"vacations\"")
    );
    // Another tenant neither sees nor uses it.
    let other = tenant(stack, "other").await;
    let (_, theirs) = stack
        .call_as(&other, reqwest::Method::GET, "/api/v1/calendars", None)
        .await;
    assert_eq!(theirs, json!([]));
    let (status, _) = stack
        .call_as(
            &other,
            reqwest::Method::DELETE,
            "/api/v1/calendars/holidays",
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, deleted) = api
        .call(reqwest::Method::DELETE, "/api/v1/calendars/holidays", None)
        .await;
    assert_eq!((status, &deleted["name"]), (200, &json!("holidays")));
    assert_eq!(
        fires(first).await,
        json!(["2030-01-01T12:00:00.000Z", "2030-01-02T12:00:00.000Z"])
    );
    owned.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_the_state_the_next_run_sees() {
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let first = stack.run_to_end(counter, "").await;
    assert!(first.message.as_deref().unwrap().starts_with("count=1 "));
    let (status, state) = stack.get(&format!("/api/v1/jobs/{counter}/state")).await;
    assert_eq!(status, 200);
    assert_eq!(state["state"], json!({ "count": "1" }));

    let (status, edited) = stack
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{counter}/state"),
            Some(json!({ "state": { "count": "41" } })),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    let next = stack.run_to_end(counter, "").await;
    assert!(
        next.message.as_deref().unwrap().starts_with("count=42 "),
        "{next:?}"
    );

    let long_key = "k".repeat(300);
    for bad in [
        json!({ "state": { "": "x" } }),
        json!({ "state": { long_key: "x" } }),
        json!({ "state": { "count": 7 } }),
        json!({ "values": {} }),
    ] {
        let (status, error) = stack
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/jobs/{counter}/state"),
                Some(bad.clone()),
            )
            .await;
        assert!(status == 400 || status == 422, "{bad}: {status} {error}");
    }
    let (_, state) = stack.get(&format!("/api/v1/jobs/{counter}/state")).await;
    assert_eq!(state["state"], json!({ "count": "42" }), "nothing stored");
    let (status, _) = stack.get("/api/v1/jobs/999/state").await;
    assert_eq!(status, 404);
    stack.shutdown().await;
}
