//! Run lifecycle events: what this admin did to a run, the moment it did
//! it, for whoever awaits it (a run's event stream, the console's run
//! page, `cronbox logs --follow`, tests) instead of polling the database.
//!
//! Events are broadcast to subscribers present when they happen and are
//! hints, not a log: a subscriber that falls behind is told it lagged and
//! reads the run again; a run ended by another admin of the same database
//! sends no event here, so a follower also reads the run now and then.
//! Nothing is built when nobody listens.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::broadcast;

use crate::store::{JobId, RunId, RunOutcome, RunRow, RunStatus};

/// Events a slow subscriber may fall behind by before it is told it lagged.
const BACKLOG: usize = 1024;

/// What happened to a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEvent {
    /// An executor accepted the run (its start may be held until its
    /// instant); written to the database a little later, with or before
    /// its end.
    Dispatched {
        run_id: RunId,
        job_id: JobId,
        executor: String,
        at_ms: i64,
    },
    /// The run's end was written: its row now says how it ended.
    Ended {
        run_id: RunId,
        job_id: JobId,
        status: RunStatus,
        outcome: Option<RunOutcome>,
    },
}

impl RunEvent {
    pub fn run_id(&self) -> RunId {
        match self {
            RunEvent::Dispatched { run_id, .. } | RunEvent::Ended { run_id, .. } => *run_id,
        }
    }

    /// The event of `run`'s end, from its ended row.
    pub(crate) fn ended(run: &RunRow) -> RunEvent {
        RunEvent::Ended {
            run_id: run.id,
            job_id: run.job_id,
            status: run.status,
            outcome: run.outcome,
        }
    }
}

/// The admin's channel of run events.
#[derive(Debug)]
pub(crate) struct RunEvents(broadcast::Sender<RunEvent>);

impl Default for RunEvents {
    fn default() -> Self {
        RunEvents(broadcast::Sender::new(BACKLOG))
    }
}

impl RunEvents {
    /// Events from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.0.subscribe()
    }

    /// Sends the event `make` builds, if anybody listens.
    pub(crate) fn send(&self, make: impl FnOnce() -> RunEvent) {
        if self.0.receiver_count() > 0 {
            // Nobody left between the count and the send: nothing lost.
            let _ = self.0.send(make());
        }
    }
}

/// How long a dispatch is remembered: past the longest a dispatch mark
/// waits to be written (two seconds, `ends::MARK_WAIT_MOST`), and short
/// enough that at 10,000 runs/s the entries stay a few MiB.
const RECENT_FOR: Duration = Duration::from_secs(5);

/// The runs this admin dispatched lately, whose rows may still say
/// `pending`: a dispatch mark waits to be written with the run's end (see
/// `ends`), and meanwhile whoever reads the run (its page, its log, a kill)
/// is told where it runs.
#[derive(Debug, Default)]
pub(crate) struct RecentDispatches(Mutex<Recent>);

#[derive(Debug, Default)]
struct Recent {
    by_run: HashMap<RunId, (String, i64)>,
    order: VecDeque<(Instant, RunId)>,
}

impl RecentDispatches {
    /// Remembers that `executor` accepted `run_id` at `at_ms`, forgetting
    /// dispatches older than [`RECENT_FOR`].
    pub(crate) fn add(&self, run_id: RunId, executor: &str, at_ms: i64) {
        let now = Instant::now();
        let mut recent = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        while let Some(&(when, old)) = recent.order.front() {
            if now.duration_since(when) < RECENT_FOR {
                break;
            }
            recent.order.pop_front();
            recent.by_run.remove(&old);
        }
        recent.order.push_back((now, run_id));
        recent.by_run.insert(run_id, (executor.to_owned(), at_ms));
    }

    /// `run` as dispatched if its row is behind a dispatch remembered here.
    pub(crate) fn apply(&self, run: &mut RunRow) {
        if run.status != RunStatus::Pending {
            return;
        }
        let recent = self.0.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some((executor, at_ms)) = recent.by_run.get(&run.id) {
            run.status = RunStatus::Dispatched;
            run.executor = Some(executor.clone());
            run.dispatched_at_ms = Some(*at_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_get_the_events_sent_after_they_subscribed() {
        let events = RunEvents::default();
        let mut built = false;
        events.send(|| {
            built = true;
            RunEvent::Ended {
                run_id: RunId::from(7),
                job_id: JobId::from(3),
                status: RunStatus::Success,
                outcome: Some(RunOutcome::Success),
            }
        });
        assert!(!built, "nothing is built for nobody");
        let mut receiver = events.subscribe();
        let dispatched = RunEvent::Dispatched {
            run_id: RunId::from(7),
            job_id: JobId::from(3),
            executor: "http://127.0.0.1:9090".into(),
            at_ms: 1,
        };
        events.send(|| dispatched.clone());
        let received = receiver.try_recv().unwrap();
        assert_eq!(received, dispatched);
        assert_eq!(received.run_id(), RunId::from(7));
        assert!(receiver.try_recv().is_err(), "one event sent, one received");
    }
}
