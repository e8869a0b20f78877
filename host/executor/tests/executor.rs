//! The executor through its HTTP API, with real example jobs and a
//! stand-in admin on loopback.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::time::{Duration, Instant};

use cronbox_example_jobs as jobs;
use cronbox_executor::{ExecutorConfig, RunningExecutor};
use cronbox_protocol::{
    BlockStrategy, IdleBeatResponse, KillCommand, KillResponse, LogResponse, Outcome, RunAnswer,
    RunBatch, RunBatchResponse, RunCommand, RunResponse, Trigger, executor_paths,
};
use cronbox_tests::{ExecutorClient, StandInAdmin};
use serde_json::json;

const TOKEN: &str = "executor-test-token";

struct Fixture {
    admin: StandInAdmin,
    executor: RunningExecutor,
    http: reqwest::Client,
    /// The executor's API with its token.
    client: ExecutorClient,
    _data: tempfile::TempDir,
}

async fn fixture_with(adjust: impl FnOnce(&mut ExecutorConfig)) -> Fixture {
    let admin = StandInAdmin::start(TOKEN).await;
    let data = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![admin.url()],
        TOKEN.to_owned(),
        data.path().to_path_buf(),
    );
    config.beat_interval = Duration::from_millis(200);
    adjust(&mut config);
    let executor = cronbox_executor::start(config)
        .await
        .expect("executor starts");
    let client = ExecutorClient::new(format!("http://{}", executor.local_addr()), TOKEN);
    Fixture {
        admin,
        executor,
        http: reqwest::Client::new(),
        client,
        _data: data,
    }
}

async fn fixture() -> Fixture {
    fixture_with(|_| {}).await
}

fn command(job_id: u64, run_id: u64, digest: &str, param: &str) -> RunCommand {
    let trigger = Trigger {
        job_id,
        run_id,
        ..Trigger::manual(param, 0)
    };
    RunCommand {
        block_strategy: BlockStrategy::SerialExecution,
        ..RunCommand::new(trigger, digest_as_sent(digest))
    }
}

impl Fixture {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.executor.local_addr())
    }

    async fn post(&self, path: &str, body: &impl serde::Serialize) -> reqwest::Response {
        self.client.post(path, body).await
    }

    async fn run(&self, command: &RunCommand) -> RunResponse {
        self.client.run(command).await
    }

    async fn idle_beat(&self, job_id: u64) -> IdleBeatResponse {
        self.post(executor_paths::IDLE_BEAT, &json!({ "job_id": job_id }))
            .await
            .json()
            .await
            .unwrap()
    }

    async fn metrics(&self) -> String {
        self.client.metrics().await
    }

    /// Whether run `run` has logged `text` so far.
    async fn has_logged(&self, run: u64, text: &str) -> bool {
        let page: LogResponse = self
            .post(executor_paths::LOG, &json!({ "run_id": run }))
            .await
            .json()
            .await
            .unwrap();
        page.lines.iter().any(|line| line.text == text)
    }

    async fn wait_until_running(&self, job_id: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.idle_beat(job_id).await.running == 0 {
            assert!(Instant::now() < deadline, "job {job_id} never started");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

const WAIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_a_job_fetched_by_digest_and_calls_the_result_back() {
    let f = fixture_with(|config| {
        config.advertised_address = Some("http://executor-7.example:9999".to_owned());
        config.group = "billing".to_owned();
    })
    .await;
    assert_eq!(f.executor.address(), "http://executor-7.example:9999");
    let digest = f.admin.add_module(jobs::bytes("hello"));
    let response = f.run(&command(1, 100, &digest, "executor")).await;
    assert!(response.accepted);
    let result = f.admin.result_of(100, WAIT).await;
    assert_eq!(
        result.outcome,
        Outcome::Success {
            message: "hello, executor".into()
        }
    );
    assert_eq!(result.code, 200);
    assert_eq!(result.module_digest, digest);
    assert_eq!(result.executor, f.executor.address());
    assert_eq!(result.log[0].text, "hello, executor");
    // Registered with the admin under its group and advertised address.
    let registrations = f.admin.registrations();
    assert!(
        registrations
            .iter()
            .any(|r| r.address == "http://executor-7.example:9999" && r.group == "billing"),
        "{registrations:?}"
    );
    f.executor.shutdown().await;
    assert!(!f.admin.removals().is_empty(), "deregistered on shutdown");
}

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
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        f.admin.results().iter().filter(|r| r.run_id == 42).count(),
        1
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_retires_and_calls_destroy() {
    let f = fixture_with(|config| config.idle_retire = Duration::from_millis(300)).await;
    let digest = f.admin.add_module(jobs::bytes("counter"));
    for run_id in 1..=2 {
        assert!(f.run(&command(9, run_id, &digest, "")).await.accepted);
        f.admin.result_of(run_id, WAIT).await;
    }
    assert_eq!(
        f.admin.result_of(2, WAIT).await.outcome,
        Outcome::Success {
            message: "count=1 instance_runs=2".into()
        },
        "the warm instance served both runs"
    );
    let deadline = Instant::now() + WAIT;
    while !f
        .metrics()
        .await
        .contains("cronbox_executor_instances_retired_total 1")
    {
        assert!(Instant::now() < deadline, "{}", f.metrics().await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(f.run(&command(9, 3, &digest, "")).await.accepted);
    assert_eq!(
        f.admin.result_of(3, WAIT).await.outcome,
        Outcome::Success {
            message: "count=1 instance_runs=1".into()
        },
        "a new instance after retirement"
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_swap_between_versions_loses_no_run() {
    let f = fixture().await;
    let v1 = f.admin.add_module(jobs::bytes("hello"));
    let v2 = f.admin.add_module(jobs::bytes("sharded"));
    let mut sent = Vec::new();
    for run_id in 1..=30u64 {
        let version = if (run_id / 5) % 2 == 0 { &v1 } else { &v2 };
        assert!(f.run(&command(10, run_id, version, "swap")).await.accepted);
        sent.push((run_id, version.clone()));
        if run_id % 3 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let results = f.admin.wait_for_results(30, WAIT).await;
    for (run_id, version) in sent {
        let result = results
            .iter()
            .find(|r| r.run_id == run_id)
            .expect("every run reported");
        assert_eq!(
            result.module_digest, version,
            "run {run_id} ran the version it was sent"
        );
        let expected = if version == v1 {
            "hello, swap"
        } else {
            "shard 0/1"
        };
        assert_eq!(
            result.outcome,
            Outcome::Success {
                message: expected.into()
            }
        );
    }
    assert_eq!(results.len(), 30);
    f.executor.shutdown().await;
}

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

    // None of the refused requests ran anything.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(f.admin.results().is_empty());
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_cannot_load_is_rejected_by_callback() {
    let f = fixture().await;
    let missing = "0".repeat(64);
    assert!(f.run(&command(13, 1, &missing, "")).await.accepted);
    let result = f.admin.result_of(1, WAIT).await;
    match result.outcome {
        Outcome::Rejected { reason } => assert!(reason.contains("cannot fetch module"), "{reason}"),
        other => panic!("expected rejected, got {other:?}"),
    }
    let refused = f.admin.add_module(jobs::bytes("foreign-import"));
    for run in 2..=4 {
        assert!(f.run(&command(13, run, &refused, "")).await.accepted);
        match f.admin.result_of(run, WAIT).await.outcome {
            Outcome::Rejected { reason } => {
                assert!(reason.contains("acme:vault/keys"), "{reason}")
            }
            other => panic!("expected rejected, got {other:?}"),
        }
    }
    // Loaded (and refused) once; the later triggers reused the refusal.
    let metrics = f.metrics().await;
    assert!(
        metrics.contains("cronbox_executor_module_load_failures_total 1\n"),
        "{metrics}"
    );
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
    let deadline = Instant::now() + WAIT;
    while f.executor.pending_results() < 5 {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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

/// What an executor keeps of modules is bounded: past `max_loaded_modules`
/// the least recently used leaves memory, and then its files leave the disk
/// caches when they are over their bound; it runs again by fetching and
/// compiling anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_caches_stay_within_their_bounds() {
    let mut data_dir = std::path::PathBuf::new();
    let f = fixture_with(|config| {
        config.max_loaded_modules = 1;
        config.disk_cache_bytes = 1; // nothing beyond the loaded module
        data_dir = config.data_dir.clone();
    })
    .await;
    // A digest's module and artifact (not the empty lock file an
    // artifact is compiled under).
    let files_of = |digest: &str| -> usize {
        ["modules", "artifacts"]
            .iter()
            .filter_map(|dir| std::fs::read_dir(data_dir.join(dir)).ok())
            .flatten()
            .filter(|entry| {
                entry.as_ref().is_ok_and(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    name.starts_with(digest) && !name.ends_with(".lock")
                })
            })
            .count()
    };
    let hello = f.admin.add_module(jobs::bytes("hello"));
    let counter = f.admin.add_module(jobs::bytes("counter"));
    f.run(&command(1, 1, &hello, "a")).await;
    assert!(f.admin.result_of(1, WAIT).await.outcome.is_success());
    assert_eq!(files_of(&hello), 2, "module and artifact kept while loaded");

    f.run(&command(2, 2, &counter, "")).await;
    assert!(f.admin.result_of(2, WAIT).await.outcome.is_success());
    assert_eq!(files_of(&counter), 2);
    assert_eq!(
        files_of(&hello),
        0,
        "no longer loaded, over the bound: gone"
    );

    // Another job of the same module: fetched and compiled again.
    f.run(&command(3, 3, &hello, "again")).await;
    let again = f.admin.result_of(3, WAIT).await;
    assert!(again.outcome.is_success(), "{:?}", again.outcome);
    assert_eq!((files_of(&hello), files_of(&counter)), (2, 0));
    let metrics = f.metrics().await;
    assert!(
        metrics.contains("cronbox_executor_disk_cache_trimmed_files_total 4"),
        "{metrics}"
    );
    f.executor.shutdown().await;
}

/// No tenant fills every instance slot: with four slots a tenant runs at
/// most three at once, so another tenant's run starts at once instead of
/// waiting behind it; the tenant's fourth run waits for its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_gets_a_share_of_the_slots_not_all_of_them() {
    let f = fixture_with(|config| config.runtime.max_instances = 4).await;
    let sleeper = f.admin.add_module(jobs::bytes("sleeper"));
    let hello = f.admin.add_module(jobs::bytes("hello"));
    let of_tenant = |tenant: &str, mut command: RunCommand| {
        command.tenant = tenant.to_owned();
        command
    };
    for job in 1..=4 {
        let busy = of_tenant("busy", command(job, job, &sleeper, "60000"));
        assert!(f.run(&busy).await.accepted);
    }
    // Three of the four start sleeping; the fourth waits for a share.
    let waiting = cronbox_tests::until("three busy runs sleep", || async {
        let mut waiting = Vec::new();
        for run in 1..=4 {
            if !f.has_logged(run, "sleeping 60000 ms").await {
                waiting.push(run);
            }
        }
        (waiting.len() == 1).then(|| waiting[0])
    })
    .await;
    let other = of_tenant("other", command(9, 9, &hello, "other"));
    assert!(f.run(&other).await.accepted);
    let result = f.admin.result_of(9, WAIT).await;
    assert!(result.outcome.is_success(), "{:?}", result.outcome);

    // Stopped now (the waiting one first, or it would take a freed share),
    // the busy tenant's three ran and its fourth never began.
    let mut order = vec![waiting];
    order.extend((1..=4).filter(|run| *run != waiting));
    for job in order {
        f.post(executor_paths::KILL, &KillCommand::Job { job_id: job })
            .await;
    }
    let mut started = 0;
    for run in 1..=4 {
        let result = f.admin.result_of(run, WAIT).await;
        assert_eq!(result.outcome, Outcome::Killed, "run {run}");
        let slept = result
            .log
            .iter()
            .any(|line| line.text == "sleeping 60000 ms");
        assert_eq!(slept, run != waiting, "run {run}");
        if slept {
            started += 1;
        }
    }
    assert_eq!(started, 3, "three of four slots for one tenant");
    f.executor.shutdown().await;
}

/// A tenant's quota of instances, sent with each of its runs, caps it below
/// its share of the slots; a larger quota sent later lets more start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_instance_quota_caps_its_runs_on_an_executor() {
    let f = fixture_with(|config| config.runtime.max_instances = 8).await;
    let sleeper = f.admin.add_module(jobs::bytes("sleeper"));
    let capped = |job: u64, quota: u32| RunCommand {
        tenant: "capped".to_owned(),
        tenant_max_instances: Some(quota),
        ..command(job, job, &sleeper, "60000")
    };
    let sleeping = |runs: std::ops::RangeInclusive<u64>| {
        let f = &f;
        async move {
            let mut sleeping = Vec::new();
            for run in runs {
                if f.has_logged(run, "sleeping 60000 ms").await {
                    sleeping.push(run);
                }
            }
            sleeping
        }
    };
    for job in 1..=2 {
        assert!(f.run(&capped(job, 1)).await.accepted);
    }
    let running = cronbox_tests::until("one capped run sleeps", || async {
        let sleeping = sleeping(1..=2).await;
        (sleeping.len() == 1).then(|| sleeping[0])
    })
    .await;
    let waiting = 3 - running;
    // Stopped while it waits, it never began.
    f.post(executor_paths::KILL, &KillCommand::Job { job_id: waiting })
        .await;
    let result = f.admin.result_of(waiting, WAIT).await;
    assert_eq!(result.outcome, Outcome::Killed);
    assert!(
        !result
            .log
            .iter()
            .any(|line| line.text == "sleeping 60000 ms"),
        "run {waiting} waited for the tenant's one instance: {:?}",
        result.log
    );

    // A quota of three, sent with the next runs: both start beside the
    // first.
    for job in 3..=4 {
        assert!(f.run(&capped(job, 3)).await.accepted);
    }
    cronbox_tests::until("three capped runs sleep", || async {
        (sleeping(3..=4).await.len() == 2).then_some(())
    })
    .await;
    for job in [running, 3, 4] {
        f.post(executor_paths::KILL, &KillCommand::Job { job_id: job })
            .await;
        let result = f.admin.result_of(job, WAIT).await;
        assert_eq!(result.outcome, Outcome::Killed, "run {job}");
    }
    f.executor.shutdown().await;
}

/// `prepare` fetches and compiles a module ahead of its runs and says
/// whether it is ready: a module the admin has is, an unknown digest or a
/// malformed one is not, with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_compiles_a_module_ahead_and_names_what_failed() {
    use cronbox_protocol::PrepareResponse;
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    let prepare = |digest: String| {
        let f = &f;
        async move {
            f.post(executor_paths::PREPARE, &json!({ "module_digest": digest }))
                .await
                .json::<PrepareResponse>()
                .await
                .unwrap()
        }
    };
    let ready = prepare(digest.clone()).await;
    assert!(ready.ready && ready.error.is_none(), "{ready:?}");
    let unknown = prepare("e".repeat(64)).await;
    assert!(!unknown.ready, "{unknown:?}");
    assert!(
        unknown
            .error
            .as_deref()
            .unwrap()
            .contains("cannot fetch module"),
        "{unknown:?}"
    );
    let malformed = prepare("not-a-digest".to_owned()).await;
    assert!(
        malformed
            .error
            .as_deref()
            .unwrap()
            .contains("module_digest"),
        "{malformed:?}"
    );
    let response = f.run(&command(1, 1, &digest, "prepared")).await;
    assert!(response.accepted);
    let result = f.admin.result_of(1, WAIT).await;
    assert_eq!(
        result.outcome,
        Outcome::Success {
            message: "hello, prepared".into()
        }
    );
    f.executor.shutdown().await;
}

/// `text` as an admin would send it in a run command, a digest or not
/// (the executor must refuse one that is not).
fn digest_as_sent(text: &str) -> cronbox_protocol::Digest {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).expect("any text")
}
