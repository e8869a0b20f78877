//! A live instance of a job: its store and bindings, the pool slot it
//! occupies and the memory it reserved from the executor's budget. Made
//! and run by `worker`, parked between runs by `idle`.

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

use crate::host::{HostState, Job};

/// An instance, the pool slot it occupies and the memory it reserved from
/// the executor's budget.
pub(crate) struct LiveInstance {
    pub(crate) store: Store<HostState>,
    pub(crate) bindings: Job,
    pub(crate) runs: u64,
    pub(crate) _slot: OwnedSemaphorePermit,
    pub(crate) _memory: OwnedSemaphorePermit,
    /// The memory limit reserved: a run asking for more needs a new
    /// instance.
    pub(crate) reserved_bytes: u64,
}

impl LiveInstance {
    /// Runs this instance has served.
    pub(crate) fn runs(&self) -> u64 {
        self.runs
    }
}
