//! What a guest's store holds and the host side of the `cronbox:job/context`
//! interface: the current trigger, durable state, logging, resource limits.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

pub(crate) use cronbox_component_check::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES};
use cronbox_protocol::{LogLevel, LogSource, StateChanges, Trigger};
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_config::{WasiConfig, WasiConfigVariables};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::config::{RunLimits, StateLimits};
use crate::http::HttpGate;
use crate::log::{LogSink, RunLog};
use crate::run::RunHandle;

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "cronbox:job/job",
    imports: { default: trappable },
    exports: { default: async },
});

use cronbox::job::context as wit;

/// Most host resources (streams, pollables, HTTP requests, fields, ...)
/// one instance holds at once; past it, creating one more traps.
pub(crate) const MAX_RESOURCES: usize = 4096;

/// Most bytes of one set of HTTP headers or trailers a guest builds (as
/// the host holds them).
pub(crate) const MAX_FIELDS_BYTES: usize = 16 << 10;

/// The data of one store: one instance of a job.
pub(crate) struct HostState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    pub(crate) limiter: JobLimiter,
    pub(crate) log_sink: LogSink,
    pub(crate) run: RunScope,
}

/// What belongs to the run the instance is serving now.
pub(crate) struct RunScope {
    pub(crate) trigger: Trigger,
    pub(crate) handle: RunHandle,
    pub(crate) deadline: Instant,
    pub(crate) state: StateView,
    /// The job's configuration, as `wasi:config/store` answers it.
    pub(crate) config: WasiConfigVariables,
    /// Its outbound HTTP: grants, limits, use so far.
    pub(crate) http: HttpGate,
}

impl RunScope {
    pub(crate) fn state_limits(&self) -> StateLimits {
        self.state.limits()
    }
}

impl HostState {
    pub(crate) fn new(run: RunScope, limits: &RunLimits) -> Self {
        let log_sink = LogSink::default();
        log_sink.switch_to(run.handle.log_arc());
        let wasi = WasiCtx::builder()
            .stdout(RunLog::stream(log_sink.clone(), LogSource::Stdout))
            .stderr(RunLog::stream(log_sink.clone(), LogSource::Stderr))
            .wall_clock(crate::clocks::CoarseWallClock)
            .monotonic_clock(crate::clocks::CoarseMonotonicClock::new())
            .build();
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_FIELDS_BYTES);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        HostState {
            wasi,
            http,
            table,
            limiter: JobLimiter::new(limits),
            log_sink,
            run,
        }
    }

    /// Points the instance at a new run: its trigger, log, deadline, state.
    pub(crate) fn begin_run(&mut self, run: RunScope, limits: &RunLimits) {
        self.log_sink.switch_to(run.handle.log_arc());
        self.limiter.apply(limits);
        self.run = run;
    }

    /// Whether the epoch callback must stop the guest now.
    pub(crate) fn must_stop(&self) -> bool {
        self.run.handle.is_killed() || Instant::now() >= self.run.deadline
    }
}

impl HostState {
    /// The run's configuration, for `wasi:config/store`.
    pub(crate) fn config(&mut self) -> WasiConfig<'_> {
        WasiConfig::new(&self.run.config)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.run.http,
        }
    }
}

impl wit::Host for HostState {
    fn current(&mut self) -> wasmtime::Result<wit::Trigger> {
        let trigger = &self.run.trigger;
        Ok(wit::Trigger {
            job_id: trigger.job_id,
            run_id: trigger.run_id,
            param: trigger.param.clone(),
            shard_index: trigger.shard_index,
            shard_total: trigger.shard_total,
            kind: match trigger.kind {
                // A backfill is a fire of the schedule, late on purpose (the
                // contract's enum stays as every built guest knows it).
                cronbox_protocol::TriggerKind::Schedule
                | cronbox_protocol::TriggerKind::Backfill => wit::TriggerKind::Schedule,
                cronbox_protocol::TriggerKind::Manual => wit::TriggerKind::Manual,
                cronbox_protocol::TriggerKind::Api => wit::TriggerKind::Api,
                cronbox_protocol::TriggerKind::Retry => wit::TriggerKind::Retry,
                cronbox_protocol::TriggerKind::Parent | cronbox_protocol::TriggerKind::Workflow => {
                    wit::TriggerKind::Parent
                }
                cronbox_protocol::TriggerKind::Misfire => wit::TriggerKind::Misfire,
            },
            scheduled_at_ms: trigger.scheduled_at_ms,
            attempt: trigger.attempt,
        })
    }

    fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.run.state.read(&key))
    }

    fn set(&mut self, key: String, value: String) -> wasmtime::Result<Result<(), wit::StateError>> {
        Ok(self.run.state.set(key, value))
    }

    fn remove(&mut self, key: String) -> wasmtime::Result<()> {
        self.run.state.remove(key);
        Ok(())
    }

    fn log(&mut self, level: wit::Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            wit::Level::Trace => LogLevel::Trace,
            wit::Level::Debug => LogLevel::Debug,
            wit::Level::Info => LogLevel::Info,
            wit::Level::Warn => LogLevel::Warn,
            wit::Level::Error => LogLevel::Error,
        };
        self.run.handle.log().guest(level, message);
        Ok(())
    }
}

/// A job's durable state as one run sees it: the snapshot it was given plus
/// its own writes, which become the run's change set. The keys it read are
/// remembered, so that a commit can be checked against what the run saw.
pub(crate) struct StateView {
    snapshot: Arc<HashMap<String, String>>,
    changes: StateChanges,
    reads: BTreeSet<String>,
    limits: StateLimits,
    total_bytes: u64,
}

fn entry_bytes(key: &str, value: &str) -> u64 {
    (key.len() + value.len()) as u64
}

impl StateView {
    pub(crate) fn new(snapshot: Arc<HashMap<String, String>>, limits: StateLimits) -> Self {
        let total_bytes = snapshot.iter().map(|(k, v)| entry_bytes(k, v)).sum();
        StateView {
            snapshot,
            changes: StateChanges::new(),
            reads: BTreeSet::new(),
            limits,
            total_bytes,
        }
    }

    /// The guest's `get`: the value, remembering that the run read it.
    fn read(&mut self, key: &str) -> Option<String> {
        if !self.changes.contains_key(key) && !self.reads.contains(key) {
            self.reads.insert(key.to_owned());
        }
        self.get(key)
    }

    fn get(&self, key: &str) -> Option<String> {
        match self.changes.get(key) {
            Some(change) => change.clone(),
            None => self.snapshot.get(key).cloned(),
        }
    }

    fn set(&mut self, key: String, value: String) -> Result<(), wit::StateError> {
        if key.is_empty() || key.len() > self.limits.max_key_bytes as usize {
            return Err(wit::StateError::KeyTooLarge(self.limits.max_key_bytes));
        }
        if value.len() > self.limits.max_value_bytes as usize {
            return Err(wit::StateError::ValueTooLarge(self.limits.max_value_bytes));
        }
        let old = self.get(&key).map_or(0, |old| entry_bytes(&key, &old));
        let new_total = self.total_bytes - old + entry_bytes(&key, &value);
        if new_total > self.limits.max_total_bytes {
            return Err(wit::StateError::QuotaExceeded(self.limits.max_total_bytes));
        }
        self.total_bytes = new_total;
        self.changes.insert(key, Some(value));
        Ok(())
    }

    fn remove(&mut self, key: String) {
        if let Some(old) = self.get(&key) {
            self.total_bytes -= entry_bytes(&key, &old);
        }
        if self.snapshot.contains_key(&key) {
            self.changes.insert(key, None);
        } else {
            self.changes.remove(&key);
        }
    }

    pub(crate) fn limits(&self) -> StateLimits {
        self.limits
    }

    /// The run's change set, and the keys it read from its snapshot.
    pub(crate) fn into_changes(self) -> (StateChanges, BTreeSet<String>) {
        (self.changes, self.reads)
    }
}

/// Per-store resource limits, which also remember whether a memory growth
/// was refused (to tell a memory-limit death from any other trap) and the
/// most memory the instance held.
///
/// The memory limit is the instance's, not a linear memory's: a component
/// made of several core instances, each with its own memory, gets the
/// limit once for all of them together.
pub(crate) struct JobLimiter {
    memory_bytes: usize,
    table_elements: usize,
    /// The bytes of every linear memory of this store together.
    memory_in_use: usize,
    /// The growth approved last, taken back if the memory then fails to
    /// grow.
    last_growth: usize,
    pub(crate) memory_refused: bool,
    pub(crate) peak_memory_bytes: usize,
}

impl JobLimiter {
    fn new(limits: &RunLimits) -> Self {
        let mut limiter = JobLimiter {
            memory_bytes: 0,
            table_elements: 0,
            memory_in_use: 0,
            last_growth: 0,
            memory_refused: false,
            peak_memory_bytes: 0,
        };
        limiter.apply(limits);
        limiter
    }

    fn apply(&mut self, limits: &RunLimits) {
        self.memory_bytes = usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX);
        self.table_elements = limits.table_elements as usize;
        self.memory_refused = false;
    }
}

impl ResourceLimiter for JobLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current);
        let total = self.memory_in_use.saturating_add(growth);
        if total > self.memory_bytes || maximum.is_some_and(|max| desired > max) {
            self.memory_refused = true;
            return Ok(false);
        }
        self.memory_in_use = total;
        self.last_growth = growth;
        self.peak_memory_bytes = self.peak_memory_bytes.max(total);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_in_use = self.memory_in_use.saturating_sub(self.last_growth);
        self.last_growth = 0;
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements && maximum.is_none_or(|max| desired <= max))
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_limit_holds_for_all_of_an_instances_memories_together() {
        const MIB: usize = 1 << 20;
        let limits = RunLimits {
            memory_bytes: 64 << 20,
            ..RunLimits::default()
        };
        let mut limiter = JobLimiter::new(&limits);
        // Two memories (two core instances), each created then grown.
        assert!(limiter.memory_growing(0, 40 * MIB, None).unwrap());
        assert!(limiter.memory_growing(0, 20 * MIB, None).unwrap());
        assert!(!limiter.memory_refused);
        // Growing the second by 8 MiB would make 68 MiB together.
        assert!(!limiter.memory_growing(20 * MIB, 28 * MIB, None).unwrap());
        assert!(limiter.memory_refused);
        assert!(limiter.memory_growing(20 * MIB, 24 * MIB, None).unwrap());
        assert_eq!(limiter.peak_memory_bytes, 64 * MIB);
        // A growth approved but failed in the allocator is given back.
        let mut limiter = JobLimiter::new(&limits);
        assert!(limiter.memory_growing(0, 60 * MIB, None).unwrap());
        limiter
            .memory_grow_failed(wasmtime::Error::msg("pool exhausted"))
            .unwrap();
        assert!(limiter.memory_growing(0, 60 * MIB, None).unwrap());
    }

    fn view(pairs: &[(&str, &str)], limits: StateLimits) -> StateView {
        let snapshot = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        StateView::new(Arc::new(snapshot), limits)
    }

    #[test]
    fn writes_shadow_the_snapshot_and_form_the_change_set() {
        let mut state = view(&[("a", "1"), ("b", "2")], StateLimits::default());
        state.set("a".into(), "10".into()).unwrap();
        state.remove("b".into());
        state.set("c".into(), "3".into()).unwrap();
        state.set("tmp".into(), "x".into()).unwrap();
        state.remove("tmp".into());
        assert_eq!(state.get("a").as_deref(), Some("10"));
        assert_eq!(state.get("b"), None);
        let (changes, reads) = state.into_changes();
        assert!(reads.is_empty(), "nothing was read through the guest's get");
        let expected: StateChanges = [
            ("a".to_string(), Some("10".to_string())),
            ("b".to_string(), None),
            ("c".to_string(), Some("3".to_string())),
        ]
        .into_iter()
        .collect();
        assert_eq!(changes, expected);
    }

    #[test]
    fn keys_read_from_the_snapshot_are_remembered() {
        let mut state = view(&[("a", "1"), ("b", "2")], StateLimits::default());
        assert_eq!(state.read("a").as_deref(), Some("1"));
        assert_eq!(state.read("missing"), None);
        state.set("b".into(), "3".into()).unwrap();
        // Read after its own write: the run saw its own value, not the
        // snapshot's.
        assert_eq!(state.read("b").as_deref(), Some("3"));
        let (_, reads) = state.into_changes();
        let expected: BTreeSet<String> = ["a".to_string(), "missing".to_string()].into();
        assert_eq!(reads, expected);
    }

    #[test]
    fn limits_refuse_oversized_writes() {
        let limits = StateLimits {
            max_key_bytes: 4,
            max_value_bytes: 8,
            max_total_bytes: 12,
        };
        let mut state = view(&[("k", "1234")], limits);
        assert!(matches!(
            state.set("".into(), "v".into()),
            Err(wit::StateError::KeyTooLarge(4))
        ));
        assert!(matches!(
            state.set("toolong".into(), "v".into()),
            Err(wit::StateError::KeyTooLarge(4))
        ));
        assert!(matches!(
            state.set("k".into(), "123456789".into()),
            Err(wit::StateError::ValueTooLarge(8))
        ));
        // k=1234 uses 5 bytes; a second 8-byte entry would make 14 > 12.
        assert!(matches!(
            state.set("k2".into(), "12345678".into()),
            Err(wit::StateError::QuotaExceeded(12))
        ));
        // Replacing the value of k frees its old bytes first.
        state.set("k".into(), "12345678".into()).unwrap();
        assert!(state.into_changes().0.contains_key("k"));
    }
}
