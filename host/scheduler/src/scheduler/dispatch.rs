//! The dispatcher: when and where runs go — timers that send each run
//! ahead of its instant, send windows shared by claim batches, leases, the
//! fast and slow pools. The overlap policy is `overlap.rs`; routing and the
//! send are `sending.rs`; what a run is sent with is `command.rs`; triggers are
//! `triggers.rs`.

use super::*;

/// The dispatcher's state: its pools, the groups' live addresses, the
/// commands queued per executor, the open send windows, and the HTTP
/// client runs go to executors with.
#[derive(Debug)]
pub(super) struct Dispatcher {
    pub(super) http: reqwest::Client,
    /// Dispatch slots of jobs whose dispatches are quick.
    fast_slots: Arc<Semaphore>,
    /// Dispatch slots of jobs whose dispatches were often slow this minute,
    /// so that they cannot hold up the others (xxl-job's slow pool).
    slow_slots: Arc<Semaphore>,
    slow_jobs: std::sync::Mutex<SlowJobs>,
    /// Each group's live addresses, read at most once per second.
    pub(super) addresses:
        std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Vec<String>)>>,
    /// What to present to each executor (an enrolled one's admin proof;
    /// `None`: the shared token), read at most once per second.
    pub(super) bearers:
        std::sync::Mutex<std::collections::HashMap<String, (std::time::Instant, Option<String>)>>,
    /// Run commands on their way to each executor, sent in batches.
    pub(super) batches: Batches,
    /// Runs waiting for their window's time to be sent.
    windows: OpenWindows,
}

impl Dispatcher {
    pub(super) fn new(config: &SchedulerConfig, http: reqwest::ClientBuilder) -> Self {
        Dispatcher {
            http: http
                .timeout(config.dispatch_timeout)
                .connect_timeout(Duration::from_secs(1))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            fast_slots: Arc::new(Semaphore::new(config.max_dispatches)),
            slow_slots: Arc::new(Semaphore::new((config.max_dispatches / 4).max(1))),
            slow_jobs: std::sync::Mutex::new(SlowJobs::default()),
            addresses: std::sync::Mutex::new(std::collections::HashMap::new()),
            bearers: std::sync::Mutex::new(std::collections::HashMap::new()),
            batches: Batches::default(),
            windows: OpenWindows::default(),
        }
    }
}

/// How long a group's address list is reused before the registry is read
/// again.
pub(super) const ADDRESS_CACHE: Duration = Duration::from_secs(1);

/// The lease runs to dispatch are under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Lease {
    /// This admin wrote them and holds the lease the write gave each
    /// (see [`Leases::write_until`](crate::store::Leases::write_until)).
    Written,
    /// Found pending (at start-up, or orphaned by a dead admin): to take.
    ToTake,
}

/// What a dispatch knows of its run's job before routing; what it does
/// not know it reads.
#[derive(Debug)]
pub(super) enum Known {
    /// Nothing: the dispatch reads the job and its durable state.
    Nothing,
    /// The job, read by the trigger that wrote the run (each trigger reads
    /// its job once); the dispatch reads its state.
    Job(Box<JobRow>),
    /// The job (`None` if it was deleted) and its state, read for a group
    /// of fires at once.
    JobAndState(Option<Box<JobRow>>, JobState),
}

/// Runs counted in the dispatch backlog (see
/// [`SchedulerConfig::max_backlog`]) while this lives, however its task
/// ends (the admin stopping cuts it short).
pub(super) struct InBacklog {
    gauge: prometheus_client::metrics::gauge::Gauge,
    runs: i64,
}

impl InBacklog {
    /// One run's share, to live as long as that run's dispatch.
    fn take_one(&mut self) -> InBacklog {
        self.runs -= 1;
        InBacklog {
            gauge: self.gauge.clone(),
            runs: 1,
        }
    }
}

impl Drop for InBacklog {
    fn drop(&mut self) {
        self.gauge.dec_by(self.runs);
    }
}

/// The width of the windows of scheduled time whose runs are sent
/// together (see [`Scheduler::dispatch_all_at`]): a third of how far ahead
/// runs are sent, so a run goes between `ahead` and `4/3 ahead` before its
/// instant; at least 1 ms (with nothing sent ahead, runs due on the same
/// millisecond still go together).
///
/// Fires spread over the second (jitter, FIX_RATE phases) were each
/// dispatched on their own millisecond: 5,000 runs/s made a thousand
/// groups of five a second, each a lease write and two reads, and
/// overran; in windows they are ten groups of 500.
pub(super) fn dispatch_window(ahead_ms: i64) -> i64 {
    (ahead_ms / 3).max(1)
}

/// The window of runs whose time to be sent has come: they all go together,
/// at once, whatever their instants.
pub(super) const OVERDUE: i64 = i64::MIN;

/// The window of scheduled time `scheduled_at_ms` falls in, and when that
/// window's runs are sent: `ahead` before the window's start, so each of
/// its runs goes between `ahead` and `ahead` plus a window before its
/// instant. A run whose time to be sent is `now_ms` or past is in the
/// [`OVERDUE`] window, sent now.
///
/// Overdue runs went in their own windows too: an admin that had fallen
/// behind claimed seconds of late fires in a batch, spread over dozens of
/// windows of a few runs each, each with its two reads, at the moment it
/// most needed to save work (BENCHMARKS.md's history, "Windows shared by claim
/// batches").
pub(super) fn send_window(scheduled_at_ms: i64, ahead_ms: i64, now_ms: i64) -> (i64, i64) {
    let window = dispatch_window(ahead_ms);
    let index = scheduled_at_ms.div_euclid(window);
    let send_at = index * window - ahead_ms;
    if send_at <= now_ms {
        (OVERDUE, now_ms)
    } else {
        (index, send_at)
    }
}

/// Runs waiting for their window's timer, by window and lease. Every batch
/// of claims adds its runs to the windows they fall in, so that all the
/// runs of one window share one timer and one read of their jobs, however
/// many batches they were claimed in. A window closes when its timer takes
/// its runs; runs added after that open it again, with a timer of its own
/// (which goes off at once: its time has come).
///
/// Each claim batch had windows of its own: at 10,000 fires a second in
/// batches of a few hundred jobs, the admin read jobs and states for 300
/// windows a second where 10 would do, and the reads waited on each
/// other.
#[derive(Debug, Default)]
pub(super) struct OpenWindows {
    open: std::sync::Mutex<std::collections::HashMap<(i64, Lease), Vec<RunRow>>>,
}

impl OpenWindows {
    /// Adds `runs` to window `index` of `lease`; true if this opened it
    /// (its timer is the caller's to start).
    fn add(&self, index: i64, lease: Lease, runs: Vec<RunRow>) -> bool {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        match open.entry((index, lease)) {
            std::collections::hash_map::Entry::Occupied(mut window) => {
                window.get_mut().extend(runs);
                false
            }
            std::collections::hash_map::Entry::Vacant(window) => {
                window.insert(runs);
                true
            }
        }
    }

    /// Closes window `index` of `lease`, taking its runs.
    fn take(&self, index: i64, lease: Lease) -> Vec<RunRow> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        open.remove(&(index, lease)).unwrap_or_default()
    }
}

impl Scheduler {
    /// Dispatches `run` at its scheduled instant (at once if it is past).
    pub(super) fn dispatch_at(self: Arc<Self>, run: RunRow, lease: Lease) {
        self.dispatch_all_at(vec![run], lease);
    }

    /// Dispatches each run `dispatch_ahead` before its scheduled instant
    /// (at once if that is past), for the executor to hold until the
    /// instant. Runs due within one [`dispatch_window`] share one timer
    /// and one read of their jobs and states (see [`OpenWindows`]), so a
    /// thousand jobs firing on the same second cost two queries, not two
    /// thousand, and neither do a thousand fires spread over a second.
    pub(super) fn dispatch_all_at(self: Arc<Self>, runs: Vec<RunRow>, lease: Lease) {
        let ahead = self.config.dispatch_ahead.as_millis() as i64;
        let now = self.now_ms();
        let mut by_window: std::collections::BTreeMap<(i64, i64), Vec<RunRow>> = Default::default();
        for run in runs {
            by_window
                .entry(send_window(run.scheduled_at_ms, ahead, now))
                .or_default()
                .push(run);
        }
        for ((index, send_at), runs) in by_window {
            if !self.dispatcher.windows.add(index, lease, runs) {
                continue;
            }
            let scheduler = self.clone();
            self.tasks.spawn(async move {
                // Once the admin stops firing, a window not yet due is not
                // sent: its runs stay pending for the next start (or
                // another admin, once their lease ends).
                tokio::select! {
                    () = scheduler.config.clock.sleep_until(send_at) => {}
                    () = scheduler.firing.cancelled() => {
                        scheduler.dispatcher.windows.take(index, lease);
                        return;
                    }
                }
                let runs = scheduler.dispatcher.windows.take(index, lease);
                let due = scheduler.in_backlog(runs.len());
                scheduler.dispatch_group(runs, lease, due).await;
            });
        }
    }

    /// The runs among `runs` this admin holds a lease on long enough to
    /// send them, each with when that lease runs out: those it wrote whose
    /// write lease has [`Leases::left_to_send_ms`](crate::store::Leases::left_to_send_ms) left as they are, the
    /// others only if it takes their leases now (in one write). With
    /// several admins, a run whose admin died is so taken over by exactly
    /// one other.
    async fn leased(&self, runs: Vec<RunRow>, lease: Lease) -> Vec<(RunRow, i64)> {
        let now = self.now_ms();
        let leases = self.store.leases();
        let (mut held, to_take): (Vec<_>, Vec<_>) = runs
            .into_iter()
            .map(|run| {
                let until = match lease {
                    Lease::Written => leases.write_until(run.scheduled_at_ms, run.created_at_ms),
                    Lease::ToTake => now,
                };
                (run, until)
            })
            .partition(|(_, until)| until - now >= leases.left_to_send_ms());
        if to_take.is_empty() {
            return held;
        }
        let ids: Vec<(RunId, i64)> = to_take
            .iter()
            .map(|(run, _)| (run.id, run.scheduled_at_ms))
            .collect();
        match self.store.take_leases(&ids, now).await {
            Ok(taken) => {
                let taken: std::collections::HashSet<RunId> = taken.into_iter().collect();
                held.extend(
                    to_take
                        .into_iter()
                        .filter(|(run, _)| taken.contains(&run.id))
                        .map(|(run, _)| (run, now + leases.dispatch_ms())),
                );
            }
            Err(error) => {
                // Left pending: taken over once their lease runs out.
                tracing::warn!(%error, count = ids.len(), "cannot take the leases of due runs");
            }
        }
        held
    }

    /// Reads what the runs' dispatches need in one go, then dispatches each
    /// in its pool. `due` counts the runs in the backlog; each run's task
    /// takes its share.
    pub(super) async fn dispatch_group(
        self: Arc<Self>,
        runs: Vec<RunRow>,
        lease: Lease,
        mut due: InBacklog,
    ) {
        let runs = self.leased(runs, lease).await;
        if runs.is_empty() {
            return;
        }
        let mut job_ids: Vec<JobId> = runs.iter().map(|(run, _)| run.job_id).collect();
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
                for (run, leased_until) in runs {
                    let scheduler = self.clone();
                    let due = due.take_one();
                    self.tasks.spawn(async move {
                        scheduler
                            .dispatch_in_pool(&run, leased_until, Known::Nothing, None)
                            .await;
                        drop(due);
                    });
                }
                return;
            }
        };
        for (run, leased_until) in runs {
            let known = Known::JobAndState(
                jobs.get(&run.job_id).cloned().map(Box::new),
                states.get(&run.job_id).cloned().unwrap_or_default(),
            );
            let scheduler = self.clone();
            let due = due.take_one();
            self.tasks.spawn(async move {
                scheduler
                    .dispatch_in_pool(&run, leased_until, known, None)
                    .await;
                drop(due);
            });
        }
    }

    /// Counts `runs` in the dispatch backlog until the answer is dropped.
    fn in_backlog(&self, runs: usize) -> InBacklog {
        let runs = runs as i64;
        self.metrics.dispatch_backlog.inc_by(runs);
        InBacklog {
            gauge: self.metrics.dispatch_backlog.clone(),
            runs,
        }
    }

    /// Dispatches in the job's pool (fast or slow), timing it. `leased_until`
    /// is when this admin's lease on the run runs out.
    pub(super) async fn dispatch_in_pool(
        self: &Arc<Self>,
        run: &RunRow,
        leased_until: i64,
        known: Known,
        addresses: Option<Vec<String>>,
    ) {
        let slow = self
            .dispatcher
            .slow_jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .is_slow(run.job_id, self.now_ms());
        let slots = if slow {
            &self.dispatcher.slow_slots
        } else {
            &self.dispatcher.fast_slots
        };
        let Ok(_slot) = slots.clone().acquire_owned().await else {
            return;
        };
        // A long wait for a slot may have used up the run's lease: renew
        // it, or leave the run to the admin that took it over.
        if leased_until - self.now_ms() < self.store.leases().renew_below_ms() {
            match self
                .store
                .take_leases(&[(run.id, run.scheduled_at_ms)], self.now_ms())
                .await
            {
                Ok(taken) if taken == [run.id] => {}
                Ok(_) => return,
                Err(error) => {
                    tracing::warn!(run = %run.id, %error, "cannot renew a run's lease");
                    return;
                }
            }
        }
        let started = std::time::Instant::now();
        if let Err(error) = self.dispatch(run, known, addresses).await {
            tracing::error!(run = %run.id, %error, "dispatch failed");
        }
        self.dispatcher
            .slow_jobs
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .record(run.job_id, started.elapsed(), self.now_ms());
    }

    /// Ends `run` of a job whose stored row does not decode (the pre-read
    /// reads only the columns it plans with, so another column's damage is
    /// found here), and stops the job: every later fire would end the same.
    async fn stop_undecodable_job(
        self: &Arc<Self>,
        run: &RunRow,
        error: &StoreError,
    ) -> Result<(), StoreError> {
        tracing::error!(job = %run.job_id, %error, "job row does not decode; job stopped");
        self.metrics.dispatch_failures.inc();
        // Ended without what follows an end (retries, children, alarms):
        // they are the job's settings, and those do not decode.
        let message = format!("the job's stored row does not decode: {error}");
        let end = RunEnd::failed(run.id, RunOutcome::Rejected, &message, self.now_ms());
        if self.store.finish_run(&end).await?.is_some() {
            self.metrics
                .run_ended(&run.tenant, run.job_id, RunOutcome::Rejected.as_str());
        }
        self.store.stop_job(run.job_id, self.now_ms()).await?;
        Ok(())
    }

    /// Routes and sends a run; records the trigger failure as the run's end.
    /// Reads what [`Known`] does not bring of its job.
    pub(super) async fn dispatch(
        self: &Arc<Self>,
        run: &RunRow,
        known: Known,
        addresses: Option<Vec<String>>,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let (job, state) = match known {
            Known::JobAndState(job, state) => (job.map(|job| *job), state),
            Known::Job(job) => (Some(*job), self.store.job_state(run.job_id).await?),
            Known::Nothing => match self.store.job(run.job_id).await {
                Err(error) if error.is_undecodable_row() => {
                    return self.stop_undecodable_job(run, &error).await;
                }
                job => (job?, self.store.job_state(run.job_id).await?),
            },
        };
        let Some(job) = job else {
            self.fail(run, "the job no longer exists").await?;
            return Ok(());
        };
        if run.kind.is_scheduled_fire() && !job.enabled {
            // Written ahead by the pre-read, but the job was stopped since.
            let end = RunEnd::cancelled(
                run.id,
                "cancelled: the job was stopped before this run was dispatched",
                now,
            );
            if let Some(ended) = self.store.finish_run(&end).await? {
                self.metrics
                    .run_ended(&ended.tenant, ended.job_id, RunStatus::Cancelled.as_str());
                self.sink.events.send(|| RunEvent::ended(&ended));
            }
            return Ok(());
        }
        let fire = run.kind.is_scheduled_fire() || run.kind == TriggerKind::Backfill;
        if fire && !self.overlap_allows(&job, run, now).await? {
            return Ok(());
        }
        if let Err(exceeded) = self.quotas.admit_run(&self.store, &job.tenant, now).await? {
            self.fail_with(run, RunOutcome::QuotaExceeded, &exceeded.to_string())
                .await?;
            return Ok(());
        }
        let addresses = match addresses {
            Some(addresses) => addresses,
            None => self.live_addresses(&job.group_name, now).await?,
        };
        let executors = match self.executors_of(&job).await? {
            Ok(executors) => executors,
            Err(why) => {
                self.fail(run, &format!("trigger failed: {why}")).await?;
                return Ok(());
            }
        };
        let strategy = job.route;
        let route = if strategy == RouteStrategy::ShardingBroadcast && is_one_shard(run) {
            // A retry of one shard, or a shard written by an earlier fan-out:
            // that shard again, on one executor, not a new broadcast.
            match shard_address(run, &addresses) {
                Some(address) => Ok(Route::One(address)),
                None => Err(crate::routing::RouteError::NoAddress),
            }
        } else {
            self.router
                .route(strategy, run.job_id.wire(), &addresses, &executors)
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
        if targets.len() > 1 {
            self.quotas
                .admitted_more(&job.tenant, targets.len() as u64 - 1);
        }
        for (run, address) in targets {
            self.send(&executors, &job, &run, &address, &state).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
