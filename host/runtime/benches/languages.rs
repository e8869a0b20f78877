//! The same job in Rust, Python and JavaScript, side by side. Prints a
//! table; figures go into BENCHMARKS.md.
//!
//!     cargo bench -p cronbox-runtime --bench languages
//!
//! Per language, for the `counter` example: component size; build time
//! (componentize-py and componentize-js from the sources into a temporary
//! directory with the pinned tools in `target/tools`; Rust: `cargo build
//! --release` of the crate alone, its dependencies built); compile time (Cranelift, no cache); cached load (the
//! artifact from the disk cache); a fresh instance + init + execute; a
//! warm execute; peak guest memory. Then the first run after a new
//! version reaches an executor: without compile-ahead it waits for the
//! compilation (compile + fresh run), with it the artifact is ready
//! (cached load + fresh run).

#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::path::Path;
use std::time::{Duration, Instant};

use cronbox_example_jobs as jobs;
use cronbox_language_jobs as languages;
use cronbox_runtime::{
    InstanceMode, JobWorker, RunHandle, RunRequest, Runtime, RuntimeConfig, Trigger,
};

fn millis(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1e3)
}

fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

/// How long building the `counter` of `language` takes, from its sources.
fn build_time(language: &str, out: &Path) -> Duration {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tools = cronbox_guest_build::Tools::new(languages::dir().parent().unwrap().join("tools"));
    let wit = root.join("wit");
    let output = out.join(format!("{language}.wasm"));
    let started = Instant::now();
    match language {
        "python" => cronbox_guest_build::build_python(
            &tools,
            &root.join("example-jobs/python/counter"),
            &root.join("guest-sdk/python"),
            &wit,
            &output,
        )
        .unwrap(),
        "js" => cronbox_guest_build::build_js(
            &tools,
            &root.join("example-jobs/js/counter/job.js"),
            &root,
            &wit,
            &output,
        )
        .unwrap(),
        _ => {
            // The crate alone, its dependencies built already (as CPython
            // and StarlingMonkey come prebuilt with their tools): touched,
            // then rebuilt in the example workspace's own target.
            let source = root.join("example-jobs/counter/src/lib.rs");
            let text = std::fs::read(&source).unwrap();
            std::fs::write(&source, text).unwrap();
            let target = jobs::dir().ancestors().nth(2).unwrap().to_owned();
            let started = Instant::now();
            let status = std::process::Command::new("cargo")
                .args([
                    "build",
                    "--release",
                    "--target",
                    "wasm32-wasip2",
                    "-p",
                    "counter",
                ])
                .current_dir(root.join("example-jobs"))
                .env("CARGO_TARGET_DIR", target)
                .env_remove("RUSTFLAGS")
                .env_remove("CARGO_ENCODED_RUSTFLAGS")
                .status()
                .unwrap();
            assert!(status.success());
            return started.elapsed();
        }
    }
    started.elapsed()
}

async fn fresh_run(runtime: &Runtime, module: cronbox_runtime::JobModule) -> (Duration, u64) {
    let mut worker = JobWorker::new(runtime, module, InstanceMode::FreshPerRun);
    let started = Instant::now();
    let report = worker
        .run(RunRequest::new(Trigger::manual("", 0)), &RunHandle::new())
        .await;
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
    (started.elapsed(), report.peak_memory_bytes)
}

async fn warm_execute(runtime: &Runtime, module: cronbox_runtime::JobModule) -> Duration {
    let mut worker = JobWorker::new(runtime, module, InstanceMode::Warm);
    let handle = RunHandle::new();
    for _ in 0..20 {
        worker
            .run(RunRequest::new(Trigger::manual("", 0)), &handle)
            .await;
    }
    let runs = 2_000;
    let started = Instant::now();
    for _ in 0..runs {
        let report = worker
            .run(RunRequest::new(Trigger::manual("", 0)), &RunHandle::new())
            .await;
        assert!(report.outcome.is_success(), "{:?}", report.outcome);
    }
    started.elapsed() / runs
}

fn main() {
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    println!(
        "| language | size | build | compile | cached load | fresh instance + init + execute | warm execute | peak memory | first run after a push: without / with compile-ahead |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (language, wasm) in [
        ("rust", jobs::bytes("counter")),
        ("python", languages::bytes("python-counter")),
        ("js", languages::bytes("js-counter")),
    ] {
        let built = build_time(language, scratch.path());
        threads.block_on(async {
            let cache = tempfile::tempdir().unwrap();
            let config = RuntimeConfig {
                cache_dir: Some(cache.path().to_path_buf()),
                cache_key_file: Some(cache.path().join("cache.key")),
                ..RuntimeConfig::default()
            };
            let compiling = Runtime::new(config.clone()).unwrap();
            let compiled = compiling.load(wasm.clone()).await.unwrap();
            let compile = compiled.load_time();
            let (cold_run, _) = fresh_run(&compiling, compiled).await;
            drop(compiling);
            let runtime = Runtime::new(config).unwrap();
            let cached = runtime.load(wasm.clone()).await.unwrap();
            assert_eq!(cached.cache_status(), cronbox_runtime::CacheStatus::Hit);
            let cached_load = cached.load_time();
            // The best of a few fresh runs (the first pays page faults).
            let mut fresh = Duration::MAX;
            let mut peak = 0;
            for _ in 0..5 {
                let (took, memory) = fresh_run(&runtime, cached.clone()).await;
                fresh = fresh.min(took);
                peak = peak.max(memory);
            }
            let warm = warm_execute(&runtime, cached).await;
            println!(
                "| {language} | {:.1} MB | {:.1} s | {} | {} | {} | {} | {:.1} MiB | {} / {} |",
                wasm.len() as f64 / 1e6,
                built.as_secs_f64(),
                millis(compile),
                millis(cached_load),
                millis(fresh),
                micros(warm),
                peak as f64 / (1 << 20) as f64,
                millis(compile + cold_run),
                millis(cached_load + fresh),
            );
        });
    }
}
