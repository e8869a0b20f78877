//! `cronbox executor` as a real process: results survive SIGKILL in the
//! spool and arrive exactly once when the admin comes back.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cronbox_example_jobs as jobs;
use cronbox_protocol::{Outcome, RunCommand, Trigger, executor_paths};
use cronbox_tests::{StandInAdmin, until};

use crate::support::{Process, cronbox_listening};

const TOKEN: &str = "process-test-token";
const WAIT: Duration = Duration::from_secs(20);

/// `cronbox executor` on `bind` (`None`: port 0), once it listens.
fn spawn_executor(bind: Option<SocketAddr>, admin: &str, data_dir: &Path) -> Process {
    let bind = bind.map_or_else(|| "127.0.0.1:0".to_owned(), |bind| bind.to_string());
    let data_dir = data_dir.to_str().expect("a UTF-8 path");
    let args = [
        "executor",
        "--bind",
        &bind,
        "--admin",
        admin,
        "--token",
        TOKEN,
        "--data-dir",
        data_dir,
        "--beat-interval",
        "200ms",
    ];
    cronbox_listening(&args, "advertised as ").0
}

/// Until the executor registered with `admin` for the `n`th time; returns
/// the address it registered (where it listens).
async fn wait_for_registration(admin: &StandInAdmin, n: usize) -> SocketAddr {
    until("the executor registered", || async {
        let registration = admin.registrations().get(n - 1)?.clone();
        registration
            .address
            .trim_start_matches("http://")
            .parse()
            .ok()
    })
    .await
}

async fn wait_for_beat(http: &reqwest::Client, bind: SocketAddr) {
    let deadline = Instant::now() + WAIT;
    loop {
        let beat = http
            .post(format!("http://{bind}{}", executor_paths::BEAT))
            .bearer_auth(TOKEN)
            .send()
            .await;
        if beat.is_ok_and(|response| response.status().is_success()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the executor never answered beat"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn send_run(http: &reqwest::Client, bind: SocketAddr, run_id: u64, digest: &str) {
    let trigger = Trigger {
        job_id: 1,
        run_id,
        ..Trigger::manual("spool", 0)
    };
    let command = RunCommand::new(trigger, digest_as_sent(digest));
    let response = http
        .post(format!("http://{bind}{}", executor_paths::RUN))
        .bearer_auth(TOKEN)
        .json(&command)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
}

/// Results in the executor's spool not yet acknowledged: its segment files
/// replayed (a `result` record adds a run, an `acked` record removes runs).
fn spooled(data_dir: &Path) -> usize {
    let mut files: Vec<_> = std::fs::read_dir(data_dir.join("spool"))
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    files.retain(|path| path.extension().is_some_and(|ext| ext == "spool"));
    files.sort();
    let mut unacknowledged = std::collections::HashSet::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for record in text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        {
            if let Some(run_id) = record["result"]["run_id"].as_u64() {
                unacknowledged.insert(run_id);
            }
            for run_id in record["acked"].as_array().into_iter().flatten() {
                unacknowledged.remove(&run_id.as_u64().unwrap_or(0));
            }
        }
    }
    unacknowledged.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spooled_results_survive_sigkill_and_arrive_exactly_once() {
    let admin = StandInAdmin::start(TOKEN).await;
    let digest = admin.add_module(jobs::bytes("hello"));
    let data = tempfile::tempdir().unwrap();
    let http = cronbox_tls::client();

    let mut executor = spawn_executor(None, &admin.url(), data.path());
    let bind = wait_for_registration(&admin, 1).await;
    wait_for_beat(&http, bind).await;
    send_run(&http, bind, 1, &digest).await;
    admin.result_of(1, WAIT).await;

    admin.set_available(false);
    for run_id in 2..=6 {
        send_run(&http, bind, run_id, &digest).await;
    }
    let deadline = Instant::now() + WAIT;
    while spooled(data.path()) < 5 {
        assert!(Instant::now() < deadline, "results never reached the spool");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    executor.kill();
    assert_eq!(spooled(data.path()), 5, "the spool outlives the process");

    let mut restarted = spawn_executor(Some(bind), &admin.url(), data.path());
    wait_for_beat(&http, bind).await;
    admin.set_available(true);
    let results = admin.wait_for_results(6, WAIT).await;
    // An acknowledged result leaves the spool; once it is empty nothing is
    // left to send again.
    until("the spool emptied", || async {
        (spooled(data.path()) == 0).then_some(())
    })
    .await;
    let results_later = admin.results();
    assert_eq!(results_later.len(), results.len(), "nothing arrives twice");
    let mut ids: Vec<u64> = results_later.iter().map(|r| r.run_id).collect();
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3, 4, 5, 6]);
    for result in &results_later {
        assert_eq!(
            result.outcome,
            Outcome::Success {
                message: "hello, spool".into()
            }
        );
    }
    assert_eq!(spooled(data.path()), 0);
    restarted.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_gracefully_and_deregisters() {
    let admin = StandInAdmin::start(TOKEN).await;
    let data = tempfile::tempdir().unwrap();
    let http = cronbox_tls::client();
    let mut executor = spawn_executor(None, &admin.url(), data.path());
    let bind = wait_for_registration(&admin, 1).await;
    wait_for_beat(&http, bind).await;
    let status = Command::new("kill")
        .args(["-TERM", &executor.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = executor.0.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
    assert_eq!(admin.removals().len(), 1, "deregistered once");
    assert_eq!(admin.removals()[0].address, format!("http://{bind}"));
}

#[test]
fn an_executor_without_admin_or_token_is_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["executor", "--token", "x"])
        .env_remove("CRONBOX_ADMINS")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--admin"));

    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["executor", "--admin", "http://127.0.0.1:1", "--token", ""])
        .env_remove("CRONBOX_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("must not be empty"));
}

/// `text` as an admin would send it in a run command, a digest or not
/// (the executor must refuse one that is not).
fn digest_as_sent(text: &str) -> cronbox_protocol::Digest {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).expect("any text")
}
