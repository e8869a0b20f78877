//! The run-end writer against a real SQLite file: groups, waits, marks.

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
