//! Modules and instances: idle workers, hot swaps, load failures, disk
//! caches, tenants' slot shares and quotas, compiling ahead.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_retires_and_calls_destroy() {
    let f = fixture_with(|config| config.idle_retire = Duration::from_millis(300)).await;
    let digest = f.admin.add_module(jobs::bytes("counter"));
    for run_id in 1..=2 {
        assert!(f.run(&command(9, run_id, &digest, "")).await.accepted);
        f.admin.result_of(run_id, WAIT).await;
    }
    // The stand-in admin commits no state: the second run's snapshot
    // misses the first run's change, which the executor lays over it.
    assert_eq!(
        f.admin.result_of(2, WAIT).await.outcome,
        Outcome::Success {
            message: "count=2 instance_runs=2".into()
        },
        "the warm instance served both runs"
    );
    until("the idle instance retires", || async {
        f.metrics()
            .await
            .contains("cronbox_executor_instances_retired_total 1")
            .then_some(())
    })
    .await;
    assert!(f.run(&command(9, 3, &digest, "")).await.accepted);
    assert_eq!(
        f.admin.result_of(3, WAIT).await.outcome,
        Outcome::Success {
            message: "count=1 instance_runs=1".into()
        },
        "a new instance after retirement"
    );
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_swap_between_versions_loses_no_run() {
    let f = fixture().await;
    let v1 = f.admin.add_module(jobs::bytes("hello"));
    let v2 = f.admin.add_module(jobs::bytes("sharded"));
    let mut sent = Vec::new();
    for run_id in 1..=30u64 {
        let version = if (run_id / 5) % 2 == 0 { &v1 } else { &v2 };
        assert!(f.run(&command(10, run_id, version, "swap")).await.accepted);
        sent.push((run_id, version.clone()));
        // Every third run is awaited, so that versions swap both under
        // queued runs and after finished ones.
        if run_id % 3 == 0 {
            f.admin.result_of(run_id, WAIT).await;
        }
    }
    let results = f.admin.wait_for_results(30, WAIT).await;
    for (run_id, version) in sent {
        let result = results
            .iter()
            .find(|r| r.run_id == run_id)
            .expect("every run reported");
        assert_eq!(
            result.module_digest, version,
            "run {run_id} ran the version it was sent"
        );
        let expected = if version == v1 {
            "hello, swap"
        } else {
            "shard 0/1"
        };
        assert_eq!(
            result.outcome,
            Outcome::Success {
                message: expected.into()
            }
        );
    }
    assert_eq!(results.len(), 30);
    f.executor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_that_cannot_load_is_rejected_by_callback() {
    let f = fixture().await;
    let missing = "0".repeat(64);
    assert!(f.run(&command(13, 1, &missing, "")).await.accepted);
    let result = f.admin.result_of(1, WAIT).await;
    match result.outcome {
        Outcome::Rejected { reason } => assert!(reason.contains("cannot fetch module"), "{reason}"),
        other => panic!("expected rejected, got {other:?}"),
    }
    let refused = f.admin.add_module(jobs::bytes("foreign-import"));
    for run in 2..=4 {
        assert!(f.run(&command(13, run, &refused, "")).await.accepted);
        match f.admin.result_of(run, WAIT).await.outcome {
            Outcome::Rejected { reason } => {
                assert!(reason.contains("acme:vault/keys"), "{reason}")
            }
            other => panic!("expected rejected, got {other:?}"),
        }
    }
    // Loaded (and refused) once; the later triggers reused the refusal.
    let metrics = f.metrics().await;
    assert!(
        metrics.contains("cronbox_executor_module_load_failures_total 1\n"),
        "{metrics}"
    );
    f.executor.shutdown().await;
}

/// What an executor keeps of modules is bounded: past `max_loaded_modules`
/// the least recently used leaves memory, and then its files leave the disk
/// caches when they are over their bound; it runs again by fetching and
/// compiling anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn module_caches_stay_within_their_bounds() {
    let mut data_dir = std::path::PathBuf::new();
    let f = fixture_with(|config| {
        config.max_loaded_modules = 1;
        config.disk_cache_bytes = 1; // nothing beyond the loaded module
        data_dir = config.data_dir.clone();
    })
    .await;
    let files_of = |digest: &str| files_of(&data_dir, digest);
    let hello = f.admin.add_module(jobs::bytes("hello"));
    let counter = f.admin.add_module(jobs::bytes("counter"));
    f.run(&command(1, 1, &hello, "a")).await;
    assert!(f.admin.result_of(1, WAIT).await.outcome.is_success());
    assert_eq!(files_of(&hello), 2, "module and artifact kept while loaded");

    f.run(&command(2, 2, &counter, "")).await;
    assert!(f.admin.result_of(2, WAIT).await.outcome.is_success());
    assert_eq!(files_of(&counter), 2);
    assert_eq!(
        files_of(&hello),
        0,
        "no longer loaded, over the bound: gone"
    );

    // Another job of the same module: fetched and compiled again.
    f.run(&command(3, 3, &hello, "again")).await;
    let again = f.admin.result_of(3, WAIT).await;
    assert!(again.outcome.is_success(), "{:?}", again.outcome);
    assert_eq!((files_of(&hello), files_of(&counter)), (2, 0));
    // The compiled functions kept beside the artifacts count towards the
    // bound too: none is left, and each went into the count with the
    // modules' and artifacts' four files.
    let functions = walkdir_files(&data_dir.join("artifacts/functions"));
    assert_eq!(functions, 0, "compiled functions over the bound: gone");
    let metrics = f.metrics().await;
    let trimmed: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("cronbox_executor_disk_cache_trimmed_files_total "))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_default();
    assert!(trimmed > 4 + 50, "{trimmed} files trimmed: {metrics}");
    f.executor.shutdown().await;
}

/// A bound lowered by a restart holds from the next module written: a
/// load that reads its module and artifact back writes nothing and walks
/// nothing, the next one that fetches and compiles trims the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_disk_bound_holds_from_the_next_module_written() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_path_buf();
    let first = fixture_with(|config| config.data_dir = data_dir.clone()).await;
    let hello = first.admin.add_module(jobs::bytes("hello"));
    let counter = first.admin.add_module(jobs::bytes("counter"));
    for (run, digest) in [(1, &hello), (2, &counter)] {
        first.run(&command(run, run, digest, "a")).await;
        assert!(first.admin.result_of(run, WAIT).await.outcome.is_success());
    }
    first.executor.shutdown().await;
    let files = |digest: &str| files_of(&data_dir, digest);
    assert_eq!((files(&hello), files(&counter)), (2, 2));

    let second = fixture_with(|config| {
        config.data_dir = data_dir.clone();
        config.disk_cache_bytes = 1; // nothing beyond the loaded module
    })
    .await;
    // On disk: read back (this admin has no module to send), nothing
    // written, nothing trimmed.
    second.run(&command(3, 3, &hello, "a")).await;
    assert!(second.admin.result_of(3, WAIT).await.outcome.is_success());
    assert_eq!((files(&hello), files(&counter)), (2, 2));
    // A new module, fetched and compiled: the caches are trimmed to the
    // loaded modules' files.
    let sleeper = second.admin.add_module(jobs::bytes("sleeper"));
    second.run(&command(4, 4, &sleeper, "1")).await;
    assert!(second.admin.result_of(4, WAIT).await.outcome.is_success());
    assert_eq!(
        (files(&hello), files(&counter), files(&sleeper)),
        (2, 0, 2),
        "the loaded modules' files kept, the other's gone"
    );
    second.executor.shutdown().await;
}

/// No tenant fills every instance slot: with four slots a tenant runs at
/// most three at once, so another tenant's run starts at once instead of
/// waiting behind it; the tenant's fourth run waits for its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_gets_a_share_of_the_slots_not_all_of_them() {
    let f = fixture_with(|config| config.runtime.max_instances = 4).await;
    let sleeper = f.admin.add_module(jobs::bytes("sleeper"));
    let hello = f.admin.add_module(jobs::bytes("hello"));
    let of_tenant = |tenant: &str, mut command: RunCommand| {
        command.tenant = tenant.to_owned();
        command
    };
    for job in 1..=4 {
        let busy = of_tenant("busy", command(job, job, &sleeper, "60000"));
        assert!(f.run(&busy).await.accepted);
    }
    // Three of the four start sleeping; the fourth waits for a share.
    let waiting = cronbox_tests::until("three busy runs sleep", || async {
        let mut waiting = Vec::new();
        for run in 1..=4 {
            if !f.has_logged(run, "sleeping 60000 ms").await {
                waiting.push(run);
            }
        }
        (waiting.len() == 1).then(|| waiting[0])
    })
    .await;
    let other = of_tenant("other", command(9, 9, &hello, "other"));
    assert!(f.run(&other).await.accepted);
    let result = f.admin.result_of(9, WAIT).await;
    assert!(result.outcome.is_success(), "{:?}", result.outcome);

    // Stopped now (the waiting one first, or it would take a freed share),
    // the busy tenant's three ran and its fourth never began.
    let mut order = vec![waiting];
    order.extend((1..=4).filter(|run| *run != waiting));
    for job in order {
        f.post(executor_paths::KILL, &KillCommand::Job { job_id: job })
            .await;
    }
    let mut started = 0;
    for run in 1..=4 {
        let result = f.admin.result_of(run, WAIT).await;
        assert_eq!(result.outcome, Outcome::Killed, "run {run}");
        let slept = result
            .log
            .iter()
            .any(|line| line.text == "sleeping 60000 ms");
        assert_eq!(slept, run != waiting, "run {run}");
        if slept {
            started += 1;
        }
    }
    assert_eq!(started, 3, "three of four slots for one tenant");
    f.executor.shutdown().await;
}

/// A tenant's quota of instances, sent with each of its runs, caps it below
/// its share of the slots; a larger quota sent later lets more start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_instance_quota_caps_its_runs_on_an_executor() {
    let f = fixture_with(|config| config.runtime.max_instances = 8).await;
    let sleeper = f.admin.add_module(jobs::bytes("sleeper"));
    let capped = |job: u64, quota: u32| RunCommand {
        tenant: "capped".to_owned(),
        tenant_max_instances: Some(quota),
        ..command(job, job, &sleeper, "60000")
    };
    let sleeping = |runs: std::ops::RangeInclusive<u64>| {
        let f = &f;
        async move {
            let mut sleeping = Vec::new();
            for run in runs {
                if f.has_logged(run, "sleeping 60000 ms").await {
                    sleeping.push(run);
                }
            }
            sleeping
        }
    };
    for job in 1..=2 {
        assert!(f.run(&capped(job, 1)).await.accepted);
    }
    let running = cronbox_tests::until("one capped run sleeps", || async {
        let sleeping = sleeping(1..=2).await;
        (sleeping.len() == 1).then(|| sleeping[0])
    })
    .await;
    let waiting = 3 - running;
    // Stopped while it waits, it never began.
    f.post(executor_paths::KILL, &KillCommand::Job { job_id: waiting })
        .await;
    let result = f.admin.result_of(waiting, WAIT).await;
    assert_eq!(result.outcome, Outcome::Killed);
    assert!(
        !result
            .log
            .iter()
            .any(|line| line.text == "sleeping 60000 ms"),
        "run {waiting} waited for the tenant's one instance: {:?}",
        result.log
    );

    // A quota of three, sent with the next runs: both start beside the
    // first.
    for job in 3..=4 {
        assert!(f.run(&capped(job, 3)).await.accepted);
    }
    cronbox_tests::until("three capped runs sleep", || async {
        (sleeping(3..=4).await.len() == 2).then_some(())
    })
    .await;
    for job in [running, 3, 4] {
        f.post(executor_paths::KILL, &KillCommand::Job { job_id: job })
            .await;
        let result = f.admin.result_of(job, WAIT).await;
        assert_eq!(result.outcome, Outcome::Killed, "run {job}");
    }
    f.executor.shutdown().await;
}

/// `prepare` fetches and compiles a module ahead of its runs and says
/// whether it is ready: a module the admin has is, an unknown digest or a
/// malformed one is not, with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_compiles_a_module_ahead_and_names_what_failed() {
    use cronbox_protocol::PrepareResponse;
    let f = fixture().await;
    let digest = f.admin.add_module(jobs::bytes("hello"));
    let prepare = |digest: String| {
        let f = &f;
        async move {
            f.post(executor_paths::PREPARE, &json!({ "module_digest": digest }))
                .await
                .json::<PrepareResponse>()
                .await
                .unwrap()
        }
    };
    let ready = prepare(digest.clone()).await;
    assert!(ready.ready && ready.error.is_none(), "{ready:?}");
    let unknown = prepare("e".repeat(64)).await;
    assert!(!unknown.ready, "{unknown:?}");
    assert!(
        unknown
            .error
            .as_deref()
            .unwrap()
            .contains("cannot fetch module"),
        "{unknown:?}"
    );
    let malformed = prepare("not-a-digest".to_owned()).await;
    assert!(
        malformed
            .error
            .as_deref()
            .unwrap()
            .contains("module_digest"),
        "{malformed:?}"
    );
    let response = f.run(&command(1, 1, &digest, "prepared")).await;
    assert!(response.accepted);
    let result = f.admin.result_of(1, WAIT).await;
    assert_eq!(
        result.outcome,
        Outcome::Success {
            message: "hello, prepared".into()
        }
    );
    f.executor.shutdown().await;
}

/// Files under `dir` and its subdirectories (none when it is missing).
/// The files of `digest` in the caches of the executor with data
/// directory `data_dir`: its module and artifact (not the empty lock file
/// an artifact is compiled under).
fn files_of(data_dir: &std::path::Path, digest: &str) -> usize {
    ["modules", "artifacts"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(data_dir.join(dir)).ok())
        .flatten()
        .filter(|entry| {
            entry.as_ref().is_ok_and(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.starts_with(digest) && !name.ends_with(".lock")
            })
        })
        .count()
}

fn walkdir_files(dir: &std::path::Path) -> usize {
    let mut dirs = vec![dir.to_owned()];
    let mut files = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                dirs.push(entry.path());
            } else {
                files += 1;
            }
        }
    }
    files
}
