//! Firing and dispatch: the pre-read loop that turns due jobs into run rows
//! before anything is sent, millisecond timers that dispatch each run at its
//! instant, routing, and what happens when results come back (state commit,
//! retries, child jobs, FIX_DELAY).
//!
//! Every fire is written as a `pending` run before it is dispatched; on
//! start, pending runs left by a crash are dispatched (late ones at once).
//! A job's fires are claimed by moving its `next_fire_at_ms` with a
//! conditional update in the same transaction that writes the runs, and the
//! unique key on (job, scheduled time, shard) makes a double fire
//! impossible.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, TimeZone, Utc};
use cronbox_protocol::{
    BlockStrategy, IdleBeatRequest, IdleBeatResponse, RunCommand, RunResponse, RunResult, Trigger,
    TriggerKind, WireLimits, executor_paths,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::jobs::{children_of, schedule_of};
use crate::metrics::Metrics;
use crate::routing::{Probe, Route, RouteStrategy, Router};
use crate::schedule::Schedule;
use crate::store::{
    DispatchMark, JobRow, JobState, NewRun, RunEnd, RunRow, Store, StoreError,
    outcome_is_deliberate, status,
};

/// Timing settings of the scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// How far ahead due jobs are read and their runs written.
    pub pre_read: Duration,
    /// An executor is dead after this long without a heartbeat.
    pub dead_after: Duration,
    /// Dispatches in flight at once (back-pressure beyond).
    pub max_dispatches: usize,
    /// Timeout of one dispatch request.
    pub dispatch_timeout: Duration,
    /// A dispatched run whose executor is dead and that has had no result
    /// for this long is marked lost (failed), then retried if it may be.
    pub lost_after: Duration,
    /// Token the admin presents to executors.
    pub executor_token: String,
    /// How long before its instant a fire is sent; the executor holds it
    /// until then, so a burst of fires due together still starts on time.
    /// Zero sends each fire at its instant.
    pub dispatch_ahead: Duration,
    /// Ended runs older than this are deleted (xxl-job's log retention).
    pub run_retention: Duration,
    /// How often daily reports are recounted and old rows cleaned.
    pub housekeeping_interval: Duration,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            pre_read: Duration::from_secs(5),
            dead_after: Duration::from_secs(90),
            max_dispatches: 256,
            dispatch_timeout: Duration::from_secs(3),
            lost_after: Duration::from_secs(600),
            executor_token: String::new(),
            dispatch_ahead: Duration::from_millis(300),
            run_retention: Duration::from_secs(30 * 24 * 3600),
            housekeeping_interval: Duration::from_secs(60),
        }
    }
}

/// A shift of this process's clock, for tests of admins whose clocks
/// disagree (`cronbox admin --clock-offset`); zero otherwise.
static CLOCK_OFFSET_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Shifts what [`now_ms`] returns by `offset_ms` (test-only setting).
pub fn set_clock_offset(offset_ms: i64) {
    CLOCK_OFFSET_MS.store(offset_ms, std::sync::atomic::Ordering::Relaxed);
}

/// Milliseconds since the epoch, now (by this admin's clock).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|now| now.as_millis() as i64)
        .unwrap_or(0)
        + CLOCK_OFFSET_MS.load(std::sync::atomic::Ordering::Relaxed)
}

/// [`now_ms`] as a time.
pub fn now() -> DateTime<Utc> {
    instant(now_ms())
}

fn instant(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// The scheduler of one admin process.
#[derive(Debug)]
pub struct Scheduler {
    store: Store,
    router: Router,
    http: reqwest::Client,
    config: SchedulerConfig,
    /// Dispatch slots of jobs whose dispatches are quick.
    fast_slots: Arc<Semaphore>,
    /// Dispatch slots of jobs whose dispatches were often slow this minute,
    /// so that they cannot hold up the others (xxl-job's slow pool).
    slow_slots: Arc<Semaphore>,
    slow_jobs: std::sync::Mutex<SlowJobs>,
    /// Each group's live addresses, read at most once per second.
    addresses:
        std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Vec<String>)>>,
    /// Runs accepted by executors, recorded as dispatched in batches by
    /// [`write_dispatch_marks`] so that a burst of dispatches does not
    /// queue one write transaction each.
    marks: tokio::sync::mpsc::UnboundedSender<DispatchMark>,
    mark_queue: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<DispatchMark>>>,
    /// Starts a pre-read pass now (a job was started or changed).
    wake: tokio::sync::Notify,
    metrics: Arc<Metrics>,
    /// The key run receipts are signed with (shared by the admins of one
    /// database; see [`Scheduler::receipt`]).
    receipt_key: Vec<u8>,
}

/// A run receipt: HMAC-SHA256 under `key` of the run id and the executor
/// address it was sent to, in hex.
fn run_receipt(key: &[u8], run_id: u64, address: &str) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(run_id.to_string().as_bytes());
    mac.update(b"\n");
    mac.update(address.as_bytes());
    mac
}

/// Most dispatch marks written in one transaction.
const MARK_BATCH: usize = 1_000;

/// Writes dispatch marks as they come, all those waiting in one
/// transaction, until `stop`; then writes what is left.
async fn write_dispatch_marks(
    store: Store,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<DispatchMark>,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(MARK_BATCH);
    loop {
        let stopping = tokio::select! {
            received = queue.recv_many(&mut batch, MARK_BATCH) => received == 0,
            _ = stop.cancelled() => true,
        };
        if stopping {
            while let Ok(mark) = queue.try_recv() {
                batch.push(mark);
            }
        }
        if !batch.is_empty()
            && let Err(error) = store.mark_dispatched_many(&batch).await
        {
            // The runs stay pending: their results still end them, and a
            // restarted admin re-dispatches them (the executor answers
            // that it already has them).
            tracing::warn!(%error, count = batch.len(), "cannot record dispatched runs");
        }
        batch.clear();
        if stopping {
            return;
        }
    }
}

/// How long a group's address list is reused before the registry is read
/// again.
const ADDRESS_CACHE: Duration = Duration::from_secs(1);

/// A dispatch slower than this counts against its job.
const SLOW_DISPATCH: Duration = Duration::from_millis(500);
/// More slow dispatches than this in a minute move a job to the slow pool.
const SLOW_DISPATCHES_PER_MINUTE: u32 = 10;

/// Per-job counts of slow dispatches in the current minute.
#[derive(Debug, Default)]
pub struct SlowJobs {
    minute: i64,
    counts: std::collections::HashMap<i64, u32>,
}

impl SlowJobs {
    fn roll(&mut self, now_ms: i64) {
        let minute = now_ms / 60_000;
        if minute != self.minute {
            self.minute = minute;
            self.counts.clear();
        }
    }

    /// Records how long a dispatch of `job` took.
    pub fn record(&mut self, job: i64, took: Duration, now_ms: i64) {
        self.roll(now_ms);
        if took > SLOW_DISPATCH {
            *self.counts.entry(job).or_default() += 1;
        }
    }

    /// Whether `job` belongs in the slow pool now.
    pub fn is_slow(&mut self, job: i64, now_ms: i64) -> bool {
        self.roll(now_ms);
        self.counts
            .get(&job)
            .is_some_and(|count| *count > SLOW_DISPATCHES_PER_MINUTE)
    }
}

/// FAILOVER and BUSYOVER checks over HTTP.
struct HttpProbe<'a> {
    http: &'a reqwest::Client,
    token: &'a str,
}

impl Probe for HttpProbe<'_> {
    async fn beat(&self, address: &str) -> bool {
        self.http
            .post(format!("{address}{}", executor_paths::BEAT))
            .bearer_auth(self.token)
            .send()
            .await
            .is_ok_and(|response| response.status().is_success())
    }

    async fn idle(&self, address: &str, job_id: u64) -> bool {
        let response = self
            .http
            .post(format!("{address}{}", executor_paths::IDLE_BEAT))
            .bearer_auth(self.token)
            .json(&IdleBeatRequest { job_id })
            .send()
            .await;
        match response {
            Ok(response) if response.status().is_success() => response
                .json::<IdleBeatResponse>()
                .await
                .is_ok_and(|beat| beat.idle),
            _ => false,
        }
    }
}

fn trigger_kind(kind: &str) -> TriggerKind {
    match kind {
        "manual" => TriggerKind::Manual,
        "api" => TriggerKind::Api,
        "retry" => TriggerKind::Retry,
        "parent" => TriggerKind::Parent,
        "misfire" => TriggerKind::Misfire,
        _ => TriggerKind::Schedule,
    }
}

impl Scheduler {
    /// A scheduler over `store`; `receipt_key` signs run receipts (see
    /// [`Store::receipt_key`]).
    pub fn new(store: Store, config: SchedulerConfig, receipt_key: Vec<u8>) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .timeout(config.dispatch_timeout)
            .connect_timeout(Duration::from_secs(1))
            .build()
            .unwrap_or_default();
        let (marks, mark_queue) = tokio::sync::mpsc::unbounded_channel();
        Arc::new(Scheduler {
            marks,
            mark_queue: std::sync::Mutex::new(Some(mark_queue)),
            wake: tokio::sync::Notify::new(),
            metrics: Arc::new(Metrics::new()),
            fast_slots: Arc::new(Semaphore::new(config.max_dispatches)),
            slow_slots: Arc::new(Semaphore::new((config.max_dispatches / 4).max(1))),
            slow_jobs: std::sync::Mutex::new(SlowJobs::default()),
            addresses: std::sync::Mutex::new(std::collections::HashMap::new()),
            store,
            router: Router::default(),
            http,
            config,
            receipt_key,
        })
    }

    /// The receipt of `run_id` sent to `address`: the executor returns it
    /// with the result, and a result without the right one is refused.
    fn receipt(&self, run_id: u64, address: &str) -> String {
        use hmac::Mac;
        hex::encode(
            run_receipt(&self.receipt_key, run_id, address)
                .finalize()
                .into_bytes(),
        )
    }

    /// Whether `result` carries the receipt of its run's dispatch to the
    /// executor it names (compared in constant time).
    fn receipt_holds(&self, result: &RunResult) -> bool {
        use hmac::Mac;
        let Ok(presented) = hex::decode(&result.receipt) else {
            return false;
        };
        run_receipt(&self.receipt_key, result.run_id, &result.executor)
            .verify_slice(&presented)
            .is_ok()
    }

    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Runs the pre-read loop until `stop`. First recovers runs written but
    /// not dispatched by an earlier process.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mark_queue = self
            .mark_queue
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take();
        let mark_writer = mark_queue.map(|queue| {
            tokio::spawn(write_dispatch_marks(
                self.store.clone(),
                queue,
                stop.clone(),
            ))
        });
        match self.store.pending_runs().await {
            Ok(pending) => {
                if !pending.is_empty() {
                    tracing::info!(
                        count = pending.len(),
                        "recovering runs written but not dispatched"
                    );
                }
                self.clone().dispatch_all_at(pending);
            }
            Err(error) => tracing::error!(%error, "cannot read pending runs"),
        }
        let mut last_lost_check = std::time::Instant::now();
        loop {
            if let Err(error) = self.pre_read().await {
                tracing::warn!(%error, "pre-read failed; retrying");
            }
            if last_lost_check.elapsed() >= Duration::from_secs(1) {
                last_lost_check = std::time::Instant::now();
                if let Err(error) = self.reap_lost_runs().await {
                    tracing::warn!(%error, "lost-run check failed");
                }
                match self.store.orphaned_runs(now_ms(), 5_000).await {
                    Ok(orphans) if !orphans.is_empty() => {
                        tracing::warn!(
                            count = orphans.len(),
                            "taking over runs whose admin did not dispatch them"
                        );
                        self.clone().dispatch_all_at(orphans);
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "orphaned-run check failed"),
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
        if let Some(writer) = mark_writer {
            let _ = writer.await;
        }
    }

    /// Runs a pre-read pass now instead of at the next tick: a job just
    /// started or changed may be due sooner.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The lost-run monitor: a run dispatched more than `lost_after` ago to
    /// an executor without a heartbeat for `dead_after` ends as failed
    /// ("lost"), and is retried if the job's retries allow.
    async fn reap_lost_runs(self: &Arc<Self>) -> Result<(), StoreError> {
        let now = now_ms();
        let dispatched_before = now - self.config.lost_after.as_millis() as i64;
        let alive_since = self.alive_since(now).await?;
        for run in self.store.lost_runs(dispatched_before, alive_since).await? {
            let message = format!(
                "lost: executor {} stopped beating and no result came",
                run.executor.as_deref().unwrap_or("?")
            );
            let ended = self
                .store
                .finish_run(&RunEnd::failed(run.id, "lost", &message, now))
                .await?;
            if let Some(ended) = ended {
                self.metrics.run_ended("lost");
                tracing::warn!(run = run.id, "{message}");
                self.after_end(&ended, None).await?;
            }
        }
        Ok(())
    }

    /// Executors that beat since the returned instant are alive now.
    pub async fn alive_since_now(&self) -> Result<i64, StoreError> {
        self.alive_since(now_ms()).await
    }

    /// Executors that beat since this instant are alive (see
    /// [`Store::liveness_reference`]).
    async fn alive_since(&self, now: i64) -> Result<i64, StoreError> {
        let reference = self.store.liveness_reference(now).await?;
        Ok(reference - self.config.dead_after.as_millis() as i64)
    }

    /// Forwards a kill to the executor running `run`.
    pub async fn kill(&self, run: &RunRow) -> Result<bool, String> {
        let command = cronbox_protocol::KillCommand::Run {
            run_id: run.id as u64,
        };
        let answer: cronbox_protocol::KillResponse = self
            .ask_executor(run, executor_paths::KILL, &command)
            .await?;
        Ok(answer.killed.contains(&(run.id as u64)))
    }

    /// A running run's log from its executor, by line offset.
    pub async fn live_log(
        &self,
        run: &RunRow,
        offset: usize,
        limit: usize,
    ) -> Result<cronbox_protocol::LogResponse, String> {
        let query = cronbox_protocol::LogQuery {
            run_id: run.id as u64,
            offset,
            limit,
        };
        self.ask_executor(run, executor_paths::LOG, &query).await
    }

    /// POSTs `body` to the executor that holds `run` and decodes its answer.
    async fn ask_executor<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        run: &RunRow,
        path: &str,
        body: &B,
    ) -> Result<R, String> {
        let Some(executor) = &run.executor else {
            return Err("the run was not dispatched to an executor".to_owned());
        };
        self.post(executor, path, body).await
    }

    /// POSTs `body` to `executor` (an address the admin routed to) with the
    /// executor token and decodes its answer.
    async fn post<B: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        executor: &str,
        path: &str,
        body: &B,
    ) -> Result<R, String> {
        let response = self
            .http
            .post(format!("{executor}{path}"))
            .bearer_auth(&self.config.executor_token)
            .json(body)
            .send()
            .await
            .map_err(|error| format!("{executor}: {error}"))?;
        if !response.status().is_success() {
            return Err(format!("{executor} answered {}", response.status()));
        }
        response
            .json()
            .await
            .map_err(|error| format!("{executor} answered badly: {error}"))
    }

    /// One pass: claim every fire due within the pre-read window.
    async fn pre_read(self: &Arc<Self>) -> Result<(), StoreError> {
        if self.store.backend() == crate::store::Backend::Postgres {
            return self.pre_read_shared().await;
        }
        let now = now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        let mut written = Vec::new();
        for job in self.store.due_jobs(horizon, 5_000).await? {
            let Some(expected) = job.next_fire_at_ms else {
                continue;
            };
            let Some((runs, next)) = plan_job(&job, now, horizon) else {
                self.store.set_enabled(job.id, false, None, now).await?;
                continue;
            };
            if let Some(ids) = self
                .store
                .claim_fires(job.id, expected, next, &runs, now)
                .await?
            {
                let fires: Vec<(Option<i64>, NewRun)> = ids.into_iter().zip(runs).collect();
                self.collect_written(&job, &fires, now, &mut written);
            }
        }
        self.clone().dispatch_all_at(written);
        Ok(())
    }

    /// The rows of the fires just written for `job` (counted), to dispatch.
    fn collect_written(
        &self,
        job: &JobRow,
        fires: &[(Option<i64>, NewRun)],
        now: i64,
        written: &mut Vec<RunRow>,
    ) {
        for (id, fire) in fires {
            if let Some(id) = id {
                self.metrics.fires.inc();
                written.push(written_run(*id, &job.tenant, fire, now));
            }
        }
    }

    /// The pre-read on PostgreSQL, where several admins may share the
    /// database: due jobs are claimed in batches with `FOR UPDATE SKIP
    /// LOCKED`, so each admin takes jobs no other admin holds, instead of
    /// every admin trying every job.
    async fn pre_read_shared(self: &Arc<Self>) -> Result<(), StoreError> {
        /// Jobs claimed per transaction.
        const BATCH: i64 = 200;
        let now = now_ms();
        let horizon = now + self.config.pre_read.as_millis() as i64;
        loop {
            let claimed = self
                .store
                .claim_due_batch(horizon, BATCH, now, |job| plan_job(job, now, horizon))
                .await?;
            let count = claimed.len();
            let mut written = Vec::new();
            for claim in &claimed {
                self.collect_written(&claim.job, &claim.written, now, &mut written);
            }
            self.clone().dispatch_all_at(written);
            if (count as i64) < BATCH {
                return Ok(());
            }
        }
    }

    /// Dispatches `run` at its scheduled instant (at once if it is past).
    pub fn dispatch_at(self: Arc<Self>, run: RunRow) {
        self.dispatch_all_at(vec![run]);
    }

    /// Dispatches each run `dispatch_ahead` before its scheduled instant
    /// (at once if that is past), for the executor to hold until the
    /// instant. Runs due at the same instant share one timer and one read of
    /// their jobs and states, so a thousand jobs firing on the same second
    /// cost two queries, not two thousand.
    pub fn dispatch_all_at(self: Arc<Self>, runs: Vec<RunRow>) {
        let mut by_instant: std::collections::BTreeMap<i64, Vec<RunRow>> = Default::default();
        for run in runs {
            by_instant.entry(run.scheduled_at_ms).or_default().push(run);
        }
        let ahead = self.config.dispatch_ahead.as_millis() as i64;
        for (at, runs) in by_instant {
            let scheduler = self.clone();
            tokio::spawn(async move {
                let wait = at - ahead - now_ms();
                if wait > 0 {
                    tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                }
                scheduler.dispatch_group(runs).await;
            });
        }
    }

    /// Reads what the runs' dispatches need in one go, then dispatches each
    /// in its pool.
    async fn dispatch_group(self: Arc<Self>, runs: Vec<RunRow>) {
        // Only runs this admin holds the lease of: with several admins, a
        // run whose admin died is taken over by exactly one other.
        let ids: Vec<i64> = runs.iter().map(|run| run.id).collect();
        let runs: Vec<RunRow> = match self.store.take_leases(&ids, now_ms()).await {
            Ok(taken) => {
                let taken: std::collections::HashSet<i64> = taken.into_iter().collect();
                runs.into_iter()
                    .filter(|run| taken.contains(&run.id))
                    .collect()
            }
            Err(error) => {
                // Left pending: taken over once their lease runs out.
                tracing::warn!(%error, count = ids.len(), "cannot take the leases of due runs");
                return;
            }
        };
        if runs.is_empty() {
            return;
        }
        let mut job_ids: Vec<i64> = runs.iter().map(|run| run.job_id).collect();
        job_ids.sort_unstable();
        job_ids.dedup();
        let read = async {
            let jobs = self.store.jobs_by_id(&job_ids).await?;
            let states = self.store.job_states(&job_ids).await?;
            Ok::<_, StoreError>((jobs, states))
        };
        let (jobs, states) = match read.await {
            Ok(read) => read,
            Err(error) => {
                // Each dispatch reads for itself instead.
                tracing::warn!(%error, "cannot read the jobs of a group of fires");
                for run in runs {
                    let scheduler = self.clone();
                    tokio::spawn(async move { scheduler.dispatch_in_pool(&run, None, None).await });
                }
                return;
            }
        };
        for run in runs {
            let prepared = Prepared {
                job: jobs.get(&run.job_id).cloned(),
                state: states.get(&run.job_id).cloned().unwrap_or_default(),
            };
            let scheduler = self.clone();
            tokio::spawn(
                async move { scheduler.dispatch_in_pool(&run, Some(prepared), None).await },
            );
        }
    }

    /// Dispatches in the job's pool (fast or slow), timing it.
    async fn dispatch_in_pool(
        self: &Arc<Self>,
        run: &RunRow,
        prepared: Option<Prepared>,
        addresses: Option<Vec<String>>,
    ) {
        let slow = self
            .slow_jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .is_slow(run.job_id, now_ms());
        let slots = if slow {
            &self.slow_slots
        } else {
            &self.fast_slots
        };
        let waited = std::time::Instant::now();
        let Ok(_slot) = slots.clone().acquire_owned().await else {
            return;
        };
        // A long wait for a slot may have outlived the run's lease: renew
        // it, or leave the run to the admin that took it over.
        if waited.elapsed() > Duration::from_millis(crate::store::DISPATCH_LEASE_MS as u64 / 2) {
            match self.store.take_leases(&[run.id], now_ms()).await {
                Ok(taken) if taken == [run.id] => {}
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(run = run.id, %error, "cannot renew a run's lease");
                    return;
                }
            }
        }
        let started = std::time::Instant::now();
        if let Err(error) = self.dispatch(run, prepared, addresses).await {
            tracing::error!(run = run.id, %error, "dispatch failed");
        }
        self.slow_jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .record(run.job_id, started.elapsed(), now_ms());
    }

    /// Routes and sends a run; records the trigger failure as the run's end.
    /// Reads the job and its state unless `prepared` brings them.
    async fn dispatch(
        self: &Arc<Self>,
        run: &RunRow,
        prepared: Option<Prepared>,
        addresses: Option<Vec<String>>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let Prepared { job, state } = match prepared {
            Some(prepared) => prepared,
            None => Prepared {
                job: self.store.job(run.job_id).await?,
                state: self.store.job_state(run.job_id).await?,
            },
        };
        let Some(job) = job else {
            self.fail(run, "the job no longer exists").await?;
            return Ok(());
        };
        if matches!(run.kind.as_str(), "schedule" | "misfire") && !job.enabled {
            // Written ahead by the pre-read, but the job was stopped since.
            let end = RunEnd::cancelled(
                run.id,
                "cancelled: the job was stopped before this run was dispatched",
                now,
            );
            if self.store.finish_run(&end).await?.is_some() {
                self.metrics.run_ended(status::CANCELLED);
            }
            return Ok(());
        }
        let addresses = match addresses {
            Some(addresses) => addresses,
            None => self.live_addresses(&job.group_name, now).await?,
        };
        let strategy: RouteStrategy = job.route.parse().unwrap_or(RouteStrategy::First);
        let route = if strategy == RouteStrategy::ShardingBroadcast && is_one_shard(run) {
            // A retry of one shard, or a shard written by an earlier fan-out:
            // that shard again, on one executor, not a new broadcast.
            match shard_address(run, &addresses) {
                Some(address) => Ok(Route::One(address)),
                None => Err(crate::routing::RouteError::NoAddress),
            }
        } else {
            let probe = HttpProbe {
                http: &self.http,
                token: &self.config.executor_token,
            };
            self.router
                .route(strategy, run.job_id as u64, &addresses, &probe)
                .await
        };
        let route = match route {
            Ok(route) => route,
            Err(error) => {
                self.fail(run, &format!("trigger failed: {error}")).await?;
                return Ok(());
            }
        };
        let targets: Vec<(RunRow, String)> = match route {
            Route::One(address) => vec![(run.clone(), address)],
            Route::Broadcast(addresses) => self.broadcast_runs(run, addresses, now).await?,
        };
        for (run, address) in targets {
            self.send(&job, &run, &address, &state).await?;
        }
        Ok(())
    }

    /// The live addresses of `group` now (registered and beating, or the
    /// operator's list for a MANUAL group): where its runs may go.
    pub async fn group_addresses_now(&self, group: &str) -> Result<Vec<String>, StoreError> {
        self.live_addresses(group, now_ms()).await
    }

    /// The group's live addresses, from a cache refreshed every second.
    async fn live_addresses(&self, group: &str, now: i64) -> Result<Vec<String>, StoreError> {
        let cached = self
            .addresses
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(group)
            .filter(|(read_at, _)| read_at.elapsed() < ADDRESS_CACHE)
            .map(|(_, addresses)| addresses.clone());
        if let Some(addresses) = cached {
            return Ok(addresses);
        }
        let alive_since = self.alive_since(now).await?;
        let addresses = self.store.group_addresses(group, alive_since).await?;
        self.addresses
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(
                group.to_owned(),
                (std::time::Instant::now(), addresses.clone()),
            );
        Ok(addresses)
    }

    /// SHARDING_BROADCAST: the run becomes shard 0 of n, and n-1 sibling
    /// runs are written for the other executors.
    async fn broadcast_runs(
        &self,
        run: &RunRow,
        addresses: Vec<String>,
        now: i64,
    ) -> Result<Vec<(RunRow, String)>, StoreError> {
        let total = addresses.len() as i64;
        let mut targets = Vec::with_capacity(addresses.len());
        for (index, address) in addresses.into_iter().enumerate() {
            let mut shard = run.clone();
            shard.shard_index = index as i64;
            shard.shard_total = total;
            if index == 0 && total > 1 {
                // Persisted, so that its retries stay shard 0 of n.
                self.store.set_shard(run.id, 0, total).await?;
            }
            if index > 0 {
                shard.id = self
                    .store
                    .insert_run(
                        &NewRun {
                            job_id: run.job_id,
                            kind: static_kind(&run.kind),
                            scheduled_at_ms: run.scheduled_at_ms,
                            shard_index: index as i64,
                            shard_total: total,
                            attempt: run.attempt,
                            param: run.param.clone(),
                            module_digest: run.module_digest.clone(),
                        },
                        now,
                    )
                    .await?;
            }
            targets.push((shard, address));
        }
        Ok(targets)
    }

    async fn send(
        self: &Arc<Self>,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
    ) -> Result<(), StoreError> {
        let command = RunCommand {
            trigger: Trigger {
                job_id: job.id as u64,
                run_id: run.id as u64,
                param: run.param.clone(),
                shard_index: run.shard_index as u32,
                shard_total: run.shard_total as u32,
                kind: trigger_kind(&run.kind),
                scheduled_at_ms: run.scheduled_at_ms,
                attempt: run.attempt as u32,
            },
            // The job's module now: a version pushed or rolled back since the
            // fire was written runs from this trigger on (the result records
            // what ran).
            module_digest: job.module_digest.clone(),
            block_strategy: serde_json::from_value(serde_json::Value::String(
                job.block_strategy.clone(),
            ))
            .unwrap_or(BlockStrategy::SerialExecution),
            max_concurrency: job.max_concurrency as u32,
            limits: WireLimits {
                timeout_ms: job.timeout_ms as u64,
                fuel: job.fuel.map(|fuel| fuel as u64),
                memory_bytes: job.memory_bytes as u64,
                ..WireLimits::default()
            },
            state: state.values.clone(),
            state_revisions: state.revisions.clone(),
            receipt: self.receipt(run.id as u64, address),
            fresh_instance: job.fresh_instance,
            start_in_ms: (run.scheduled_at_ms - now_ms()).max(0) as u64,
        };
        let response = self
            .http
            .post(format!("{address}{}", executor_paths::RUN))
            .bearer_auth(&self.config.executor_token)
            .json(&command)
            .send()
            .await;
        let now = now_ms();
        match response {
            Ok(response) if response.status().is_success() => {
                match response.json::<RunResponse>().await {
                    Ok(answer) if answer.accepted => {
                        self.mark_dispatched(run.id, address, now);
                    }
                    Ok(answer) => {
                        let reason = answer
                            .refused
                            .map(|outcome| outcome.message())
                            .unwrap_or_else(|| "refused".to_owned());
                        self.fail(run, &format!("{address} refused the run: {reason}"))
                            .await?;
                    }
                    Err(error) => {
                        self.fail(run, &format!("{address} answered badly: {error}"))
                            .await?
                    }
                }
            }
            Ok(response) if response.status() == reqwest::StatusCode::CONFLICT => {
                // The executor already has this run: an earlier dispatch
                // reached it but the admin died before recording it. Its
                // result will come by callback.
                self.mark_dispatched(run.id, address, now);
            }
            Ok(response) => {
                let status = response.status();
                let body = response.text().await.unwrap_or_default();
                self.fail(
                    run,
                    &format!("trigger failed: {address} answered {status}: {body}"),
                )
                .await?;
            }
            Err(error) => {
                self.fail(run, &format!("trigger failed: {address}: {error}"))
                    .await?
            }
        }
        Ok(())
    }

    /// Queues the record that `address` accepted `run`.
    fn mark_dispatched(&self, run_id: i64, address: &str, now: i64) {
        let _ = self.marks.send(DispatchMark {
            run_id,
            executor: address.to_owned(),
            at_ms: now,
        });
    }

    /// Ends a run that could not be dispatched, then applies the retry
    /// policy.
    async fn fail(self: &Arc<Self>, run: &RunRow, message: &str) -> Result<(), StoreError> {
        tracing::warn!(
            run = run.id,
            job = run.job_id,
            message,
            "run not dispatched"
        );
        self.metrics.dispatch_failures.inc();
        let ended = self
            .store
            .finish_run(&RunEnd::failed(run.id, "rejected", message, now_ms()))
            .await?;
        if let Some(ended) = ended {
            self.metrics.run_ended("rejected");
            self.after_end(&ended, None).await?;
        }
        Ok(())
    }

    /// Records results from an executor (idempotent by run id) and acts on
    /// them: state is committed with a successful result (unless it
    /// conflicts with a commit the run did not see), then children, retries
    /// and FIX_DELAY follow. A result whose receipt does not match its run's
    /// dispatch is refused (logged and counted) and changes nothing.
    pub async fn accept_results(
        self: &Arc<Self>,
        results: Vec<RunResult>,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let (results, refused): (Vec<RunResult>, Vec<RunResult>) = results
            .into_iter()
            .partition(|result| self.receipt_holds(result));
        for result in &refused {
            self.metrics.results_refused.inc();
            tracing::warn!(
                run = result.run_id,
                executor = %result.executor,
                "result refused: its receipt does not match the run's dispatch"
            );
        }
        let ends: Vec<RunEnd> = results
            .into_iter()
            .map(|result| RunEnd {
                module_digest: (!result.module_digest.is_empty())
                    .then(|| result.module_digest.clone()),
                run_id: result.run_id as i64,
                success: result.outcome.is_success(),
                outcome: result.outcome.kind().as_str().to_owned(),
                code: i64::from(result.code),
                message: result.outcome.message(),
                log: serde_json::to_string(&result.log).unwrap_or_default(),
                executor: Some(result.executor),
                started_at_ms: (result.started_at_ms > 0).then_some(result.started_at_ms),
                state_changes: result.state_changes,
                state_base: result.state_base,
                finished_at_ms: now,
            })
            .collect();
        // One transaction for the batch; a repeated callback finds its run
        // already ended and changes nothing.
        let ended = self.store.finish_runs(&ends).await?;
        let mut job_ids: Vec<i64> = ended.iter().flatten().map(|run| run.job_id).collect();
        job_ids.sort_unstable();
        job_ids.dedup();
        let jobs = self.store.jobs_by_id(&job_ids).await?;
        for (run, end) in ended.into_iter().zip(&ends) {
            let Some(run) = run else {
                continue;
            };
            self.metrics
                .run_ended(run.outcome.as_deref().unwrap_or(&end.outcome));
            if run.kind == "schedule"
                && let Some(started) = end.started_at_ms
            {
                let late = (started - run.scheduled_at_ms).max(0) as f64 / 1000.0;
                self.metrics.lateness.observe(late);
            }
            if let Some(job) = jobs.get(&run.job_id) {
                self.after_end(&run, Some(job)).await?;
            }
        }
        Ok(())
    }

    /// What follows a run's end, whichever way it ended (result, dispatch
    /// failure, lost): children after a success; a retry after a failure,
    /// unless the run was ended on purpose (killed, covered, cancelled);
    /// and for a FIX_DELAY job's scheduled run, the job's next fire, once.
    async fn after_end(
        self: &Arc<Self>,
        run: &RunRow,
        job: Option<&JobRow>,
    ) -> Result<(), StoreError> {
        let read;
        let job = match job {
            Some(job) => job,
            None => match self.store.job(run.job_id).await? {
                Some(job) => {
                    read = job;
                    &read
                }
                None => return Ok(()),
            },
        };
        if run.status == status::SUCCESS {
            for child in children_of(job) {
                if let Err(error) = self.trigger(child, "parent", None, None).await {
                    tracing::warn!(child, %error, "child job not triggered");
                }
            }
        } else if !run.outcome.as_deref().is_some_and(outcome_is_deliberate) {
            self.retry(run, job).await?;
        }
        if matches!(run.kind.as_str(), "schedule" | "misfire")
            && let Ok(schedule @ Schedule::FixDelay(_)) = schedule_of(job)
            && let Some(next) = schedule.after_completion(instant(now_ms()))
        {
            self.store
                .continue_fixed_delay(job.id, next.timestamp_millis(), now_ms())
                .await?;
            self.wake();
        }
        Ok(())
    }

    /// Retries a failed run if the job's retries allow: a new run linked by
    /// its attempt number, after the interval doubled per attempt; the same
    /// shard (index and total) and parameter.
    async fn retry(self: &Arc<Self>, run: &RunRow, job: &JobRow) -> Result<(), StoreError> {
        if run.attempt >= job.retry_count {
            return Ok(());
        }
        let backoff = job
            .retry_interval_ms
            .saturating_mul(1_i64 << run.attempt.min(20));
        let retry = NewRun {
            job_id: run.job_id,
            kind: "retry",
            scheduled_at_ms: now_ms() + backoff,
            shard_index: run.shard_index,
            shard_total: run.shard_total,
            attempt: run.attempt + 1,
            param: run.param.clone(),
            module_digest: run.module_digest.clone(),
        };
        let id = self.store.insert_run(&retry, now_ms()).await?;
        if let Some(run) = self.store.run(id).await? {
            self.clone().dispatch_at(run);
        }
        Ok(())
    }

    /// Kills a whole job: its runs waiting to be dispatched end as
    /// cancelled (pending retries included), and every executor that may
    /// hold one of its runs (running, queued or held until its instant) is
    /// told to kill them all. Returns the cancelled run ids, the killed
    /// ones, and the executors that could not be reached.
    pub async fn kill_job(&self, job: &JobRow) -> Result<JobKill, StoreError> {
        let now = now_ms();
        let cancelled = self
            .store
            .cancel_waiting_runs(job.id, "cancelled: the job was killed", now)
            .await?;
        for _ in &cancelled {
            self.metrics.run_ended(status::CANCELLED);
        }
        let mut executors = self.store.executors_of_running(job.id).await?;
        // Runs sent ahead whose dispatch is not recorded yet are on one of
        // the group's executors.
        executors.extend(self.live_addresses(&job.group_name, now).await?);
        executors.sort();
        executors.dedup();
        let mut killed = Vec::new();
        let mut unreachable = Vec::new();
        for executor in executors {
            let command = cronbox_protocol::KillCommand::Job {
                job_id: job.id as u64,
            };
            match self
                .post::<_, cronbox_protocol::KillResponse>(
                    &executor,
                    executor_paths::KILL,
                    &command,
                )
                .await
            {
                Ok(answer) => killed.extend(answer.killed),
                Err(error) => unreachable.push(error),
            }
        }
        killed.sort_unstable();
        Ok(JobKill {
            cancelled,
            killed,
            unreachable,
        })
    }

    /// Triggers a job now (manual, API, parent): writes the run, then
    /// dispatches it. `param` overrides the job's parameter.
    pub async fn trigger(
        self: &Arc<Self>,
        job_id: i64,
        kind: &'static str,
        param: Option<String>,
        addresses: Option<Vec<String>>,
    ) -> Result<i64, StoreError> {
        let Some(job) = self.store.job(job_id).await? else {
            return Err(StoreError::Database(sqlx::Error::RowNotFound));
        };
        let now = now_ms();
        let id = self
            .store
            .insert_run(
                &NewRun {
                    job_id,
                    kind,
                    scheduled_at_ms: now,
                    shard_index: 0,
                    shard_total: 1,
                    attempt: 0,
                    param: param.unwrap_or(job.param),
                    module_digest: job.module_digest,
                },
                now,
            )
            .await?;
        if let Some(run) = self.store.run(id).await? {
            // Written with this admin's lease, so no other admin sends it.
            self.clone().dispatch_now(run, addresses);
        }
        Ok(id)
    }

    /// Dispatches `run` at once in its pool, to `addresses` if given.
    /// (A plain function: a trigger dispatches, and a dispatch can end a
    /// run and trigger children, so an async one would contain itself.)
    fn dispatch_now(self: Arc<Self>, run: RunRow, addresses: Option<Vec<String>>) {
        tokio::spawn(async move { self.dispatch_in_pool(&run, None, addresses).await });
    }
}

/// What a kill of a whole job did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct JobKill {
    /// Runs that were waiting to be dispatched, now cancelled.
    pub cancelled: Vec<i64>,
    /// Runs executors stopped or dropped from their queues.
    pub killed: Vec<u64>,
    /// Executors that could not be reached (their runs of the job go on).
    pub unreachable: Vec<String>,
}

/// What a dispatch reads before routing: the job (`None` if it was
/// deleted) and its durable state.
#[derive(Debug)]
struct Prepared {
    job: Option<JobRow>,
    state: JobState,
}

/// Whether a SHARDING_BROADCAST run stands for one shard (a retry, or a
/// sibling written by an earlier fan-out) rather than a fresh fire to fan
/// out.
fn is_one_shard(run: &RunRow) -> bool {
    run.attempt > 0 || run.shard_total > 1 || run.shard_index > 0
}

/// The executor for one shard of a broadcast: the one at the shard's index
/// among the group's live executors (wrapping around if there are fewer
/// now), so a retry lands on an executor chosen for that shard.
fn shard_address(run: &RunRow, addresses: &[String]) -> Option<String> {
    if addresses.is_empty() {
        return None;
    }
    let index = usize::try_from(run.shard_index).unwrap_or(0) % addresses.len();
    Some(addresses[index].clone())
}

/// The runs to write for a due job's fires up to `horizon` and its next
/// fire after them; `None` (logged) when its schedule cannot be read, and
/// the job is to be stopped.
fn plan_job(job: &JobRow, now: i64, horizon: i64) -> Option<(Vec<NewRun>, Option<i64>)> {
    let expected = job.next_fire_at_ms?;
    let schedule = match schedule_of(job) {
        Ok(schedule) => schedule,
        Err(error) => {
            tracing::error!(job = job.id, %error, "unparseable schedule; job stopped");
            return None;
        }
    };
    let (fires, next) = plan_fires(job, &schedule, expected, now, horizon);
    Some((new_runs(job, &fires), next))
}

/// The runs to write for `job`'s planned fires.
fn new_runs(job: &JobRow, fires: &[(i64, &'static str)]) -> Vec<NewRun> {
    fires
        .iter()
        .map(|(at, kind)| NewRun {
            job_id: job.id,
            kind,
            scheduled_at_ms: *at,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            param: job.param.clone(),
            module_digest: job.module_digest.clone(),
        })
        .collect()
}

/// The row of a run just written (saves reading it back).
fn written_run(id: i64, tenant: &str, run: &NewRun, now: i64) -> RunRow {
    RunRow {
        id,
        tenant: tenant.to_owned(),
        job_id: run.job_id,
        kind: run.kind.to_owned(),
        scheduled_at_ms: run.scheduled_at_ms,
        shard_index: run.shard_index,
        shard_total: run.shard_total,
        attempt: run.attempt,
        param: run.param.clone(),
        status: crate::store::status::PENDING.to_owned(),
        executor: None,
        module_digest: run.module_digest.clone(),
        outcome: None,
        code: None,
        message: None,
        created_at_ms: now,
        dispatched_at_ms: None,
        started_at_ms: None,
        finished_at_ms: None,
        alarm_status: crate::store::alarm::NONE.to_owned(),
        alarm_message: None,
    }
}

/// The stored kind as a static string (run rows keep it as text).
fn static_kind(kind: &str) -> &'static str {
    match kind {
        "manual" => "manual",
        "api" => "api",
        "retry" => "retry",
        "parent" => "parent",
        "misfire" => "misfire",
        _ => "schedule",
    }
}

/// The fires of `job` from `expected` (its stored next fire) up to
/// `horizon`, with the misfire policy applied, and its next fire after them.
pub fn plan_fires(
    job: &JobRow,
    schedule: &Schedule,
    expected: i64,
    now: i64,
    horizon: i64,
) -> (Vec<(i64, &'static str)>, Option<i64>) {
    let mut fires = Vec::new();
    let mut next = Some(expected);
    if expected < now - job.misfire_threshold_ms {
        // Missed by more than the threshold.
        if job.misfire == "FIRE_ONCE_NOW" {
            fires.push((now, "misfire"));
        }
        next = match schedule {
            Schedule::FixDelay(_) => None,
            Schedule::OneShot(_) => None,
            _ => schedule
                .next_after(instant(now))
                .map(|at| at.timestamp_millis()),
        };
        if let Schedule::FixDelay(delay) = schedule
            && job.misfire != "FIRE_ONCE_NOW"
        {
            next = Some(now + delay.as_millis() as i64);
        }
        return (fires, next);
    }
    while let Some(at) = next {
        if at > horizon {
            break;
        }
        fires.push((at, "schedule"));
        next = match schedule {
            // FIX_DELAY's next fire is set when the run completes.
            Schedule::FixDelay(_) | Schedule::OneShot(_) | Schedule::None => None,
            _ => schedule
                .next_after(instant(at))
                .map(|at| at.timestamp_millis()),
        };
    }
    (fires, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_second(misfire: &str) -> JobRow {
        JobRow {
            id: 1,
            tenant: "default".into(),
            group_name: "default".into(),
            name: "every-second".into(),
            module_digest: "a".repeat(64),
            schedule_type: "CRON".into(),
            schedule_conf: "* * * * * ?".into(),
            time_zone: "UTC".into(),
            misfire: misfire.into(),
            misfire_threshold_ms: 5_000,
            route: "FIRST".into(),
            block_strategy: "SERIAL_EXECUTION".into(),
            max_concurrency: 1,
            timeout_ms: 1_000,
            fuel: None,
            memory_bytes: 1 << 20,
            retry_count: 0,
            retry_interval_ms: 0,
            children: String::new(),
            param: String::new(),
            enabled: true,
            next_fire_at_ms: None,
            module_name: None,
            module_version: None,
            alarm_url: String::new(),
            fresh_instance: false,
        }
    }

    /// The catch-up rule: after a stall shorter than the misfire threshold
    /// every missed fire runs (late, in order); past the threshold none does
    /// (DO_NOTHING) or one runs now (FIRE_ONCE_NOW), and the schedule goes
    /// on from now.
    #[test]
    fn missed_fires_catch_up_within_the_threshold_and_misfire_beyond_it() {
        let now = 1_800_000_000_000; // a whole second
        let horizon = now + 1_000;
        for misfire in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
            let job = every_second(misfire);
            let schedule = schedule_of(&job).unwrap_or_else(|error| panic!("{error}"));
            // A 4 s stall: the four missed fires run, then the due ones.
            let (fires, next) = plan_fires(&job, &schedule, now - 4_000, now, horizon);
            let expected: Vec<(i64, &str)> = (-4..=1)
                .map(|second| (now + second * 1_000, "schedule"))
                .collect();
            assert_eq!(fires, expected, "{misfire}");
            assert_eq!(next, Some(now + 2_000));
            // A 6 s stall is past the 5 s threshold.
            let (fires, next) = plan_fires(&job, &schedule, now - 6_000, now, horizon);
            let expected: Vec<(i64, &str)> = match misfire {
                "DO_NOTHING" => vec![],
                _ => vec![(now, "misfire")],
            };
            assert_eq!(fires, expected, "{misfire}");
            assert_eq!(next, Some(now + 1_000), "{misfire}: on from now");
        }
    }

    #[test]
    fn often_slow_jobs_move_to_the_slow_pool_for_the_minute() {
        let mut slow = SlowJobs::default();
        let minute = 60_000 * 1_000;
        for _ in 0..SLOW_DISPATCHES_PER_MINUTE {
            slow.record(7, Duration::from_millis(800), minute);
            slow.record(8, Duration::from_millis(10), minute);
        }
        assert!(
            !slow.is_slow(7, minute),
            "ten slow dispatches are tolerated"
        );
        slow.record(7, Duration::from_millis(800), minute + 1);
        assert!(slow.is_slow(7, minute + 1));
        assert!(!slow.is_slow(8, minute + 1), "fast jobs stay fast");
        assert!(
            !slow.is_slow(7, minute + 60_000),
            "counts reset every minute"
        );
    }
}
