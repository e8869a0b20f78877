//! The task of one job: starts its queued runs up to the job's limit on
//! warm workers (hot-swapping versions), reports each, and retires the
//! workers when the job is idle.

use super::*;

/// The task of one job: starts its runs, keeps its workers, retires when idle.
pub(super) async fn job_loop(shared: Arc<Shared>, job_id: u64, wake: Arc<Notify>) {
    let mut idle_workers: Vec<JobWorker> = Vec::new();
    let mut in_flight: JoinSet<JobWorker> = JoinSet::new();
    loop {
        // Start every run the job's limit allows.
        loop {
            let next = {
                let mut table = shared.lock();
                let Some(entry) = table.jobs.get_mut(&job_id) else {
                    break;
                };
                if entry.running.len() >= entry.limit {
                    None
                } else {
                    entry.queue.pop_front().inspect(|pending| {
                        entry
                            .running
                            .insert(pending.command.trigger.run_id, pending.handle.clone());
                    })
                }
            };
            let Some(pending) = next else { break };
            shared.metrics.queued.dec();
            match worker_for(&shared, &mut idle_workers, &pending.command).await {
                Ok(worker) => {
                    shared.metrics.running.inc();
                    in_flight.spawn(run_one(shared.clone(), worker, pending));
                }
                Err(reason) => {
                    let run_id = pending.command.trigger.run_id;
                    if let Some(entry) = shared.lock().jobs.get_mut(&job_id) {
                        entry.running.remove(&run_id);
                    }
                    shared.report_unstarted(pending, Outcome::Rejected { reason });
                }
            }
        }

        let closing = shared.closing.load(Ordering::SeqCst);
        if closing && in_flight.is_empty() {
            shared.lock().jobs.remove(&job_id);
            retire_all(&shared, idle_workers).await;
            return;
        }

        tokio::select! {
            _ = wake.notified() => {}
            joined = in_flight.join_next(), if !in_flight.is_empty() => {
                if let Some(Ok(worker)) = joined {
                    idle_workers.push(worker);
                }
            }
            _ = tokio::time::sleep(shared.idle_retire), if in_flight.is_empty() => {
                let gone = {
                    let mut table = shared.lock();
                    let idle = table
                        .jobs
                        .get(&job_id)
                        .is_none_or(|entry| entry.queue.is_empty() && entry.running.is_empty());
                    if idle {
                        table.jobs.remove(&job_id);
                    }
                    idle
                };
                if gone {
                    retire_all(&shared, idle_workers).await;
                    return;
                }
            }
        }
    }
}

/// A worker for the command's module: a warm one if there is one; else a
/// new one, after retiring workers of other versions (the hot swap).
pub(super) async fn worker_for(
    shared: &Shared,
    idle_workers: &mut Vec<JobWorker>,
    command: &RunCommand,
) -> Result<JobWorker, String> {
    let mode = if command.fresh_instance {
        InstanceMode::FreshPerRun
    } else {
        InstanceMode::Warm
    };
    let digest = command.module_digest.as_str();
    if let Some(index) = idle_workers
        .iter()
        .position(|worker| worker.module().digest() == digest && worker.mode() == mode)
    {
        return Ok(idle_workers.swap_remove(index));
    }
    let (stale, keep): (Vec<JobWorker>, Vec<JobWorker>) = idle_workers
        .drain(..)
        .partition(|worker| worker.module().digest() != digest);
    *idle_workers = keep;
    retire_all(shared, stale).await;
    let module = shared.modules.get(&command.module_digest).await?;
    Ok(JobWorker::new(&shared.runtime, module, mode))
}

pub(super) async fn retire_all(shared: &Shared, workers: Vec<JobWorker>) {
    for worker in workers {
        let digest = worker.module().digest().to_owned();
        if let Some(report) = worker.retire().await {
            if report.error.is_none() {
                shared.metrics.instances_retired.inc();
            }
            for line in &report.log {
                tracing::info!(module = %digest, "destroy: {}", line.text);
            }
            if let Some(error) = report.error {
                tracing::warn!(module = %digest, %error, "destroy did not complete");
            }
        }
    }
}

/// The report of a run that never got its tenant's share: killed while
/// waiting, or out of time.
pub(super) fn unstarted_report(
    handle: &RunHandle,
    worker: &JobWorker,
    timeout_ms: u64,
) -> RunReport {
    let outcome = handle
        .stopped_outcome()
        .unwrap_or(Outcome::Timeout { timeout_ms });
    RunReport::unstarted(outcome, worker.module().digest())
}

/// The run's span, continuing the admin's fire span (disabled, and free,
/// unless traces are exported).
fn run_span(command: &RunCommand, queued: Duration) -> tracing::Span {
    use cronbox_protocol::trace_context::{self, TARGET};
    let trigger = &command.trigger;
    let span = tracing::info_span!(
        target: TARGET,
        "cronbox.run",
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        faas.invocation_id = trigger.run_id,
        cronbox.run_id = trigger.run_id,
        cronbox.job_id = trigger.job_id,
        cronbox.tenant = %command.tenant,
        cronbox.kind = %trigger.kind,
        cronbox.attempt = trigger.attempt,
        cronbox.queued_ms = queued.as_millis() as u64,
        cronbox.outcome = tracing::field::Empty,
        cronbox.new_instance = tracing::field::Empty,
        cronbox.fuel = tracing::field::Empty,
        cronbox.peak_memory_bytes = tracing::field::Empty,
    );
    if let Some(parent) = &command.traceparent {
        trace_context::continue_from(&span, parent);
    }
    span
}

/// What the run ended as, on its span (when traced) and, at
/// `CRONBOX_LOG=cronbox_executor=debug`, as a log line carrying the run's
/// trace ids in JSON logs.
fn record_end(span: &tracing::Span, command: &RunCommand, report: &RunReport) {
    if !span.is_disabled() {
        span.record("cronbox.outcome", report.outcome.kind().as_str());
        span.record("cronbox.new_instance", report.new_instance);
        span.record("cronbox.peak_memory_bytes", report.peak_memory_bytes);
        if let Some(fuel) = report.fuel_consumed {
            span.record("cronbox.fuel", fuel);
        }
        let status = if report.outcome.is_success() {
            "ok"
        } else {
            "error"
        };
        span.record("otel.status_code", status);
    }
    span.in_scope(|| {
        tracing::debug!(
            run_id = command.trigger.run_id,
            job_id = command.trigger.job_id,
            outcome = %report.outcome.kind(),
            duration_ms = report.duration.as_millis() as u64,
            "run ended"
        );
    });
}

pub(super) async fn run_one(
    shared: Arc<Shared>,
    mut worker: JobWorker,
    pending: Pending,
) -> JobWorker {
    let Pending { command, handle } = pending;
    let limits = RunLimits {
        timeout: Duration::from_millis(command.limits.timeout_ms),
        fuel: command.limits.fuel,
        memory_bytes: command.limits.memory_bytes,
        log_bytes: usize::try_from(command.limits.log_bytes).unwrap_or(usize::MAX),
        ..RunLimits::default()
    };
    let job_id = command.trigger.job_id;
    let start = shared.lock().jobs.get(&job_id).map_or_else(
        || StartState::of(&command),
        |entry| entry.recent_changes.view(&command),
    );
    let timeout = limits.timeout;
    let request = RunRequest {
        trigger: command.trigger.clone(),
        limits,
        state: start.values.clone(),
        config: command.config.clone(),
        // Checked when the command was submitted.
        http_allow: cronbox_runtime::parse_origins(&command.http_allow)
            .unwrap_or_default()
            .into(),
        http_limits: command.http_limits,
        secrets: command.secrets.0.clone(),
    };
    // The tenant's share first: waiting for it counts against the run's
    // timeout and ends on a kill, like waiting for a slot.
    let waiting_since = tokio::time::Instant::now();
    let slots = shared
        .tenant_slots
        .of(&command.tenant, command.tenant_max_instances);
    let share = tokio::select! {
        biased;
        _ = handle.cancelled() => None,
        _ = tokio::time::sleep(timeout) => None,
        permit = slots.acquire_owned() => permit.ok(),
    };
    let waited = waiting_since.elapsed();
    let span = run_span(&command, waited);
    let report = match share {
        Some(_share) if waited < timeout => {
            use tracing::Instrument as _;
            worker
                .run_after_wait(request, &handle, waited)
                .instrument(span.clone())
                .await
        }
        _ => unstarted_report(&handle, &worker, command.limits.timeout_ms),
    };
    record_end(&span, &command, &report);
    drop(span);
    let run_id = command.trigger.run_id;
    {
        let mut table = shared.lock();
        if let Some(entry) = table.jobs.get_mut(&job_id) {
            entry.running.remove(&run_id);
            if report.outcome.is_success() && !report.state_changes.is_empty() {
                entry.recent_changes.remember(run_id, &report, &start);
            }
        }
        table.active.remove(&run_id);
        table.remember_finished(run_id, handle, shared.retained);
        shared
            .metrics
            .retained_log_bytes
            .set(table.finished_log_bytes as i64);
    }
    shared.metrics.running.dec();
    shared.report_finished(&command, report, &start);
    worker
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With traces off (the process's subscriber logging warnings, no
    /// OpenTelemetry layer), a run's span, what is recorded on it and its
    /// debug line are disabled and allocate nothing.
    #[test]
    fn an_untraced_runs_span_allocates_nothing() {
        use cronbox_tests::allocations::{counted, counting};
        assert!(counting(), "this test binary counts allocations");
        let digest: cronbox_protocol::Digest = "a".repeat(64).parse().unwrap();
        let mut command = RunCommand::new(
            cronbox_protocol::Trigger {
                job_id: 1,
                run_id: 2,
                param: String::new(),
                shard_index: 0,
                shard_total: 1,
                kind: cronbox_protocol::TriggerKind::Schedule,
                scheduled_at_ms: 1_000,
                attempt: 0,
            },
            digest.clone(),
        );
        command.traceparent =
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned());
        let report = RunReport::unstarted(Outcome::Killed, &digest);
        let off = cronbox_telemetry::without_traces(cronbox_telemetry::LogFormat::Json);
        tracing::subscriber::with_default(off, || {
            let ((), allocations) = counted(|| {
                let span = run_span(&command, Duration::from_millis(3));
                record_end(&span, &command, &report);
            });
            assert_eq!(allocations, 0, "allocations for a span that is off");
        });
    }
}
