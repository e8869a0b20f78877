//! Hostile guests against a real `cronbox executor` process: each ends its
//! own run only, the executor's memory stays bounded (read from its own
//! metrics), and another tenant's runs go on meanwhile.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

mod support;

use std::time::Duration;

use cronbox_example_jobs as jobs;
use cronbox_protocol::{
    KillCommand, Outcome, RunCommand, RunResult, Trigger, WireLimits, executor_paths,
};
use cronbox_tests::{ExecutorClient, StandInAdmin, hostile, until};
use support::Process;

const TOKEN: &str = "hostile-test-token";
const WAIT: Duration = Duration::from_secs(60);
const MIB: u64 = 1 << 20;
/// Instance slots of the executor: the hostile tenant's share is three.
const SLOTS: u32 = 4;
/// The timeout of every hostile run but the infinite loop. Waiting for the
/// tenant's share counts against it, and the attacks queue behind the
/// sleeper and the loop on two slots, so it is wide: on a loaded machine a
/// deep recursion that waited out a 5 s loop must still get to overflow.
const ATTACK_TIMEOUT_MS: u64 = 30_000;
/// The infinite loop's timeout, the one the attack is expected to meet.
const LOOP_TIMEOUT_MS: u64 = 5_000;

fn command(tenant: &str, job_id: u64, run_id: u64, digest: &str, param: &str) -> RunCommand {
    let trigger = Trigger {
        job_id,
        run_id,
        ..Trigger::manual(param, 0)
    };
    RunCommand {
        limits: WireLimits {
            timeout_ms: 5_000,
            ..WireLimits::default()
        },
        tenant: tenant.to_owned(),
        ..RunCommand::new(trigger, digest_as_sent(digest))
    }
}

/// What a hostile run must end with.
enum Expect {
    /// This outcome exactly.
    Outcome(Outcome),
    /// Refused before it ran, the reason naming this.
    RejectedNaming(&'static str),
    /// A trap whose message names this.
    TrapNaming(&'static str),
    /// Success or a timeout (a flood may finish in time or not), with its
    /// log cut behind the marker.
    Truncated,
    /// Success, its message starting with this.
    SuccessSaying(&'static str),
}

fn check(name: &str, result: &RunResult, expect: &Expect) {
    let log_bytes: usize = result.log.iter().map(|line| line.text.len()).sum();
    assert!(
        log_bytes <= MIB as usize && result.log.len() <= 20_000,
        "{name}: {log_bytes} log bytes in {} lines",
        result.log.len()
    );
    match (expect, &result.outcome) {
        (Expect::Outcome(expected), outcome) => assert_eq!(outcome, expected, "{name}"),
        (Expect::RejectedNaming(what), Outcome::Rejected { reason }) => {
            assert!(reason.contains(what), "{name}: {reason}")
        }
        (Expect::TrapNaming(what), Outcome::Trap { message }) => {
            assert!(message.contains(what), "{name}: {message}")
        }
        (Expect::Truncated, Outcome::Success { .. } | Outcome::Timeout { .. }) => {
            assert!(result.log_truncated, "{name}: the log was not cut")
        }
        (Expect::SuccessSaying(start), Outcome::Success { message }) => {
            assert!(message.starts_with(start), "{name}: {message}")
        }
        (_, outcome) => panic!("{name}: unexpected {outcome:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_guests_end_their_own_runs_only_and_the_executors_memory_stays_bounded() {
    let admin = StandInAdmin::start(TOKEN).await;
    let data = tempfile::tempdir().unwrap();
    let slots = SLOTS.to_string();
    let admin_url = admin.url();
    let data_dir = data.path().to_str().unwrap();
    // Killed when dropped, at the end of the test.
    let _executor_process = Process::cronbox(&[
        "executor",
        "--bind",
        "127.0.0.1:0",
        "--admin",
        &admin_url,
        "--token",
        TOKEN,
        "--data-dir",
        data_dir,
        "--beat-interval",
        "200ms",
        "--max-instances",
        &slots,
    ]);
    let address = until("the executor registered", || async {
        Some(admin.registrations().first()?.address.clone())
    })
    .await;
    let executor = ExecutorClient::new(address, TOKEN);

    // The other tenant's job, loaded and run once before the attack: the
    // executor's memory from here on is what the hostile guests add.
    let hello = admin.add_module(jobs::bytes("hello"));
    let good = |run_id: u64| command("good", 1000, run_id, &hello, "good");
    assert!(executor.run(&good(1000)).await.accepted);
    assert!(admin.result_of(1000, WAIT).await.outcome.is_success());
    let resident_before = executor
        .metric("cronbox_executor_resident_memory_peak_bytes")
        .await;

    let limit = WireLimits::default().memory_bytes;
    let chatty = admin.add_module(jobs::bytes("chatty"));
    let slow_sleeper = admin.add_module(jobs::bytes("sleeper"));
    let attacks: Vec<(&str, String, &str, Expect)> = vec![
        (
            "newline flood",
            chatty.clone(),
            "empty:13000000",
            Expect::Truncated,
        ),
        (
            "huge line and result",
            chatty,
            "big:8388608",
            Expect::Truncated,
        ),
        (
            "memory bomb",
            admin.add_module(jobs::bytes("memory-hog")),
            "",
            Expect::Outcome(Outcome::MemoryLimit { limit_bytes: limit }),
        ),
        (
            "infinite loop",
            admin.add_module(jobs::bytes("runaway")),
            "",
            Expect::Outcome(Outcome::Timeout {
                timeout_ms: LOOP_TIMEOUT_MS,
            }),
        ),
        (
            "deep recursion",
            admin.add_module(jobs::bytes("panicker")),
            "overflow",
            Expect::TrapNaming("call stack exhausted"),
        ),
        (
            "many core instances",
            admin.add_module(hostile::many_core_instances(40)),
            "",
            Expect::RejectedNaming("40 core instances, over the limit of 16"),
        ),
        (
            "many memories",
            admin.add_module(hostile::many_memories(4, 16)),
            "",
            Expect::RejectedNaming("5 linear memories, over the limit of 2"),
        ),
        (
            // Empty writes to standard output and to a request's body,
            // each of which once grew the host (wasmtime advisories fixed
            // after 48.0.8, SECURITY.md): memory stays within the bound
            // below. Standard output takes every one ...
            "empty stdout writes",
            admin.add_module(jobs::bytes("http-probe")),
            "EMPTY-STDOUT 2000000",
            Expect::SuccessSaying("2000000 of 2000000 empty writes taken"),
        ),
        (
            // ... and a body nobody sends queues only what its channel
            // holds: the next write ends the run.
            "empty body writes",
            admin.add_module(jobs::bytes("http-probe")),
            "EMPTY-BODY 2000000",
            Expect::TrapNaming("write exceeded budget"),
        ),
        (
            // Two memories of 64 MiB + 64 KiB together: one instance's
            // limit holds for both.
            "memories over the limit together",
            admin.add_module(hostile::many_memories(1, 1024)),
            "",
            Expect::Outcome(Outcome::MemoryLimit { limit_bytes: limit }),
        ),
    ];
    // A slow host call: blocked in a sleep far past its timeout, it holds
    // a slot until it is killed.
    let sleeper_job = 99;
    let mut sleeper = command("hostile", sleeper_job, 99, &slow_sleeper, "600000");
    sleeper.limits.timeout_ms = 600_000;
    assert!(executor.run(&sleeper).await.accepted);
    for (index, (_, digest, param, expect)) in attacks.iter().enumerate() {
        let id = index as u64 + 1;
        let mut attack = command("hostile", id, id, digest, param);
        attack.limits.timeout_ms = match expect {
            Expect::Outcome(Outcome::Timeout { timeout_ms }) => *timeout_ms,
            _ => ATTACK_TIMEOUT_MS,
        };
        let response = executor.run(&attack).await;
        assert!(response.accepted, "{response:?}");
    }

    // The other tenant's runs go on meanwhile, one after another, on the
    // slot the hostile tenant may not take.
    for run_id in 1001..=1005 {
        assert!(executor.run(&good(run_id)).await.accepted);
        let result = admin.result_of(run_id, WAIT).await;
        assert!(
            result.outcome.is_success(),
            "run {run_id}: {:?}",
            result.outcome
        );
    }
    for (index, (name, _, _, expect)) in attacks.iter().enumerate() {
        let result = admin.result_of(index as u64 + 1, WAIT).await;
        check(name, &result, expect);
    }
    // The sleeper slept all along, and stops when killed.
    assert!(admin.results().iter().all(|result| result.run_id != 99));
    let killed = executor
        .post(
            executor_paths::KILL,
            &KillCommand::Job {
                job_id: sleeper_job,
            },
        )
        .await;
    assert!(killed.status().is_success());
    assert_eq!(admin.result_of(99, WAIT).await.outcome, Outcome::Killed);

    let resident_after = executor
        .metric("cronbox_executor_resident_memory_peak_bytes")
        .await;
    let budget = u64::from(SLOTS) * limit;
    eprintln!(
        "executor resident memory at its peak: {} MiB before the attacks, {} MiB after \
         (memory budget {} MiB)",
        resident_before / MIB,
        resident_after / MIB,
        budget / MIB
    );
    assert!(
        resident_after.saturating_sub(resident_before) <= budget + 128 * MIB,
        "the hostile guests took the executor from {} MiB to {} MiB",
        resident_before / MIB,
        resident_after / MIB
    );
}

/// `text` as an admin would send it in a run command, a digest or not
/// (the executor must refuse one that is not).
fn digest_as_sent(text: &str) -> cronbox_protocol::Digest {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).expect("any text")
}
