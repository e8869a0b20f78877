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
//! Which one goes is a segmented LRU in the manner of 2Q: first the
//! instance idle longest among those on probation, then the one idle
//! longest among the protected. An instance is protected once it has
//! served a second run, or when its worker's previous instance was evicted
//! from probation so recently that the worker is still remembered (the
//! last `2 × max_instances` such evictions are): a job that runs again
//! soon after losing its instance is one that runs often. With more jobs
//! than slots, the many jobs that run rarely take turns in the slots the
//! often-run jobs leave, instead of pushing them out.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

use crate::instance::LiveInstance;

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
    /// Parked instances of a runtime with `max_instances` slots.
    pub(crate) fn new(max_instances: u32) -> Self {
        IdleInstances {
            next_worker: AtomicU64::new(1),
            parked: Mutex::new(Parked {
                remembered: 2 * max_instances as usize,
                ..Parked::default()
            }),
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
            let reused = instance.runs() > 1 || parked.recalls(worker);
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
            match parked.once.first_key_value().map(|(_, worker)| *worker) {
                Some(worker) => {
                    parked.remember(worker);
                    parked.remove(worker)
                }
                None => {
                    let oldest = parked.reused.first_key_value().map(|(_, worker)| *worker);
                    oldest.and_then(|worker| parked.remove(worker))
                }
            }
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
    /// The same for protected instances.
    reused: BTreeMap<u64, u64>,
    next_order: u64,
    /// Workers whose instance was evicted from probation, newest last, at
    /// most `remembered`.
    evicted_once: VecDeque<u64>,
    evicted_once_set: HashSet<u64>,
    remembered: usize,
}

impl Parked {
    fn segment(&mut self, reused: bool) -> &mut BTreeMap<u64, u64> {
        if reused {
            &mut self.reused
        } else {
            &mut self.once
        }
    }

    /// Remembers that `worker`'s instance was evicted from probation.
    fn remember(&mut self, worker: u64) {
        if self.remembered == 0 || !self.evicted_once_set.insert(worker) {
            return;
        }
        self.evicted_once.push_back(worker);
        while self.evicted_once.len() > self.remembered {
            if let Some(forgotten) = self.evicted_once.pop_front() {
                self.evicted_once_set.remove(&forgotten);
            }
        }
    }

    /// Whether `worker` lost an instance from probation lately (forgetting
    /// it: its new instance is protected instead).
    fn recalls(&mut self, worker: u64) -> bool {
        if !self.evicted_once_set.remove(&worker) {
            return false;
        }
        self.evicted_once.retain(|known| *known != worker);
        true
    }

    fn remove(&mut self, worker: u64) -> Option<LiveInstance> {
        let (order, reused, instance) = self.by_worker.remove(&worker)?;
        self.segment(reused).remove(&order);
        Some(instance)
    }
}
