//! Cluster mode on PostgreSQL: several `cronbox admin` processes on one
//! database with `cronbox executor` processes, each test injecting a fault
//! (SIGKILL, a database restart, skewed clocks, racing admins) and then
//! asserting on the run table itself; workflows advanced by two admins,
//! one of them killed.
//!
//! The seven that fire a hundred jobs a second or more share a budget of
//! jobs firing (they load the machine on purpose, see [`FIRING_BUDGET`]):
//! the 500-job test never beside the database restart, a Patroni failover
//! beside one of the two lightest at most; the others, a few runs each, go
//! beside them. The suite's other test binaries run before
//! or after. Their only sleeps are the firing windows themselves (real
//! seconds of a real clock, which is what they measure) and one fault's
//! length; every other wait ends on the event it waits for.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cronbox_admin::Store;
use cronbox_admin::scheduler::CLAIM_PAST_HORIZON_MS;
use cronbox_admin::store::{JobId, Leases, RunFilter, RunId, RunRow};
use cronbox_api::{AlarmState, Client, JobBatch, JobSpec, RunStatus, TriggerKind, TriggerRequest};
use cronbox_example_jobs as jobs;
use cronbox_tests::{PostgresServer, TestGroup, WebhookReceiver};
use cronbox_tests::{run_summary, until, until_seen, until_within};
use serde_json::{Value, json};
use support::{Process, cronbox_listening};

/// Every test at once: the firing ones wait for their share of
/// [`FIRING_BUDGET`], the others wait on their runs.
static TESTS: TestGroup = TestGroup::new(7);

const API: &str = "cluster-api";
const EXEC: &str = "cluster-exec";
const WAIT: Duration = Duration::from_secs(60);
/// Every admin's `--dispatch-lease`: the shortest, so that a killed
/// admin's fires are taken over soonest.
const DISPATCH_LEASE: Duration = Duration::from_secs(4);

/// Jobs firing every second the machine carries at once: each test that
/// fires hundreds of jobs a second takes a share, what they measure being
/// firing on time under load. 800 a second over these clusters keeps the
/// 500-job test's fires within half a second of their instants on two
/// cores. The database restart takes 400 for its 100 jobs, so that it
/// never runs beside the 500-job test: its fires are late by the outage
/// and by the database's start, which a loaded machine slows (4.9 s late
/// beside it, 2.3 s without). The tests of a few runs each take nothing:
/// beside a loaded cluster they still see their runs end within their
/// waits.
const FIRING_BUDGET: u32 = 800;
static FIRING: std::sync::Mutex<u32> = std::sync::Mutex::new(0);
static FIRING_FREED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// A share of [`FIRING_BUDGET`], given back when dropped.
struct FiringShare(u32);

/// Waits until `jobs` more jobs firing every second fit in
/// [`FIRING_BUDGET`]. Not first come first served: a test that fits goes
/// on beside the others while a larger one waits for the machine.
async fn firing_budget(jobs: u32) -> FiringShare {
    loop {
        // Made before looking, so that a share given back between the
        // look and the wait still wakes this one.
        let freed = FIRING_FREED.notified();
        {
            let mut firing = FIRING.lock().unwrap();
            if *firing + jobs <= FIRING_BUDGET {
                *firing += jobs;
                return FiringShare(jobs);
            }
        }
        freed.await;
    }
}

impl Drop for FiringShare {
    fn drop(&mut self) {
        *FIRING.lock().unwrap() -= self.0;
        FIRING_FREED.notify_waiters();
    }
}

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
    /// The database's server, when the test started its own (not one
    /// under Patroni).
    postgres: Option<PostgresServer>,
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
        Cluster::on(Some(postgres), url, admin_args, executors).await
    }

    /// [`Cluster::start`] on the database at `url` (`postgres`: its
    /// server, if the test started it).
    async fn on(
        postgres: Option<PostgresServer>,
        url: String,
        admin_args: &[&[&str]],
        executors: usize,
    ) -> Cluster {
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
            http: cronbox_tls::client(),
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
        let lease = format!("{}s", DISPATCH_LEASE.as_secs());
        for (flag, value) in [
            ("--dead-after", "3s"),
            ("--lost-after", "4s"),
            ("--dispatch-lease", lease.as_str()),
        ] {
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

    /// Workflow run `id` once it has ended, read through admin `admin`.
    async fn workflow_ended(&self, admin: usize, id: i64) -> cronbox_api::WorkflowRun {
        let api = self.api(admin);
        until("the workflow run ends", || async {
            let run = api.workflow_run(id).await.ok()?;
            (run.status != cronbox_api::WorkflowRunStatus::Running).then_some(run)
        })
        .await
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

    /// The first whole second at least `lead_ms` after the time creating
    /// `count` jobs takes now: ten are created (never scheduled) and
    /// timed, and the estimate is twice their rate. A loaded machine took
    /// 8 s to create 200 jobs across three admins, an idle one well under
    /// one; a window starting a fixed time ahead either waits for nothing
    /// or opens before its jobs exist.
    async fn window_start(&self, count: usize, lead_ms: i64) -> i64 {
        self.push("hello", "hello").await;
        let jobs: Vec<JobSpec> = (0..10)
            .map(|i| {
                let name = format!("timing-{}-{i}", now_ms());
                serde_json::from_value(json!({ "name": name, "module": "hello" })).unwrap()
            })
            .collect();
        let started = now_ms();
        let batch = JobBatch { jobs, start: false };
        self.api(0).create_jobs(&batch).await.unwrap();
        let per_job_ms = (now_ms() - started) as f64 / 10.0;
        let creating_ms = (2.0 * per_job_ms * count as f64) as i64;
        second_after(lead_ms + creating_ms)
    }

    /// `count` jobs running `hello` every second of [from, to) only (their
    /// schedule starts and ends there, so that nothing needs stopping
    /// after), started: created in one batch per admin, each started by
    /// the admin that created it. A fire later than the default misfire
    /// threshold (5 s) is missed. Returns their ids and the first second
    /// of the window at which every one of them existed: `from`, unless
    /// creating them took longer (a job owes no fire due before it was
    /// created, and a loaded machine slows the creation of hundreds).
    async fn every_second(&self, count: usize, from: i64, to: i64) -> (Vec<JobId>, i64) {
        self.every_second_missing_after(count, from, to, 5_000)
            .await
    }

    /// [`Cluster::every_second`] with a misfire threshold of
    /// `misfire_threshold_ms`.
    async fn every_second_missing_after(
        &self,
        count: usize,
        from: i64,
        to: i64,
        misfire_threshold_ms: i64,
    ) -> (Vec<JobId>, i64) {
        self.push("hello", "hello").await;
        let admins = self.admins.len();
        let mut batches = vec![Vec::new(); admins];
        for i in 0..count {
            let spec = json!({ "name": format!("tick-{i}"), "module": "hello",
                               "schedule_type": "CRON", "schedule_conf": "* * * * * ?",
                               "misfire_threshold_ms": misfire_threshold_ms,
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
        let all_created = now_ms();
        if all_created >= from {
            println!(
                "the {count} jobs were all created {} ms into the window",
                all_created - from
            );
        }
        (ids, from.max(all_created / 1000 * 1000 + 1000))
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
        self.settle_within(WAIT, from, to).await
    }

    /// [`Cluster::settle`] with a deadline of its own; a timeout says how
    /// many runs were still open and where the first of them stood.
    async fn settle_within(&self, wait: Duration, from: i64, to: i64) -> Vec<RunRow> {
        until_seen(wait, "every run of the window ends", || async {
            let runs = self.runs(from, to).await;
            let open: Vec<&RunRow> = runs.iter().filter(|run| run.status.is_open()).collect();
            let Some(first) = open.first() else {
                return Ok(runs);
            };
            let dispatched = open
                .iter()
                .filter(|run| run.status == RunStatus::Dispatched)
                .count();
            Err(format!(
                "{} of {} runs open ({dispatched} dispatched); the first: {}",
                open.len(),
                runs.len(),
                run_summary(first)
            ))
        })
        .await
    }
}

/// How the scheduled runs of some jobs over a window came out.
struct FireCounts {
    /// (job, second) that never fired.
    missing: Vec<(JobId, i64)>,
    /// (job, second, runs) that fired more than once.
    doubled: Vec<(JobId, i64, usize)>,
    /// Runs that fired once and did not succeed.
    failed: Vec<RunRow>,
}

/// Counts the scheduled runs of `jobs` in whole seconds [from, to): each
/// (job, second) missing, doubled or not successful. Prints the counts.
fn count_fires(runs: &[RunRow], jobs: &[JobId], from: i64, to: i64) -> FireCounts {
    let mut fires: HashMap<(JobId, i64), Vec<&RunRow>> = HashMap::new();
    for run in runs.iter().filter(|run| run.kind == TriggerKind::Schedule) {
        fires
            .entry((run.job_id, run.scheduled_at_ms))
            .or_default()
            .push(run);
    }
    let mut counts = FireCounts {
        missing: Vec::new(),
        doubled: Vec::new(),
        failed: Vec::new(),
    };
    for job in jobs {
        let mut second = from;
        while second < to {
            match fires.get(&(*job, second)).map(Vec::as_slice) {
                None | Some([]) => counts.missing.push((*job, second)),
                Some([run]) if run.status != RunStatus::Success => {
                    counts.failed.push((*run).clone())
                }
                Some([_]) => {}
                Some(more) => counts.doubled.push((*job, second, more.len())),
            }
            second += 1000;
        }
    }
    let mut late: Vec<i64> = fires
        .values()
        .flatten()
        .filter_map(|run| Some(run.started_at_ms? - run.scheduled_at_ms))
        .collect();
    late.sort_unstable();
    println!(
        "{} jobs × {} s: {} missing, {} doubled, {} not successful; started late by p99 {} ms, at most {} ms",
        jobs.len(),
        (to - from) / 1000,
        counts.missing.len(),
        counts.doubled.len(),
        counts.failed.len(),
        late.get(late.len() * 99 / 100).unwrap_or(&0),
        late.last().unwrap_or(&0),
    );
    counts
}

/// Checks the scheduled runs of `jobs` in whole seconds [from, to): each
/// (job, second) fired exactly once and succeeded. Prints the counts.
fn exactly_once(runs: &[RunRow], jobs: &[JobId], from: i64, to: i64) {
    let FireCounts {
        missing,
        doubled,
        failed,
    } = count_fires(runs, jobs, from, to);
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

mod failover;
mod failures;
mod firing;
