//! Every task the admin spawns belongs to one [`Tasks`]: a tracker and the
//! stop signal. A spawned task ends when its work is done or when the admin
//! stops, whichever comes first; [`Tasks::shutdown`] signals the stop and
//! waits for every task to end, so nothing of the admin runs after it
//! returns.
//!
//! Stopping may cut a task short at an await point: a dispatch in flight
//! leaves its run pending under a lease (taken over later), a webhook in
//! flight leaves its alarm claimed (sent again once the claim is stale).
//! Both are the at-least-once paths an admin dying takes anyway.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The admin's tasks and their stop signal (cheap to clone; clones share
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

    /// Runs `task` until it ends or the admin stops.
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

    /// Runs `task`, a loop that watches [`Tasks::stopping`] itself and
    /// finishes its own work (flushing what it holds) before it returns.
    pub fn spawn_loop<F>(&self, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(task);
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
