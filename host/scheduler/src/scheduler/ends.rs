//! The writer of what happens to a run after its fire: dispatch marks and
//! run ends, in one task that takes every callback's ends and every mark
//! waiting for it and writes them in one transaction (group commit),
//! answering each callback with its own rows.
//!
//! At 6,000 runs/s spread, executors sent ~150 callbacks a second of 15 to
//! 130 results each (three in flight per executor, each answered in tens of
//! milliseconds), and each was a transaction of its own that waited ~25 ms
//! in line for SQLite's single writer for ~3 ms of work: the writer's line,
//! not its work, was full. Waiting callbacks now share the next
//! transaction, so the busier the writer, the larger (and fewer) its
//! transactions; a callback alone still goes at once.
//!
//! A dispatch mark is not urgent (the run's lease keeps it this admin's
//! until it is written), so a mark waits for its run's end: until the
//! run's instant (it was sent ahead, and its executor holds it until then)
//! and [`MARK_WAIT`] more, [`MARK_WAIT_MOST`] at most. A quick run's end
//! comes within that time, and then its mark is written by its end, in the
//! same row write (see [`Store::finish_runs_marking`]): one write of the
//! row and its indexes where a mark and an end, written apart, were two,
//! each in its own transaction.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::quotas::Quotas;
use crate::store::{DispatchMark, RunEnd, RunId, RunRow, Store, StoreError};

/// Ends written in one transaction at most (callbacks are kept whole: one
/// larger than this goes alone).
pub(super) const ENDS_PER_WRITE: usize = 2_000;

/// Dispatch marks taken from their queue at a time.
const MARKS_PER_RECEIVE: usize = 1_000;

/// How long a dispatch mark waits past its run's instant (or its
/// dispatch, if later) for the run's end to be written with.
pub(super) const MARK_WAIT: Duration = Duration::from_millis(100);

/// The longest a dispatch mark waits, however far ahead its run was sent.
pub(super) const MARK_WAIT_MOST: Duration = Duration::from_secs(2);

/// Dispatch marks waiting past this many are written at once, the
/// longest-waiting first.
pub(super) const MARKS_WAITING_MOST: usize = 50_000;

/// The longest a write of ends and marks lets the pre-read's claims go
/// first at SQLite's writer (see [`Store::urgent_writes`]): a pass that
/// keeps up claims in well under this, and one catching up on seconds of
/// fires still lets ends through four times a second.
pub(super) const ENDS_YIELD_MOST: Duration = Duration::from_millis(250);

/// A callback's ends given back, with the rows of the runs they ended (see
/// [`Store::finish_runs`]).
pub(super) type Ended = (Vec<RunEnd>, Result<Vec<Option<RunRow>>, StoreError>);

/// One callback's ends, and where they go back with their rows.
#[derive(Debug)]
pub(super) struct EndRequest {
    pub(super) ends: Vec<RunEnd>,
    pub(super) reply: oneshot::Sender<Ended>,
}

/// A dispatch mark on its way to the writer.
#[derive(Debug)]
pub(super) struct QueuedMark {
    pub(super) mark: DispatchMark,
    /// The run's tenant (see [`Quotas::sent_unmarked`]).
    pub(super) tenant: String,
    /// Whether the mark may wait for the run's end. Not when the job's
    /// overlap policy reads which of its runs are in progress.
    pub(super) may_wait: bool,
}

/// The dispatch marks waiting to be written, each until its run's end
/// takes it or its wait is over.
#[derive(Default)]
struct WaitingMarks {
    /// The first mark of each run (a mark sent again changes nothing once
    /// the first is written).
    by_run: HashMap<RunId, QueuedMark>,
    /// When each mark must go, soonest first (a run's entry stays after
    /// its end took the mark, and is skipped).
    due: BinaryHeap<Reverse<(Instant, RunId)>>,
}

impl WaitingMarks {
    /// Keeps `mark` until its run's instant (it was sent ahead, and its
    /// executor holds it until then) and [`MARK_WAIT`] more.
    /// A mark sent again, of a run whose first mark waits, is answered
    /// back: it is written at once (and changes nothing).
    fn add(&mut self, queued: QueuedMark) -> Option<QueuedMark> {
        let mark = &queued.mark;
        if self.by_run.contains_key(&mark.run_id) {
            return Some(queued);
        }
        let wait = if queued.may_wait {
            let ahead = mark
                .scheduled_at_ms
                .map_or(0, |scheduled| scheduled.saturating_sub(mark.at_ms))
                .clamp(0, MARK_WAIT_MOST.as_millis() as i64);
            (Duration::from_millis(ahead as u64) + MARK_WAIT).min(MARK_WAIT_MOST)
        } else {
            Duration::ZERO
        };
        self.due.push(Reverse((Instant::now() + wait, mark.run_id)));
        self.by_run.insert(mark.run_id, queued);
        None
    }

    /// When the next mark must go, if one waits.
    fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((due, run_id))) = self.due.peek() {
            if self.by_run.contains_key(run_id) {
                return Some(*due);
            }
            self.due.pop();
        }
        None
    }

    /// The marks that go now: those of the runs `ends` end, those whose
    /// wait is over (all of them when `all`), and the longest-waiting past
    /// [`MARKS_WAITING_MOST`].
    fn take(&mut self, ends: &[EndRequest], all: bool) -> Vec<QueuedMark> {
        if all {
            self.due.clear();
            return self.by_run.drain().map(|(_, mark)| mark).collect();
        }
        let mut going: Vec<QueuedMark> = ends
            .iter()
            .flat_map(|request| &request.ends)
            .filter_map(|end| self.by_run.remove(&end.run_id))
            .collect();
        let now = Instant::now();
        while let Some(Reverse((due, run_id))) = self.due.peek().copied() {
            if due > now && self.by_run.len() <= MARKS_WAITING_MOST {
                break;
            }
            self.due.pop();
            going.extend(self.by_run.remove(&run_id));
        }
        going
    }
}

/// Writes the ends of the callbacks waiting and the dispatch marks, together,
/// until `stop`; then writes what is left. Ends go at once, with the marks
/// of their runs and those whose wait is over; other marks go alone once
/// their wait is over (see [`WaitingMarks`]). A write that fails is
/// tried again: the marks alone, then callback by callback, so one
/// callback's bad end fails that callback only. `writes` counts the
/// transactions.
pub(super) async fn write_run_ends(
    store: Store,
    mut queue: mpsc::UnboundedReceiver<EndRequest>,
    mut marks: mpsc::UnboundedReceiver<QueuedMark>,
    quotas: Arc<Quotas>,
    writes: Counter,
    stop: CancellationToken,
) {
    let mut carried: Option<EndRequest> = None;
    let mut waiting = WaitingMarks::default();
    let mut received = Vec::with_capacity(MARKS_PER_RECEIVE);
    let mut marks_open = true;
    let mut stopping = false;
    loop {
        let mut group = Vec::new();
        // A write that follows one the ends overflowed is part of one
        // backlog, already waited for once.
        let backlog = carried.is_some();
        if let Some(request) = carried.take() {
            group.push(request);
        } else if !stopping {
            let marks_due = waiting.next_due();
            tokio::select! {
                request = queue.recv() => match request {
                    Some(request) => group.push(request),
                    None => stopping = true,
                },
                count = marks.recv_many(&mut received, MARKS_PER_RECEIVE), if marks_open => {
                    marks_open = count > 0;
                }
                _ = tokio::time::sleep_until(marks_due.unwrap_or_else(Instant::now)),
                    if marks_due.is_some() => {}
                _ = stop.cancelled() => stopping = true,
            }
        }
        // A mark that may not wait (its job's overlap policy reads it)
        // does not wait for the claims either.
        let marks_now = received.iter().any(|mark| !mark.may_wait);
        if !stopping && !backlog && !marks_now {
            // Callbacks arriving meanwhile join this write (and those past
            // what one write takes follow at once, without a wait each:
            // a wait per write would cap the ends written a second).
            store.after_urgent_writes(ENDS_YIELD_MOST).await;
        }
        let mut count: usize = group.iter().map(|request| request.ends.len()).sum();
        while let Ok(request) = queue.try_recv() {
            if count + request.ends.len() > ENDS_PER_WRITE && !group.is_empty() {
                carried = Some(request);
                break;
            }
            count += request.ends.len();
            group.push(request);
        }
        while let Ok(mark) = marks.try_recv() {
            received.push(mark);
        }
        let mut going: Vec<QueuedMark> = received
            .drain(..)
            .filter_map(|mark| waiting.add(mark))
            .collect();
        going.extend(waiting.take(&group, stopping));
        if !group.is_empty() || !going.is_empty() {
            let mut tenants: HashMap<String, u64> = HashMap::new();
            let marks = going
                .into_iter()
                .map(|queued| {
                    *tenants.entry(queued.tenant).or_default() += 1;
                    queued.mark
                })
                .collect();
            write_group(&store, marks, group, &writes).await;
            for (tenant, runs) in tenants {
                quotas.marks_written(&tenant, runs);
            }
        }
        if stopping && carried.is_none() && queue.is_empty() && marks.is_empty() {
            return;
        }
    }
}

/// Writes one group's marks and ends in one transaction and answers each
/// callback.
async fn write_group(
    store: &Store,
    marks: Vec<DispatchMark>,
    group: Vec<EndRequest>,
    writes: &Counter,
) {
    writes.inc();
    let lengths: Vec<usize> = group.iter().map(|request| request.ends.len()).collect();
    let (all, replies): (Vec<Vec<RunEnd>>, Vec<oneshot::Sender<Ended>>) = group
        .into_iter()
        .map(|request| (request.ends, request.reply))
        .unzip();
    let all: Vec<RunEnd> = all.into_iter().flatten().collect();
    let together = store.finish_runs_marking(&marks, &all).await;
    let mut ends = all.into_iter();
    match together {
        Ok(ended) => {
            let mut rows = ended.into_iter();
            for (length, reply) in lengths.iter().zip(replies) {
                let own: Vec<RunEnd> = ends.by_ref().take(*length).collect();
                let _ = reply.send((own, Ok(rows.by_ref().take(*length).collect())));
            }
        }
        Err(error) if marks.is_empty() && replies.len() == 1 => {
            let own: Vec<RunEnd> = ends.collect();
            let reply = replies.into_iter().next().expect("one callback");
            let _ = reply.send((own, Err(error)));
        }
        Err(error) => {
            tracing::warn!(
                %error,
                callbacks = lengths.len(),
                marks = marks.len(),
                "writing run ends and dispatch marks together failed; writing them apart"
            );
            if !marks.is_empty() {
                writes.inc();
                if let Err(error) = store.mark_dispatched_many(&marks).await {
                    // The runs stay pending: their results still end them,
                    // and a restarted admin re-dispatches them (the
                    // executor answers that it already has them).
                    tracing::warn!(%error, count = marks.len(), "cannot record dispatched runs");
                }
            }
            for (length, reply) in lengths.iter().zip(replies) {
                let own: Vec<RunEnd> = ends.by_ref().take(*length).collect();
                writes.inc();
                let ended = store.finish_runs(&own).await;
                let _ = reply.send((own, ended));
            }
        }
    }
}

#[cfg(test)]
mod tests;
