//! `cronbox up` as a process: the demo jobs run and their runs appear
//! through the API; a restart keeps jobs, state and token and adds nothing
//! twice.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `cronbox up` on `data_dir`; returns the process and what it printed up
/// to its last welcome line.
fn up(data_dir: &Path, bind: SocketAddr, executor_bind: SocketAddr) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("up")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--bind", &bind.to_string()])
        .args(["--executor-bind", &executor_bind.to_string()])
        .env_remove("CRONBOX_API_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("Ctrl-C") {
            break;
        }
    }
    // Keep reading so that the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, printed)
}

fn terminate(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "cronbox up exited with {exit:?}");
}

struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "GET {path}");
        response.json().await.unwrap()
    }

    async fn trigger(&self, job: i64) -> i64 {
        let response = self
            .http
            .post(format!("{}/api/v1/jobs/{job}/trigger", self.base))
            .bearer_auth(&self.token)
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202);
        response.json::<Value>().await.unwrap()["run_id"]
            .as_i64()
            .unwrap()
    }

    async fn ended(&self, run: i64) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let run = self.get(&format!("/api/v1/runs/{run}")).await;
            if run["status"] == "success" || run["status"] == "failed" {
                return run;
            }
            assert!(Instant::now() < deadline, "run never ended: {run}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Jobs by name: (name, id, enabled).
    async fn jobs(&self) -> Vec<(String, i64, bool)> {
        let mut jobs: Vec<(String, i64, bool)> = self
            .get("/api/v1/jobs")
            .await
            .as_array()
            .unwrap()
            .iter()
            .map(|job| {
                (
                    job["name"].as_str().unwrap().to_owned(),
                    job["id"].as_i64().unwrap(),
                    job["enabled"].as_bool().unwrap(),
                )
            })
            .collect();
        jobs.sort();
        jobs
    }

    /// Successful scheduled runs of `job`.
    async fn scheduled_successes(&self, job: i64) -> usize {
        self.get(&format!("/api/v1/jobs/{job}/runs"))
            .await
            .as_array()
            .unwrap()
            .iter()
            .filter(|run| run["kind"] == "schedule" && run["status"] == "success")
            .count()
    }
}

fn count_of(run: &Value) -> u64 {
    let message = run["message"].as_str().unwrap();
    message
        .strip_prefix("count=")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("not a counter message: {message}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_the_demo_jobs_and_a_restart_carries_on() {
    let data = tempfile::tempdir().unwrap();
    let (bind, executor_bind) = (free_port(), free_port());
    let (mut first, printed) = up(data.path(), bind, executor_bind);
    assert!(
        printed.contains(&format!("admin API   http://{bind}")),
        "{printed}"
    );
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    assert!(token.len() >= 32, "a generated token: {token:?}");
    assert!(printed.contains("api-token"), "{printed}");
    let api = Api {
        base: format!("http://{bind}"),
        token: token.trim().to_owned(),
        http: reqwest::Client::new(),
    };

    let jobs = api.jobs().await;
    let names: Vec<&str> = jobs.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["counter", "hello", "sharded"]);
    assert!(jobs.iter().all(|(_, _, enabled)| *enabled), "{jobs:?}");
    let id = |name: &str| jobs.iter().find(|job| job.0 == name).unwrap().1;

    // hello fires every 5 s: its runs show up through the API.
    let deadline = Instant::now() + Duration::from_secs(15);
    while api.scheduled_successes(id("hello")).await == 0 {
        assert!(Instant::now() < deadline, "hello never ran on schedule");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let run = api.trigger(id("counter")).await;
    let before = count_of(&api.ended(run).await);

    terminate(&mut first);
    let (mut second, printed) = up(data.path(), bind, executor_bind);
    assert!(printed.contains("cronbox is up"), "{printed}");
    assert_eq!(api.jobs().await, jobs, "the same jobs, none added twice");
    let run = api.trigger(id("counter")).await;
    let after = api.ended(run).await;
    assert_eq!(
        count_of(&after),
        before + 1,
        "the counter's durable state survived the restart: {after}"
    );
    let hello_runs = api.scheduled_successes(id("hello")).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    while api.scheduled_successes(id("hello")).await == hello_runs {
        assert!(
            Instant::now() < deadline,
            "hello stopped firing after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    terminate(&mut second);
}

#[test]
fn up_refuses_an_address_in_use_clearly() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("up")
        .arg("--data-dir")
        .arg(data.path())
        .args(["--bind", &taken.local_addr().unwrap().to_string()])
        .args(["--executor-bind", &free_port().to_string()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&taken.local_addr().unwrap().to_string()),
        "the error names the address: {stderr}"
    );
}
