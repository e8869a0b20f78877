//! Loading modules: refusals with clear messages, and the artifact cache.

use cronbox_example_jobs as jobs;
use cronbox_runtime::{
    CacheStatus, InstanceMode, JobWorker, LoadError, RunHandle, RunRequest, Runtime, RuntimeConfig,
    Trigger,
};
use sha2::Digest as _;

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

async fn refusal(runtime: &Runtime, wasm: Vec<u8>) -> LoadError {
    runtime
        .load(wasm)
        .await
        .expect_err("the module must be refused")
}

#[tokio::test]
async fn random_bytes_are_not_wasm() {
    let noise: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let error = refusal(&runtime(), noise).await;
    assert!(matches!(error, LoadError::NotWasm), "{error:?}");
    assert!(
        error.to_string().contains("not a WebAssembly binary"),
        "{error}"
    );
}

#[tokio::test]
async fn an_empty_file_is_refused() {
    let error = refusal(&runtime(), Vec::new()).await;
    assert_eq!(error.to_string(), "the module is empty (0 bytes)");
}

#[tokio::test]
async fn a_core_module_is_refused_with_advice() {
    let core =
        wat::parse_str(r#"(module (func (export "execute") (result i32) i32.const 0))"#).unwrap();
    let error = refusal(&runtime(), core).await;
    assert!(matches!(error, LoadError::CoreModule), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("core WebAssembly module, not a component"),
        "{error}"
    );
    assert!(error.to_string().contains("wasm32-wasip2"), "{error}");
}

#[tokio::test]
async fn a_truncated_component_is_invalid() {
    let mut hello = jobs::bytes("hello");
    hello.truncate(hello.len() / 2);
    let error = refusal(&runtime(), hello).await;
    assert!(matches!(error, LoadError::Invalid(_)), "{error:?}");
    assert!(
        error.to_string().starts_with("invalid component:"),
        "{error}"
    );
}

#[tokio::test]
async fn a_component_for_another_world_is_refused() {
    let error = refusal(&runtime(), jobs::bytes("wrong-world")).await;
    let message = error.to_string();
    assert!(matches!(error, LoadError::WrongWorld { .. }), "{error:?}");
    assert!(
        message.contains("not a component for world cronbox:job/job"),
        "{message}"
    );
    assert!(message.contains("`init`"), "{message}");
    assert!(message.contains("its exports: greet"), "{message}");
}

/// Loads `fixture` and checks it is refused for importing `interface`,
/// named in the message.
async fn assert_refused_import(fixture: &str, interface: &str) {
    let error = refusal(&runtime(), jobs::bytes(fixture)).await;
    match &error {
        LoadError::ForbiddenImport { imports } => {
            assert!(
                imports.iter().any(|i| i.starts_with(interface)),
                "{imports:?}"
            )
        }
        other => panic!("expected a forbidden import, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains("which cronbox does not grant"),
        "{message}"
    );
    assert!(message.contains(&format!("`{interface}")), "{message}");
}

#[tokio::test]
async fn an_import_cronbox_does_not_link_is_refused_by_name() {
    assert_refused_import("foreign-import", "acme:vault/keys").await;
}

/// The imports and exports are checked before any compilation: with a
/// compiler that cannot even start, a component for the wrong world or
/// with an unknown import is still refused for what it is.
#[tokio::test]
async fn imports_and_exports_are_refused_before_compiling() {
    let runtime = Runtime::new(RuntimeConfig {
        compiler: cronbox_runtime::Compiler::Subprocess(cronbox_runtime::CompilerProcess {
            program: "/nonexistent/cronbox-compiler".into(),
            args: Vec::new(),
            cpu: std::time::Duration::from_secs(5),
            timeout: std::time::Duration::from_secs(5),
            memory_bytes: 1 << 30,
        }),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let error = refusal(&runtime, jobs::bytes("foreign-import")).await;
    assert!(
        matches!(error, LoadError::ForbiddenImport { .. }),
        "{error:?}"
    );
    let error = refusal(&runtime, jobs::bytes("wrong-world")).await;
    assert!(matches!(error, LoadError::WrongWorld { .. }), "{error:?}");
    // A good component does reach the compiler, which cannot start.
    let error = refusal(&runtime, jobs::bytes("hello")).await;
    assert!(
        !matches!(
            error,
            LoadError::ForbiddenImport { .. } | LoadError::WrongWorld { .. }
        ),
        "{error:?}"
    );
}

/// A component importing the filesystem or sockets loads, and says so:
/// the module lists those imports, and nothing else.
#[tokio::test]
async fn a_module_lists_the_imports_that_link_but_grant_nothing() {
    let runtime = runtime();
    let fs = runtime.load(jobs::bytes("fs-snooper")).await.unwrap();
    assert!(
        fs.denied_imports()
            .iter()
            .any(|import| import.starts_with("wasi:filesystem/preopens")),
        "{:?}",
        fs.denied_imports()
    );
    let net = runtime.load(jobs::bytes("net-snooper")).await.unwrap();
    assert!(
        net.denied_imports()
            .iter()
            .any(|import| import.starts_with("wasi:sockets/tcp")),
        "{:?}",
        net.denied_imports()
    );
    let hello = runtime.load(jobs::bytes("hello")).await.unwrap();
    assert_eq!(hello.denied_imports(), &[] as &[String]);
}

#[tokio::test]
async fn an_oversized_module_is_refused_before_compiling() {
    let runtime = Runtime::new(RuntimeConfig {
        max_module_bytes: 1024,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let error = refusal(&runtime, jobs::bytes("hello")).await;
    assert!(
        matches!(error, LoadError::TooLarge { limit: 1024, .. }),
        "{error:?}"
    );
}

/// A component that would create more core instances or memories than a
/// job's share of the pool is refused before compiling, naming the count
/// and the limit; at the limits it loads and runs.
#[tokio::test]
async fn more_core_instances_or_memories_than_a_job_may_have_are_refused() {
    use cronbox_tests::hostile;
    let runtime = runtime();
    let max = cronbox_component_check::MAX_CORE_INSTANCES;
    for (wasm, what, count, limit) in [
        (
            hostile::many_core_instances(max + 1),
            "core instances",
            max + 1,
            max,
        ),
        (
            hostile::many_core_instances(1000),
            "core instances",
            1000,
            max,
        ),
        (hostile::many_memories(2, 1), "linear memories", 3, 2),
    ] {
        let error = refusal(&runtime, wasm).await;
        assert!(matches!(error, LoadError::OverLimit { .. }), "{error:?}");
        assert_eq!(
            error.to_string(),
            format!("the component has {count} {what}, over the limit of {limit} for a job")
        );
    }
    for wasm in [
        hostile::many_core_instances(max),
        hostile::many_memories(1, 1),
    ] {
        let module = runtime.load(wasm).await.expect("at the limits it loads");
        let mut worker = JobWorker::new(&runtime, module, InstanceMode::Warm);
        let report = worker
            .run(RunRequest::new(Trigger::manual("", 0)), &RunHandle::new())
            .await;
        assert!(report.outcome.is_success(), "{:?}", report.outcome);
    }
}

#[tokio::test]
async fn every_example_job_loads() {
    let runtime = runtime();
    for name in jobs::JOBS {
        let module = runtime.load(jobs::bytes(name)).await;
        assert!(module.is_ok(), "{name}: {module:?}");
    }
}

fn cached_runtime(dir: &std::path::Path) -> Runtime {
    cached_runtime_with_key(dir, "cache.key")
}

fn cached_runtime_with_key(dir: &std::path::Path, key_file: &str) -> Runtime {
    Runtime::new(RuntimeConfig {
        cache_dir: Some(dir.join("artifacts")),
        cache_key_file: Some(dir.join(key_file)),
        ..RuntimeConfig::default()
    })
    .expect("runtime with a disk cache")
}

/// An entry signed with another key — or with none, as anyone who can
/// write the cache directory could make — is recompiled, never loaded.
#[tokio::test]
async fn a_cache_entry_not_signed_with_the_executors_key_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = cached_runtime(dir.path());
    let module = runtime.load(jobs::bytes("hello")).await.unwrap();
    let path = runtime.artifact_path(module.digest()).unwrap();
    // Another key: the same file does not verify.
    let other = cached_runtime_with_key(dir.path(), "other.key");
    let reloaded = other.load(jobs::bytes("hello")).await.unwrap();
    assert_eq!(reloaded.cache_status(), CacheStatus::Repaired);
    // A forger's entry: the artifact behind a plain sha256.
    let file = std::fs::read(&path).unwrap();
    let artifact = &file[32..];
    let mut forged = sha2::Sha256::digest(artifact).to_vec();
    forged.extend_from_slice(artifact);
    std::fs::write(&path, forged).unwrap();
    let reloaded = runtime.load(jobs::bytes("hello")).await.unwrap();
    assert_eq!(reloaded.cache_status(), CacheStatus::Repaired);
}

#[tokio::test]
async fn the_artifact_cache_is_hit_on_the_second_load_and_survives_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let first = cached_runtime(dir.path())
        .load(jobs::bytes("hello"))
        .await
        .unwrap();
    assert_eq!(first.cache_status(), CacheStatus::Miss);
    // Age the entry: a hit renews its time, so that the disk bound
    // deletes the least recently *used* artifacts first.
    let entry = std::fs::read_dir(dir.path().join("artifacts"))
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .expect("an artifact was written");
    let long_ago = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    std::fs::File::options()
        .append(true)
        .open(&entry)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    // A new runtime (as after a restart) finds the artifact on disk.
    let runtime = cached_runtime(dir.path());
    let second = runtime.load(jobs::bytes("hello")).await.unwrap();
    assert_eq!(second.cache_status(), CacheStatus::Hit);
    let used = std::fs::metadata(&entry).unwrap().modified().unwrap();
    assert!(used > long_ago, "the hit renewed the entry's time");
    assert_eq!(first.digest(), second.digest());
    let mut worker = JobWorker::new(&runtime, second, InstanceMode::Warm);
    let report = worker
        .run(
            RunRequest::new(Trigger::manual("cached", 0)),
            &RunHandle::new(),
        )
        .await;
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
}

#[tokio::test]
async fn a_corrupted_cache_entry_is_recompiled_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = cached_runtime(dir.path());
    let module = runtime.load(jobs::bytes("counter")).await.unwrap();
    let path = runtime
        .artifact_path(module.digest())
        .expect("disk cache on");
    let mut artifact = std::fs::read(&path).unwrap();
    let middle = artifact.len() / 2;
    for byte in &mut artifact[middle..middle + 64] {
        *byte ^= 0xFF;
    }
    std::fs::write(&path, &artifact).unwrap();

    let repaired = runtime.load(jobs::bytes("counter")).await.unwrap();
    assert_eq!(repaired.cache_status(), CacheStatus::Repaired);
    let mut worker = JobWorker::new(&runtime, repaired, InstanceMode::Warm);
    let report = worker
        .run(RunRequest::new(Trigger::manual("", 0)), &RunHandle::new())
        .await;
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
    // The entry was rewritten and is trusted again.
    assert_eq!(
        runtime
            .load(jobs::bytes("counter"))
            .await
            .unwrap()
            .cache_status(),
        CacheStatus::Hit
    );

    // A truncated file is no better than a damaged one.
    std::fs::write(&path, &artifact[..10]).unwrap();
    assert_eq!(
        runtime
            .load(jobs::bytes("counter"))
            .await
            .unwrap()
            .cache_status(),
        CacheStatus::Repaired
    );
}

/// A job component with bytes flipped, seeded: the loader refuses it with
/// a typed error, or loads it and a run of it ends in an outcome; nothing
/// panics or hangs the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_with_flipped_bytes_are_refused_or_run_to_an_outcome() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_cb0c);
    let runtime = runtime();
    let hello = jobs::bytes("hello");
    let (mut loaded, mut refused) = (0, 0);
    for _ in 0..40 {
        let mut mutated = hello.clone();
        for _ in 0..rng.random_range(1..=4) {
            let at = rng.random_range(0..mutated.len());
            mutated[at] ^= rng.random_range(1..=255_u8);
        }
        match runtime.load(mutated).await {
            Err(error) => {
                refused += 1;
                assert!(!error.to_string().is_empty());
            }
            Ok(module) => {
                loaded += 1;
                let mut worker = JobWorker::new(&runtime, module, InstanceMode::FreshPerRun);
                let limits = cronbox_runtime::RunLimits {
                    timeout: std::time::Duration::from_secs(5),
                    ..Default::default()
                };
                let request = RunRequest {
                    limits,
                    ..RunRequest::new(Trigger::manual("flipped", 0))
                };
                // Any outcome will do; ending in one is the point.
                let _ = worker.run(request, &RunHandle::new()).await.outcome;
            }
        }
    }
    assert_eq!(loaded + refused, 40);
    assert!(refused > 0, "some flips must be refused");
}
