//! A job worker: the instance lifecycle of one module.
//!
//! A worker creates an instance on its first run (`init`), calls `execute`
//! once per run and keeps the instance warm between runs (or makes a fresh
//! one per run, see [`InstanceMode`]). Between runs the warm instance is
//! parked with the runtime (`idle`), where a run waiting for a slot or for
//! memory may evict it; the worker then instantiates anew. Any trap,
//! timeout or kill drops the instance: its store is never entered again and
//! `destroy` is not called; the next run instantiates anew.
//! [`JobWorker::retire`] calls `destroy` on a healthy instance.
//!
//! Every run ends in a [`RunReport`]; nothing here returns an error. With
//! traces exported, creating the instance (its `init` included) is a span
//! under the run's (`cronbox.instantiate`; the `execute` call is the rest
//! of the run's span); otherwise it is disabled and costs nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cronbox_protocol::trace_context::TARGET as TRACE;
use cronbox_protocol::{LogLine, LogSource, Outcome, Trigger};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument as _;
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::config::{InstanceMode, RunLimits};
use crate::engine::Runtime;
use crate::host::{HostState, RunScope, StateView};
use crate::http::{HttpGate, HttpStats};
use crate::instance::LiveInstance;
use crate::module::JobModule;
use crate::run::{RunHandle, RunReport, RunRequest};

/// Runs one module, run after run.
pub struct JobWorker {
    runtime: Runtime,
    module: JobModule,
    mode: InstanceMode,
    /// Its warm instance's key among the runtime's idle instances.
    id: u64,
}

impl Drop for JobWorker {
    fn drop(&mut self) {
        // A warm instance dies with its worker (no `destroy`: see `retire`).
        drop(self.runtime.inner.idle.take(self.id));
    }
}

impl std::fmt::Debug for JobWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobWorker")
            .field("module", &self.module.digest())
            .field("mode", &self.mode)
            .field("warm", &self.is_warm())
            .finish()
    }
}

/// What a retired instance's `destroy` did.
#[derive(Debug, Clone)]
pub struct RetireReport {
    /// Lines the guest logged during `destroy`.
    pub log: Vec<LogLine>,
    /// Runs the instance served.
    pub runs: u64,
    /// Why `destroy` did not complete, if it did not.
    pub error: Option<String>,
}

/// The result of a guest call raced against the run's kill and deadline.
enum Raced<T> {
    Done(wasmtime::Result<T>),
    Stopped,
    TimedOut,
}

async fn race<T>(
    handle: &RunHandle,
    deadline: Instant,
    call: impl Future<Output = wasmtime::Result<T>>,
) -> Raced<T> {
    // A guest in a CPU loop yields to tokio on every epoch tick (see
    // `new_store`), so these branches are polled; a guest blocked in an async
    // host call is cancelled by dropping `call`.
    tokio::select! {
        biased;
        _ = handle.cancelled() => Raced::Stopped,
        _ = tokio::time::sleep_until(deadline.into()) => Raced::TimedOut,
        result = call => Raced::Done(result),
    }
}

impl JobWorker {
    /// A worker for `module`; no instance exists until the first run.
    pub fn new(runtime: &Runtime, module: JobModule, mode: InstanceMode) -> Self {
        JobWorker {
            runtime: runtime.clone(),
            module,
            mode,
            id: runtime.inner.idle.worker_id(),
        }
    }

    /// The module this worker runs.
    pub fn module(&self) -> &JobModule {
        &self.module
    }

    /// Whether the worker keeps its instance between runs.
    pub fn mode(&self) -> InstanceMode {
        self.mode
    }

    /// Whether a warm instance is waiting for the next run.
    pub fn is_warm(&self) -> bool {
        self.runtime.inner.idle.holds(self.id)
    }

    /// Runs the job once. `handle` kills the run or reads its log meanwhile.
    pub async fn run(&mut self, request: RunRequest, handle: &RunHandle) -> RunReport {
        self.run_after_wait(request, handle, Duration::ZERO).await
    }

    /// Runs the job once, after it already `waited` for its turn: the
    /// wait counts against its timeout (a timeout is still reported as the
    /// request's).
    pub async fn run_after_wait(
        &mut self,
        request: RunRequest,
        handle: &RunHandle,
        waited: Duration,
    ) -> RunReport {
        let started = Instant::now();
        let config = self.runtime.config();
        let mut limits = request.limits;
        limits.memory_bytes = limits.memory_bytes.min(config.memory_ceiling_bytes);
        let deadline = started + limits.timeout.saturating_sub(waited);
        handle.log().set_cap(limits.log_bytes);
        let secrets: Vec<String> = request.secrets.values().cloned().collect();
        handle.log().set_masks(secrets.iter().cloned());

        let mut report = RunReport::unstarted(Outcome::Killed, self.module.digest());
        handle.mark_started(report.started_at);

        let run_http = Arc::new(HttpStats::within(self.runtime.inner.http_stats.clone()));
        let scope = RunScope {
            trigger: request.trigger,
            handle: handle.clone(),
            deadline,
            state: StateView::new(request.state, config.state_limits),
            // Secrets after configuration: a name in both (refused when a
            // job is saved) reads the secret.
            config: request.config.into_iter().chain(request.secrets).collect(),
            http: HttpGate::new(
                request.http_allow,
                request.http_limits.min(&config.http_max),
                self.runtime.inner.http_nets.clone(),
                deadline,
                handle.clone(),
                run_http.clone(),
            ),
        };
        report.outcome = if limits.fuel.is_some() && !config.fuel_metering {
            Outcome::Rejected {
                reason: "a fuel budget was requested but this runtime runs without fuel metering"
                    .to_owned(),
            }
        } else if let Some(stopped) = handle.stopped_outcome() {
            stopped
        } else {
            self.execute(scope, &limits, handle, deadline, &mut report)
                .await
        };

        if !report.outcome.is_success() {
            report.state_changes.clear();
            report.state_reads.clear();
        }
        if !secrets.is_empty() {
            mask_outcome(&mut report.outcome, &secrets);
        }
        report.http = run_http.snapshot();
        handle.log().finish();
        report.log = handle.log().lines();
        report.log_truncated = handle.log().is_truncated();
        report.duration = started.elapsed();
        report
    }

    async fn execute(
        &mut self,
        scope: RunScope,
        limits: &RunLimits,
        handle: &RunHandle,
        deadline: Instant,
        report: &mut RunReport,
    ) -> Outcome {
        let warm = match self.runtime.inner.idle.take(self.id) {
            // A raised memory limit needs a bigger reservation: a new
            // instance (the old one is destroyed first, freeing its own).
            Some(old) if old.reserved_bytes < limits.memory_bytes => {
                let timeout = self.runtime.config().destroy_timeout;
                destroy(old, RunHandle::new(), timeout).await;
                None
            }
            warm => warm,
        };
        let instance = match warm {
            Some(mut instance) => {
                instance.store.data_mut().begin_run(scope, limits);
                instance
            }
            None => match self
                .instantiate(scope, limits, handle, deadline)
                .instrument(tracing::info_span!(target: TRACE, "cronbox.instantiate"))
                .await
            {
                Ok(instance) => {
                    report.new_instance = true;
                    instance
                }
                Err(outcome) => return outcome,
            },
        };
        let mut instance = instance;
        let fuel_budget = self.arm_fuel(&mut instance.store, limits);

        let result = race(
            handle,
            deadline,
            instance.bindings.call_execute(&mut instance.store),
        )
        .await;
        instance.runs += 1;

        // Fuel is only settled in the store when the call returned (even by
        // a trap); a call dropped on kill or timeout leaves it unknown.
        if let (Some(budget), Raced::Done(_)) = (fuel_budget, &result) {
            let left = instance.store.get_fuel().unwrap_or(0);
            report.fuel_consumed = Some(budget - left);
        }
        report.peak_memory_bytes = instance.store.data().limiter.peak_memory_bytes as u64;

        let outcome = match result {
            Raced::Done(Ok(Ok(message))) => Outcome::Success { message },
            // A language runtime may catch the refused growth (Python's
            // MemoryError) and fail the run: it still ended at the memory
            // limit, and its bloated instance is not kept.
            Raced::Done(Ok(Err(_))) if instance.store.data().limiter.memory_refused => {
                return Outcome::MemoryLimit {
                    limit_bytes: limits.memory_bytes,
                };
            }
            Raced::Done(Ok(Err(message))) => Outcome::Failed { message },
            other => {
                // The store saw a trap, a timeout or a kill: drop it.
                return self.stopped(other, &instance.store, handle, limits);
            }
        };
        let data = instance.store.data_mut();
        let state = std::mem::replace(
            &mut data.run.state,
            StateView::new(Default::default(), self.runtime.config().state_limits),
        );
        (report.state_changes, report.state_reads) = state.into_changes();

        match self.mode {
            InstanceMode::Warm => self.runtime.inner.idle.park(self.id, instance),
            InstanceMode::FreshPerRun => {
                let timeout = self.runtime.config().destroy_timeout;
                let retired = destroy(instance, handle.clone(), timeout).await;
                if let Some(error) = retired.error {
                    handle
                        .log()
                        .host(format!("destroy did not complete: {error}"));
                }
            }
        }
        outcome
    }

    /// Creates a store and an instance, and runs the guest's `init`.
    async fn instantiate(
        &mut self,
        scope: RunScope,
        limits: &RunLimits,
        handle: &RunHandle,
        deadline: Instant,
    ) -> Result<LiveInstance, Outcome> {
        // Back-pressure: wait for a pool slot and for memory rather than
        // fail when full, evicting idle instances first.
        let runtime = &self.runtime;
        let stopped = |outcome: Option<Outcome>| match outcome {
            Some(outcome) => outcome,
            None => Outcome::Timeout {
                timeout_ms: limits.timeout.as_millis() as u64,
            },
        };
        let slot = acquire_evicting(
            runtime,
            handle,
            deadline,
            || runtime.try_instance_slot(),
            || runtime.instance_slot(),
        )
        .await
        .map_err(stopped)?;
        let permits = runtime
            .memory_permits(limits.memory_bytes)
            .map_err(|over| Outcome::Rejected {
                reason: format!(
                    "the job's memory limit ({} bytes) is over this executor's memory budget \
                     ({} bytes)",
                    over.limit_bytes, over.budget_bytes
                ),
            })?;
        let memory = acquire_evicting(
            runtime,
            handle,
            deadline,
            || runtime.try_reserve_memory(permits),
            || runtime.reserve_memory(permits),
        )
        .await
        .map_err(stopped)?;
        let mut store = self.new_store(scope, limits);
        // `init` gets whatever fuel the run's budget allows.
        self.arm_fuel(&mut store, limits);
        let pre = &self.module.inner.pre;
        let bindings = match race(handle, deadline, pre.instantiate_async(&mut store)).await {
            Raced::Done(Ok(bindings)) => bindings,
            other => return Err(self.stopped(other, &store, handle, limits)),
        };
        match race(handle, deadline, bindings.call_init(&mut store)).await {
            Raced::Done(Ok(Ok(()))) => Ok(LiveInstance {
                store,
                bindings,
                runs: 0,
                _slot: slot,
                _memory: memory,
                reserved_bytes: limits.memory_bytes,
            }),
            Raced::Done(Ok(Err(message))) => Err(Outcome::Failed {
                message: format!("init failed: {message}"),
            }),
            other => Err(self.stopped(other, &store, handle, limits)),
        }
    }

    fn new_store(&self, scope: RunScope, limits: &RunLimits) -> Store<HostState> {
        let mut store = Store::new(&self.runtime.inner.engine, HostState::new(scope, limits));
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(|context| {
            if context.data().must_stop() {
                Ok(UpdateDeadline::Interrupt)
            } else {
                // Yield to tokio on every tick: the kill and deadline
                // branches of `race` get polled even for a CPU-bound guest.
                Ok(UpdateDeadline::YieldCustom(
                    1,
                    Box::pin(tokio::task::yield_now()),
                ))
            }
        });
        store
    }

    /// Gives the store the run's fuel; returns the budget set, if metered.
    fn arm_fuel(&self, store: &mut Store<HostState>, limits: &RunLimits) -> Option<u64> {
        if !self.runtime.config().fuel_metering {
            return None;
        }
        let budget = limits.fuel.unwrap_or(u64::MAX);
        store.set_fuel(budget).ok().map(|()| budget)
    }

    /// The outcome of a call that did not return normally.
    fn stopped<T>(
        &self,
        raced: Raced<T>,
        store: &Store<HostState>,
        handle: &RunHandle,
        limits: &RunLimits,
    ) -> Outcome {
        let timeout = Outcome::Timeout {
            timeout_ms: limits.timeout.as_millis() as u64,
        };
        if let Some(stopped) = handle.stopped_outcome() {
            return stopped;
        }
        let error = match raced {
            Raced::Stopped => return Outcome::Killed,
            Raced::TimedOut => return timeout,
            Raced::Done(Ok(_)) => unreachable!("only failed calls are classified"),
            Raced::Done(Err(error)) => error,
        };
        match error.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => return timeout,
            Some(Trap::OutOfFuel) => {
                return Outcome::OutOfFuel {
                    fuel: limits.fuel.unwrap_or(u64::MAX),
                };
            }
            _ => {}
        }
        if store.data().limiter.memory_refused {
            return Outcome::MemoryLimit {
                limit_bytes: limits.memory_bytes,
            };
        }
        let mut message = match error.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => format!("{error:#}"),
        };
        if let Some(panic) = panic_message(&handle.log().lines()) {
            message = format!("{message} (guest {panic})");
        }
        Outcome::Trap { message }
    }

    /// Retires the warm instance, calling the guest's `destroy`. Returns
    /// `None` when there was no instance.
    pub async fn retire(self) -> Option<RetireReport> {
        let instance = self.runtime.inner.idle.take(self.id)?;
        let timeout = self.runtime.config().destroy_timeout;
        Some(destroy(instance, RunHandle::new(), timeout).await)
    }
}

/// A permit from `try_now`, evicting idle instances (longest idle first)
/// while none is free; with none left to evict, waits for `wait` or for an
/// instance to be parked (then evicts it). `Err` carries the run's stop
/// outcome if it was killed, `None` if its deadline passed.
async fn acquire_evicting<Wait>(
    runtime: &Runtime,
    handle: &RunHandle,
    deadline: Instant,
    try_now: impl Fn() -> Option<OwnedSemaphorePermit>,
    wait: impl Fn() -> Wait,
) -> Result<OwnedSemaphorePermit, Option<Outcome>>
where
    Wait: Future<Output = OwnedSemaphorePermit>,
{
    let idle = &runtime.inner.idle;
    let timeout = runtime.config().destroy_timeout;
    loop {
        let parked = idle.parked_one.notified();
        tokio::pin!(parked);
        parked.as_mut().enable();
        if let Some(permit) = try_now() {
            return Ok(permit);
        }
        if let Some(evicted) = idle.evict_oldest() {
            let report = destroy(evicted, RunHandle::new(), timeout).await;
            if let Some(error) = report.error {
                tracing::warn!(%error, "an evicted instance's destroy did not complete");
            }
            continue;
        }
        tokio::select! {
            biased;
            _ = handle.cancelled() => {
                return Err(Some(handle.stopped_outcome().unwrap_or(Outcome::Killed)))
            }
            _ = tokio::time::sleep_until(deadline.into()) => return Err(None),
            permit = wait() => return Ok(permit),
            _ = &mut parked => {}
        }
    }
}

/// Calls `destroy` on a healthy instance and drops it.
async fn destroy(mut instance: LiveInstance, handle: RunHandle, timeout: Duration) -> RetireReport {
    let deadline = Instant::now() + timeout;
    instance
        .store
        .data_mut()
        .begin_destroy(handle.clone(), deadline);
    let error = match race(
        &handle,
        deadline,
        instance.bindings.call_destroy(&mut instance.store),
    )
    .await
    {
        Raced::Done(Ok(())) => None,
        Raced::Done(Err(error)) => Some(format!("{error:#}")),
        Raced::Stopped => Some("killed".to_owned()),
        Raced::TimedOut => Some(format!("timed out after {} ms", timeout.as_millis())),
    };
    handle.log().finish();
    RetireReport {
        log: handle.log().lines(),
        runs: instance.runs,
        error,
    }
}

/// Masks the run's secrets in its outcome's message.
fn mask_outcome(outcome: &mut Outcome, secrets: &[String]) {
    let mut masks = secrets.to_vec();
    masks.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    masks.retain(|secret| !secret.is_empty());
    match outcome {
        Outcome::Success { message }
        | Outcome::Failed { message }
        | Outcome::Trap { message }
        | Outcome::Rejected { reason: message } => *message = crate::log::mask(message, &masks),
        _ => {}
    }
}

/// The guest's panic message, from the stderr lines Rust's panic hook wrote
/// (`panicked at file:line:col:` then the message).
fn panic_message(lines: &[LogLine]) -> Option<String> {
    let stderr: Vec<&LogLine> = lines
        .iter()
        .filter(|line| line.source == LogSource::Stderr)
        .collect();
    let start = stderr
        .iter()
        .rposition(|line| line.text.contains("panicked at"))?;
    let text: Vec<&str> = stderr[start..]
        .iter()
        .take(2)
        .map(|line| line.text.trim())
        .collect();
    let text = text.join(" ");
    Some(match text.find("panicked at") {
        Some(at) => text[at..].to_owned(),
        None => text,
    })
}

impl HostState {
    /// Points the instance at a `destroy` call: a new log and deadline, the
    /// last trigger kept for `context.current`.
    fn begin_destroy(&mut self, handle: RunHandle, deadline: Instant) {
        let trigger: Trigger = self.run.trigger.clone();
        let limits = self.run.state_limits();
        // The last run's secrets stay readable, so they stay masked.
        handle.log().set_masks(self.run.handle.log().masks());
        let scope = RunScope {
            http: HttpGate::closed(handle.clone(), self.run.http.stats()),
            trigger,
            handle,
            deadline,
            state: StateView::new(Default::default(), limits),
            config: std::mem::take(&mut self.run.config),
        };
        self.log_sink.switch_to(scope.handle.log_arc());
        self.run = scope;
    }
}
