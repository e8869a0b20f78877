//! Warm instances between runs, in the order they were parked.
//!
//! A warm instance holds an instance slot and its memory reservation while
//! it waits for its worker's next run. Parked here rather than inside its
//! worker, it can be taken by someone else: when a run cannot get a slot or
//! memory, an idle instance is evicted (its `destroy` called, its slot and
//! memory freed), so idle instances never keep a waiting run — of any
//! tenant — from starting. Its worker simply instantiates anew on its next
//! run.
//!
//! Which one goes is a segmented LRU: first the instance idle longest among
//! those that have served a single run, then the one idle longest among
//! those reused. With more jobs than slots, the many jobs that run rarely
//! take turns in the slots the often-run jobs leave, instead of pushing out
//! the instances that are reused.

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
            let reused = instance.runs() > 1;
            parked.segment(reused).insert(order, worker);
            parked.by_worker.insert(worker, (order, reused, instance));
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

    /// The instance to destroy for a waiting run: the one idle longest of
    /// those that served one run, else of all.
    pub(crate) fn evict_oldest(&self) -> Option<LiveInstance> {
        let evicted = {
            let mut parked = self.lock();
            let oldest = parked
                .once
                .first_key_value()
                .or_else(|| parked.reused.first_key_value())
                .map(|(_, worker)| *worker);
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

/// The parked instances and the order they came in, in two segments.
#[derive(Default)]
struct Parked {
    /// Worker → (park order, reused, instance).
    by_worker: HashMap<u64, (u64, bool, LiveInstance)>,
    /// Park order → worker, oldest first: instances that served one run.
    once: BTreeMap<u64, u64>,
    /// The same for instances that served more.
    reused: BTreeMap<u64, u64>,
    next_order: u64,
}

impl Parked {
    fn segment(&mut self, reused: bool) -> &mut BTreeMap<u64, u64> {
        if reused { &mut self.reused } else { &mut self.once }
    }

    fn remove(&mut self, worker: u64) -> Option<LiveInstance> {
        let (order, reused, instance) = self.by_worker.remove(&worker)?;
        self.segment(reused).remove(&order);
        Some(instance)
    }
}
