//! Who goes first at SQLite's single writer: the pre-read's claims, which
//! decide whether fires are written before their instant, ahead of the
//! writes that can wait a moment (run ends and dispatch marks, the log
//! checkpoint).
//!
//! Writers queue for SQLite's one writing connection in the order they
//! ask for it. At 9,000–10,000 runs/s a claim asked behind a run-end write
//! (200–400 ms from asking to commit) and the checkpoint, and a pass of
//! five claims waited behind them at each claim: the pass ran late, and
//! so did the fires it wrote last (BENCHMARKS.md's history, "A lagging round's
//! pre-read"). A pass now holds [`UrgentWrites`] while it claims, and the
//! writes that can wait ask for the connection only once no pass holds it
//! or after waiting [`Store::after_urgent_writes`]'s bound, so a pass
//! that takes seconds cannot starve them.
//!
//! Nothing waits on PostgreSQL, whose writers do not share a connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use super::Store;

/// The urgent writers at work, and a wake-up for those that let them go
/// first.
#[derive(Debug, Default)]
pub(super) struct WriterTurns {
    urgent: AtomicUsize,
    all_done: Notify,
}

impl WriterTurns {
    /// Counts one more urgent writer at work until the guard is dropped.
    fn urgent(self: &Arc<Self>) -> UrgentWrites {
        self.urgent.fetch_add(1, Ordering::AcqRel);
        UrgentWrites(Some(self.clone()))
    }

    /// Returns once no urgent writer is at work, or after `most`.
    pub(super) async fn after_urgent(&self, most: Duration) {
        let deadline = tokio::time::Instant::now() + most;
        loop {
            let all_done = self.all_done.notified();
            tokio::pin!(all_done);
            // Registered before the count is read, so a guard dropped in
            // between still wakes this one.
            all_done.as_mut().enable();
            if self.urgent.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, all_done).await.is_err() {
                return;
            }
        }
    }
}

/// While this lives, the writes that can wait hold back (see the module's
/// doc). Dropping it lets them go.
#[derive(Debug)]
#[must_use = "writes that can wait hold back only while this lives"]
pub struct UrgentWrites(Option<Arc<WriterTurns>>);

impl Drop for UrgentWrites {
    fn drop(&mut self) {
        if let Some(turns) = self.0.take()
            && turns.urgent.fetch_sub(1, Ordering::AcqRel) == 1
        {
            turns.all_done.notify_waiters();
        }
    }
}

impl Store {
    /// Lets this caller's writes go first at SQLite's writer until the
    /// returned guard is dropped: writes that wait in
    /// [`Store::after_urgent_writes`] hold back meanwhile. A no-op on
    /// PostgreSQL.
    pub fn urgent_writes(&self) -> UrgentWrites {
        match &self.turns {
            Some(turns) => turns.urgent(),
            None => UrgentWrites(None),
        }
    }

    /// Waits until no [`UrgentWrites`] guard lives, `most` at the longest:
    /// called before a write that can wait asks for the writer.
    pub async fn after_urgent_writes(&self, most: Duration) {
        if let Some(turns) = &self.turns {
            turns.after_urgent(most).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::let_others_run;

    #[tokio::test]
    async fn a_write_that_can_wait_goes_when_the_urgent_ones_are_done() {
        let turns = Arc::new(WriterTurns::default());
        // No urgent writer: no wait at all, however long the bound.
        tokio::time::timeout(
            Duration::from_secs(5),
            turns.after_urgent(Duration::from_secs(3_600)),
        )
        .await
        .expect("nothing to wait for");

        let (first, second) = (turns.urgent(), turns.urgent());
        let waiter = tokio::spawn({
            let turns = turns.clone();
            async move { turns.after_urgent(Duration::from_secs(3_600)).await }
        });
        let_others_run().await;
        assert!(!waiter.is_finished(), "two urgent writers at work");
        drop(first);
        let_others_run().await;
        assert!(!waiter.is_finished(), "one urgent writer still at work");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken when the last urgent writer is done")
            .unwrap();
    }

    #[tokio::test]
    async fn an_urgent_writer_holds_the_others_back_only_so_long() {
        let turns = Arc::new(WriterTurns::default());
        let _held = turns.urgent();
        let started = std::time::Instant::now();
        tokio::time::timeout(
            Duration::from_secs(5),
            turns.after_urgent(Duration::from_millis(50)),
        )
        .await
        .expect("the bound ends the wait");
        assert!(started.elapsed() >= Duration::from_millis(50));
    }
}
