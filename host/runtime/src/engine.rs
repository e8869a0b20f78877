//! The process-wide [`Runtime`]: one wasmtime engine, its linker, the epoch
//! ticker thread, the instance budget and the artifact cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::host::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES};
use crate::idle::IdleInstances;

use crate::cache::{self, ArtifactCache};
use crate::compiler::code_config;
use crate::config::RuntimeConfig;
use crate::errors::RuntimeError;
use crate::function_cache::FunctionCache;
use crate::host::{HostState, Job};

/// The sandboxed runtime: cheap to clone, shared by every worker.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

pub(crate) struct RuntimeInner {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<HostState>,
    pub(crate) config: RuntimeConfig,
    pub(crate) cache: ArtifactCache,
    /// Cranelift's compiled functions, beside the artifacts (a compiler
    /// child process is handed its directory and key).
    pub(crate) functions: Option<Arc<FunctionCache>>,
    instance_slots: Arc<Semaphore>,
    /// The memory budget in MiB (one permit each).
    memory_budget: Arc<Semaphore>,
    /// Warm instances between runs, evictable by a waiting run.
    pub(crate) idle: IdleInstances,
    ticker: EpochTicker,
    /// Where a job's outbound HTTP may go beyond the public internet.
    pub(crate) http_nets: Arc<cronbox_net_policy::NetPolicy>,
    /// Outbound HTTP of every run.
    pub(crate) http_stats: Arc<crate::http::HttpStats>,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

impl Runtime {
    /// Builds the engine, links the host interfaces and starts the ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, RuntimeError> {
        let key = cache::signing_key(config.cache_key_file.as_deref())?;
        let functions = config
            .cache_dir
            .as_deref()
            .map(|dir| Arc::new(FunctionCache::new(dir, &key)));
        let engine = build_engine(&config, functions.clone())?;
        let mut linker = Linker::<HostState>::new(&engine);
        // Every WASI p2 interface is linked, but the context grants nothing:
        // no preopened directory, no environment, no socket address. A
        // job importing filesystem or sockets loads, and each use fails
        // inside the guest with the interface's own error.
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(|error| RuntimeError::Linker(format!("{error:#}")))?;
        // Outbound HTTP, through each run's grants (see `http`).
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(|error| RuntimeError::Linker(format!("{error:#}")))?;
        Job::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|error| RuntimeError::Linker(format!("{error:#}")))?;
        // The job's configuration (`wasi:config/store`), per run.
        wasmtime_wasi_config::add_to_linker(&mut linker, HostState::config)
            .map_err(|error| RuntimeError::Linker(format!("{error:#}")))?;
        let cache = ArtifactCache::new(config.cache_dir.clone(), key, &engine)?;
        let ticker = EpochTicker::start(&engine, config.epoch_tick)?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                instance_slots: Arc::new(Semaphore::new(config.max_instances as usize)),
                memory_budget: Arc::new(Semaphore::new(mebibytes(config.memory_budget()))),
                idle: IdleInstances::new(config.max_instances),
                http_nets: Arc::new(config.http_nets.clone()),
                http_stats: Arc::default(),
                engine,
                linker,
                config,
                cache,
                functions,
                ticker,
            }),
        })
    }

    /// The settings this runtime was built with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// Outbound HTTP of every run so far.
    pub fn http_stats(&self) -> crate::http::HttpStatsSnapshot {
        self.inner.http_stats.snapshot()
    }

    /// Instance slots free right now (out of `max_instances`).
    pub fn free_instance_slots(&self) -> usize {
        self.inner.instance_slots.available_permits()
    }

    /// Memory of the budget not reserved by a live instance, in bytes.
    pub fn free_memory_budget_bytes(&self) -> u64 {
        self.inner.memory_budget.available_permits() as u64 * MIB
    }

    /// Warm instances waiting for their next run now.
    pub fn idle_instances(&self) -> usize {
        self.inner.idle.len()
    }

    /// Idle instances evicted so far to let a waiting run start.
    pub fn instances_evicted(&self) -> u64 {
        self.inner.idle.evictions()
    }

    /// `bytes` of the memory budget in permits; refused when the whole
    /// budget could never hold them.
    pub(crate) fn memory_permits(&self, bytes: u64) -> Result<u32, MemoryOverBudget> {
        let budget_bytes = self.inner.config.memory_budget();
        let wanted = mebibytes(bytes);
        u32::try_from(wanted)
            .ok()
            .filter(|_| wanted <= mebibytes(budget_bytes))
            .ok_or(MemoryOverBudget {
                limit_bytes: bytes,
                budget_bytes,
            })
    }

    /// `permits` MiB of the memory budget, if free now.
    pub(crate) fn try_reserve_memory(&self, permits: u32) -> Option<OwnedSemaphorePermit> {
        self.inner
            .memory_budget
            .clone()
            .try_acquire_many_owned(permits)
            .ok()
    }

    /// Waits until `permits` MiB of the memory budget are free and reserves
    /// them for an instance's life.
    pub(crate) async fn reserve_memory(&self, permits: u32) -> OwnedSemaphorePermit {
        self.inner
            .memory_budget
            .clone()
            .acquire_many_owned(permits)
            .await
            .expect("the memory budget is never closed")
    }

    /// An instance slot, if one is free now.
    pub(crate) fn try_instance_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.inner.instance_slots.clone().try_acquire_owned().ok()
    }

    /// Waits for a free instance slot: the back-pressure in front of the
    /// pooling allocator, which would otherwise fail when full.
    pub(crate) async fn instance_slot(&self) -> OwnedSemaphorePermit {
        self.inner
            .instance_slots
            .clone()
            .acquire_owned()
            .await
            .expect("the instance semaphore is never closed")
    }
}

const MIB: u64 = 1 << 20;

/// Bytes as whole MiB, rounded up (the memory budget's unit).
fn mebibytes(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(MIB)).unwrap_or(usize::MAX)
}

/// A run's memory limit that the executor's whole memory budget could
/// never hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryOverBudget {
    pub(crate) limit_bytes: u64,
    pub(crate) budget_bytes: u64,
}

fn build_engine(
    config: &RuntimeConfig,
    functions: Option<Arc<FunctionCache>>,
) -> Result<Engine, RuntimeError> {
    let slots = config.max_instances.max(1);
    let mut pool = PoolingAllocationConfig::default();
    // Each slot holds one component's share, and no component may take
    // more (the store's limiter says the same): one tenant's component
    // cannot exhaust what another's instantiation needs.
    pool.total_component_instances(slots)
        .total_core_instances(slots * MAX_CORE_INSTANCES as u32)
        .total_memories(slots * MAX_MEMORIES as u32)
        .total_tables(slots * MAX_TABLES as u32)
        .max_core_instances_per_component(MAX_CORE_INSTANCES as u32)
        .max_memories_per_component(MAX_MEMORIES as u32)
        .max_tables_per_component(MAX_TABLES as u32)
        .total_stacks(slots)
        .max_memory_size(usize::try_from(config.memory_ceiling_bytes).unwrap_or(usize::MAX));

    let mut wasm = code_config(config.fuel_metering, config.max_wasm_stack_bytes, functions)?;
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&wasm).map_err(|error| RuntimeError::Engine(format!("{error:#}")))
}

/// Advances the engine's epoch every tick from a dedicated OS thread, so
/// that deadlines fire even when every async worker is busy running wasm.
struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    fn start(engine: &Engine, tick: Duration) -> Result<Self, RuntimeError> {
        let weak = engine.weak();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("cronbox-epoch".into())
            .spawn(move || {
                while !stop_flag.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(RuntimeError::Ticker)?;
        Ok(EpochTicker {
            stop,
            thread: Some(thread),
        })
    }

    fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
