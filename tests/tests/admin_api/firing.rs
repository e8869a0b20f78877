//! Firing: the admin's clock, leases, undecodable rows, claims, overlap, batches, the pre-read.

use super::*;

/// The admin on a clock the test moves: a ten-minute retry backoff, an
/// hour of FIX_DELAY and an hour of downtime for a per-minute cron are
/// played out in milliseconds of real time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_fixed_delay_and_misfires_follow_the_admins_clock() {
    // On a whole minute, so that the cron fires below are easy to name.
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;

    // A failed run is retried after ten minutes of the admin's time.
    let panicker = stack
        .job(
            "retried",
            "panicker",
            json!({ "retry_count": 1, "retry_interval_ms": 600_000 }),
        )
        .await;
    let first = api.trigger(panicker, json!({})).await;
    assert_eq!(api.ended(first).await.status, RunStatus::Failed);
    let retry = until("the retry is written", || async {
        api.runs(panicker)
            .await
            .into_iter()
            .find(|run| run.kind == TriggerKind::Retry)
    })
    .await;
    assert_eq!(retry.scheduled_at_ms, start + 600_000);
    clock.advance(Duration::from_secs(599));
    let retry_id = retry.id;
    assert_eq!(
        api.run(retry_id).await.status,
        RunStatus::Pending,
        "not yet due"
    );
    clock.advance(Duration::from_secs(1));
    let retried = api.ended(retry_id).await;
    assert_eq!((retried.status, retried.attempt), (RunStatus::Failed, 1));

    // FIX_DELAY of an hour: the next fire is an hour after the run ended.
    let delayed = stack
        .job(
            "hourly",
            "hello",
            json!({ "schedule_type": "FIX_DELAY", "schedule_conf": "1h" }),
        )
        .await;
    let (_, started) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{delayed}/start"),
            None,
        )
        .await;
    let first_fire = started["next_fire_at_ms"].as_i64().unwrap();
    assert_eq!(first_fire, clock.now_ms() + 3_600_000);
    clock.set(first_fire);
    let run = until("the hourly job runs", || async {
        api.runs(delayed)
            .await
            .into_iter()
            .find(|r| r.status == RunStatus::Success)
    })
    .await;
    let finished = run.finished_at_ms.unwrap();
    // The next fire is planned just after the run's end is written.
    let job = until("the next fire is planned", || async {
        let job = api.api.job(delayed).await.unwrap();
        job.next_fire_at_ms.is_some().then_some(job)
    })
    .await;
    assert_eq!(job.next_fire_at_ms, Some(finished + 3_600_000));

    // An hour of downtime for a per-minute cron: DO_NOTHING skips every
    // missed fire, FIRE_ONCE_NOW runs once, now.
    let mut crons = Vec::new();
    for misfire in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
        let id = stack
            .job(
                misfire,
                "hello",
                json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * * ?", "misfire": misfire }),
            )
            .await;
        crons.push(id);
    }
    // Both started while the admin's pre-read is not looking: their first
    // fires are set, then the clock jumps an hour past them.
    let resumed_at = clock.now_ms() + 3_600_000 + 30_000;
    for id in &crons {
        api.call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{id}/start"),
            None,
        )
        .await;
    }
    clock.set(resumed_at);
    let fired_once = until("FIRE_ONCE_NOW fires once", || async {
        let runs = api.runs(crons[1]).await;
        (runs.len() == 1 && runs.iter().all(|run| !run.status.is_open())).then_some(runs)
    })
    .await;
    assert_eq!(fired_once[0].kind, TriggerKind::Misfire);
    assert_eq!(fired_once[0].scheduled_at_ms, resumed_at);
    for id in &crons {
        let (_, job) = api.get(&format!("/api/v1/jobs/{id}")).await;
        let next = job["next_fire_at_ms"].as_i64().unwrap();
        assert_eq!(
            next,
            resumed_at - resumed_at % 60_000 + 60_000,
            "on from now"
        );
    }
    assert!(
        api.runs(crons[0]).await.is_empty(),
        "DO_NOTHING skipped the missed hour"
    );
    stack.shutdown().await;
}

/// A fire the admin wrote is sent under the lease its write gave it: on
/// time, with no second write to take a lease (one write fewer per run at
/// rate); sent so late that little of that lease is left, its lease is
/// taken again first. Leases written are counted by a trigger on the
/// admin's own SQLite file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_sent_on_time_goes_under_its_write_lease_and_a_late_one_renews_it() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;
    let pool = stack.admin_database().await;
    for statement in [
        "CREATE TABLE lease_taken (run_id INTEGER NOT NULL)",
        "CREATE TRIGGER count_leases_taken AFTER UPDATE OF lease_until_ms ON run \
         WHEN NEW.lease_until_ms IS NOT NULL \
         BEGIN INSERT INTO lease_taken (run_id) VALUES (NEW.id); END",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let leases_taken = |run: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM lease_taken WHERE run_id = $1")
                .bind(run)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let job = stack.started_minutely_hello().await;
    // Written by the pre-read two seconds ahead, pending until its instant.
    let clock = &clock;
    let written = |at: i64| async move {
        clock.set(at - 2_000);
        until("the fire is written", || async {
            api.runs(job)
                .await
                .into_iter()
                .find(|run| run.scheduled_at_ms == at)
        })
        .await
    };

    let on_time = start + 60_000;
    let run = written(on_time).await;
    clock.set(on_time);
    assert_eq!(api.ended(run.id).await.status, RunStatus::Success);
    assert_eq!(
        leases_taken(run.id.0).await,
        0,
        "sent under its write lease"
    );

    // Dispatched eight seconds after its instant: seven seconds of its
    // write lease (fifteen) are left, less than taking the lease gives.
    let late = start + 120_000;
    let run = written(late).await;
    clock.set(late + 8_000);
    assert_eq!(api.ended(run.id).await.status, RunStatus::Success);
    assert_eq!(
        leases_taken(run.id.0).await,
        1,
        "its lease taken again first"
    );
    stack.shutdown().await;
}

/// The pre-read reads only the columns it plans fires with, so a job whose
/// stored row is damaged in another (here its route, an unknown name) still
/// has its fire written: the dispatch, which reads the whole job, ends that
/// run naming the column and stops the job, instead of leaving the run to
/// be taken over and fail again for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_of_a_job_whose_row_does_not_decode_ends_and_stops_the_job() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;
    let pool = stack.admin_database().await;
    let job = stack.started_minutely_hello().await;
    sqlx::query("UPDATE job SET route = 'SIDEWAYS' WHERE id = $1")
        .bind(job.0)
        .execute(&pool)
        .await
        .unwrap();
    let fire = start + 60_000;
    clock.set(fire);
    let run = until("the fire is written", || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT id FROM run WHERE job_id = $1 AND scheduled_at_ms = $2",
        )
        .bind(job.0)
        .bind(fire)
        .fetch_optional(&pool)
        .await
        .unwrap()
    })
    .await;
    let ended = api.ended(RunId(run)).await;
    assert_eq!(ended.status, RunStatus::Failed);
    let message = ended.message.unwrap_or_default();
    assert!(
        message.contains("route") && message.contains("SIDEWAYS"),
        "{message}"
    );
    let (enabled, next_fire): (i64, Option<i64>) =
        sqlx::query_as("SELECT enabled, next_fire_at_ms FROM job WHERE id = $1")
            .bind(job.0)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((enabled, next_fire), (0, None), "the job is stopped");
    stack.shutdown().await;
}

/// A pre-read that keeps up claims a job for its fires one second past
/// its window as well: an every-second job is claimed (its row read, its
/// next fire moved) once for every two fires written. Moves are counted by
/// a trigger on the admin's SQLite file; the clock is advanced a second at
/// a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_firing_every_second_is_claimed_once_for_two_fires() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let pool = stack.admin_database().await;
    for statement in [
        "CREATE TABLE next_fire_moved (job_id INTEGER NOT NULL)",
        "CREATE TRIGGER count_next_fire_moves AFTER UPDATE OF next_fire_at_ms ON job \
         WHEN NEW.next_fire_at_ms IS NOT OLD.next_fire_at_ms \
         BEGIN INSERT INTO next_fire_moved (job_id) VALUES (NEW.id); END",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let job = stack.started_hello("every-second", "* * * * * ?").await;
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .bind(job.0)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    // The pre-read writes the fires of the five seconds ahead.
    let window_written = |now: i64| {
        let pool = pool.clone();
        async move {
            until("the window's last fire is written", || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT id FROM run WHERE job_id = $1 AND scheduled_at_ms = $2",
                )
                .bind(job.0)
                .bind(now + 5_000)
                .fetch_optional(&pool)
                .await
                .unwrap()
            })
            .await;
        }
    };
    window_written(start).await;
    let fires = "SELECT COUNT(*) FROM run WHERE job_id = $1";
    let moves = "SELECT COUNT(*) FROM next_fire_moved WHERE job_id = $1";
    let (fires_before, moves_before) = (count(fires).await, count(moves).await);
    for second in 1..=10 {
        let now = start + second * 1_000;
        clock.set(now);
        window_written(now).await;
    }
    let fires_written = count(fires).await - fires_before;
    let claims = count(moves).await - moves_before;
    assert!(fires_written >= 10, "{fires_written} fires in 10 s");
    assert!(
        claims * 10 <= fires_written * 6,
        "{claims} claims for {fires_written} fires"
    );
    stack.shutdown().await;
}

/// Overlap decided by the admin across executors: a job firing every
/// second whose runs sleep a minute, routed ROUND over two executors (so
/// no executor's block strategy sees two of its runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_policies_hold_across_two_executors() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    let data = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![stack.base.clone()],
        EXEC.into(),
        data.path().join("second"),
    );
    config.beat_interval = Duration::from_millis(300);
    let second = cronbox_executor::start(config).await.unwrap();
    until("both executors are alive", || async {
        let executors = api.api.executors().await.unwrap();
        (executors.iter().filter(|e| e.alive).count() == 2).then_some(())
    })
    .await;
    let job = |policy: &'static str| {
        stack.job(
            policy,
            "sleeper",
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "route": "ROUND",
                    "param": "60000", "timeout_ms": 120_000,
                    "schedule_rules": { "overlap": policy } }),
        )
    };
    let (skip, cancel, allow) = (
        job("SKIP").await,
        job("CANCEL_OTHER").await,
        job("ALLOW").await,
    );
    // BUFFER_ONE with runs of 2.5 s: the fire after a run waits for it,
    // the ones after that are skipped.
    let buffer = stack
        .job(
            "BUFFER_ONE",
            "sleeper",
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "route": "ROUND",
                    "param": "2500", "timeout_ms": 60_000,
                    "schedule_rules": { "overlap": "BUFFER_ONE" } }),
        )
        .await;
    for id in [skip, cancel, allow, buffer] {
        api.api.start_job(id).await.unwrap();
    }
    let ended_with = |runs: &[Run], text: &str| {
        runs.iter()
            .filter(|run| run.message.as_deref().is_some_and(|m| m.contains(text)))
            .count()
    };
    // SKIP: one run goes on, the fires after it are recorded as skipped.
    let runs = until("SKIP skips fires", || async {
        let runs = api.runs(skip).await;
        (ended_with(&runs, "overlap SKIP") >= 2).then_some(runs)
    })
    .await;
    let skipped: Vec<&Run> = runs
        .iter()
        .filter(|run| {
            run.message
                .as_deref()
                .is_some_and(|m| m.contains("overlap SKIP"))
        })
        .collect();
    assert!(
        skipped.iter().all(|run| run.status == RunStatus::Cancelled),
        "{runs:?}"
    );
    assert_eq!(
        runs.iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .count(),
        1,
        "one run at a time: {runs:?}"
    );
    // CANCEL_OTHER: each fire kills the run before it.
    let runs = until("CANCEL_OTHER kills the runs before", || async {
        let runs = api.runs(cancel).await;
        (runs
            .iter()
            .filter(|run| run.outcome.map(cronbox_api::RunOutcome::as_str) == Some("killed"))
            .count()
            >= 2)
            .then_some(runs)
    })
    .await;
    assert!(
        runs.iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .count()
            <= 2,
        "at most the newest run and one being killed: {runs:?}"
    );
    // ALLOW: runs pile up on both executors.
    let runs = until("ALLOW runs on both executors at once", || async {
        let runs = api.runs(allow).await;
        let executors: std::collections::BTreeSet<String> = runs
            .iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .filter_map(|run| run.executor.clone())
            .collect();
        (executors.len() == 2).then_some(runs)
    })
    .await;
    assert_eq!(ended_with(&runs, "overlap"), 0, "{runs:?}");
    let runs = until(
        "BUFFER_ONE runs a held fire after the run before it",
        || async {
            let runs = api.runs(buffer).await;
            let succeeded = runs
                .iter()
                .filter(|run| run.status == RunStatus::Success)
                .count();
            (succeeded >= 2 && ended_with(&runs, "overlap BUFFER_ONE") >= 1).then_some(runs)
        },
    )
    .await;
    let mut done: Vec<&Run> = runs
        .iter()
        .filter(|run| run.status == RunStatus::Success)
        .collect();
    done.sort_by_key(|run| run.started_at_ms);
    assert!(
        done[1].started_at_ms.unwrap() >= done[0].finished_at_ms.unwrap()
            && done[1].dispatched_at_ms.unwrap() - done[1].scheduled_at_ms >= 1_000,
        "the second waited for the first to end: {done:?}"
    );
    for id in [skip, cancel, allow, buffer] {
        api.api.stop_job(id).await.unwrap();
        api.api.kill_job(id).await.unwrap();
    }
    second.shutdown().await;
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_due_together_reach_their_executor_in_batches() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    start_minutely_jobs(&stack.api, 200, "default").await;
    clock.advance(Duration::from_secs(60));
    let succeeded = until("the 200 fires succeed", || async {
        let (_, page) = stack.get("/api/v1/runs?status=success&limit=1000").await;
        let runs = page["runs"].as_array().map_or(0, Vec::len);
        (runs == 200).then_some(runs)
    })
    .await;
    assert_eq!(succeeded, 200);
    let metrics = stack
        .http
        .get(format!("http://{}/metrics", stack.executor.local_addr()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let batches: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("cronbox_executor_run_batches_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(
        (1..200).contains(&batches),
        "200 fires of one instant went in {batches} requests"
    );
    stack.shutdown().await;
}

/// The pre-read writes fires nearest first across jobs: with more jobs
/// than one claim takes and five seconds of fires due at once, every job's
/// fire of a second is written (given its run id) before any fire of the
/// next second. Claiming each job's five seconds in turn wrote the last
/// jobs' first fires after their dispatch time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_read_writes_every_jobs_nearest_fire_first() {
    /// More than a claim takes on SQLite (1,000 jobs), in two batches.
    const JOBS: usize = 1_200;
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    stack
        .api
        .api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    // Every second of the next minute: nothing is due until the clock
    // moves, so both batches are claimed together.
    let next_minute = (start / 60_000 + 1) % 60;
    let specs: Vec<JobSpec> = (0..JOBS)
        .map(|i| {
            serde_json::from_value(json!({
                "name": format!("next-minute-{i}"), "module": "greeter",
                "schedule_type": "CRON", "schedule_conf": format!("* {next_minute} * * * ?"),
                "time_zone": "UTC",
            }))
            .unwrap()
        })
        .collect();
    for batch in specs.chunks(600) {
        assert_eq!(
            create_started(&stack.api, batch.to_vec()).await.started,
            600
        );
    }
    // The fires due are those at start + 60 s ..= start + 64 s; none is
    // sent, as the clock stands before the first.
    let first = start + 60_000;
    clock.advance(Duration::from_secs(59));
    // (id, second of the window) of every run in it, newest first.
    let written = until("five seconds of every job's fires are written", || async {
        let mut query = cronbox_api::RunQuery {
            from_ms: Some(first),
            to_ms: Some(first + 5_000),
            limit: Some(1000),
            ..Default::default()
        };
        let mut runs: Vec<(i64, i64)> = Vec::new();
        loop {
            let page = stack.api.api.runs(&query).await.unwrap();
            runs.extend(
                page.runs
                    .iter()
                    .map(|run| (run.id.0, (run.scheduled_at_ms - first) / 1_000)),
            );
            match page.next_before {
                Some(before) => query.before = Some(before),
                None => break,
            }
        }
        (runs.len() == JOBS * 5).then_some(runs)
    })
    .await;
    assert!(written.windows(2).all(|pair| pair[0].0 > pair[1].0));
    for second in 0..5 {
        let count = written.iter().filter(|(_, at)| *at == second).count();
        assert_eq!(count, JOBS, "second {second}");
    }
    // Newest first, so the seconds never rise down the list: a later
    // second's fire written before an earlier second's would.
    let out_of_order = written
        .windows(2)
        .filter(|pair| pair[0].1 < pair[1].1)
        .count();
    assert_eq!(
        out_of_order, 0,
        "a later fire was written before a nearer one"
    );
}

/// An admin given fires faster than it can send them stops claiming new
/// ones once its dispatch backlog is full, instead of queueing them all in
/// memory; the fires it held back are claimed once the backlog drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_dispatch_backlog_holds_the_pre_read_until_it_drains() {
    // An "executor" that accepts connections and never answers: every
    // dispatch to it waits until its connection is closed.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = format!("http://{}", silent.local_addr().unwrap());
    let holding = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let start = next_whole_minute();
    let clock = ManualClock::new(start);
    let stack = stack(SchedulerConfig {
        clock: clock.clone(),
        max_backlog: 50,
        dispatch_timeout: Duration::from_secs(60),
        // A lease outlasts a send.
        dispatch_lease: Duration::from_secs(61),
        ..SchedulerConfig::default()
    })
    .await;
    let registered = stack
        .http
        .post(format!("{}/api/v1/registry", stack.base))
        .bearer_auth(EXEC)
        .json(&json!({ "group": "silent", "address": silent_address }))
        .send()
        .await
        .unwrap();
    assert!(registered.status().is_success(), "{registered:?}");
    start_minutely_jobs(&stack.api, 100, "silent").await;

    // The first minute's 100 fires are claimed and wait on the silent
    // executor: twice the backlog allowed.
    let first = start + 60_000;
    clock.advance(Duration::from_secs(60));
    until("the first minute's fires wait in dispatch", || async {
        (admin_metric(&stack, "cronbox_admin_dispatch_backlog").await == 100).then_some(())
    })
    .await;
    assert_eq!(runs_scheduled_at(&stack, first).await, 100);
    // The second minute comes: its fires stay in their jobs.
    let second = start + 120_000;
    let held_before = admin_metric(&stack, "cronbox_admin_pre_reads_held_total").await;
    clock.advance(Duration::from_secs(60));
    until("a pre-read pass is held", || async {
        (admin_metric(&stack, "cronbox_admin_pre_reads_held_total").await > held_before)
            .then_some(())
    })
    .await;
    assert_eq!(
        runs_scheduled_at(&stack, second).await,
        0,
        "no fire is claimed while the backlog is full"
    );

    // The silent executor goes away: its dispatches fail, the backlog
    // drains, and the second minute's fires are claimed (on time by the
    // admin's clock, which has not moved).
    holding.abort();
    until("the second minute's fires are claimed", || async {
        (runs_scheduled_at(&stack, second).await == 100).then_some(())
    })
    .await;
    // The held fires were sent in their turn, not dropped: each of the
    // first minute's runs ended, failed by the executor's going.
    let failed = format!(
        "/api/v1/runs?status=failed&from_ms={first}&to_ms={}&limit=1000",
        first + 1
    );
    until("the first minute's runs end", || async {
        let (_, page) = stack.get(&failed).await;
        (page["runs"].as_array().map_or(0, Vec::len) == 100).then_some(())
    })
    .await;
    stack.shutdown().await;
}
