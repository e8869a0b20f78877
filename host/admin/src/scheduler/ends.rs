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
mod tests {
    use super::*;
    use crate::store::{NewRun, RunId};
    use crate::test_support::{let_others_run, sqlite_store};
    use cronbox_protocol::TriggerKind;

    fn ended_well(run_id: RunId) -> RunEnd {
        RunEnd {
            run_id,
            success: true,
            outcome: crate::model::RunOutcome::Success,
            code: 200,
            finished_at_ms: 2_000,
            ..RunEnd::default()
        }
    }

    /// The record that executor `http://e1` took `run_id` (of tenant
    /// `default`) at 1,500, for a run due then.
    fn mark_of(run_id: RunId) -> QueuedMark {
        QueuedMark {
            mark: DispatchMark {
                run_id,
                executor: "http://e1".into(),
                at_ms: 1_500,
                scheduled_at_ms: Some(1_500),
            },
            tenant: "default".into(),
            may_wait: true,
        }
    }

    /// Queues a callback of `runs`' ends; answers where its reply comes.
    fn queue_callback(
        queue: &mpsc::UnboundedSender<EndRequest>,
        runs: &[RunId],
    ) -> oneshot::Receiver<Ended> {
        let (reply, answer) = oneshot::channel();
        let ends = runs.iter().copied().map(ended_well).collect();
        queue.send(EndRequest { ends, reply }).unwrap();
        answer
    }

    /// `count` pending runs of job 1 in `store`.
    async fn pending_runs(store: &Store, count: i64) -> Vec<RunId> {
        let mut runs = Vec::new();
        for at in 0..count {
            let fire = NewRun {
                job_id: crate::model::JobId(1),
                kind: TriggerKind::Manual,
                scheduled_at_ms: 1_000 + at,
                shard_index: 0,
                shard_total: 1,
                attempt: 0,
                param: String::new(),
                module_digest: "a".repeat(64).parse().unwrap(),
            };
            runs.push(store.insert_run(&fire, 1_000).await.unwrap());
        }
        runs
    }

    /// The run-end writer of a test, and its queues.
    struct Writer {
        send: mpsc::UnboundedSender<EndRequest>,
        mark: mpsc::UnboundedSender<QueuedMark>,
        quotas: Arc<Quotas>,
        writes: Counter,
        stop: CancellationToken,
        task: tokio::task::JoinHandle<()>,
    }

    impl Writer {
        /// Queues `callbacks`, then starts the writer (so they wait for it
        /// together); answers it and what it answered each callback.
        async fn after(
            store: &Store,
            callbacks: &[Vec<RunId>],
        ) -> (
            Writer,
            Vec<(Vec<RunId>, Result<Vec<Option<RunId>>, String>)>,
        ) {
            Writer::after_marks(store, &[], callbacks).await
        }

        /// [`Writer::after`] with dispatch marks of `marked` queued first.
        async fn after_marks(
            store: &Store,
            marked: &[RunId],
            callbacks: &[Vec<RunId>],
        ) -> (
            Writer,
            Vec<(Vec<RunId>, Result<Vec<Option<RunId>>, String>)>,
        ) {
            let writer = Writer::start(store, marked);
            let answers: Vec<_> = callbacks
                .iter()
                .map(|runs| queue_callback(&writer.send, runs))
                .collect();
            let mut answers_given = Vec::new();
            for answer in answers {
                answers_given.push(answered(answer).await);
            }
            (writer, answers_given)
        }

        /// A writer over `store` with dispatch marks of `marked` queued.
        /// Its task first runs when the test next waits (a test's runtime
        /// has one thread), so what the test queues before that waits for
        /// it together.
        fn start(store: &Store, marked: &[RunId]) -> Writer {
            let (send, queue) = mpsc::unbounded_channel();
            let (mark, marks) = mpsc::unbounded_channel();
            let quotas = Arc::new(Quotas::new(Default::default()));
            for run_id in marked {
                quotas.sent_unmarked("default");
                mark.send(mark_of(*run_id)).unwrap();
            }
            let writes = Counter::default();
            let stop = CancellationToken::new();
            let task = tokio::spawn(write_run_ends(
                store.clone(),
                queue,
                marks,
                quotas.clone(),
                writes.clone(),
                stop.clone(),
            ));
            Writer {
                send,
                mark,
                quotas,
                writes,
                stop,
                task,
            }
        }

        async fn stop(self) {
            self.stop.cancel();
            self.task.await.unwrap();
        }
    }

    /// The writer's answer to a callback: its ends' run ids, and the ids of
    /// the rows it ended (or the error).
    async fn answered(
        answer: oneshot::Receiver<Ended>,
    ) -> (Vec<RunId>, Result<Vec<Option<RunId>>, String>) {
        let (ends, rows) = answer.await.unwrap();
        let ends = ends.iter().map(|end| end.run_id).collect();
        let rows = rows
            .map(|rows| {
                rows.iter()
                    .map(|row| row.as_ref().map(|row| row.id))
                    .collect()
            })
            .map_err(|error| error.to_string());
        (ends, rows)
    }

    #[tokio::test]
    async fn callbacks_that_wait_together_share_a_write_and_each_gets_its_own_rows() {
        let (_dir, store) = sqlite_store().await;
        let runs = pending_runs(&store, 5).await;
        // Three callbacks wait before the writer starts; the third names
        // again a run the first ends.
        let callbacks = [
            vec![runs[0], runs[1]],
            vec![runs[2], runs[3]],
            vec![runs[4], runs[1]],
        ];
        let (writer, answers_given) = Writer::after(&store, &callbacks).await;
        assert_eq!(
            writer.writes.get(),
            1,
            "one transaction for the three callbacks"
        );
        assert_eq!(
            answers_given,
            [
                (callbacks[0].clone(), Ok(vec![Some(runs[0]), Some(runs[1])])),
                (callbacks[1].clone(), Ok(vec![Some(runs[2]), Some(runs[3])])),
                // A run ends once: the first callback naming it has its row.
                (callbacks[2].clone(), Ok(vec![Some(runs[4]), None])),
            ]
        );
        for run in &runs {
            let status = store.run(*run).await.unwrap().unwrap().status;
            assert_eq!(status, crate::store::RunStatus::Success);
        }

        // Callbacks past the most one write takes go in writes of their own.
        let big: Vec<RunId> = (0..ENDS_PER_WRITE as i64 * 3 / 4)
            .map(|id| RunId(1_000_000 + id))
            .collect();
        let answers = [
            queue_callback(&writer.send, &big),
            queue_callback(&writer.send, &big),
        ];
        for answer in answers {
            let (ends, rows) = answer.await.unwrap();
            assert_eq!((ends.len(), rows.unwrap().len()), (big.len(), big.len()));
        }
        assert_eq!(writer.writes.get(), 3);
        writer.stop().await;
    }

    /// A group whose write fails is written callback by callback: the
    /// callback holding the end the database refuses fails alone (its
    /// executor sends it again), the others end their runs.
    #[tokio::test]
    async fn a_group_that_fails_is_written_callback_by_callback() {
        let (dir, store) = sqlite_store().await;
        let runs = pending_runs(&store, 4).await;
        // The database refuses to end one run (a trigger on the same file
        // the store writes, as a constraint or a full disk would).
        sqlx::any::install_default_drivers();
        let url = format!("sqlite://{}", dir.path().join("cronbox.db").display());
        let raw = sqlx::AnyPool::connect(&url).await.unwrap();
        let trigger = format!(
            "CREATE TRIGGER refuse_one_end BEFORE UPDATE ON run WHEN OLD.id = {} \
             BEGIN SELECT RAISE(ABORT, 'this run may not end'); END",
            runs[1].0
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(trigger))
            .execute(&raw)
            .await
            .unwrap();

        let callbacks = [vec![runs[0]], vec![runs[1], runs[2]], vec![runs[3]]];
        let (writer, answers_given) = Writer::after(&store, &callbacks).await;
        assert_eq!(
            writer.writes.get(),
            4,
            "the group, then each callback alone"
        );
        assert_eq!(
            answers_given[0],
            (callbacks[0].clone(), Ok(vec![Some(runs[0])]))
        );
        assert_eq!(
            answers_given[2],
            (callbacks[2].clone(), Ok(vec![Some(runs[3])]))
        );
        let (ends, refused) = &answers_given[1];
        assert_eq!(ends, &callbacks[1]);
        assert!(
            refused
                .as_ref()
                .is_err_and(|error| error.contains("this run may not end")),
            "{refused:?}"
        );
        let mut statuses = Vec::new();
        for run in &runs {
            statuses.push(store.run(*run).await.unwrap().unwrap().status);
        }
        use crate::store::RunStatus::{Pending, Success};
        assert_eq!(
            statuses,
            [Success, Pending, Pending, Success],
            "the refused callback ended none of its runs"
        );
        writer.stop().await;
    }

    /// A mark waiting when its run's end comes is written by the end: one
    /// transaction, and the run has its dispatch time and executor. A mark
    /// alone waits for ends (up to `MARK_WAIT`), then goes by itself.
    #[tokio::test]
    async fn marks_go_with_the_ends_that_come_for_them_or_alone_after_a_wait() {
        let (_dir, store) = sqlite_store().await;
        let runs = pending_runs(&store, 3).await;
        let (writer, answers_given) =
            Writer::after_marks(&store, &runs[..2], &[vec![runs[0], runs[1]]]).await;
        assert_eq!(
            answers_given,
            [(
                vec![runs[0], runs[1]],
                Ok(vec![Some(runs[0]), Some(runs[1])])
            )]
        );
        assert_eq!(writer.writes.get(), 1, "marks and ends in one transaction");
        assert_eq!(
            writer.quotas.unmarked_of("default"),
            0,
            "written marks are let go"
        );
        for run in &runs[..2] {
            let run = store.run(*run).await.unwrap().unwrap();
            assert_eq!(
                (run.status, run.dispatched_at_ms, run.executor.as_deref()),
                (
                    crate::store::RunStatus::Success,
                    Some(1_500),
                    Some("http://e1")
                )
            );
        }

        // A mark with no end to go with: written once its wait is over.
        // The writer lets the quota's count go last, after its write is
        // committed, so that is the event to wait for (the row can read
        // `dispatched` before the writer has counted it).
        let sent = std::time::Instant::now();
        writer.quotas.sent_unmarked("default");
        writer.mark.send(mark_of(runs[2])).unwrap();
        while writer.quotas.unmarked_of("default") != 0 {
            assert!(sent.elapsed() < Duration::from_secs(10), "never marked");
            tokio::task::yield_now().await;
        }
        assert!(sent.elapsed() >= MARK_WAIT, "{:?}", sent.elapsed());
        let marked = store.run(runs[2]).await.unwrap().unwrap();
        assert_eq!(marked.status, crate::store::RunStatus::Dispatched);
        assert_eq!(marked.dispatched_at_ms, Some(1_500));
        assert_eq!(writer.writes.get(), 2);
        writer.stop().await;
    }

    /// Marks still waiting when the admin stops are written before the
    /// writer ends.
    #[tokio::test]
    async fn marks_waiting_at_the_stop_are_written() {
        let (_dir, store) = sqlite_store().await;
        let runs = pending_runs(&store, 1).await;
        let (writer, _) = Writer::after_marks(&store, &runs, &[]).await;
        writer.stop().await;
        let run = store.run(runs[0]).await.unwrap().unwrap();
        assert_eq!(run.status, crate::store::RunStatus::Dispatched);
    }

    /// A mark waits until its run's instant and `MARK_WAIT` more, unless it
    /// may not wait; an end of its run takes it at any time; a mark sent
    /// again while the first waits goes at once.
    #[test]
    fn a_mark_waits_for_its_runs_end_until_past_its_instant() {
        let ahead = |run_id: i64, may_wait: bool| {
            let mut queued = mark_of(RunId(run_id));
            // Sent a second ahead of its instant.
            queued.mark.at_ms = 1_000;
            queued.mark.scheduled_at_ms = Some(2_000);
            queued.may_wait = may_wait;
            queued
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(async {
                let mut waiting = WaitingMarks::default();
                assert!(waiting.add(ahead(1, true)).is_none());
                assert!(waiting.add(ahead(2, true)).is_none());
                assert!(waiting.add(ahead(3, false)).is_none());
                let again = waiting.add(ahead(1, true));
                assert_eq!(again.map(|queued| queued.mark.run_id), Some(RunId(1)));
                let due = waiting.next_due().unwrap() - Instant::now();
                assert!(due <= Duration::from_millis(1), "{due:?}");
                let taken = |marks: Vec<QueuedMark>| -> Vec<RunId> {
                    marks.into_iter().map(|queued| queued.mark.run_id).collect()
                };
                assert_eq!(taken(waiting.take(&[], false)), [RunId(3)], "may not wait");
                let (reply, _) = oneshot::channel();
                let end_of_2 = EndRequest {
                    ends: vec![ended_well(RunId(2))],
                    reply,
                };
                assert_eq!(taken(waiting.take(&[end_of_2], false)), [RunId(2)]);
                let due = waiting.next_due().unwrap() - Instant::now();
                assert!(due > Duration::from_secs(1), "{due:?}");
                assert!(due <= Duration::from_secs(1) + MARK_WAIT, "{due:?}");
                assert_eq!(
                    taken(waiting.take(&[], true)),
                    [RunId(1)],
                    "all, at the stop"
                );
                assert!(waiting.next_due().is_none());
            });
    }

    #[tokio::test]
    async fn ends_wait_while_the_pre_read_claims_and_go_when_it_is_done() {
        let (_dir, store) = sqlite_store().await;
        let runs = pending_runs(&store, 2).await;
        let claiming = store.urgent_writes();
        let writer = Writer::start(&store, &[]);
        let first = queue_callback(&writer.send, &runs[..1]);
        // Everything up to the write is on this thread's runtime: given
        // the chance, a writer that did not wait would have begun it.
        let_others_run().await;
        assert_eq!(writer.writes.get(), 0, "the ends wait for the claims");
        let second = queue_callback(&writer.send, &runs[1..]);
        drop(claiming);
        let (first, second) = tokio::time::timeout(Duration::from_secs(10), async {
            (answered(first).await, answered(second).await)
        })
        .await
        .expect("the ends are written once the claims are done");
        assert_eq!(first, (vec![runs[0]], Ok(vec![Some(runs[0])])));
        assert_eq!(second, (vec![runs[1]], Ok(vec![Some(runs[1])])));
        assert_eq!(
            writer.writes.get(),
            1,
            "the callback that came meanwhile joined"
        );
        writer.stop().await;
    }

    #[tokio::test]
    async fn a_backlog_past_one_write_waits_for_the_claims_once() {
        let (_dir, store) = sqlite_store().await;
        // A pass that claims for longer than the ends wait for it.
        let _claiming = store.urgent_writes();
        let writer = Writer::start(&store, &[]);
        let overflowing: Vec<RunId> = (1..=ENDS_PER_WRITE as i64).map(RunId).collect();
        let first = queue_callback(&writer.send, &overflowing);
        let _second = queue_callback(&writer.send, &[RunId(0)]);
        let (ends, _) = tokio::time::timeout(Duration::from_secs(10), first)
            .await
            .expect("the ends wait for the claims only so long")
            .unwrap();
        assert_eq!(ends.len(), ENDS_PER_WRITE);
        let_others_run().await;
        assert_eq!(
            writer.writes.get(),
            2,
            "what did not fit the first write follows it without a second wait"
        );
        writer.stop().await;
    }

    #[tokio::test]
    async fn a_mark_that_may_not_wait_does_not_wait_for_the_claims() {
        let (_dir, store) = sqlite_store().await;
        let runs = pending_runs(&store, 1).await;
        let _claiming = store.urgent_writes();
        let writer = Writer::start(&store, &[]);
        writer.quotas.sent_unmarked("default");
        writer
            .mark
            .send(QueuedMark {
                may_wait: false,
                ..mark_of(runs[0])
            })
            .unwrap();
        let_others_run().await;
        assert_eq!(writer.writes.get(), 1, "written while the claims go on");
        writer.stop().await;
    }
}
