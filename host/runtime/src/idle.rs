//! Warm instances between runs, in the order they were parked.
//!
//! A warm instance holds an instance slot and its memory reservation while
//! it waits for its worker's next run. Parked here rather than inside its
//! worker, it can be taken by someone else: when a run cannot get a slot or
//! memory, the instance idle longest is evicted (its `destroy` called, its
//! slot and memory freed), so idle instances never keep a waiting run — of
//! any tenant — from starting. Its worker simply instantiates anew on its
//! next run.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::worker::LiveInstance;

/// Parked instances by the id of the worker they belong to, with the order
/// they were parked in: every operation is a map lookup, since a park and
/// a take come with every run.
pub(crate) struct IdleInstances {
    next_worker: AtomicU64,
    parked: Mutex<Parked>,
    /// Woken when an instance is parked: one that a waiting run may evict.
    pub(crate) parked_one: Notify,
    evicted: AtomicU64,
}

impl IdleInstances {
    pub(crate) fn new() -> Self {
        IdleInstances {
            next_worker: AtomicU64::new(1),
            parked: Mutex::new(Parked::default()),
            parked_one: Notify::new(),
            evicted: AtomicU64::new(0),
        }
    }

    /// A new worker's id.
    pub(crate) fn worker_id(&self) -> u64 {
        self.next_worker.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn park(&self, worker: u64, instance: LiveInstance) {
        {
            let mut parked = self.lock();
            let order = parked.next_order;
            parked.next_order += 1;
            parked.order.insert(order, worker);
            parked.by_worker.insert(worker, (order, instance));
        }
        self.parked_one.notify_waiters();
    }

    /// The worker's parked instance, if it was not evicted.
    pub(crate) fn take(&self, worker: u64) -> Option<LiveInstance> {
        self.lock().remove(worker)
    }

    pub(crate) fn holds(&self, worker: u64) -> bool {
        self.lock().by_worker.contains_key(&worker)
    }

    /// The instance idle longest, taken to be destroyed.
    pub(crate) fn evict_oldest(&self) -> Option<LiveInstance> {
        let evicted = {
            let mut parked = self.lock();
            let oldest = parked.order.first_key_value().map(|(_, worker)| *worker);
            oldest.and_then(|worker| parked.remove(worker))
        };
        if evicted.is_some() {
            self.evicted.fetch_add(1, Ordering::Relaxed);
        }
        evicted
    }

    /// Instances parked now.
    pub(crate) fn len(&self) -> usize {
        self.lock().by_worker.len()
    }

    /// Instances evicted so far.
    pub(crate) fn evictions(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Parked> {
        self.parked
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// The parked instances and the order they came in.
#[derive(Default)]
struct Parked {
    by_worker: HashMap<u64, (u64, LiveInstance)>,
    /// Park order → worker, oldest first.
    order: BTreeMap<u64, u64>,
    next_order: u64,
}

impl Parked {
    fn remove(&mut self, worker: u64) -> Option<LiveInstance> {
        let (order, instance) = self.by_worker.remove(&worker)?;
        self.order.remove(&order);
        Some(instance)
    }
}
