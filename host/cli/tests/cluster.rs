//! Cluster mode on PostgreSQL: several `cronbox admin` processes on one
//! database with `cronbox executor` processes, each test injecting a fault
//! (SIGKILL, a database restart, skewed clocks, racing admins) and then
//! asserting on the run table itself; workflows advanced by two admins,
//! one of them killed.
//!
//! The tests of this file run one at a time (they load the machine on
//! purpose); the suite's other test binaries run before or after. Their
//! only sleeps are the firing windows themselves (real seconds of a real
//! clock, which is what they measure) and one fault's length; every other
//! wait ends on the event it waits for.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cronbox_admin::scheduler::CLAIM_PAST_HORIZON_MS;
use cronbox_admin::store::WRITE_LEASE_MS;
use cronbox_admin::store::{JobId, RunFilter, RunId, RunRow};
use cronbox_admin::{SchedulerConfig, Store};
use cronbox_api::{AlarmState, Client, JobBatch, JobSpec, RunStatus, TriggerKind, TriggerRequest};
use cronbox_example_jobs as jobs;
use cronbox_tests::{PostgresServer, WebhookReceiver};
use cronbox_tests::{until, until_within};
use serde_json::{Value, json};
use support::{Process, cronbox_listening};

const API: &str = "cluster-api";
const EXEC: &str = "cluster-exec";
const WAIT: Duration = Duration::from_secs(60);

/// One cluster test at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

struct Admin {
    /// `http://…`, as the admin reported it.
    url: String,
    /// Its instance name, the lease owner of the runs it holds.
    instance: String,
    extra: Vec<String>,
    process: Option<Process>,
}

struct Cluster {
    postgres: PostgresServer,
    url: String,
    admins: Vec<Admin>,
    executors: Vec<Option<Process>>,
    /// Where each executor listens (`http://…`, as it advertises itself).
    executor_urls: Vec<String>,
    http: reqwest::Client,
    _data: tempfile::TempDir,
}

impl Cluster {
    /// A database, admins (one per entry of `admin_args`, each with those
    /// extra flags) and `executors` executors registered with all of them.
    async fn start(admin_args: &[&[&str]], executors: usize) -> Cluster {
        let postgres = PostgresServer::start();
        let url = postgres.create_database("cluster");
        let data = tempfile::tempdir().unwrap();
        let mut cluster = Cluster {
            postgres,
            url,
            admins: admin_args
                .iter()
                .map(|extra| Admin {
                    url: String::new(),
                    instance: String::new(),
                    extra: extra.iter().map(|arg| arg.to_string()).collect(),
                    process: None,
                })
                .collect(),
            executors: Vec::new(),
            executor_urls: Vec::new(),
            http: reqwest::Client::new(),
            _data: data,
        };
        for index in 0..cluster.admins.len() {
            cluster.start_admin(index).await;
        }
        for index in 0..executors {
            let (process, url) = cluster.spawn_executor(index);
            cluster.executors.push(Some(process));
            cluster.executor_urls.push(url);
        }
        cluster.wait_for_executors(executors).await;
        cluster
    }

    /// Starts admin `index` on port 0 and waits until it is ready.
    async fn start_admin(&mut self, index: usize) {
        let admin = &mut self.admins[index];
        let mut args: Vec<String> = [
            "admin",
            "--bind",
            "127.0.0.1:0",
            "--database-url",
            &self.url,
            "--token",
            API,
            "--executor-token",
            EXEC,
            // The alarm receivers of these tests listen on loopback.
            "--alarm-allow-nets",
            "127.0.0.1/32",
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        // Quick failure detection, unless the test says otherwise.
        for (flag, value) in [("--dead-after", "3s"), ("--lost-after", "4s")] {
            if !admin.extra.iter().any(|arg| arg == flag) {
                args.extend([flag.to_owned(), value.to_owned()]);
            }
        }
        args.extend(admin.extra.iter().cloned());
        let (process, url) = cronbox_listening(&args, "listening on ");
        admin.process = Some(process);
        let api = Client::new(&url, API);
        let ready = until("the admin is ready", || async {
            api.ready().await.ok().filter(|ready| ready.ready)
        })
        .await;
        let admin = &mut self.admins[index];
        admin.instance = ready.instance;
        admin.url = url;
    }

    /// Until the first admin counts `count` executors alive (read from
    /// `GET /api/v1/executors`, not waited for).
    async fn wait_for_executors(&self, count: usize) {
        let api = self.api(0);
        until(&format!("{count} executors register"), || async {
            let executors = api.executors().await.ok()?;
            (executors.iter().filter(|e| e.alive).count() >= count).then_some(())
        })
        .await;
    }

    /// Starts executor `index` on port 0, registered with every admin:
    /// the process and the address it advertises.
    fn spawn_executor(&self, index: usize) -> (Process, String) {
        let admins: Vec<&str> = self.admins.iter().map(|admin| admin.url.as_str()).collect();
        let dir = self._data.path().join(format!("executor-{index}"));
        cronbox_listening(
            &[
                "executor".to_owned(),
                "--bind".to_owned(),
                "127.0.0.1:0".to_owned(),
                "--admin".to_owned(),
                admins.join(","),
                "--token".to_owned(),
                EXEC.to_owned(),
                "--beat-interval".to_owned(),
                "1s".to_owned(),
                "--max-instances".to_owned(),
                "1024".to_owned(),
                "--data-dir".to_owned(),
                dir.display().to_string(),
            ],
            "advertised as ",
        )
    }

    /// Successful executions as the executors counted them (their
    /// `cronbox_executor_runs_total{outcome="success"}`), summed.
    async fn executions_succeeded(&self) -> u64 {
        let mut total = 0;
        for url in &self.executor_urls {
            let metrics = self
                .http
                .get(format!("{url}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            total += metrics
                .lines()
                .find(|line| line.starts_with("cronbox_executor_runs_total{outcome=\"success\"}"))
                .and_then(|line| line.rsplit(' ').next())
                .and_then(|count| count.parse::<u64>().ok())
                .unwrap_or(0);
        }
        total
    }

    /// Once the executors' successful executions are as many as the
    /// successful run rows (failing if they never are; each pair that
    /// differs is printed). They can differ for a while after the runs
    /// settle: a fire the stop cancelled while an executor already held it
    /// (its dispatch mark not yet written) runs anyway, is counted by the
    /// executor when it finishes, and its end then replaces the
    /// cancellation in its row.
    async fn until_executions_match_success_rows(&self) {
        until_within(
            WAIT,
            "the successful executions on the executors equal the successful run rows",
            || async {
                let succeeded = self
                    .settle(0, i64::MAX)
                    .await
                    .iter()
                    .filter(|run| run.status == RunStatus::Success)
                    .count() as u64;
                let executed = self.executions_succeeded().await;
                if executed == succeeded {
                    return Some(());
                }
                eprintln!("successful executions {executed}, successful run rows {succeeded}");
                None
            },
        )
        .await;
    }

    fn base(&self, admin: usize) -> &str {
        &self.admins[admin].url
    }

    /// The API of admin `admin` as the operator.
    fn api(&self, admin: usize) -> Client {
        Client::new(self.base(admin), API)
    }

    /// Pushes the example job `job` as module `name`.
    async fn push(&self, name: &str, job: &str) {
        let api = self.api(0);
        api.upload(jobs::bytes(job), Some(name), &[]).await.unwrap();
    }

    /// Creates a job through admin `admin` from its definition as JSON.
    async fn create(&self, admin: usize, spec: Value) -> JobId {
        let spec: JobSpec = serde_json::from_value(spec).unwrap();
        self.api(admin).create_job(&spec).await.unwrap().id
    }

    /// Triggers `job` through admin `admin`; the run's id.
    async fn trigger(&self, admin: usize, job: JobId) -> RunId {
        let request = TriggerRequest::default();
        self.api(admin).trigger(job, &request).await.unwrap().run_id
    }

    /// `count` jobs running `hello` every second of [from, to) only (their
    /// schedule starts and ends there, so that nothing needs stopping
    /// after), started: created in one batch per admin, each started by
    /// the admin that created it.
    async fn every_second(&self, count: usize, from: i64, to: i64) -> Vec<JobId> {
        self.push("hello", "hello").await;
        let admins = self.admins.len();
        let mut batches = vec![Vec::new(); admins];
        for i in 0..count {
            let spec = json!({ "name": format!("tick-{i}"), "module": "hello",
                               "schedule_type": "CRON", "schedule_conf": "* * * * * ?",
                               "schedule_rules": { "starts_at_ms": from, "ends_at_ms": to - 1 } });
            batches[i % admins].push(serde_json::from_value::<JobSpec>(spec).unwrap());
        }
        let mut ids = Vec::with_capacity(count);
        for (admin, jobs) in batches.into_iter().enumerate() {
            let batch = JobBatch { jobs, start: true };
            let created = self.api(admin).create_jobs(&batch).await.unwrap();
            assert_eq!(created.started, created.ids.len());
            ids.extend(created.ids);
        }
        ids
    }

    /// Every run scheduled in [from, to).
    async fn runs(&self, from: i64, to: i64) -> Vec<RunRow> {
        let store = Store::connect(&self.url).await.unwrap();
        store
            .list_runs(&RunFilter {
                from_ms: Some(from),
                to_ms: Some(to),
                limit: 10_000_000,
                ..RunFilter::default()
            })
            .await
            .unwrap()
    }

    /// Waits until no run scheduled in [from, to) is still pending or
    /// dispatched.
    async fn settle(&self, from: i64, to: i64) -> Vec<RunRow> {
        let deadline = Instant::now() + WAIT;
        loop {
            let runs = self.runs(from, to).await;
            let open = runs
                .iter()
                .filter(|run| {
                    run.status == RunStatus::Pending || run.status == RunStatus::Dispatched
                })
                .count();
            if open == 0 {
                return runs;
            }
            assert!(
                Instant::now() < deadline,
                "{open} runs never ended: {:?}",
                runs.iter()
                    .filter(|run| run.status == RunStatus::Pending
                        || run.status == RunStatus::Dispatched)
                    .take(5)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Checks the scheduled runs of `jobs` in whole seconds [from, to): each
/// (job, second) fired exactly once and succeeded. Prints the counts.
fn exactly_once(runs: &[RunRow], jobs: &[JobId], from: i64, to: i64) {
    let mut fires: HashMap<(JobId, i64), Vec<&RunRow>> = HashMap::new();
    for run in runs.iter().filter(|run| run.kind == TriggerKind::Schedule) {
        fires
            .entry((run.job_id, run.scheduled_at_ms))
            .or_default()
            .push(run);
    }
    let mut missing = Vec::new();
    let mut doubled = Vec::new();
    let mut failed = Vec::new();
    for job in jobs {
        let mut second = from;
        while second < to {
            match fires.get(&(*job, second)).map(Vec::as_slice) {
                None | Some([]) => missing.push((*job, second)),
                Some([run]) if run.status != RunStatus::Success => failed.push((*run).clone()),
                Some([_]) => {}
                Some(more) => doubled.push((*job, second, more.len())),
            }
            second += 1000;
        }
    }
    println!(
        "{} jobs × {} s: {} missing, {} doubled, {} not successful",
        jobs.len(),
        (to - from) / 1000,
        missing.len(),
        doubled.len(),
        failed.len()
    );
    assert!(
        doubled.is_empty(),
        "fired twice: {:?}",
        &doubled[..doubled.len().min(10)]
    );
    assert!(
        missing.is_empty(),
        "never fired: {:?}",
        &missing[..missing.len().min(10)]
    );
    assert!(
        failed.is_empty(),
        "did not succeed: {:?}",
        &failed[..failed.len().min(3)]
    );
}

/// The first whole second at least `ahead_ms` from now.
fn second_after(ahead_ms: i64) -> i64 {
    (now_ms() + ahead_ms) / 1000 * 1000 + 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_admins_fire_every_second_of_500_jobs_exactly_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::start(&[&[], &[], &[]], 1).await;
    // 6,000 fires over 12 s (the firing benchmark runs longer).
    let from = second_after(3_000);
    let to = from + 12_000;
    let ids = cluster.every_second(500, from, to).await;
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
    // Executed once, as the executors saw it: every successful run row
    // of the test is one successful execution, and no run was executed
    // twice (a double dispatch would count twice on the executors).
    cluster.until_executions_match_success_rows().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_admins_fires_are_taken_over() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(&[&[], &[], &[]], 1).await;
    // The window goes on long enough after the kill (2 s in) for the
    // dead admin's last fires, written as far ahead as a pre-read reaches,
    // to be taken over once their write leases run out, and for firing
    // to go on after (checked once the admin is killed).
    let pre_read_reach =
        SchedulerConfig::default().pre_read.as_millis() as i64 + CLAIM_PAST_HORIZON_MS;
    let from = second_after(3_000);
    let to = from + 2_000 + pre_read_reach + WRITE_LEASE_MS + 5_000;
    let ids = cluster.every_second(200, from, to).await;
    let store = Store::connect(&cluster.url).await.unwrap();
    // Once firing, the admin holding the most written fires dies with them
    // (which admin claims a pass's batch of jobs is a race, so ask).
    let (victim, _) = until("an admin holds written fires", || async {
        if now_ms() < from + 2_000 {
            return None;
        }
        let mut held = Vec::new();
        for (index, admin) in cluster.admins.iter().enumerate() {
            held.push((
                index,
                store.pending_leased_to(&admin.instance).await.ok()?.len(),
            ));
        }
        held.into_iter()
            .max_by_key(|(_, count)| *count)
            .filter(|(_, count)| *count > 0)
    })
    .await;
    cluster.admins[victim].process.take().unwrap().kill();
    // What it held is now fixed: nothing else may dispatch those runs until
    // their leases run out.
    let orphaned = store
        .pending_leased_to(&cluster.admins[victim].instance)
        .await
        .unwrap();
    assert!(!orphaned.is_empty(), "the killed admin held no fire");
    // Its last fires were written as far ahead as a pre-read reaches;
    // each is taken over once its write lease has run out, at the next
    // check for orphans (every second or so), well within the window.
    assert!(
        to - now_ms() >= pre_read_reach + WRITE_LEASE_MS + 2_000,
        "the admin was killed too late in the window"
    );
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
    // Each fire the dead admin held was dispatched by another admin, once
    // its lease ran out, and ran.
    let by_id: HashMap<RunId, &RunRow> = runs.iter().map(|run| (run.id, run)).collect();
    for id in &orphaned {
        let run = by_id
            .get(id)
            .unwrap_or_else(|| panic!("run {id} outside the window"));
        assert_eq!(run.status.as_str(), "success", "{run:?}");
    }
    println!(
        "{} fires held by the killed admin were taken over",
        orphaned.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_killed_executor_is_lost_and_retried_on_another() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(&[&[], &[]], 2).await;
    cluster.push("sleeper", "sleeper").await;
    let job = cluster
        .create(
            0,
            json!({ "name": "nap", "module": "sleeper", "param": "6000",
                    "retry_count": 1, "retry_interval_ms": 100 }),
        )
        .await;
    let run = cluster.trigger(1, job).await;
    let store = Store::connect(&cluster.url).await.unwrap();
    let deadline = Instant::now() + WAIT;
    let executor = loop {
        let row = store.run(run).await.unwrap().unwrap();
        if let (Some(executor), Some(_)) = (&row.executor, row.dispatched_at_ms) {
            break executor.clone();
        }
        assert!(Instant::now() < deadline, "never dispatched: {row:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let index = cluster
        .executor_urls
        .iter()
        .position(|url| *url == executor)
        .unwrap_or_else(|| panic!("no executor process serves {executor}"));
    cluster.executors[index].as_mut().unwrap().kill();
    let deadline = Instant::now() + WAIT;
    let (first, retry) = loop {
        let runs = store.runs_of_job(job).await.unwrap();
        if runs.len() == 2
            && runs
                .iter()
                .all(|r| r.status == RunStatus::Success || r.status == RunStatus::Failed)
        {
            break (runs[0].clone(), runs[1].clone());
        }
        assert!(Instant::now() < deadline, "no retry ended: {runs:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        (
            first.status.as_str(),
            first.outcome.map(cronbox_api::RunOutcome::as_str)
        ),
        ("failed", Some("lost")),
        "{first:?}"
    );
    assert_eq!((retry.kind.as_str(), retry.attempt), ("retry", 1));
    assert_eq!(retry.status.as_str(), "success", "{retry:?}");
    assert_ne!(
        retry.executor, first.executor,
        "retried on the other executor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_load_loses_and_doubles_nothing() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::start(&[&[], &[]], 1).await;
    // 3 s of firing, a 3 s outage (a fault's length, not a wait for an
    // event), then at least 5 s of firing after the database is back.
    let from = second_after(3_000);
    let to = from + 11_000;
    let ids = cluster.every_second(100, from, to).await;
    tokio::time::sleep(Duration::from_millis(
        (from + 3_000 - now_ms()).max(0) as u64
    ))
    .await;
    cluster.postgres.stop();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.postgres.start_again();
    assert!(
        to - now_ms() >= 4_000,
        "the database came back too late in the window"
    );
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    // A 3 s outage is under the misfire threshold (5 s): every fire is
    // still due, late, and must happen once.
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_with_skewed_clocks_still_fire_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    // Heartbeats carry the clock of the admin that received them, so the
    // dead-after time must exceed the skew between admins (4 s here).
    let cluster = Cluster::start(
        &[
            &["--clock-offset", "2s", "--dead-after", "30s"],
            &["--clock-offset", "-2s", "--dead-after", "30s"],
        ],
        1,
    )
    .await;
    let from = second_after(3_000);
    let to = from + 6_000;
    let ids = cluster.every_second(100, from, to).await;
    // Until every second of the window has fired and ended (on the slower
    // admin's clock, 2 s behind, it closes last).
    let expected = ids.len() * ((to - from) / 1000) as usize;
    until("every second of the window fired and ended", || async {
        let ended = cluster
            .runs(from, to)
            .await
            .iter()
            .filter(|run| run.kind == TriggerKind::Schedule && !run.status.is_open())
            .count();
        (ended >= expected).then_some(())
    })
    .await;
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_admins_send_each_alarm_and_retry_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    let cluster = Cluster::start(&[&[], &[]], 1).await;
    let receiver = WebhookReceiver::start(200).await;
    cluster.push("burner", "fuel-burner").await;
    let job = cluster
        .create(
            0,
            json!({ "name": "failing", "module": "burner", "param": "not-a-number",
                    "retry_count": 2, "retry_interval_ms": 200, "alarm_url": receiver.url() }),
        )
        .await;
    for i in 0..5 {
        cluster.trigger(i % 2, job).await;
    }
    let store = Store::connect(&cluster.url).await.unwrap();
    let deadline = Instant::now() + WAIT;
    let runs = loop {
        let runs = store.runs_of_job(job).await.unwrap();
        let settled = runs.len() >= 15
            && runs.iter().all(|r| {
                r.status == RunStatus::Failed
                    && r.alarm_status != AlarmState::Due
                    && r.alarm_status != AlarmState::Sending
            });
        if settled {
            break runs;
        }
        assert!(Instant::now() < deadline, "{} runs: {runs:?}", runs.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Every run ended and alarmed: every result was handled (a retry is
    // written by the one admin that recorded the failure it follows, right
    // after), so a duplicate would show now.
    let runs_now = store.runs_of_job(job).await.unwrap();
    assert_eq!(runs_now.len(), 15, "5 runs and 2 retries each, no more");
    let attempts: Vec<i64> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(
        attempts.iter().filter(|a| **a == 2).count(),
        5,
        "{attempts:?}"
    );
    let mut alarmed: Vec<i64> = receiver
        .bodies()
        .iter()
        .map(|alarm| alarm["run"]["id"].as_i64().unwrap())
        .collect();
    alarmed.sort();
    let mut failed: Vec<i64> = runs.iter().map(|r| r.id.0).collect();
    failed.sort();
    assert_eq!(alarmed, failed, "one alarm per failed run");
    assert!(runs.iter().all(|r| r.alarm_status == AlarmState::Sent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_outlive_a_killed_admin_and_start_each_node_once() {
    let _one = ONE_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(&[&[], &[]], 1).await;
    cluster.push("sleeper", "sleeper").await;
    cluster.push("hello", "hello").await;
    let nap = cluster
        .create(
            0,
            json!({ "name": "nap", "module": "sleeper", "param": "1500" }),
        )
        .await;
    let mut greeters = Vec::new();
    for name in ["left", "right", "join"] {
        greeters.push(
            cluster
                .create(0, json!({ "name": name, "module": "hello" }))
                .await,
        );
    }
    let diamond: cronbox_api::WorkflowSpec = serde_json::from_value(json!({
        "nodes": [
            { "name": "nap", "job": "nap" },
            { "name": "left", "job": "left", "param": "L" },
            { "name": "right", "job": "right", "param": "R" },
            { "name": "join", "job": "join",
              "param": "{{ nodes.left.output }} and {{ nodes.right.output }}" }
        ],
        "edges": [
            { "from": "nap", "to": "left" }, { "from": "nap", "to": "right" },
            { "from": "left", "to": "join" }, { "from": "right", "to": "join" }
        ]
    }))
    .unwrap();
    cluster
        .api(0)
        .put_workflow("diamond", &diamond)
        .await
        .unwrap();
    // Ten runs started through both admins; then the first admin dies
    // while their naps run, and the other carries every run to its end.
    let mut runs = Vec::new();
    for i in 0..10 {
        let started = cluster
            .api(i % 2)
            .start_workflow_run("diamond", None)
            .await
            .unwrap();
        runs.push(started.id);
    }
    cluster.admins[0].process.take().unwrap().kill();
    let api = cluster.api(1);
    for id in &runs {
        let run = until("the workflow run ends", || async {
            let run = api.workflow_run(*id).await.ok()?;
            (run.status != cronbox_api::WorkflowRunStatus::Running).then_some(run)
        })
        .await;
        assert_eq!(
            run.status,
            cronbox_api::WorkflowRunStatus::Succeeded,
            "{run:#?}"
        );
        assert_eq!(
            run.nodes[3].input.as_deref(),
            Some("hello, L and hello, R"),
            "{run:#?}"
        );
    }
    // Each node ran once per workflow run, whichever admin advanced it.
    let store = Store::connect(&cluster.url).await.unwrap();
    for job in std::iter::once(nap).chain(greeters) {
        let ran = store.runs_of_job(job).await.unwrap();
        assert_eq!(ran.len(), runs.len(), "job {job}: {ran:?}");
        assert!(
            ran.iter().all(|run| run.status == RunStatus::Success),
            "{ran:?}"
        );
    }
}
