//! The result sink: where what happens to a run after it is sent goes.
//! Dispatch marks and run ends are queued to their writer
//! ([`ends::write_run_ends`], started with the sink), each event is told
//! to whoever awaits the run ([`RunEvents`]), and a run an executor
//! accepted reads as dispatched at once, before its mark is written
//! ([`RecentDispatches`]).

use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::ends::{self, EndRequest, Ended, QueuedMark};
use super::events::{RecentDispatches, RunEvent, RunEvents};
use crate::metrics::Metrics;
use crate::quotas::Quotas;
use crate::store::{DispatchMark, JobRow, RunEnd, RunRow, Store, StoreError};
use crate::tasks::Tasks;

#[derive(Debug)]
pub(super) struct ResultSink {
    store: Store,
    quotas: Arc<Quotas>,
    /// Runs accepted by executors, recorded as dispatched in batches by
    /// the writer (with run ends, when they come soon enough) so that a
    /// burst of dispatches does not queue one write transaction each.
    marks: UnboundedSender<QueuedMark>,
    /// Callbacks' run ends, written together when several wait for the
    /// writer.
    ends: UnboundedSender<EndRequest>,
    /// What happens to runs, for whoever awaits it.
    pub(super) events: RunEvents,
    /// Runs dispatched lately, whose marks may not be written yet.
    recent_dispatches: RecentDispatches,
}

impl ResultSink {
    /// The sink, its writer started among `tasks` (results may come before
    /// the pre-read starts).
    pub(super) fn start(
        store: Store,
        quotas: Arc<Quotas>,
        metrics: &Metrics,
        tasks: &Tasks,
    ) -> Self {
        let (marks, mark_queue) = tokio::sync::mpsc::unbounded_channel();
        let (ends, end_queue) = tokio::sync::mpsc::unbounded_channel();
        tasks.spawn_loop(ends::write_run_ends(
            store.clone(),
            end_queue,
            mark_queue,
            quotas.clone(),
            metrics.run_end_writes.clone(),
            tasks.stopping(),
        ));
        ResultSink {
            store,
            quotas,
            marks,
            ends,
            events: RunEvents::default(),
            recent_dispatches: RecentDispatches::default(),
        }
    }

    /// Queues the record that `address` accepted `run` at `now`: it may
    /// wait for the run's end unless the job's overlap policy reads which
    /// of its runs are in progress.
    pub(super) fn dispatched(&self, job: &JobRow, run: &RunRow, address: &str, now: i64) {
        self.quotas.sent_unmarked(&job.tenant);
        let queued = QueuedMark {
            mark: DispatchMark {
                run_id: run.id,
                executor: address.to_owned(),
                at_ms: now,
                scheduled_at_ms: Some(run.scheduled_at_ms),
            },
            tenant: job.tenant.clone(),
            may_wait: job.schedule_rules.overlap == cronbox_api::OverlapPolicy::Allow,
        };
        self.recent_dispatches.add(run.id, address, now);
        self.events.send(|| RunEvent::Dispatched {
            run_id: run.id,
            job_id: run.job_id,
            executor: address.to_owned(),
            at_ms: now,
        });
        if self.marks.send(queued).is_err() {
            // The writer stopped (the admin is stopping): the run stays
            // pending; a restarted admin sends it again and hears that
            // the executor has it.
            self.quotas.marks_written(&job.tenant, 1);
        }
    }

    /// Ends runs through the writer (with the other callbacks waiting for
    /// it), or directly before it starts or once it stopped.
    pub(super) async fn finish_runs(&self, ends: Vec<RunEnd>) -> Ended {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if let Err(refused) = self.ends.send(EndRequest { ends, reply }) {
            let ends = refused.0.ends;
            let ended = self.store.finish_runs(&ends).await;
            return (ends, ended);
        }
        match answer.await {
            Ok(ended) => ended,
            // The writer stopped with the request queued: the admin is
            // stopping; the executor sends these results again.
            Err(_) => (
                Vec::new(),
                Err(StoreError::Database(sqlx::Error::PoolClosed)),
            ),
        }
    }

    /// `run` as read from the database, shown as dispatched if an executor
    /// accepted it before its mark was written.
    pub(super) fn as_known(&self, mut run: RunRow) -> RunRow {
        self.recent_dispatches.apply(&mut run);
        run
    }
}
