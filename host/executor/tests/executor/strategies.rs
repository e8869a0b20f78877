//! Block strategies, held and queued runs, kills and batches of runs.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serial_execution_runs_one_at_a_time_in_order() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("sleeper"));
    for run_id in 1..=3 {
        assert!(f.run(&command(2, run_id, &digest, "150")).await.accepted);
    }
    let idle = f.idle_beat(2).await;
    assert!(!idle.idle);
    assert_eq!(idle.running + idle.queued, 3);
    let mut results = Vec::new();
    for run_id in 1..=3 {
        results.push(f.admin.result_of(run_id, WAIT).await);
    }
    for pair in results.windows(2) {
        let first_end = pair[0].started_at_ms + pair[0].duration_ms as i64;
        assert!(
            pair[1].started_at_ms >= first_end,
            "run {} started before run {} ended",
            pair[1].run_id,
            pair[0].run_id
        );
    }
    assert!(results.iter().all(|r| r.outcome.is_success()));
    assert!(f.idle_beat(2).await.idle);
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discard_later_refuses_while_the_job_runs() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("runaway"));
    let mut first = command(3, 1, &digest, "");
    first.block_strategy = BlockStrategy::DiscardLater;
    first.limits.timeout_ms = 600;
    assert!(f.run(&first).await.accepted);
    f.wait_until_running(3).await;
    let mut second = command(3, 2, &digest, "");
    second.block_strategy = BlockStrategy::DiscardLater;
    let refused = f.run(&second).await;
    assert!(!refused.accepted);
    match refused.refused {
        Some(Outcome::Rejected { reason }) => assert!(reason.contains("DISCARD_LATER"), "{reason}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    let result = f.admin.result_of(1, WAIT).await;
    assert_eq!(result.outcome, Outcome::Timeout { timeout_ms: 600 });
    // Once idle, the job takes runs again.
    let mut third = command(3, 3, &digest, "");
    third.block_strategy = BlockStrategy::DiscardLater;
    third.limits.timeout_ms = 100;
    assert!(f.run(&third).await.accepted);
    assert!(
        f.admin.results().iter().all(|r| r.run_id != 2),
        "a refused run has no callback"
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_sent_ahead_is_held_until_its_instant_then_applied() {
    let f = fixture().await;
    let hello = f.admin.add_module(jobs::bytes("hello"));
    let runaway = f.admin.add_module(jobs::bytes("runaway"));

    // Held for 300 ms: accepted now, started then.
    let mut ahead = command(30, 1, &hello, "ahead");
    ahead.start_in_ms = 300;
    let sent = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(f.run(&ahead).await.accepted);
    assert!(
        f.idle_beat(30).await.idle,
        "a held run does not make its job busy"
    );
    let result = f.admin.result_of(1, WAIT).await;
    assert!(result.outcome.is_success(), "{:?}", result.outcome);
    let held_for = result.started_at_ms - sent;
    assert!(
        (300..1_000).contains(&held_for),
        "started {held_for} ms after it was sent"
    );

    // Killed while held: it never starts.
    let mut killed = command(31, 2, &hello, "");
    killed.start_in_ms = 5_000;
    assert!(f.run(&killed).await.accepted);
    let answer: KillResponse = f
        .post(executor_paths::KILL, &KillCommand::Run { run_id: 2 })
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer.killed, [2]);
    let result = f.admin.result_of(2, WAIT).await;
    assert_eq!((result.outcome, result.started_at_ms), (Outcome::Killed, 0));

    // The block strategy applies at the instant: DISCARD_LATER refuses a
    // held trigger if the job is busy by then, and says so by callback.
    let mut busy = command(32, 3, &runaway, "");
    busy.limits.timeout_ms = 1_000;
    assert!(f.run(&busy).await.accepted);
    f.wait_until_running(32).await;
    let mut later = command(32, 4, &runaway, "");
    later.block_strategy = BlockStrategy::DiscardLater;
    later.start_in_ms = 100;
    assert!(f.run(&later).await.accepted, "held, not yet judged");
    match f.admin.result_of(4, WAIT).await.outcome {
        Outcome::Rejected { reason } => assert!(reason.contains("DISCARD_LATER"), "{reason}"),
        other => panic!("expected a rejection, got {other:?}"),
    }
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_run_sees_the_state_its_predecessor_wrote_here() {
    let f = fixture().await;
    let counter = f.admin.add_module(jobs::bytes("counter"));
    // Both triggers carry the admin's snapshot from before either ran, as
    // when the second is sent while the first is still queued or held.
    let mut first = command(33, 1, &counter, "");
    first.state.insert("count".into(), "41".into());
    let mut second = command(33, 2, &counter, "");
    second.state = first.state.clone();
    second.start_in_ms = 200;
    assert!(f.run(&first).await.accepted);
    assert!(f.run(&second).await.accepted);
    let mut counts = Vec::new();
    for run_id in [1, 2] {
        let result = f.admin.result_of(run_id, WAIT).await;
        counts.push(result.state_changes.get("count").cloned().flatten());
    }
    assert_eq!(
        counts,
        [Some("42".to_owned()), Some("43".to_owned())],
        "the second run counted on from the first"
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cover_early_stops_a_runaway_and_runs_the_new_trigger() {
    let f = fixture().await;
    let runaway = f.admin.add_module(jobs::bytes("runaway"));
    let hello = f.admin.add_module(jobs::bytes("hello"));
    assert!(f.run(&command(4, 1, &runaway, "")).await.accepted);
    f.wait_until_running(4).await;
    // Queued behind the runaway (serial), to be covered too.
    assert!(f.run(&command(4, 2, &runaway, "")).await.accepted);
    let covering_at = Instant::now();
    let mut cover = command(4, 3, &hello, "replacement");
    cover.block_strategy = BlockStrategy::CoverEarly;
    assert!(f.run(&cover).await.accepted);

    let first = f.admin.result_of(1, WAIT).await;
    assert_eq!(first.outcome, Outcome::Covered);
    let queued = f.admin.result_of(2, WAIT).await;
    assert_eq!(queued.outcome, Outcome::Covered);
    assert_eq!(
        queued.started_at_ms, 0,
        "a covered queued run never started"
    );
    let replacement = f.admin.result_of(3, WAIT).await;
    assert_eq!(
        replacement.outcome,
        Outcome::Success {
            message: "hello, replacement".into()
        }
    );
    assert!(covering_at.elapsed() < Duration::from_secs(5));
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_up_to_the_limit_at_once() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("sleeper"));
    for run_id in 1..=4 {
        let mut run = command(5, run_id, &digest, "400");
        run.block_strategy = BlockStrategy::Concurrent;
        run.max_concurrency = 3;
        assert!(f.run(&run).await.accepted);
    }
    let deadline = Instant::now() + WAIT;
    let mut peak = 0;
    while f.admin.results().len() < 4 {
        peak = peak.max(f.idle_beat(5).await.running);
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(peak, 3, "three at once, never more");
    let results = f.admin.results();
    let mut starts: Vec<i64> = results.iter().map(|r| r.started_at_ms).collect();
    starts.sort();
    assert!(
        starts[2] - starts[0] < 300,
        "the first three overlapped: {starts:?}"
    );
    assert!(
        starts[3] - starts[0] >= 350,
        "the fourth waited for a free slot: {starts:?}"
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_by_run_and_by_job() {
    let f = fixture().await;
    let runaway = f.admin.add_module(jobs::bytes("runaway"));
    let sleeper = f.admin.add_module(jobs::bytes("sleeper"));
    assert!(f.run(&command(6, 1, &runaway, "")).await.accepted);
    f.wait_until_running(6).await;
    let killed: KillResponse = f
        .post(executor_paths::KILL, &KillCommand::Run { run_id: 1 })
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(killed.killed, vec![1]);
    assert_eq!(f.admin.result_of(1, WAIT).await.outcome, Outcome::Killed);

    assert!(f.run(&command(7, 10, &sleeper, "60000")).await.accepted);
    assert!(f.run(&command(7, 11, &sleeper, "60000")).await.accepted);
    f.wait_until_running(7).await;
    let killed: KillResponse = f
        .post(executor_paths::KILL, &KillCommand::Job { job_id: 7 })
        .await
        .json()
        .await
        .unwrap();
    let mut ids = killed.killed.clone();
    ids.sort();
    assert_eq!(ids, vec![10, 11]);
    assert_eq!(f.admin.result_of(10, WAIT).await.outcome, Outcome::Killed);
    assert_eq!(f.admin.result_of(11, WAIT).await.outcome, Outcome::Killed);
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_runs_is_answered_command_by_command_in_order() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    let batch = RunBatch {
        commands: vec![
            command(8, 60, &digest, "first"),
            command(8, 60, &digest, "again"),
            command(9, 61, "not-a-digest", "bad"),
            command(10, 62, &digest, "third"),
        ],
    };
    let answer = f.post(executor_paths::RUN_BATCH, &batch).await;
    assert_eq!(answer.status(), 200);
    let answers: RunBatchResponse = answer.json().await.unwrap();
    let summary: Vec<String> = answers
        .answers
        .iter()
        .map(|answer| match answer {
            RunAnswer::Answered(response) => format!("{} {}", response.run_id, response.accepted),
            RunAnswer::Failed { status, error } => format!("{status} {:?}", error.field),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "60 true",
            "409 None",
            "400 Some(\"module_digest\")",
            "62 true"
        ]
    );
    for run in [60, 62] {
        assert!(f.admin.result_of(run, WAIT).await.outcome.is_success());
    }
    assert!(
        f.metrics()
            .await
            .contains("cronbox_executor_run_batches_total 1")
    );
    // More than a batch holds is refused whole.
    let too_many = RunBatch {
        commands: (0..=RunBatch::MAX as u64)
            .map(|run| command(20, 100 + run, &digest, "x"))
            .collect(),
    };
    let refused = f.post(executor_paths::RUN_BATCH, &too_many).await;
    assert_eq!(refused.status(), 400);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["field"], "commands", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_run_id_is_refused() {
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    assert!(f.run(&command(8, 42, &digest, "once")).await.accepted);
    let again = f
        .post(executor_paths::RUN, &command(8, 42, &digest, "twice"))
        .await;
    assert_eq!(again.status(), 409);
    let body: serde_json::Value = again.json().await.unwrap();
    assert_eq!(body["code"], "duplicate_run");
    assert!(body["message"].as_str().unwrap().contains("run 42"));
    f.admin.result_of(42, WAIT).await;
    // A later run of the same job (one at a time, results in order) ends
    // after anything the refused trigger could have started.
    assert!(f.run(&command(8, 43, &digest, "after")).await.accepted);
    f.admin.result_of(43, WAIT).await;
    assert_eq!(
        f.admin.results().iter().filter(|r| r.run_id == 42).count(),
        1
    );
    f.executor.shutdown().await;
}
