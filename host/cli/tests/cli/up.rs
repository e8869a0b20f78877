//! `cronbox up` as a process: the demo jobs run and their runs appear
//! through the API; a restart keeps jobs, state and token and adds nothing
//! twice.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::net::TcpListener;
use std::process::{Child, Command};
use std::time::Duration;

use cronbox_api::{Client, JobId, JobQuery, Run, RunStatus, TriggerKind};
use cronbox_tests::{AdminClient, TestGroup, until_within};
use serde_json::{Value, json};
use support::{up, up_with_env};

/// Three at a time: the demo test waits on its jobs' 5 s schedule, the
/// others go beside it.
static TESTS: TestGroup = TestGroup::new(3);

fn terminate(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "cronbox up exited with {exit:?}");
}

/// The demo jobs by name: (name, id, enabled).
async fn jobs(api: &Client) -> Vec<(String, JobId, bool)> {
    let mut jobs: Vec<(String, JobId, bool)> = api
        .jobs(&JobQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|listed| (listed.job.name, listed.job.id, listed.job.enabled))
        .collect();
    jobs.sort();
    jobs
}

/// Successful scheduled runs of `job`.
async fn scheduled_successes(api: &AdminClient, job: JobId) -> usize {
    api.runs(job)
        .await
        .iter()
        .filter(|run| run.kind == TriggerKind::Schedule && run.status == RunStatus::Success)
        .count()
}

fn count_of(run: &Run) -> u64 {
    let message = run.message.as_deref().unwrap_or_default();
    message
        .strip_prefix("count=")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("not a counter message: {message}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_runs_the_demo_jobs_and_a_restart_carries_on() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let (mut first, printed, at) = up(data.path(), None);
    let bind = at.admin;
    assert!(
        printed.contains(&format!("admin API   http://{bind}")),
        "{printed}"
    );
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    assert!(token.len() >= 32, "a generated token: {token:?}");
    assert!(printed.contains("api-token"), "{printed}");
    let api = AdminClient::new(format!("http://{bind}"), token.trim());

    let jobs = jobs(&api.api).await;
    let names: Vec<&str> = jobs.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(names, ["counter", "hello", "sharded"]);
    assert!(jobs.iter().all(|(_, _, enabled)| *enabled), "{jobs:?}");
    let id = |name: &str| jobs.iter().find(|job| job.0 == name).unwrap().1;

    // hello fires every 5 s: its runs show up through the API.
    until_within(
        Duration::from_secs(15),
        "hello runs on schedule",
        || async { (scheduled_successes(&api, id("hello")).await > 0).then_some(()) },
    )
    .await;
    let run = api.trigger(id("counter"), json!({})).await;
    let before = api.ended(run).await;

    // The console's user: operator `admin`, its password kept beside the
    // database (owner only) and the same after a restart.
    let password_file = data.path().join("admin-password");
    let password = std::fs::read_to_string(&password_file).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&password_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (status, users) = api.get("/api/v1/users").await;
    assert_eq!(status, 200, "{users}");
    assert_eq!(users[0]["name"], "admin");
    assert_eq!(users[0]["role"], "operator");

    terminate(&mut first.0);
    let (mut second, printed, _) = up(data.path(), Some(at));
    assert!(printed.contains("cronbox is up"), "{printed}");
    assert_eq!(std::fs::read_to_string(&password_file).unwrap(), password);
    let login = api
        .http
        .post(format!("http://{bind}/api/v1/session"))
        .json(&json!({ "user": "admin", "password": password }))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200, "the kept password still logs in");
    assert_eq!(
        self::jobs(&api.api).await,
        jobs,
        "the same jobs, none added twice"
    );
    let run = api.trigger(id("counter"), json!({})).await;
    let after = api.ended(run).await;
    // The counter also fires every 10 s, one run at a time: each run that
    // succeeded between the two counted once more.
    let started = |run: &Run| run.started_at_ms.unwrap();
    let between = api
        .runs(id("counter"))
        .await
        .iter()
        .filter(|run| run.status == RunStatus::Success)
        .filter(|run| (started(&before) + 1..started(&after)).contains(&started(run)))
        .count() as u64;
    assert_eq!(
        count_of(&after),
        count_of(&before) + between + 1,
        "the counter's durable state survived the restart: {after:?}"
    );
    let hello_runs = scheduled_successes(&api, id("hello")).await;
    until_within(
        Duration::from_secs(15),
        "hello fires again after the restart",
        || async { (scheduled_successes(&api, id("hello")).await > hello_runs).then_some(()) },
    )
    .await;
    terminate(&mut second.0);
}

#[test]
fn up_refuses_an_address_in_use_clearly() {
    let _turn = TESTS.turn();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let data = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("up")
        .arg("--data-dir")
        .arg(data.path())
        .args(["--bind", &taken.local_addr().unwrap().to_string()])
        .args(["--executor-bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&taken.local_addr().unwrap().to_string()),
        "the error names the address: {stderr}"
    );
}

mod session;
mod shutdown;

mod legacy;
mod nothing_secret;
mod observability;
mod tls;
mod traces;
mod xxl_job_api;
mod xxl_mariadb;
