//! Runtime benchmarks. Prints a table; figures go into BENCHMARKS.md.
//!
//!     cargo bench -p cronbox-runtime --bench runtime
//!
//! 1. Per-run cost of a warm-instance `execute` and of a fresh instance per
//!    run (instantiate, init, execute, destroy), each against bare wasmtime
//!    making the same calls on the same engine in the same process.
//! 2. Time from deadline to stop for `runaway`, over 100 runs (p50/p99).
//! 3. Compile time vs cached load for each example job.

#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::time::{Duration, Instant};

use cronbox_example_jobs as jobs;
use cronbox_runtime::{
    InstanceMode, JobWorker, RunHandle, RunLimits, RunRequest, Runtime, RuntimeConfig, Trigger,
};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

mod bare {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "cronbox:job/job",
        imports: { default: trappable },
        exports: { default: async },
    });
}
use bare::cronbox::job::context as wit;

/// The least a host can do for the `job` world: a fixed trigger, a map for
/// state, logs into a memory pipe. No limits, no deadline checks, no log
/// capture structure.
struct BareHost {
    wasi: WasiCtx,
    table: ResourceTable,
    state: std::collections::HashMap<String, String>,
    logged: usize,
}

impl WasiView for BareHost {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl wit::Host for BareHost {
    fn current(&mut self) -> wasmtime::Result<wit::Trigger> {
        Ok(wit::Trigger {
            job_id: 0,
            run_id: 0,
            param: "bench".into(),
            shard_index: 0,
            shard_total: 1,
            kind: wit::TriggerKind::Manual,
            scheduled_at_ms: 0,
            attempt: 0,
        })
    }
    fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.state.get(&key).cloned())
    }
    fn set(&mut self, key: String, value: String) -> wasmtime::Result<Result<(), wit::StateError>> {
        self.state.insert(key, value);
        Ok(Ok(()))
    }
    fn remove(&mut self, key: String) -> wasmtime::Result<()> {
        self.state.remove(&key);
        Ok(())
    }
    fn log(&mut self, _level: wit::Level, message: String) -> wasmtime::Result<()> {
        self.logged += message.len();
        Ok(())
    }
}

struct Bare {
    engine: Engine,
    pre: bare::JobPre<BareHost>,
}

impl Bare {
    fn new(engine: &Engine, wasm: &[u8]) -> Bare {
        let mut linker = Linker::<BareHost>::new(engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        bare::Job::add_to_linker::<_, HasSelf<_>>(&mut linker, |host| host).unwrap();
        let component = Component::new(engine, wasm).unwrap();
        let pre = bare::JobPre::new(linker.instantiate_pre(&component).unwrap()).unwrap();
        Bare {
            engine: engine.clone(),
            pre,
        }
    }

    fn store(&self) -> Store<BareHost> {
        let out = MemoryOutputPipe::new(1 << 20);
        let wasi = WasiCtx::builder().stdout(out.clone()).stderr(out).build();
        let mut store = Store::new(
            &self.engine,
            BareHost {
                wasi,
                table: ResourceTable::new(),
                state: Default::default(),
                logged: 0,
            },
        );
        // Same engine config (epochs and fuel on), so the same settings are
        // needed to run at all: a far deadline and plenty of fuel.
        store.set_epoch_deadline(u64::MAX / 2);
        let _ = store.set_fuel(u64::MAX);
        store
    }
}

fn per_run(total: Duration, runs: u32) -> Duration {
    total / runs
}

fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

fn millis(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

async fn bench_overhead(runtime: &Runtime, job: &str) {
    const WARM_RUNS: u32 = 20_000;
    const FRESH_RUNS: u32 = 2_000;
    let wasm = jobs::bytes(job);
    let bare = Bare::new(cronbox_runtime::bench_support::engine(runtime), &wasm);

    // Warm: bare.
    let mut store = bare.store();
    let instance = bare.pre.instantiate_async(&mut store).await.unwrap();
    instance.call_init(&mut store).await.unwrap().unwrap();
    for _ in 0..1_000 {
        instance.call_execute(&mut store).await.unwrap().unwrap();
    }
    let started = Instant::now();
    for _ in 0..WARM_RUNS {
        instance.call_execute(&mut store).await.unwrap().unwrap();
    }
    let bare_warm = per_run(started.elapsed(), WARM_RUNS);
    drop(store);
    let mut bare_fresh = Duration::ZERO;

    // Warm: cronbox.
    let module = runtime.load(wasm.clone()).await.unwrap();
    let mut worker = JobWorker::new(runtime, module.clone(), InstanceMode::Warm);
    let request = RunRequest::new(Trigger::manual("bench", 0));
    for _ in 0..1_000 {
        worker.run(request.clone(), &RunHandle::new()).await;
    }
    let started = Instant::now();
    for _ in 0..WARM_RUNS {
        let report = worker.run(request.clone(), &RunHandle::new()).await;
        assert!(report.outcome.is_success());
    }
    let cronbox_warm = per_run(started.elapsed(), WARM_RUNS);
    worker.retire().await;

    // Fresh instance per run: bare. Both sides first warm the pool's slots
    // for their module (the first use of a slot maps its memory).
    for round in 0..2 {
        let started = Instant::now();
        for _ in 0..FRESH_RUNS {
            let mut store = bare.store();
            let instance = bare.pre.instantiate_async(&mut store).await.unwrap();
            instance.call_init(&mut store).await.unwrap().unwrap();
            instance.call_execute(&mut store).await.unwrap().unwrap();
            instance.call_destroy(&mut store).await.unwrap();
        }
        if round == 1 {
            bare_fresh = per_run(started.elapsed(), FRESH_RUNS);
        }
    }

    // Fresh instance per run: cronbox.
    let mut worker = JobWorker::new(runtime, module, InstanceMode::FreshPerRun);
    for _ in 0..FRESH_RUNS {
        worker.run(request.clone(), &RunHandle::new()).await;
    }
    let started = Instant::now();
    for _ in 0..FRESH_RUNS {
        let report = worker.run(request.clone(), &RunHandle::new()).await;
        assert!(report.outcome.is_success());
    }
    let cronbox_fresh = per_run(started.elapsed(), FRESH_RUNS);

    let ratio = |ours: Duration, base: Duration| ours.as_secs_f64() / base.as_secs_f64();
    println!(
        "| {job:<8} | warm execute     | {:>10} | {:>10} | {:>5.2}× |",
        micros(bare_warm),
        micros(cronbox_warm),
        ratio(cronbox_warm, bare_warm)
    );
    println!(
        "| {job:<8} | fresh instance   | {:>10} | {:>10} | {:>5.2}× |",
        micros(bare_fresh),
        micros(cronbox_fresh),
        ratio(cronbox_fresh, bare_fresh)
    );
}

async fn bench_deadline(runtime: &Runtime) {
    const RUNS: usize = 100;
    let timeout = Duration::from_millis(50);
    let module = runtime.load(jobs::bytes("runaway")).await.unwrap();
    let mut worker = JobWorker::new(runtime, module, InstanceMode::Warm);
    let limits = RunLimits {
        timeout,
        ..RunLimits::default()
    };
    let mut late = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let request = RunRequest {
            limits,
            ..RunRequest::new(Trigger::manual("", 0))
        };
        let started = Instant::now();
        let report = worker.run(request, &RunHandle::new()).await;
        let elapsed = started.elapsed();
        assert!(matches!(
            report.outcome,
            cronbox_runtime::Outcome::Timeout { .. }
        ));
        late.push(elapsed.saturating_sub(timeout));
    }
    late.sort();
    println!(
        "| runaway, timeout 50 ms, {RUNS} runs | {:>9} | {:>9} | {:>9} |",
        millis(percentile(&late, 0.50)),
        millis(percentile(&late, 0.99)),
        millis(*late.last().unwrap())
    );
}

async fn bench_cold_start() {
    let dir = tempfile::tempdir().unwrap();
    // The key file outside the cache, as an executor keeps it: without one
    // each runtime signs with a key of its own, and the second finds the
    // first's entries unsigned.
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().join("cache")),
        cache_key_file: Some(dir.path().join("cache.key")),
        ..RuntimeConfig::default()
    };
    for job in jobs::JOBS {
        let wasm = jobs::bytes(job);
        let compiling = Runtime::new(config.clone()).unwrap();
        let compiled = compiling.load(wasm.clone()).await.unwrap();
        drop(compiling);
        let loading = Runtime::new(config.clone()).unwrap();
        let cached = loading.load(wasm.clone()).await.unwrap();
        assert_eq!(cached.cache_status(), cronbox_runtime::CacheStatus::Hit);
        println!(
            "| {job:<11} | {:>4} KiB | {:>9} | {:>9} | {:>6.0}× |",
            wasm.len() / 1024,
            millis(compiled.load_time()),
            millis(cached.load_time()),
            compiled.load_time().as_secs_f64() / cached.load_time().as_secs_f64()
        );
    }
}

fn main() {
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    threads.block_on(async {
        let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
        println!("Per-run cost against bare wasmtime (same engine, same calls)\n");
        println!("| job      | mode             | bare       | cronbox    | ratio  |");
        println!("|----------|------------------|------------|------------|--------|");
        for job in ["hello", "counter"] {
            bench_overhead(&runtime, job).await;
        }
        println!("\nDeadline to stop (lateness past the timeout)\n");
        println!("| case | p50 | p99 | max |");
        println!("|------|-----|-----|-----|");
        bench_deadline(&runtime).await;
        println!("\nCold start: compile vs load from the artifact cache\n");
        println!("| job         | size     | compile   | cached    | ratio   |");
        println!("|-------------|----------|-----------|-----------|---------|");
        bench_cold_start().await;
    });
}
