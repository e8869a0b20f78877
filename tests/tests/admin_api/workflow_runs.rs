//! How workflow runs start and stop: by a schedule in its zone (and what
//! a stall misses), FIX_DELAY after the run before, by a backfill (each
//! instant once), cancelled and retried, failed past a deadline, and
//! taken up by the next admin where a stopped one left them.

use cronbox_api::{NodeStatus, WorkflowRunStatus};

use super::workflows::{ended, newest_ended, node, refused_field, save, spec};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_admin_takes_up_what_a_stopped_one_left_of_a_workflow_run() {
    use cronbox_admin::store::{NewRun, RunEnd, Store};
    let stack = stack(SchedulerConfig::default()).await;
    stack.job("first", "hello", json!({ "param": "one" })).await;
    stack.job("second", "hello", json!({})).await;
    save(
        &stack,
        "chain",
        json!({
            "nodes": [
                { "name": "first", "job": "first" },
                { "name": "second", "job": "second", "param": "after {{ nodes.first.output }}" }
            ],
            "edges": [{ "from": "first", "to": "second" }]
        }),
    )
    .await;
    let data = stack.shutdown_keeping_data().await;
    // What an admin left when it stopped a minute ago: a workflow run it
    // wrote but never advanced, and one whose first node's run ended
    // without its end being followed.
    let (idle, unfollowed) = {
        let store = Store::open_sqlite(&data.path().join("admin"))
            .await
            .unwrap();
        let then = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
            - 60_000;
        let workflow = store.workflow("default", "chain").await.unwrap().unwrap();
        let idle = store
            .create_workflow_run(&workflow, "{}", TriggerKind::Api, then)
            .await
            .unwrap();
        let unfollowed = store
            .create_workflow_run(&workflow, "{}", TriggerKind::Api, then)
            .await
            .unwrap();
        let job = store
            .jobs_named("default", "first")
            .await
            .unwrap()
            .remove(0);
        let run = NewRun::of_job(&job, TriggerKind::Workflow, then);
        let run_id = store
            .start_workflow_node(unfollowed, "first", "one", &run, then)
            .await
            .unwrap()
            .unwrap();
        let end = RunEnd {
            run_id,
            success: true,
            code: 200,
            message: "hello, one".to_owned(),
            finished_at_ms: then,
            ..RunEnd::default()
        };
        store.finish_run(&end).await.unwrap().unwrap();
        (idle, unfollowed)
    };
    let stack = restarted(data).await;
    for id in [idle, unfollowed] {
        let run = ended(&stack, id).await;
        assert_eq!(run.status, WorkflowRunStatus::Succeeded, "{run:#?}");
        assert_eq!(
            node(&run, "second").output.as_deref(),
            Some("hello, after hello, one")
        );
    }
    // The first node of the unfollowed run ran once: the end was taken up,
    // not the node started again.
    let first = stack.api.api.workflow_run(unfollowed).await.unwrap();
    let first_job = stack.api.api.jobs(&Default::default()).await.unwrap();
    let first_job = first_job
        .iter()
        .find(|job| job.job.name == "first")
        .unwrap()
        .job
        .id;
    let runs = stack.api.api.job_runs(first_job, None, 10).await.unwrap();
    assert_eq!(runs.len(), 2, "one run per workflow run: {runs:?}");
    assert_eq!(node(&first, "first").run_id, Some(runs[0].id));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_cancelled_with_its_running_node_and_retried_from_what_failed() {
    let stack = stack(SchedulerConfig::default()).await;
    let extract = stack
        .job("extract", "hello", json!({ "param": "rows" }))
        .await;
    let burn = stack
        .job("burn", "fuel-burner", json!({ "param": "not-a-number" }))
        .await;
    stack.job("load", "hello", json!({})).await;
    stack
        .job("nap", "sleeper", json!({ "param": "30000" }))
        .await;
    save(
        &stack,
        "etl",
        json!({
            "nodes": [
                { "name": "extract", "job": "extract" },
                { "name": "burn", "job": "burn", "param": "{{ input.rounds }}" },
                { "name": "load", "job": "load", "param": "{{ nodes.extract.output }}" }
            ],
            "edges": [{ "from": "extract", "to": "burn" }, { "from": "burn", "to": "load" }]
        }),
    )
    .await;
    // Fails at `burn` (its input is not a number of rounds)...
    let started = stack
        .api
        .api
        .start_workflow_run("etl", Some(r#"{"rounds": "many"}"#))
        .await
        .unwrap();
    let failed = ended(&stack, started.id).await;
    assert_eq!(failed.status, WorkflowRunStatus::Failed, "{failed:#?}");
    assert_eq!(node(&failed, "load").status, NodeStatus::Skipped);
    // ...and a run that did not fail is not retried.
    let (status, answer) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/workflow-runs/999/retry",
            None,
        )
        .await;
    assert_eq!(status, 404, "{answer}");
    // Retried from `burn` (its job's param now a number): `extract` keeps
    // its output and does not run again.
    let digest = stack.api.api.job(burn).await.unwrap().module_digest;
    let spec_of_burn: JobSpec =
        serde_json::from_value(json!({ "name": "burn", "module_digest": digest, "param": "10" }))
            .unwrap();
    stack.api.api.update_job(burn, &spec_of_burn).await.unwrap();
    save(
        &stack,
        "etl",
        json!({
            "nodes": [
                { "name": "extract", "job": "extract" },
                { "name": "burn", "job": "burn" },
                { "name": "load", "job": "load", "param": "{{ nodes.extract.output }}" }
            ],
            "edges": [{ "from": "extract", "to": "burn" }, { "from": "burn", "to": "load" }]
        }),
    )
    .await;
    let retried = stack.api.api.retry_workflow_run(started.id).await.unwrap();
    assert_eq!(retried.status, WorkflowRunStatus::Running);
    let run = ended(&stack, started.id).await;
    // The run follows the version it started with: `burn` renders
    // `{{ input.rounds }}` again, and fails again the same way.
    assert_eq!(run.version, 1);
    assert_eq!(run.status, WorkflowRunStatus::Failed, "{run:#?}");
    assert_eq!(node(&run, "burn").input.as_deref(), Some("many"));
    assert_eq!(
        stack
            .api
            .api
            .job_runs(extract, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        stack.api.api.job_runs(burn, None, 10).await.unwrap().len(),
        2
    );
    // A new run of version 2 succeeds.
    let second = stack.api.api.start_workflow_run("etl", None).await.unwrap();
    let second = ended(&stack, second.id).await;
    assert_eq!(second.status, WorkflowRunStatus::Succeeded, "{second:#?}");
    assert_eq!(
        node(&second, "load").output.as_deref(),
        Some("hello, hello, rows")
    );

    // Cancelled while its node sleeps: the node's run is killed, nothing
    // after it starts; a cancelled run is not cancelled twice.
    save(
        &stack,
        "slow",
        json!({
            "nodes": [{ "name": "nap", "job": "nap" }, { "name": "load", "job": "load" }],
            "edges": [{ "from": "nap", "to": "load" }]
        }),
    )
    .await;
    let slow = stack
        .api
        .api
        .start_workflow_run("slow", None)
        .await
        .unwrap();
    let nap_run = node(&slow, "nap").run_id.unwrap();
    until("the nap is dispatched", || async {
        let run = stack.api.run(nap_run).await;
        (run.status == RunStatus::Dispatched).then_some(())
    })
    .await;
    let cancelled = stack.api.api.cancel_workflow_run(slow.id).await.unwrap();
    assert_eq!(cancelled.status, WorkflowRunStatus::Cancelled);
    assert!(
        cancelled
            .nodes
            .iter()
            .all(|node| node.status == NodeStatus::Cancelled)
    );
    let killed = stack.api.ended(nap_run).await;
    assert_eq!(
        killed.outcome,
        Some(cronbox_api::RunOutcome::Killed),
        "{killed:?}"
    );
    let (status, answer) = stack
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/workflow-runs/{}/cancel", slow.id),
            None,
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(
        stack.api.api.workflow_run(slow.id).await.unwrap().status,
        WorkflowRunStatus::Cancelled
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_workflow_fires_in_its_zone_and_skips_what_it_missed() {
    let minute = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(minute + 30_000).await;
    stack.job("greet", "hello", json!({})).await;
    let schedule = |kind: &str, conf: &str, zone: &str| {
        spec(json!({
            "nodes": [{ "name": "greet", "job": "greet", "param": "{{ input.who }}" }],
            "schedule": { "schedule_type": kind, "schedule_conf": conf, "time_zone": zone,
                          "input": r#"{"who": "the clock"}"# }
        }))
    };
    let saved = stack
        .api
        .api
        .put_workflow("minutely", &schedule("CRON", "0 * * * * ?", "UTC"))
        .await
        .unwrap();
    assert_eq!(saved.next_fire_at_ms, Some(minute + 60_000));
    // Its minute comes: one run, started by the schedule, with its input.
    clock.set(minute + 60_000);
    let fired = newest_ended(&stack, "minutely").await;
    assert_eq!(fired.kind, TriggerKind::Schedule);
    assert_eq!(
        node(&fired, "greet").output.as_deref(),
        Some("hello, the clock")
    );
    // Four minutes pass unseen (the admin stalled): the missed fires are
    // skipped (DO_NOTHING) and the next is planned from now.
    clock.set(minute + 300_500);
    until("the next fire is planned from now", || async {
        let workflow = stack.api.api.workflow("minutely").await.unwrap();
        (workflow.next_fire_at_ms == Some(minute + 360_000)).then_some(())
    })
    .await;
    assert_eq!(
        stack.api.api.workflow_runs("minutely").await.unwrap().len(),
        1
    );
    // A zoned cron: 09:00 in Tokyo is 00:00 UTC.
    let tokyo = stack
        .api
        .api
        .put_workflow("morning", &schedule("CRON", "0 0 9 * * ?", "Asia/Tokyo"))
        .await
        .unwrap();
    let next = tokyo.next_fire_at_ms.unwrap();
    assert!(next > minute && next % 86_400_000 == 0, "{next}");
    // What cannot be a workflow's schedule is refused naming the field.
    for (body, field) in [
        (
            schedule("CRON", "61 * * * * ?", "UTC"),
            "schedule.schedule_conf",
        ),
        (
            schedule("CRON", "0 * * * * ?", "Mars/Olympus"),
            "schedule.time_zone",
        ),
        (
            schedule("FIX_DELAY", "soon", "UTC"),
            "schedule.schedule_conf",
        ),
    ] {
        assert_eq!(
            refused_field(
                &stack,
                reqwest::Method::PUT,
                "/api/v1/workflows/refused",
                serde_json::to_value(&body).unwrap()
            )
            .await,
            field
        );
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_deadline_fails_with_its_running_node_killed() {
    let minute = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(minute).await;
    stack
        .job("nap", "sleeper", json!({ "param": "30000" }))
        .await;
    stack.job("after", "hello", json!({})).await;
    let definition = json!({
        "nodes": [{ "name": "nap", "job": "nap" }, { "name": "after", "job": "after" }],
        "edges": [{ "from": "nap", "to": "after" }],
        "deadline_ms": 10_000
    });
    save(&stack, "bounded", definition).await;
    let started = stack
        .api
        .api
        .start_workflow_run("bounded", None)
        .await
        .unwrap();
    assert_eq!(started.deadline_at_ms, Some(minute + 10_000));
    let nap = node(&started, "nap").run_id.unwrap();
    until("the nap is dispatched", || async {
        let run = stack.api.run(nap).await;
        (run.status == RunStatus::Dispatched).then_some(())
    })
    .await;
    // Ten seconds pass on the admin's clock: the run fails, its running
    // node's run is killed, the next node never starts.
    clock.set(minute + 10_001);
    let run = ended(&stack, started.id).await;
    assert_eq!(run.status, WorkflowRunStatus::Failed, "{run:#?}");
    assert_eq!(
        node(&run, "nap").message.as_deref(),
        Some("its workflow run passed its deadline")
    );
    assert_eq!(node(&run, "after").status, NodeStatus::Cancelled);
    let killed = stack.api.ended(nap).await;
    assert_eq!(
        killed.outcome,
        Some(cronbox_api::RunOutcome::Killed),
        "{killed:?}"
    );
    // A deadline past the bound is refused naming it.
    assert_eq!(
        refused_field(
            &stack,
            reqwest::Method::PUT,
            "/api/v1/workflows/bounded",
            json!({ "nodes": [{ "name": "nap", "job": "nap" }], "deadline_ms": 10 })
        )
        .await,
        "deadline_ms"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_delay_workflow_waits_for_its_run_and_a_backfill_runs_each_instant_once() {
    let minute = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(minute).await;
    stack.job("greet", "hello", json!({})).await;
    let scheduled = |kind: &str, conf: &str| {
        spec(json!({
            "nodes": [{ "name": "greet", "job": "greet", "param": "{{ input.who }}" }],
            "schedule": { "schedule_type": kind, "schedule_conf": conf,
                          "input": r#"{"who": "the past"}"# }
        }))
    };
    // FIX_DELAY: the next fire is planned from the end of the run before.
    let delayed = stack
        .api
        .api
        .put_workflow("delayed", &scheduled("FIX_DELAY", "30"))
        .await
        .unwrap();
    assert_eq!(delayed.next_fire_at_ms, Some(minute + 30_000));
    clock.set(minute + 30_000);
    let run = newest_ended(&stack, "delayed").await;
    assert_eq!(run.fire_at_ms, Some(minute + 30_000));
    let run_ended = run.ended_at_ms.unwrap();
    until("the next fire follows the run's end", || async {
        let workflow = stack.api.api.workflow("delayed").await.unwrap();
        (workflow.next_fire_at_ms == Some(run_ended + 30_000)).then_some(())
    })
    .await;

    // A backfill of three days of a nightly schedule: three runs, once.
    stack
        .api
        .api
        .put_workflow("nightly", &scheduled("CRON", "0 0 2 * * ?"))
        .await
        .unwrap();
    let range = cronbox_api::WorkflowBackfillRequest {
        from_ms: minute - 3 * 86_400_000,
        to_ms: minute,
    };
    let backfill = stack
        .api
        .api
        .backfill_workflow("nightly", &range)
        .await
        .unwrap();
    assert_eq!(
        (
            backfill.planned,
            backfill.started.len(),
            backfill.already_run
        ),
        (3, 3, 0)
    );
    for id in &backfill.started {
        let run = ended(&stack, *id).await;
        assert_eq!(run.kind, TriggerKind::Backfill);
        assert_eq!(run.fire_at_ms.unwrap() % 86_400_000, 2 * 3_600_000);
        assert_eq!(
            node(&run, "greet").output.as_deref(),
            Some("hello, the past")
        );
    }
    let again = stack
        .api
        .api
        .backfill_workflow("nightly", &range)
        .await
        .unwrap();
    assert_eq!(
        (again.planned, again.started.len(), again.already_run),
        (3, 0, 3)
    );
    // Refused, naming the field: too long a range, one in the future, a
    // FIX_DELAY schedule.
    for (name, from_ms, to_ms, field) in [
        ("nightly", minute - 200 * 86_400_000, minute, "to_ms"),
        ("nightly", minute, minute + 86_400_000, "to_ms"),
        (
            "delayed",
            minute - 86_400_000,
            minute,
            "schedule.schedule_type",
        ),
    ] {
        assert_eq!(
            refused_field(
                &stack,
                reqwest::Method::POST,
                &format!("/api/v1/workflows/{name}/backfill"),
                json!({ "from_ms": from_ms, "to_ms": to_ms })
            )
            .await,
            field
        );
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_schedule_skips_its_calendars_dates_and_fires_after_its_jitter() {
    let minute = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(minute + 1_000).await;
    stack.job("greet", "hello", json!({})).await;
    stack
        .api
        .api
        .put_calendar("holidays", &[utc_date(minute)])
        .await
        .unwrap();
    let every_minute = |rules: Value| {
        spec(json!({
            "nodes": [{ "name": "greet", "job": "greet" }],
            "schedule": { "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
                          "rules": rules }
        }))
    };
    // Today is a holiday: the first fire is tomorrow's first minute.
    let off = stack
        .api
        .api
        .put_workflow("off", &every_minute(json!({ "calendars": ["holidays"] })))
        .await
        .unwrap();
    let tomorrow = minute - minute % 86_400_000 + 86_400_000;
    assert_eq!(off.next_fire_at_ms, Some(tomorrow));
    // Jitter holds a fire up to its bound, and the fire is not late then
    // (a run started for its instant, not a misfire).
    let jittered = stack
        .api
        .api
        .put_workflow("jittered", &every_minute(json!({ "jitter_ms": 20_000 })))
        .await
        .unwrap();
    let planned = jittered.next_fire_at_ms.unwrap();
    let starts = jittered.next_run_at_ms.unwrap();
    assert!(
        (planned..=planned + 20_000).contains(&starts),
        "{jittered:?}"
    );
    clock.set(starts);
    let run = until("the jittered fire starts its run", || async {
        let runs = stack.api.api.workflow_runs("jittered").await.unwrap();
        runs.first().cloned()
    })
    .await;
    assert_eq!(
        (run.kind, run.fire_at_ms),
        (TriggerKind::Schedule, Some(planned))
    );
    // A calendar the tenant does not have is refused, naming the field.
    assert_eq!(
        refused_field(
            &stack,
            reqwest::Method::PUT,
            "/api/v1/workflows/refused",
            serde_json::to_value(every_minute(json!({ "calendars": ["nope"] }))).unwrap()
        )
        .await,
        "schedule.rules.calendars"
    );
    stack.shutdown().await;
}

/// The UTC date (`YYYY-MM-DD`) of instant `ms` (days to a civil date, as
/// in Howard Hinnant's `civil_from_days`).
fn utc_date(ms: i64) -> String {
    let z = ms.div_euclid(86_400_000) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
