//! Warm instances between runs, in the order they were parked.
//!
//! A warm instance holds an instance slot and its memory reservation while
//! it waits for its worker's next run. Parked here rather than inside its
//! worker, it can be taken by someone else: when a run cannot get a slot or
//! memory, the instance idle longest is evicted (its `destroy` called, its
//! slot and memory freed), so idle instances never keep a waiting run — of
//! any tenant — from starting. Its worker simply instantiates anew on its
//! next run.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::worker::LiveInstance;

/// Parked instances, oldest first, by the id of the worker they belong to.
pub(crate) struct IdleInstances {
    next_worker: AtomicU64,
    parked: Mutex<VecDeque<(u64, LiveInstance)>>,
    /// Woken when an instance is parked: one that a waiting run may evict.
    pub(crate) parked_one: Notify,
    evicted: AtomicU64,
}

impl IdleInstances {
    pub(crate) fn new() -> Self {
        IdleInstances {
            next_worker: AtomicU64::new(1),
            parked: Mutex::new(VecDeque::new()),
            parked_one: Notify::new(),
            evicted: AtomicU64::new(0),
        }
    }

    /// A new worker's id.
    pub(crate) fn worker_id(&self) -> u64 {
        self.next_worker.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn park(&self, worker: u64, instance: LiveInstance) {
        self.lock().push_back((worker, instance));
        self.parked_one.notify_waiters();
    }

    /// The worker's parked instance, if it was not evicted.
    pub(crate) fn take(&self, worker: u64) -> Option<LiveInstance> {
        let mut parked = self.lock();
        let index = parked.iter().position(|(id, _)| *id == worker)?;
        parked.remove(index).map(|(_, instance)| instance)
    }

    pub(crate) fn holds(&self, worker: u64) -> bool {
        self.lock().iter().any(|(id, _)| *id == worker)
    }

    /// The instance idle longest, taken to be destroyed.
    pub(crate) fn evict_oldest(&self) -> Option<LiveInstance> {
        let evicted = self.lock().pop_front().map(|(_, instance)| instance);
        if evicted.is_some() {
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        evicted
    }

    /// Instances parked now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Instances evicted so far.
    pub(crate) fn evictions(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, LiveInstance)>> {
        self.parked
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}
