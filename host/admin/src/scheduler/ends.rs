//! Run ends from callbacks that arrive together, written together: one
//! task takes every callback's ends waiting for it and writes them in one
//! transaction (group commit), answering each callback with its own rows.
//!
//! At 6,000 runs/s spread, executors sent ~150 callbacks a second of 15 to
//! 130 results each (three in flight per executor, each answered in tens of
//! milliseconds), and each was a transaction of its own that waited ~25 ms
//! in line for SQLite's single writer for ~3 ms of work: the writer's line,
//! not its work, was full. Waiting callbacks now share the next
//! transaction, so the busier the writer, the larger (and fewer) its
//! transactions; a callback alone still goes at once.

use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::store::{RunEnd, RunRow, Store, StoreError};

/// Ends written in one transaction at most (callbacks are kept whole: one
/// larger than this goes alone).
pub(super) const ENDS_PER_WRITE: usize = 2_000;

/// A callback's ends given back, with the rows of the runs they ended (see
/// [`Store::finish_runs`]).
pub(super) type Ended = (Vec<RunEnd>, Result<Vec<Option<RunRow>>, StoreError>);

/// One callback's ends, and where they go back with their rows.
#[derive(Debug)]
pub(super) struct EndRequest {
    pub(super) ends: Vec<RunEnd>,
    pub(super) reply: oneshot::Sender<Ended>,
}

/// Writes the ends of the callbacks waiting, together, until `stop`; then
/// writes what is left. A write that fails is tried again callback by
/// callback, so one callback's bad end fails that callback only. `writes`
/// counts the transactions.
pub(super) async fn write_run_ends(
    store: Store,
    mut queue: mpsc::UnboundedReceiver<EndRequest>,
    writes: Counter,
    stop: CancellationToken,
) {
    let mut carried: Option<EndRequest> = None;
    loop {
        let mut group = Vec::new();
        let stopping = match carried.take() {
            Some(request) => {
                group.push(request);
                false
            }
            None => tokio::select! {
                received = queue.recv() => match received {
                    Some(request) => {
                        group.push(request);
                        false
                    }
                    None => return,
                },
                _ = stop.cancelled() => true,
            },
        };
        let mut count: usize = group.iter().map(|request| request.ends.len()).sum();
        while let Ok(request) = queue.try_recv() {
            if count + request.ends.len() > ENDS_PER_WRITE && !group.is_empty() {
                carried = Some(request);
                break;
            }
            count += request.ends.len();
            group.push(request);
        }
        if !group.is_empty() {
            write_group(&store, group, &writes).await;
        }
        if stopping && carried.is_none() && queue.is_empty() {
            return;
        }
    }
}

/// Writes one group's ends in one transaction and answers each callback.
async fn write_group(store: &Store, group: Vec<EndRequest>, writes: &Counter) {
    writes.inc();
    if group.len() == 1 {
        let request = group.into_iter().next().expect("one request");
        let ended = store.finish_runs(&request.ends).await;
        let _ = request.reply.send((request.ends, ended));
        return;
    }
    let lengths: Vec<usize> = group.iter().map(|request| request.ends.len()).collect();
    let (all, replies): (Vec<Vec<RunEnd>>, Vec<oneshot::Sender<Ended>>) = group
        .into_iter()
        .map(|request| (request.ends, request.reply))
        .unzip();
    let all: Vec<RunEnd> = all.into_iter().flatten().collect();
    let together = store.finish_runs(&all).await;
    let mut ends = all.into_iter();
    match together {
        Ok(ended) => {
            let mut rows = ended.into_iter();
            for (length, reply) in lengths.iter().zip(replies) {
                let own: Vec<RunEnd> = ends.by_ref().take(*length).collect();
                let _ = reply.send((own, Ok(rows.by_ref().take(*length).collect())));
            }
        }
        Err(error) => {
            tracing::warn!(
                %error,
                callbacks = lengths.len(),
                "writing callbacks' run ends together failed; writing each alone"
            );
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
    use cronbox_protocol::TriggerKind;

    fn ended_well(run_id: RunId) -> RunEnd {
        RunEnd {
            run_id,
            success: true,
            outcome: "success".into(),
            code: 200,
            finished_at_ms: 2_000,
            ..RunEnd::default()
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

    /// The run-end writer of a test, and its queue.
    struct Writer {
        send: mpsc::UnboundedSender<EndRequest>,
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
            let (send, queue) = mpsc::unbounded_channel();
            let answers: Vec<_> = callbacks
                .iter()
                .map(|runs| queue_callback(&send, runs))
                .collect();
            let writes = Counter::default();
            let stop = CancellationToken::new();
            let task = tokio::spawn(write_run_ends(
                store.clone(),
                queue,
                writes.clone(),
                stop.clone(),
            ));
            let mut answers_given = Vec::new();
            for answer in answers {
                answers_given.push(answered(answer).await);
            }
            let writer = Writer {
                send,
                writes,
                stop,
                task,
            };
            (writer, answers_given)
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
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).await.unwrap();
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
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_sqlite(dir.path()).await.unwrap();
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
}
