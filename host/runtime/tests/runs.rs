//! Every outcome of the runtime, produced by the real example jobs built
//! from `example-jobs/`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cronbox_example_jobs as jobs;
use cronbox_runtime::{
    InstanceMode, JobWorker, LogSource, Outcome, RunHandle, RunLimits, RunRequest, Runtime,
    RuntimeConfig, Trigger,
};

fn runtime() -> Runtime {
    Runtime::new(RuntimeConfig::default()).expect("runtime")
}

async fn worker(runtime: &Runtime, job: &str) -> JobWorker {
    let module = runtime
        .load(jobs::bytes(job))
        .await
        .expect("example job loads");
    JobWorker::new(runtime, module, InstanceMode::Warm)
}

fn request(param: &str) -> RunRequest {
    RunRequest::new(Trigger::manual(param, 0))
}

fn with_limits(param: &str, limits: RunLimits) -> RunRequest {
    RunRequest {
        limits,
        ..request(param)
    }
}

#[tokio::test]
async fn hello_succeeds_echoes_its_param_and_logs() {
    let runtime = runtime();
    let mut hello = worker(&runtime, "hello").await;
    let report = hello.run(request("world"), &RunHandle::new()).await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "hello, world".into()
        }
    );
    assert_eq!(report.outcome.code(), 200);
    assert!(report.new_instance);
    let lines: Vec<_> = report
        .log
        .iter()
        .map(|l| (l.source, l.text.as_str()))
        .collect();
    assert_eq!(
        lines,
        vec![(
            LogSource::Guest(cronbox_runtime::LogLevel::Info),
            "hello, world"
        )]
    );
    assert!(report.fuel_consumed.is_some_and(|fuel| fuel > 0));
    assert!(report.peak_memory_bytes > 0);
    // The second run reuses the warm instance.
    let again = hello.run(request("again"), &RunHandle::new()).await;
    assert!(!again.new_instance);
    assert_eq!(
        again.outcome,
        Outcome::Success {
            message: "hello, again".into()
        }
    );
}

#[tokio::test]
async fn an_error_result_is_a_failed_run_and_keeps_the_instance() {
    let runtime = runtime();
    let mut burner = worker(&runtime, "fuel-burner").await;
    let report = burner.run(request("abc"), &RunHandle::new()).await;
    match &report.outcome {
        Outcome::Failed { message } => {
            assert!(
                message.contains("param must be a number of rounds"),
                "{message}"
            )
        }
        other => panic!("expected failed, got {other:?}"),
    }
    assert_eq!(report.outcome.code(), 500);
    assert!(burner.is_warm(), "a guest-reported failure is not a trap");
}

#[tokio::test]
async fn runaway_times_out_on_time_and_the_runtime_carries_on() {
    let runtime = runtime();
    let mut runaway = worker(&runtime, "runaway").await;
    let limits = RunLimits {
        timeout: Duration::from_millis(200),
        ..RunLimits::default()
    };
    let started = Instant::now();
    let report = runaway
        .run(with_limits("", limits), &RunHandle::new())
        .await;
    let elapsed = started.elapsed();
    assert_eq!(report.outcome, Outcome::Timeout { timeout_ms: 200 });
    assert_eq!(report.outcome.code(), 502);
    assert!(
        elapsed < Duration::from_millis(250),
        "stopped {elapsed:?} after the start, deadline 200 ms"
    );
    assert!(!runaway.is_warm(), "a timed-out instance is dropped");
    assert!(report.log.iter().any(|l| l.text == "spinning forever"));

    // The same process runs the next job normally.
    let mut hello = worker(&runtime, "hello").await;
    let next = hello.run(request("after"), &RunHandle::new()).await;
    assert!(next.outcome.is_success(), "{:?}", next.outcome);
}

async fn kill_after(handle: RunHandle, delay: Duration) -> Instant {
    tokio::time::sleep(delay).await;
    let at = Instant::now();
    handle.kill();
    at
}

#[tokio::test]
async fn kill_stops_runaway_mid_loop() {
    let runtime = runtime();
    let mut runaway = worker(&runtime, "runaway").await;
    let handle = RunHandle::new();
    let killer = tokio::spawn(kill_after(handle.clone(), Duration::from_millis(150)));
    let report = runaway.run(request(""), &handle).await;
    let stopped = Instant::now();
    let killed_at = killer.await.unwrap();
    assert_eq!(report.outcome, Outcome::Killed);
    let latency = stopped - killed_at;
    assert!(latency < Duration::from_millis(50), "kill took {latency:?}");
    assert!(report.duration >= Duration::from_millis(150));
}

#[tokio::test]
async fn kill_stops_sleeper_blocked_in_a_host_call() {
    let runtime = runtime();
    let mut sleeper = worker(&runtime, "sleeper").await;
    let handle = RunHandle::new();
    let killer = tokio::spawn(kill_after(handle.clone(), Duration::from_millis(150)));
    let report = sleeper.run(request("60000"), &handle).await;
    let stopped = Instant::now();
    let killed_at = killer.await.unwrap();
    assert_eq!(report.outcome, Outcome::Killed);
    assert!(stopped - killed_at < Duration::from_millis(50));
    assert!(report.log.iter().any(|l| l.text == "sleeping 60000 ms"));
}

#[tokio::test]
async fn sleeper_wakes_up_on_its_own_and_times_out_when_too_slow() {
    let runtime = runtime();
    let mut sleeper = worker(&runtime, "sleeper").await;
    let report = sleeper.run(request("50"), &RunHandle::new()).await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "slept 50 ms".into()
        }
    );
    let limits = RunLimits {
        timeout: Duration::from_millis(100),
        ..RunLimits::default()
    };
    let report = sleeper
        .run(with_limits("10000", limits), &RunHandle::new())
        .await;
    assert_eq!(report.outcome, Outcome::Timeout { timeout_ms: 100 });
    assert!(
        report.duration < Duration::from_millis(150),
        "{:?}",
        report.duration
    );
}

#[tokio::test]
async fn a_run_killed_before_it_starts_never_runs() {
    let runtime = runtime();
    let mut hello = worker(&runtime, "hello").await;
    let handle = RunHandle::new();
    handle.cover();
    let report = hello.run(request("x"), &handle).await;
    assert_eq!(report.outcome, Outcome::Covered);
    assert!(report.log.is_empty());
    assert!(!report.new_instance);
}

#[tokio::test]
async fn memory_hog_hits_the_memory_limit() {
    let runtime = runtime();
    let mut hog = worker(&runtime, "memory-hog").await;
    let limits = RunLimits {
        memory_bytes: 32 << 20,
        ..RunLimits::default()
    };
    let report = hog.run(with_limits("", limits), &RunHandle::new()).await;
    assert_eq!(
        report.outcome,
        Outcome::MemoryLimit {
            limit_bytes: 32 << 20
        }
    );
    assert!(report.peak_memory_bytes <= 32 << 20);
    assert!(
        report.peak_memory_bytes >= 16 << 20,
        "{}",
        report.peak_memory_bytes
    );
    assert!(report.log.iter().any(|l| l.text == "holding 16 MiB"));
    assert!(!hog.is_warm());
}

#[tokio::test]
async fn fuel_burner_runs_out_with_a_small_budget_and_succeeds_with_a_large_one() {
    let runtime = runtime();
    let mut burner = worker(&runtime, "fuel-burner").await;
    let small = RunLimits {
        fuel: Some(100_000),
        ..RunLimits::default()
    };
    let report = burner
        .run(with_limits("10000000", small), &RunHandle::new())
        .await;
    assert_eq!(report.outcome, Outcome::OutOfFuel { fuel: 100_000 });
    assert_eq!(report.fuel_consumed, Some(100_000));

    let large = RunLimits {
        fuel: Some(10_000_000_000),
        ..RunLimits::default()
    };
    let first = burner
        .run(with_limits("10000000", large), &RunHandle::new())
        .await;
    let second = burner
        .run(with_limits("10000000", large), &RunHandle::new())
        .await;
    assert!(first.outcome.is_success(), "{:?}", first.outcome);
    assert_eq!(first.outcome, second.outcome, "deterministic result");
    let used = first.fuel_consumed.unwrap();
    assert!(used > 10_000_000, "{used}");
    assert!(used < 10_000_000_000);
    // Fuel is deterministic: the warm second run costs the same as the
    // first run minus its instantiation and init.
    let second_used = second.fuel_consumed.unwrap();
    assert!(
        second_used <= used && used - second_used < used / 100,
        "{used} vs {second_used}"
    );
}

#[tokio::test]
async fn panics_traps_and_stack_overflows_end_the_run_only() {
    let runtime = runtime();
    let mut panicker = worker(&runtime, "panicker").await;
    let report = panicker.run(request("boom"), &RunHandle::new()).await;
    match &report.outcome {
        Outcome::Trap { message } => {
            assert!(message.contains("unreachable"), "{message}");
            assert!(message.contains("panicking on purpose"), "{message}");
        }
        other => panic!("expected trap, got {other:?}"),
    }
    assert!(
        report
            .log
            .iter()
            .any(|l| l.source == LogSource::Stderr && l.text.contains("panicking on purpose"))
    );

    let overflow = panicker.run(request("overflow"), &RunHandle::new()).await;
    match &overflow.outcome {
        Outcome::Trap { message } => assert!(message.contains("stack"), "{message}"),
        other => panic!("expected a stack overflow trap, got {other:?}"),
    }
    assert!(overflow.new_instance, "a trapped instance is replaced");

    let abort = panicker
        .run(request("unreachable"), &RunHandle::new())
        .await;
    assert!(
        matches!(abort.outcome, Outcome::Trap { .. }),
        "{:?}",
        abort.outcome
    );

    let mut hello = worker(&runtime, "hello").await;
    assert!(
        hello
            .run(request("still here"), &RunHandle::new())
            .await
            .outcome
            .is_success()
    );
}

#[tokio::test]
async fn state_changes_are_returned_only_on_success() {
    let runtime = runtime();
    let mut counter = worker(&runtime, "counter").await;
    let state = Arc::new(HashMap::from([("count".to_string(), "41".to_string())]));
    let ok = counter
        .run(
            RunRequest {
                state: state.clone(),
                ..request("")
            },
            &RunHandle::new(),
        )
        .await;
    assert!(ok.outcome.is_success(), "{:?}", ok.outcome);
    assert_eq!(ok.state_changes.get("count"), Some(&Some("42".to_string())));

    let failed = counter
        .run(
            RunRequest {
                state,
                ..request("fail")
            },
            &RunHandle::new(),
        )
        .await;
    match &failed.outcome {
        Outcome::Failed { message } => assert!(message.contains("after counting 42"), "{message}"),
        other => panic!("expected failed, got {other:?}"),
    }
    assert!(
        failed.state_changes.is_empty(),
        "a failed run commits nothing"
    );
}

#[tokio::test]
async fn trigger_fields_reach_the_guest() {
    let runtime = runtime();
    let mut sharded = worker(&runtime, "sharded").await;
    let trigger = Trigger {
        shard_index: 2,
        shard_total: 3,
        ..Trigger::manual("", 0)
    };
    let report = sharded
        .run(RunRequest::new(trigger), &RunHandle::new())
        .await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "shard 2/3".into()
        }
    );
}

#[tokio::test]
async fn chatty_output_is_capped_with_a_visible_marker() {
    let runtime = runtime();
    let mut chatty = worker(&runtime, "chatty").await;
    let limits = RunLimits {
        log_bytes: 64 << 10,
        ..RunLimits::default()
    };
    let report = chatty
        .run(with_limits("20000", limits), &RunHandle::new())
        .await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "wrote 20000 lines".into()
        }
    );
    assert!(report.log_truncated);
    let kept: usize = report
        .log
        .iter()
        .filter(|l| l.source != LogSource::Host)
        .map(|l| l.text.len())
        .sum();
    assert!(kept <= 64 << 10, "{kept}");
    let marker = report.log.last().expect("lines");
    assert_eq!(marker.source, LogSource::Host);
    assert!(marker.text.starts_with("log truncated"), "{}", marker.text);
    for source in [LogSource::Stdout, LogSource::Stderr] {
        assert!(
            report.log.iter().any(|l| l.source == source),
            "{source:?} captured"
        );
    }
}

/// A guest sees both clocks in whole milliseconds, nothing finer.
#[tokio::test]
async fn guests_see_clocks_in_whole_milliseconds() {
    let runtime = runtime();
    let mut chatty = worker(&runtime, "chatty").await;
    let report = chatty.run(request("clocks"), &RunHandle::new()).await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "sub-millisecond remainder 0 ns".into()
        }
    );
}

/// A guest flooding its log with empty lines (on stdout and through
/// `context.log`) fills the cap like any other output: the lines kept and
/// the bytes charged stay within the cap, one marker counts the rest.
#[tokio::test]
async fn a_flood_of_empty_lines_is_bounded_like_any_output() {
    let runtime = runtime();
    let mut chatty = worker(&runtime, "chatty").await;
    let cap = 256 << 10;
    let limits = RunLimits {
        log_bytes: cap,
        ..RunLimits::default()
    };
    let handle = RunHandle::new();
    let report = chatty
        .run(with_limits("empty:2000000", limits), &handle)
        .await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "wrote 2000000 empty lines".into()
        }
    );
    assert!(report.log_truncated);
    let kept = cap / cronbox_runtime::LINE_OVERHEAD;
    assert_eq!(
        report.log.len(),
        kept + 1,
        "the lines the cap allows, and a marker"
    );
    assert!(handle.log().charged_bytes() <= cap);
    let marker = &report.log[kept];
    assert_eq!(marker.source, LogSource::Host);
    let dropped = 2_000_000 + 200_000 - kept;
    assert!(
        marker.text.contains(&format!("{dropped} more lines")),
        "{}",
        marker.text
    );
}

#[tokio::test]
async fn a_log_is_readable_by_offset_while_the_run_goes_on() {
    let runtime = runtime();
    let mut chatty = worker(&runtime, "chatty").await;
    let handle = RunHandle::new();
    let reader = {
        let handle = handle.clone();
        tokio::spawn(async move {
            let mut offset = 0;
            let mut pages_while_running = 0;
            let mut texts = Vec::new();
            loop {
                let page = handle.read_log(offset, 500);
                if !page.lines.is_empty() && !page.finished {
                    pages_while_running += 1;
                }
                offset = page.next_offset;
                texts.extend(page.lines.into_iter().map(|l| l.text));
                if page.finished {
                    return (pages_while_running, texts);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let report = chatty.run(request("6000"), &handle).await;
    let (pages_while_running, texts) = reader.await.unwrap();
    assert!(report.outcome.is_success());
    assert!(
        pages_while_running >= 2,
        "read {pages_while_running} pages live"
    );
    let all: Vec<_> = report.log.iter().map(|l| l.text.clone()).collect();
    assert_eq!(texts, all, "paging saw every line once, in order");
}

#[tokio::test]
async fn fresh_instance_mode_instantiates_and_destroys_per_run() {
    let runtime = runtime();
    let module = runtime.load(jobs::bytes("counter")).await.unwrap();
    let mut counter = JobWorker::new(&runtime, module, InstanceMode::FreshPerRun);
    for _ in 0..2 {
        let report = counter.run(request(""), &RunHandle::new()).await;
        assert!(report.new_instance);
        assert_eq!(
            report.outcome,
            Outcome::Success {
                message: "count=1 instance_runs=1".into()
            }
        );
        assert!(
            report
                .log
                .iter()
                .any(|l| l.text == "counter instance retired after 1 runs"),
            "destroy ran and logged into the run: {:?}",
            report.log
        );
    }
    assert!(!counter.is_warm());
}

#[tokio::test]
async fn retire_calls_destroy_on_a_warm_instance() {
    let runtime = runtime();
    let mut counter = worker(&runtime, "counter").await;
    for _ in 0..3 {
        assert!(
            counter
                .run(request(""), &RunHandle::new())
                .await
                .outcome
                .is_success()
        );
    }
    let retired = counter.retire().await.expect("an instance was warm");
    assert_eq!(retired.runs, 3);
    assert_eq!(retired.error, None);
    assert_eq!(retired.log.len(), 1);
    assert_eq!(retired.log[0].text, "counter instance retired after 3 runs");
}

/// Eviction is a segmented LRU: an instance that served one run goes
/// before one reused, even one idle for less time.
#[tokio::test]
async fn instances_run_once_are_evicted_before_reused_ones() {
    let runtime = Runtime::new(RuntimeConfig {
        max_instances: 2,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut often = worker(&runtime, "hello").await;
    for param in ["a", "b"] {
        assert!(
            often
                .run(request(param), &RunHandle::new())
                .await
                .outcome
                .is_success()
        );
    }
    let mut once = worker(&runtime, "hello").await;
    assert!(
        once.run(request("c"), &RunHandle::new())
            .await
            .outcome
            .is_success()
    );
    assert_eq!(runtime.free_instance_slots(), 0);

    // A third job needs a slot: the instance run once goes, though the
    // reused one has been idle longer.
    let mut third = worker(&runtime, "hello").await;
    assert!(
        third
            .run(request("d"), &RunHandle::new())
            .await
            .outcome
            .is_success()
    );
    assert_eq!(runtime.instances_evicted(), 1);
    assert!(often.is_warm(), "the reused instance stays");
    assert!(!once.is_warm());
    let again = often.run(request("e"), &RunHandle::new()).await;
    assert!(!again.new_instance);

    // With only protected instances parked, the one idle longest goes.
    // The job that just lost its instance from probation and runs again is
    // remembered: its new instance is protected at once.
    assert!(
        third
            .run(request("f"), &RunHandle::new())
            .await
            .outcome
            .is_success()
    );
    assert!(once.run(request("g"), &RunHandle::new()).await.new_instance);
    assert_eq!(runtime.instances_evicted(), 2);
    assert!(!often.is_warm(), "idle longer than the third job's");
    assert!(third.is_warm());
    let mut newcomer = worker(&runtime, "hello").await;
    assert!(
        newcomer
            .run(request("h"), &RunHandle::new())
            .await
            .new_instance
    );
    assert!(
        once.is_warm(),
        "protected: the third job's instance went instead"
    );
    assert!(!third.is_warm());
}

/// A full pool: an idle warm instance is evicted for a run that needs its
/// slot; a slot held by a running instance makes the run wait (bounded by
/// its deadline), never fail.
#[tokio::test]
async fn a_full_pool_evicts_idle_instances_and_otherwise_waits() {
    let runtime = Runtime::new(RuntimeConfig {
        max_instances: 1,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut first = worker(&runtime, "hello").await;
    let report = first.run(request("a"), &RunHandle::new()).await;
    assert!(report.outcome.is_success());
    assert!(first.is_warm());
    assert_eq!(runtime.free_instance_slots(), 0);

    // Another job's run takes the idle instance's slot.
    let mut second = worker(&runtime, "hello").await;
    let report = second.run(request("b"), &RunHandle::new()).await;
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
    assert_eq!(runtime.instances_evicted(), 1);
    assert!(!first.is_warm(), "its instance was evicted");
    assert!(second.is_warm());

    // A running instance is not evicted: a run needing its slot waits.
    let mut sleeper = worker(&runtime, "sleeper").await;
    let sleeping = RunHandle::new();
    let running = {
        let sleeping = sleeping.clone();
        tokio::spawn(async move { sleeper.run(request("60000"), &sleeping).await })
    };
    cronbox_tests::until("the sleeper holds the only slot", || async {
        let log = sleeping.log().lines();
        log.iter()
            .any(|line| line.text == "sleeping 60000 ms")
            .then_some(())
    })
    .await;
    let limits = RunLimits {
        timeout: Duration::from_millis(100),
        ..RunLimits::default()
    };
    let waited = first.run(with_limits("c", limits), &RunHandle::new()).await;
    assert_eq!(waited.outcome, Outcome::Timeout { timeout_ms: 100 });

    // Once the sleeper is gone, the slot is free again.
    sleeping.kill();
    assert_eq!(running.await.unwrap().outcome, Outcome::Killed);
    let report = first.run(request("c"), &RunHandle::new()).await;
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
}

#[tokio::test]
async fn fuel_budget_without_metering_is_rejected() {
    let runtime = Runtime::new(RuntimeConfig {
        fuel_metering: false,
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut hello = worker(&runtime, "hello").await;
    let limits = RunLimits {
        fuel: Some(1000),
        ..RunLimits::default()
    };
    let report = hello.run(with_limits("x", limits), &RunHandle::new()).await;
    assert!(
        matches!(report.outcome, Outcome::Rejected { .. }),
        "{:?}",
        report.outcome
    );
    let unmetered = hello.run(request("x"), &RunHandle::new()).await;
    assert!(unmetered.outcome.is_success());
    assert_eq!(unmetered.fuel_consumed, None);
}

/// Live instances share the executor's memory budget: each reserves its
/// memory limit while it lives; one that does not fit evicts idle
/// instances, or waits for running ones (a run that cannot wait times out),
/// and a limit over the whole budget is refused at once.
#[tokio::test]
async fn instances_share_the_executors_memory_budget() {
    const MIB: u64 = 1 << 20;
    let runtime = Runtime::new(RuntimeConfig {
        memory_budget_bytes: Some(100 * MIB),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let limits = |memory_mib: u64, timeout_ms: u64| RunLimits {
        memory_bytes: memory_mib * MIB,
        timeout: Duration::from_millis(timeout_ms),
        ..RunLimits::default()
    };
    let mut first = worker(&runtime, "hello").await;
    let report = first
        .run(with_limits("a", limits(64, 10_000)), &RunHandle::new())
        .await;
    assert!(report.outcome.is_success(), "{:?}", report.outcome);
    assert_eq!(runtime.free_memory_budget_bytes(), 36 * MIB, "kept warm");

    // 32 MiB fit beside the warm instance.
    let mut second = worker(&runtime, "hello").await;
    let small = second
        .run(with_limits("b", limits(32, 10_000)), &RunHandle::new())
        .await;
    assert!(small.outcome.is_success(), "{:?}", small.outcome);
    assert_eq!(runtime.free_memory_budget_bytes(), 4 * MIB);
    assert_eq!(runtime.instances_evicted(), 0);

    // 64 MiB more do not: the instance idle longest (the first) goes.
    let mut third = worker(&runtime, "hello").await;
    let big = third
        .run(with_limits("c", limits(64, 10_000)), &RunHandle::new())
        .await;
    assert!(big.outcome.is_success(), "{:?}", big.outcome);
    assert_eq!(runtime.instances_evicted(), 1);
    assert!(!first.is_warm() && second.is_warm() && third.is_warm());

    // Held by a running instance, memory is waited for, not taken.
    let mut sleeper = worker(&runtime, "sleeper").await;
    let sleeping = RunHandle::new();
    let running = {
        let sleeping = sleeping.clone();
        tokio::spawn(async move {
            sleeper
                .run(with_limits("60000", limits(90, 120_000)), &sleeping)
                .await
        })
    };
    cronbox_tests::until("the sleeper holds 90 MiB", || async {
        let log = sleeping.log().lines();
        log.iter()
            .any(|line| line.text == "sleeping 60000 ms")
            .then_some(())
    })
    .await;
    assert_eq!(runtime.idle_instances(), 0, "both idle instances evicted");
    let waited = first
        .run(with_limits("d", limits(64, 100)), &RunHandle::new())
        .await;
    assert_eq!(waited.outcome, Outcome::Timeout { timeout_ms: 100 });
    sleeping.kill();
    assert_eq!(running.await.unwrap().outcome, Outcome::Killed);
    assert_eq!(runtime.free_memory_budget_bytes(), 100 * MIB);

    // More than the whole budget could never run here: refused, not queued.
    let mut greedy = worker(&runtime, "hello").await;
    let refused = greedy
        .run(with_limits("c", limits(200, 10_000)), &RunHandle::new())
        .await;
    match refused.outcome {
        Outcome::Rejected { reason } => assert!(reason.contains("memory budget"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Without a budget given, each instance slot brings the default limit.
    let default = Runtime::new(RuntimeConfig {
        max_instances: 3,
        ..RuntimeConfig::default()
    })
    .unwrap();
    assert_eq!(default.free_memory_budget_bytes(), 3 * 64 * MIB);
}

/// A run's configuration reaches the guest through `wasi:config/store`,
/// and a warm instance sees each run's own: none is left from the last.
#[tokio::test]
async fn each_run_reads_its_own_configuration() {
    let runtime = runtime();
    let mut echo = worker(&runtime, "config-echo").await;
    let configured = RunRequest {
        config: [("greeting".to_owned(), "hi".to_owned())].into(),
        ..request("greeting")
    };
    let report = echo.run(configured, &RunHandle::new()).await;
    assert_eq!(
        report.outcome,
        Outcome::Success {
            message: "hi".to_owned()
        }
    );
    assert!(echo.is_warm());
    let report = echo.run(request("greeting"), &RunHandle::new()).await;
    assert_eq!(
        report.outcome,
        Outcome::Failed {
            message: "no configuration \"greeting\"".to_owned()
        }
    );
}
