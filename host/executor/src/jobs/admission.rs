//! Taking a run in: a command's checks, and its job's block strategy
//! (queue, cover earlier runs, or refuse).

use super::*;

pub(super) fn validate(command: &RunCommand) -> Result<(), SubmitError> {
    let invalid = |field, message: String| Err(SubmitError::Invalid { field, message });
    if !is_digest(command.module_digest.as_str()) {
        return invalid(
            "module_digest",
            format!(
                "module_digest must be a sha256 in lowercase hex (64 characters), got {:?}",
                command.module_digest
            ),
        );
    }
    let trigger = &command.trigger;
    if trigger.shard_total == 0 || trigger.shard_index >= trigger.shard_total {
        return invalid(
            "trigger.shard_index",
            format!(
                "shard {} of {} is impossible: need shard_index < shard_total",
                trigger.shard_index, trigger.shard_total
            ),
        );
    }
    if let Err(error) = cronbox_runtime::parse_origins(&command.http_allow) {
        return invalid("http_allow", error.to_string());
    }
    if let Some((name, value, max)) = command.http_limits.first_outside(&HttpLimits::MAX) {
        return invalid(
            "http_limits",
            format!("http_limits.{name} is {value}, outside 1..={max}"),
        );
    }
    if command.limits.timeout_ms == 0 {
        return invalid(
            "limits.timeout_ms",
            "timeout_ms must be positive".to_owned(),
        );
    }
    if command.block_strategy == BlockStrategy::Concurrent && command.max_concurrency == 0 {
        return invalid(
            "max_concurrency",
            "max_concurrency must be at least 1 under CONCURRENT".to_owned(),
        );
    }
    Ok(())
}

/// A trigger its job's block strategy refused.
pub(super) struct Refused {
    pub(super) pending: Pending,
    pub(super) outcome: Outcome,
}

/// Applies a trigger to its job: queues it (starting the job's task if
/// needed), covering earlier runs under COVER_EARLY, or refuses it under
/// DISCARD_LATER when the job is busy here.
pub(super) fn apply(shared: &Arc<Shared>, pending: Pending) -> Result<(), Box<Refused>> {
    let run_id = pending.command.trigger.run_id;
    let job_id = pending.command.trigger.job_id;
    let mut covered = Vec::new();
    {
        let mut table = shared.lock();
        if shared.closing.load(Ordering::SeqCst) {
            return Err(Box::new(Refused {
                pending,
                outcome: Outcome::Rejected {
                    reason: "the executor shut down before the run started".to_owned(),
                },
            }));
        }
        let entry = match table.jobs.entry(job_id) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(vacant) => {
                let wake = Arc::new(Notify::new());
                shared
                    .tasks
                    .spawn(job_loop(shared.clone(), job_id, wake.clone()));
                vacant.insert(JobEntry {
                    queue: VecDeque::new(),
                    running: HashMap::new(),
                    limit: 1,
                    wake,
                    recent_changes: RecentChanges::default(),
                })
            }
        };
        let busy = !entry.running.is_empty() || !entry.queue.is_empty();
        let strategy = pending.command.block_strategy;
        match strategy {
            BlockStrategy::DiscardLater if busy => {
                return Err(Box::new(Refused {
                    pending,
                    outcome: Outcome::Rejected {
                        reason: format!(
                            "job {job_id} is already running or queued here (DISCARD_LATER)"
                        ),
                    },
                }));
            }
            BlockStrategy::CoverEarly => {
                for handle in entry.running.values() {
                    handle.cover();
                }
                covered.extend(entry.queue.drain(..));
            }
            _ => {}
        }
        entry.limit = match strategy {
            BlockStrategy::Concurrent => pending.command.max_concurrency.max(1) as usize,
            _ => 1,
        };
        let handle = pending.handle.clone();
        entry.queue.push_back(pending);
        entry.wake.notify_one();
        table.active.insert(run_id, handle);
    }
    shared.metrics.queued.inc();
    for pending in covered {
        shared.metrics.queued.dec();
        pending.handle.cover();
        shared.report_unstarted(pending, Outcome::Covered);
    }
    Ok(())
}
