//! Results and what follows a run's end, whichever way it ended: state
//! commit, children, retries, the FIX_DELAY chain; the lost-run monitor.

use super::*;
use std::collections::HashMap;

use tracing::Instrument as _;

use cronbox_protocol::trace_context;
use cronbox_protocol::{LogLine, LogSource};

use crate::store::{RunCharge, logs};

impl Scheduler {
    /// Ends runs through the result sink's writer.
    async fn finish_runs(&self, ends: Vec<RunEnd>) -> ends::Ended {
        self.sink.finish_runs(ends).await
    }

    /// Records results from an executor (idempotent by run id) and acts on
    /// them: state is committed with a successful result (unless it
    /// conflicts with a commit the run did not see), then children, retries
    /// and FIX_DELAY follow. A result whose receipt does not match its run's
    /// dispatch is refused (logged and counted) and changes nothing.
    pub async fn accept_results(
        self: &Arc<Self>,
        results: Vec<RunResult>,
        from_groups: Option<&[String]>,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let (results, refused): (Vec<RunResult>, Vec<RunResult>) = results
            .into_iter()
            .partition(|result| self.commands.receipt_holds(result));
        for result in &refused {
            self.metrics.results_refused.inc();
            tracing::warn!(
                run = result.run_id,
                executor = %result.executor,
                "result refused: its receipt does not match the run's dispatch"
            );
        }
        let mut job_ids: Vec<JobId> = results
            .iter()
            .map(|result| JobId::from(result.job_id))
            .collect();
        job_ids.sort_unstable();
        job_ids.dedup();
        let jobs = self.store.jobs_by_id(&job_ids).await?;
        // An enrolled executor delivers only its own groups' results: the
        // receipt ties a result to the address its run was sent to, the
        // credential to the groups it serves.
        let results: Vec<RunResult> = match from_groups {
            None => results,
            Some(groups) => results
                .into_iter()
                .filter(|result| {
                    let group = jobs
                        .get(&JobId::from(result.job_id))
                        .map(|job| job.group_name.as_str());
                    let allowed = group.is_none_or(|group| groups.iter().any(|g| g == group));
                    if !allowed {
                        self.metrics.results_refused.inc();
                        tracing::warn!(
                            run = result.run_id,
                            executor = %result.executor,
                            group = group.unwrap_or_default(),
                            "result refused: the credential that posted it does not serve the run's group"
                        );
                    }
                    allowed
                })
                .collect(),
        };
        // What each tenant may still log today, spent as the batch goes.
        let mut log_room: HashMap<String, LogRoom> = HashMap::new();
        let mut ends: Vec<RunEnd> = Vec::with_capacity(results.len());
        for mut result in results {
            let tenant = jobs
                .get(&JobId::from(result.job_id))
                .map(|job| job.tenant.clone());
            let mut log = logs::encode(&result.log);
            let mut log_charge = log.len() as u64;
            let mut state_quota = None;
            if let Some(tenant) = &tenant {
                let room = match log_room.get_mut(tenant) {
                    Some(room) => room,
                    None => {
                        let (left, limit) = self.quotas.log_room(&self.store, tenant, now).await?;
                        log_room
                            .entry(tenant.clone())
                            .or_insert(LogRoom { left, limit })
                    }
                };
                if log_charge <= room.left {
                    room.left -= log_charge;
                } else {
                    // Past what is left today: cut, and the day is used up.
                    cut_log(&mut result.log, room.left, tenant, room.limit);
                    log = logs::encode(&result.log);
                    log_charge = room.left.max(log.len() as u64);
                    room.left = 0;
                }
                if !result.state_changes.is_empty() {
                    let limit = self
                        .quotas
                        .limit(&self.store, tenant, cronbox_api::Quota::StateBytes, now)
                        .await?;
                    state_quota = Some((tenant.clone(), limit));
                }
            }
            ends.push(RunEnd {
                module_digest: (!result.module_digest.as_str().is_empty())
                    .then(|| result.module_digest.to_string()),
                run_id: RunId::from(result.run_id),
                scheduled_at_ms: result.scheduled_at_ms,
                success: result.outcome.is_success(),
                outcome: result.outcome.kind().into(),
                code: i64::from(result.code),
                message: result.outcome.message(),
                log,
                executor: Some(result.executor),
                started_at_ms: (result.started_at_ms > 0).then_some(result.started_at_ms),
                state_changes: result.state_changes,
                state_base: result.state_base,
                finished_at_ms: now,
                state_quota,
                fuel_consumed: result
                    .fuel_consumed
                    .map(|fuel| i64::try_from(fuel).unwrap_or(i64::MAX)),
                peak_memory_bytes: (result.started_at_ms > 0)
                    .then(|| i64::try_from(result.peak_memory_bytes).unwrap_or(i64::MAX)),
                charge: Some(RunCharge {
                    run_ms: i64::try_from(result.duration_ms).unwrap_or(i64::MAX),
                    log_bytes: i64::try_from(log_charge).unwrap_or(i64::MAX),
                }),
                // Only a trace context that parses; anything else dropped.
                traceparent: result
                    .traceparent
                    .filter(|traceparent| trace_context::trace_id(traceparent).is_some()),
            });
        }
        self.end_runs(ends, &jobs).await
    }

    /// Ends runs reported ended (by an executor, a legacy executor, or a
    /// kill) in one transaction (with the other ends waiting with them),
    /// with what each costs its tenant today; a run already ended changes
    /// nothing. Then metrics, and what follows each end; `jobs` are the
    /// runs' jobs where already read.
    pub(super) async fn end_runs(
        self: &Arc<Self>,
        ends: Vec<RunEnd>,
        jobs: &HashMap<JobId, JobRow>,
    ) -> Result<(), StoreError> {
        // Traced runs: the end span starts with the write, and the write
        // (its wait for a batch included) is a span of its own.
        let spans = EndSpans::begin(&ends);
        let (ends, ended) = self.finish_runs(ends).await;
        let spans = spans.written();
        let ended = ended?;
        // Runs, run time and log bytes of the runs that ended, per tenant.
        let mut usage: HashMap<String, (u64, u64, u64)> = HashMap::new();
        for (run, end) in ended.iter().zip(&ends) {
            if let (Some(run), Some(charge)) = (run, end.charge) {
                let entry = usage.entry(run.tenant.clone()).or_default();
                entry.0 += 1;
                entry.1 += u64::try_from(charge.run_ms).unwrap_or_default();
                entry.2 += u64::try_from(charge.log_bytes).unwrap_or_default();
            }
        }
        for (tenant, (runs, ms, bytes)) in &usage {
            self.quotas.ended(tenant, *runs, *ms, *bytes);
        }
        for (index, (run, end)) in ended.into_iter().zip(&ends).enumerate() {
            let Some(run) = run else {
                continue;
            };
            self.metrics.run_ended(
                &run.tenant,
                run.job_id,
                run.outcome.unwrap_or(end.outcome).as_str(),
            );
            let seconds = |ms: i64| ms.max(0) as f64 / 1000.0;
            self.metrics.run_measured(
                &run.tenant,
                run.job_id,
                crate::metrics::RunMeasures {
                    lateness_seconds: end
                        .started_at_ms
                        .filter(|_| run.kind == TriggerKind::Schedule)
                        .map(|started| seconds(started - run.scheduled_at_ms)),
                    duration_seconds: end
                        .started_at_ms
                        .map(|started| seconds(end.finished_at_ms - started)),
                    fuel: end.fuel_consumed,
                    peak_memory_bytes: end.peak_memory_bytes,
                },
            );
            // What follows the end (children, a retry, the next workflow
            // nodes) continues the run's trace.
            let span = spans.of(index, &run);
            self.after_end(&run, jobs.get(&run.job_id))
                .instrument(span)
                .await?;
        }
        Ok(())
    }

    /// What follows a run's end, whichever way it ended (result, dispatch
    /// failure, lost): children after a success; a retry after a failure,
    /// unless the run was ended on purpose (killed, covered, cancelled);
    /// and for a FIX_DELAY job's scheduled run, the job's next fire, once.
    pub(super) async fn after_end(
        self: &Arc<Self>,
        run: &RunRow,
        job: Option<&JobRow>,
    ) -> Result<(), StoreError> {
        self.sink.events.send(|| RunEvent::ended(run));
        let read;
        let job = match job {
            Some(job) => job,
            None => match self.store.job(run.job_id).await? {
                Some(job) => {
                    read = job;
                    &read
                }
                // A node's job deleted while it ran: the node still ends.
                None if run.kind == TriggerKind::Workflow => {
                    return self.workflow_node_ended(run, None).await;
                }
                None => return Ok(()),
            },
        };
        if run.kind == TriggerKind::Workflow {
            return self.workflow_node_ended(run, Some(job)).await;
        }
        if run.status == RunStatus::Success {
            for child in children_of(job) {
                match self.trigger_child(child).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%child, "child job not triggered: it no longer exists")
                    }
                    Err(error) => tracing::warn!(%child, %error, "child job not triggered"),
                }
            }
        } else if !run.outcome.is_some_and(RunOutcome::is_deliberate) {
            self.retry(run, job).await?;
        }
        // The type first: no parse of every ended run's cron expression
        // only to find it is not FIX_DELAY.
        if run.kind.is_scheduled_fire()
            && job.schedule_type == crate::model::ScheduleType::FixDelay
            && let Ok(schedule @ Schedule::FixDelay(_)) = schedule_of(job)
            && let Some(next) = self
                .rules_of(job)
                .after_completion(&schedule, instant(self.now_ms()))
        {
            self.store
                .continue_fixed_delay(job.id, next.timestamp_millis(), self.now_ms())
                .await?;
            self.wake();
        }
        Ok(())
    }

    /// Retries a failed run if the job's retries allow: a new run linked by
    /// its attempt number, after the interval doubled per attempt; the same
    /// shard (index and total) and parameter.
    pub(super) async fn retry(
        self: &Arc<Self>,
        run: &RunRow,
        job: &JobRow,
    ) -> Result<(), StoreError> {
        if run.attempt >= job.retry_count {
            return Ok(());
        }
        let backoff = job
            .retry_interval_ms
            .saturating_mul(1_i64 << run.attempt.min(20));
        let retry = NewRun {
            job_id: run.job_id,
            kind: TriggerKind::Retry,
            scheduled_at_ms: self.now_ms() + backoff,
            shard_index: run.shard_index,
            shard_total: run.shard_total,
            attempt: run.attempt + 1,
            param: run.param.clone(),
            module_digest: run.module_digest.clone(),
        };
        let id = self.store.insert_run(&retry, self.now_ms()).await?;
        if let Some(run) = self.store.run(id).await? {
            self.clone().dispatch_at(run, Lease::Written);
        }
        Ok(())
    }

    /// The lost-run monitor: a run dispatched more than `lost_after` ago to
    /// an executor without a heartbeat for `dead_after` ends as failed
    /// ("lost"), and is retried if the job's retries allow.
    pub(super) async fn reap_lost_runs(self: &Arc<Self>) -> Result<(), StoreError> {
        let now = self.now_ms();
        let dispatched_before = now - self.config.lost_after.as_millis() as i64;
        let alive_since = self.alive_since(now).await?;
        for run in self.store.lost_runs(dispatched_before, alive_since).await? {
            let message = format!(
                "lost: executor {} stopped beating and no result came",
                run.executor.as_deref().unwrap_or("?")
            );
            let ended = self
                .store
                .finish_run(&RunEnd::failed(run.id, RunOutcome::Lost, &message, now))
                .await?;
            if let Some(ended) = ended {
                self.metrics
                    .run_ended(&ended.tenant, ended.job_id, RunOutcome::Lost.as_str());
                tracing::warn!(run = %run.id, "{message}");
                self.after_end(&ended, None).await?;
            }
        }
        Ok(())
    }

    /// Executors that beat since this instant are alive.
    pub(super) async fn alive_since(&self, now: i64) -> Result<i64, StoreError> {
        alive_since(&self.store, now, self.config.dead_after).await
    }
}

/// Executors that beat since the returned instant are alive at `now`, dead
/// after `dead_after` without a beat (see [`Store::liveness_reference`]).
pub async fn alive_since(store: &Store, now: i64, dead_after: Duration) -> Result<i64, StoreError> {
    let reference = store.liveness_reference(now).await?;
    Ok(reference - dead_after.as_millis() as i64)
}

/// What a tenant may still log today (bytes) and its quota.
struct LogRoom {
    left: u64,
    limit: u64,
}

/// Cuts `log` to about `left` bytes serialized, behind a marker line naming
/// `tenant`'s log quota (`limit`).
fn cut_log(log: &mut Vec<LogLine>, left: u64, tenant: &str, limit: u64) {
    /// Room kept for the marker line and the brackets.
    const MARKER_BYTES: u64 = 300;
    let budget = left.saturating_sub(MARKER_BYTES);
    let mut kept = 0;
    let mut used = 0;
    for line in log.iter() {
        // The line and its comma.
        let bytes = logs::stored_bytes(line);
        if used + bytes > budget {
            break;
        }
        used += bytes;
        kept += 1;
    }
    let dropped = log.len() - kept;
    let at_ms = log.last().map_or(0, |line| line.at_ms);
    log.truncate(kept);
    log.push(LogLine {
        at_ms,
        source: LogSource::Host,
        text: format!(
            "log cut: quota log_bytes_per_day of tenant {tenant:?} (limit {limit}) reached \
             today; {dropped} lines were dropped"
        ),
    });
}

/// The spans of the ends of traced runs, in the order of the ends: each
/// run's `cronbox.end`, and under it `cronbox.write` while the end is
/// written. Nothing (no allocation) when no run was traced.
pub(super) struct EndSpans {
    ends: Vec<tracing::Span>,
    writes: Vec<tracing::Span>,
}

impl EndSpans {
    pub(super) fn begin(ends: &[RunEnd]) -> EndSpans {
        if ends.iter().all(|end| end.traceparent.is_none()) {
            return EndSpans {
                ends: Vec::new(),
                writes: Vec::new(),
            };
        }
        let ends: Vec<tracing::Span> = ends.iter().map(end_span).collect();
        let writes = ends
            .iter()
            .map(|end| {
                tracing::info_span!(
                    target: trace_context::TARGET,
                    parent: end,
                    "cronbox.write",
                    db.operation.name = "end runs",
                )
            })
            .collect();
        EndSpans { ends, writes }
    }

    /// Ends the write spans.
    pub(super) fn written(mut self) -> EndSpans {
        self.writes.clear();
        self
    }

    /// The end span of the `index`th end, with the run's status.
    pub(super) fn of(&self, index: usize, run: &RunRow) -> tracing::Span {
        let Some(span) = self.ends.get(index) else {
            return tracing::Span::none();
        };
        if !span.is_disabled() {
            span.record("cronbox.status", run.status.as_str());
        }
        span.clone()
    }
}

/// The span of a traced run's end: its write, then what follows it, in
/// the run's trace (disabled, and free, unless the run was traced).
fn end_span(end: &RunEnd) -> tracing::Span {
    let Some(traceparent) = end.traceparent.as_deref() else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!(
        target: trace_context::TARGET,
        "cronbox.end",
        cronbox.run_id = end.run_id.wire(),
        cronbox.outcome = %end.outcome,
        cronbox.status = tracing::field::Empty,
    );
    trace_context::continue_from(&span, traceparent);
    span
}
