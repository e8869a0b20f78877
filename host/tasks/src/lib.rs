//! Every task a cronbox process spawns belongs to one [`Tasks`]: a tracker
//! and the stop signal, one type for the admin and the executor. A spawned
//! task ends when its work is done or when the process stops, whichever
//! comes first; [`Tasks::shutdown`] signals the stop and waits for every
//! task to end, so nothing of the process runs after it returns.
//!
//! In the admin, stopping may cut a task short at an await point: a
//! dispatch in flight leaves its run pending under a lease (taken over
//! later), a webhook in flight leaves its alarm claimed (sent again once
//! the claim is stale). Both are the at-least-once paths an admin dying
//! takes anyway. The executor stops its parts in order (runs drain, then
//! the API, then the result sender flushes): it awaits the handle
//! [`Tasks::spawn_loop`] returns for each part before the next.

use std::future::Future;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A process's tasks and their stop signal (cheap to clone; clones share
/// both).
#[derive(Debug, Clone, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Tasks {
    pub fn new() -> Self {
        Tasks::default()
    }

    /// Runs `task` until it ends or the process stops.
    pub fn spawn<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = task => {}
                () = stop.cancelled() => {}
            }
        });
    }

    /// Runs `task`, a loop that watches a stop signal itself (this one's
    /// [`Tasks::stopping`], or one of its own that is cancelled first) and
    /// finishes its own work (flushing what it holds) before it returns.
    /// The handle is for a caller that stops its parts in order; the task
    /// is tracked whether or not the handle is kept.
    pub fn spawn_loop<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// Tasks not yet ended.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Whether every task has ended.
    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }

    /// The stop signal, for loops that wind down by themselves.
    pub fn stopping(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops every task and waits until all have ended.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn shutdown_ends_waiting_tasks_and_waits_for_loops_to_finish() {
        let tasks = Tasks::new();
        let timer_fired = Arc::new(AtomicBool::new(false));
        let fired = timer_fired.clone();
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            fired.store(true, Ordering::SeqCst);
        });
        let flushed = Arc::new(AtomicBool::new(false));
        let done = flushed.clone();
        let stop = tasks.stopping();
        tasks.spawn_loop(async move {
            stop.cancelled().await;
            tokio::time::sleep(Duration::from_millis(20)).await; // a last flush
            done.store(true, Ordering::SeqCst);
        });
        tasks.shutdown().await;
        assert!(flushed.load(Ordering::SeqCst), "the loop finished its work");
        assert!(
            !timer_fired.load(Ordering::SeqCst),
            "the timer was cut short"
        );
        // Nothing spawned after shutdown runs past it either.
        tasks.spawn(async {});
        tasks.shutdown().await;
    }
}
