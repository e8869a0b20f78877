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
use cronbox_tests::{ExecutorClient, StandInAdmin, until};
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
        http: cronbox_tls::client(),
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

/// `text` as an admin would send it in a run command, a digest or not
/// (the executor must refuse one that is not).
fn digest_as_sent(text: &str) -> cronbox_protocol::Digest {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).expect("any text")
}

#[path = "executor/modules.rs"]
mod modules;
#[path = "executor/results.rs"]
mod results;
#[path = "executor/strategies.rs"]
mod strategies;

#[tokio::test]
async fn an_admin_older_than_the_executor_is_left_at_once() {
    let f = fixture_with(|config| config.beat_interval = Duration::from_millis(50)).await;
    // An admin of protocol 1 answers a registration with no version.
    f.admin.set_protocol(None);
    let left = until("the executor deregisters from the old admin", || async {
        f.admin.removals().first().cloned()
    })
    .await;
    assert_eq!(left.address, f.executor.address());
    assert_eq!(
        f.admin.registrations().last().unwrap().protocol,
        Some(cronbox_protocol::PROTOCOL_VERSION)
    );
    // A current admin keeps it: no deregistration after its next beats.
    f.admin
        .set_protocol(Some(cronbox_protocol::PROTOCOL_VERSION));
    let removals = f.admin.removals().len();
    let beats = f.admin.registrations().len();
    until("two more beats", || async {
        (f.admin.registrations().len() >= beats + 2).then_some(())
    })
    .await;
    assert_eq!(f.admin.removals().len(), removals);
    f.executor.shutdown().await;
}

#[tokio::test]
async fn the_probes_answer_and_readiness_ends_once_a_shutdown_drains() {
    let f = fixture_with(|config| config.shutdown_grace = Duration::from_secs(30)).await;
    let base = format!("http://{}", f.executor.local_addr());
    for path in [
        executor_paths::LIVEZ,
        executor_paths::HEALTHZ,
        executor_paths::READYZ,
    ] {
        let answer = f.http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(answer.status(), 200, "{path}");
    }
    let sleeper = f.admin.add_module(jobs::bytes("sleeper"));
    assert!(f.run(&command(1, 1, &sleeper, "3000")).await.accepted);
    until("the run starts", || async {
        f.metrics()
            .await
            .contains("cronbox_executor_running 1")
            .then_some(())
    })
    .await;
    let Fixture {
        admin,
        executor,
        http,
        ..
    } = f;
    let tasks = executor.tasks();
    assert!(
        tasks.len() >= 3,
        "the API, the sender and the heartbeat are tracked: {}",
        tasks.len()
    );
    let stopping = tokio::spawn(executor.shutdown());
    let status = until("readiness ends while the run drains", || async {
        let answer = http
            .get(format!("{base}{}", executor_paths::READYZ))
            .send()
            .await
            .ok()?;
        (answer.status() == 503).then_some(answer.status())
    })
    .await;
    assert_eq!(status, 503);
    stopping.await.unwrap();
    // The run in flight finished within the grace; none was lost; nothing
    // of the executor runs past its shutdown.
    assert!(admin.result_of(1, WAIT).await.outcome.is_success());
    assert!(
        tasks.is_empty(),
        "{} tasks outlived the shutdown",
        tasks.len()
    );
}
