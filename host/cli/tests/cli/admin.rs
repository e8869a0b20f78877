//! The admin end to end: `cronbox admin` and `cronbox executor` as real
//! processes on loopback, with real example jobs and a real SQLite file;
//! every assertion reads the run table through the admin's API.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cronbox_api::{Digest, JobId, JobSpec, Run, RunId, RunStatus, TriggerKind};
use cronbox_example_jobs as jobs;
use cronbox_tests::{AdminClient, TestGroup, run_summary, until, until_seen};
use serde_json::{Value, json};
use support::{Process, cronbox_listening};

/// Four at a time: the tests wait on fires, runs and processes, not the
/// CPU.
static TESTS: TestGroup = TestGroup::new(4);

const API_TOKEN: &str = "api-token";
const EXEC_TOKEN: &str = "exec-token";
const WAIT: Duration = Duration::from_secs(30);

/// `cronbox admin` on `bind` (`None`: port 0), once it listens: the
/// process and the address it reported.
fn spawn_admin(bind: Option<SocketAddr>, data_dir: &Path) -> (Process, SocketAddr) {
    spawn_admin_with(bind, data_dir, &[])
}

fn spawn_admin_with(
    bind: Option<SocketAddr>,
    data_dir: &Path,
    extra: &[&str],
) -> (Process, SocketAddr) {
    let bind = bind.map_or_else(|| "127.0.0.1:0".to_owned(), |addr| addr.to_string());
    let fixed = [
        "admin",
        "--bind",
        &bind,
        "--token",
        API_TOKEN,
        "--executor-token",
        EXEC_TOKEN,
        "--pre-read",
        "5s",
    ];
    let (process, url) = cronbox_listening(&arguments(&fixed, extra, data_dir), "listening on ");
    (process, socket_addr(&url))
}

/// `fixed`, then `extra`, then `--data-dir data_dir`.
fn arguments(fixed: &[&str], extra: &[&str], data_dir: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = fixed.iter().chain(extra).map(Into::into).collect();
    args.push("--data-dir".into());
    args.push(data_dir.into());
    args
}

/// `cronbox executor` on port 0 registered with `admin`, once it listens:
/// the process and the address it advertises (`http://…`).
fn spawn_executor(admin: SocketAddr, data_dir: &Path, extra: &[&str]) -> (Process, String) {
    let admin = format!("http://{admin}");
    let fixed = [
        "executor",
        "--bind",
        "127.0.0.1:0",
        "--admin",
        &admin,
        "--token",
        EXEC_TOKEN,
        "--beat-interval",
        "1s",
    ];
    cronbox_listening(&arguments(&fixed, extra, data_dir), "advertised as ")
}

fn socket_addr(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").parse().unwrap()
}

struct Cluster {
    admin_addr: SocketAddr,
    admin: Option<Process>,
    executor: Option<Process>,
    data: tempfile::TempDir,
    http: reqwest::Client,
    /// The admin's API as the operator sees it.
    api: AdminClient,
}

impl Cluster {
    async fn start() -> Cluster {
        Cluster::start_with(&[]).await
    }

    async fn start_with(admin_args: &[&str]) -> Cluster {
        let data = tempfile::tempdir().unwrap();
        let (admin, admin_addr) = spawn_admin_with(None, &data.path().join("admin"), admin_args);
        let (executor, _) = spawn_executor(admin_addr, &data.path().join("executor"), &[]);
        let cluster = Cluster {
            admin_addr,
            admin: Some(admin),
            executor: Some(executor),
            data,
            http: cronbox_tls::client(),
            api: AdminClient::new(format!("http://{admin_addr}"), API_TOKEN),
        };
        cluster.wait_for_executors(&[]).await;
        cluster
    }

    /// Restarts the admin on the address it had, once the old one is gone.
    async fn restart_admin(&mut self, extra: &[&str]) {
        drop(self.admin.take()); // SIGKILL, reaped
        let (admin, _) = spawn_admin_with(
            Some(self.admin_addr),
            &self.data.path().join("admin"),
            extra,
        );
        self.admin = Some(admin);
        self.wait_until_up().await;
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin_addr)
    }

    /// Until the admin answers and counts alive an executor and each of
    /// `addresses` (read from `GET /api/v1/executors`, not waited for).
    async fn wait_for_executors(&self, addresses: &[&str]) {
        self.wait_until_up().await;
        until("the executors register", || async {
            let executors = self.api.api.executors().await.ok()?;
            let alive: Vec<&str> = executors
                .iter()
                .filter(|e| e.alive)
                .map(|e| e.address.as_str())
                .collect();
            (!alive.is_empty() && addresses.iter().all(|a| alive.contains(a))).then_some(())
        })
        .await;
    }

    /// Until the admin is ready (`GET /readyz`).
    async fn wait_until_up(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let ok = self
                .http
                .get(self.url("/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "the admin never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.api.call(method, path, body).await
    }

    async fn upload(&self, job: &str) -> Digest {
        let uploaded = self.api.api.upload(jobs::bytes(job), None, &[]).await;
        uploaded.unwrap().digest
    }

    /// Creates a job from its definition as JSON.
    async fn create(&self, spec: Value) -> JobId {
        let spec: JobSpec = serde_json::from_value(spec).unwrap();
        self.api.api.create_job(&spec).await.unwrap().id
    }

    async fn runs(&self, job: JobId) -> Vec<Run> {
        self.api.runs(job).await
    }

    /// Until `count` runs of `job` ended; every run of the job.
    async fn wait_runs(&self, job: JobId, count: usize) -> Vec<Run> {
        until_seen(
            WAIT,
            &format!("{count} runs of job {job} ended"),
            || async {
                let runs = self.runs(job).await;
                let done = runs.iter().filter(|r| !r.status.is_open()).count();
                if done >= count {
                    return Ok(runs);
                }
                let seen: Vec<String> = runs.iter().map(run_summary).collect();
                Err(format!(
                    "{done} ended of {}: {}",
                    runs.len(),
                    seen.join("; ")
                ))
            },
        )
        .await
    }

    /// Until a run scheduled at each of the `seconds` whole seconds from
    /// `first` has ended; returns those runs.
    async fn wait_seconds(&self, job: JobId, first: i64, seconds: i64) -> Vec<Run> {
        until(
            &format!("{seconds} seconds of job {job} fired and ended"),
            || async {
                let ended: Vec<Run> = self
                    .runs(job)
                    .await
                    .into_iter()
                    .filter(|r| {
                        (first..first + seconds * 1000).contains(&r.scheduled_at_ms)
                            && !r.status.is_open()
                    })
                    .collect();
                (ended.len() as i64 >= seconds).then_some(ended)
            },
        )
        .await
    }

    async fn trigger(&self, job: JobId, request: Value) -> RunId {
        self.api.trigger(job, request).await
    }

    /// The run once it has ended.
    async fn run(&self, id: RunId) -> Run {
        self.api.ended(id).await
    }
}

/// An RFC 3339 instant `ahead_ms` from now, in UTC.
fn chrono_like_rfc3339(ahead_ms: u64) -> String {
    let at = std::time::SystemTime::now() + Duration::from_millis(ahead_ms);
    let ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

/// Milliseconds since the epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

mod definitions;
mod floods;
mod operations;
mod routing;
mod runs;
mod schedules;

/// The admin's stderr up to the line that says where it listens, started
/// with `CRONBOX_LOG=info` and `extra` arguments before `admin`.
fn admin_log_lines(data_dir: &Path, extra: &[&str]) -> Vec<String> {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(extra)
        .args(arguments(
            &[
                "admin",
                "--bind",
                "127.0.0.1:0",
                "--token",
                API_TOKEN,
                "--executor-token",
                EXEC_TOKEN,
            ],
            &[],
            data_dir,
        ))
        .env("CRONBOX_LOG", "info")
        .env_remove("CRONBOX_LOG_FORMAT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _process = Process::new(child);
    let mut lines = Vec::new();
    for line in std::io::BufReader::new(stderr).lines() {
        let line = line.unwrap();
        let listening = line.contains("listening on");
        lines.push(line);
        if listening {
            break;
        }
    }
    lines
}

#[test]
fn logs_are_text_for_people_and_one_json_object_a_line_with_log_format_json() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let text = admin_log_lines(&data.path().join("text"), &[]);
    let started = text
        .iter()
        .find(|line| line.contains("admin started"))
        .unwrap_or_else(|| panic!("{text:?}"));
    assert!(
        !started.starts_with('{') && started.contains("INFO"),
        "{started}"
    );
    let json = admin_log_lines(&data.path().join("json"), &["--log-format", "json"]);
    let started: Value = json
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["fields"]["message"] == "admin started")
        .unwrap_or_else(|| panic!("{json:?}"));
    assert_eq!(started["level"], "INFO", "{started}");
    assert_eq!(started["target"], "cronbox_admin", "{started}");
    assert!(
        started["fields"]["local_addr"]
            .as_str()
            .is_some_and(|addr| addr.starts_with("127.0.0.1:")),
        "{started}"
    );
    assert!(started["timestamp"].is_string(), "{started}");
}
