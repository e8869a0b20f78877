//! The admin's HTTP API against its own OpenAPI document: schemathesis
//! (from PyPI) drives a real `cronbox up`, seeded and bounded, with the
//! operator token over the user API and the executor token over the
//! executors' routes. It must find no server error and no answer that
//! contradicts the document: a wrong status, body, media type or schema,
//! a valid request refused or an invalid one accepted.
//!
//! schemathesis is installed on first use into `target/tools/` (Python 3
//! with `venv` needed), or taken from `CRONBOX_SCHEMATHESIS` (the path of
//! its `st` command). Its configuration is `tests/api-contract/`.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The schemathesis release the contract is checked with.
const SCHEMATHESIS: &str = "schemathesis==4.32.5";
/// Examples per operation and phase.
const EXAMPLES: &str = "25";
/// CPU time a pass may use (each uses seconds here); it is stopped and
/// fails past this. CPU time, not the clock: at its low priority a pass
/// beside a busy machine waits far longer than it works.
const PASS_CPU_SECONDS: u64 = 120;
/// Longest a pass may take on the clock, a backstop to the CPU bound.
const PASS_TIMEOUT: Duration = Duration::from_secs(1_200);
/// The same cases every run.
const SEED: &str = "20261124";

/// The `st` command: `CRONBOX_SCHEMATHESIS`, or a virtualenv in
/// `target/tools/` made on first use.
fn schemathesis() -> PathBuf {
    if let Some(path) = std::env::var_os("CRONBOX_SCHEMATHESIS") {
        return PathBuf::from(path);
    }
    cronbox_tests::python_tool(SCHEMATHESIS)
        .join("bin")
        .join("st")
}

/// One schemathesis pass over the operations `filter` selects, with
/// `token`; panics with its report unless it found nothing.
fn check_contract(st: &Path, admin: &str, token: &str, filter: &[&str]) {
    let config =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/api-contract/schemathesis.toml");
    let report = tempfile::tempdir().unwrap();
    // At a lower priority, as the executor compiles: the passes take the
    // cores the cluster's firing beside them leaves idle (see `main.rs`).
    let mut child = Command::new("nice")
        .args(["-n", "10"])
        .arg("prlimit")
        .arg(format!("--cpu={PASS_CPU_SECONDS}:{}", PASS_CPU_SECONDS + 1))
        .arg(st)
        .arg("--config-file")
        .arg(&config)
        .arg("--no-color")
        .args(["run", &format!("{admin}/api/v1/openapi.json")])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--checks", "all"])
        .args(["--seed", SEED, "--max-examples", EXAMPLES])
        .args(filter)
        .args(["--generation-database", "none"])
        .arg("--report-dir")
        .arg(report.path())
        // Its caches land in the working directory: a temporary one.
        .current_dir(report.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("schemathesis runs");
    // Its output is read to the end on threads, so that it never blocks.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            text
        })
    };
    let stdout = drain(child.stdout.take().map(|pipe| Box::new(pipe) as _));
    let stderr = drain(child.stderr.take().map(|pipe| Box::new(pipe) as _));
    // Its exit is waited for on a thread and received within the bound.
    let pid = child.id().to_string();
    let (exited, exit) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = exited.send(child.wait());
    });
    let status = match exit.recv_timeout(PASS_TIMEOUT) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!("schemathesis ran past {PASS_TIMEOUT:?} ({filter:?})");
        }
    };
    let output = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    {
        use std::os::unix::process::ExitStatusExt as _;
        assert_ne!(
            output.status.signal(),
            Some(24), // SIGXCPU
            "schemathesis used more than {PASS_CPU_SECONDS} s of CPU ({filter:?})"
        );
    }
    assert!(
        output.status.success(),
        "schemathesis found contract failures ({filter:?}):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // A pass that tested nothing would succeed too.
    let tested = stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("Tested: "))
        .and_then(|count| count.trim().parse::<usize>().ok())
        .unwrap_or(0);
    assert!(tested > 0, "schemathesis tested no operation:\n{stdout}");
    eprintln!(
        "{}",
        stdout
            .lines()
            .filter(|line| line.contains("generated") || line.starts_with("Seed"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_admin_api_keeps_to_its_openapi_document() {
    let st = schemathesis();
    let data = tempfile::tempdir().unwrap();
    // Killed when dropped: a failed pass does not leave it running.
    let (mut stack, _, at) = support::up(data.path(), None);
    let admin = format!("http://{}", at.admin);
    let read = |file: &str| {
        std::fs::read_to_string(data.path().join(file))
            .unwrap()
            .trim()
            .to_owned()
    };
    // The executors' routes and the user API in two parts (jobs and
    // runs; the rest), three passes side by side: schemathesis generates
    // on one core, and the user API alone was most of the test's time.
    let (api_token, executor_token) = (read("api-token"), read("executor-token"));
    std::thread::scope(|passes| {
        passes.spawn(|| {
            check_contract(
                &st,
                &admin,
                &executor_token,
                &["--include-tag", "executors"],
            )
        });
        passes.spawn(|| {
            let jobs_and_runs = ["--include-tag", "jobs", "--include-tag", "runs"];
            check_contract(&st, &admin, &api_token, &jobs_and_runs)
        });
        let rest = ["executors", "jobs", "runs"].map(|tag| ["--exclude-tag", tag]);
        check_contract(&st, &admin, &api_token, rest.as_flattened());
    });
    // The admin served every case without falling over.
    assert!(stack.0.try_wait().unwrap().is_none(), "cronbox up exited");
    stack.kill();
}
