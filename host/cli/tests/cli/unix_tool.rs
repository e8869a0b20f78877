//! The CLI behaves like a Unix tool: output cut short by its reader ends the
//! command quietly, `--version` answers, errors are one line without a
//! backtrace. Real processes: `cronbox admin` on a loopback port it picked.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::io::Read as _;
use std::process::{Command, Stdio};

use cronbox_api::{Client, JobSpec, TriggerRequest};
use support::cronbox_listening;

const TOKEN: &str = "api-token";

#[test]
fn version_prints_the_version() {
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8(output.stdout).unwrap().trim(),
        format!("cronbox {}", env!("CARGO_PKG_VERSION"))
    );
}

/// A reader that takes the first line of a long listing and closes the
/// pipe: the command ends with status 0 (or by SIGPIPE, as Unix tools
/// may), and prints nothing about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_cut_short_by_its_reader_ends_quietly() {
    let data = tempfile::tempdir().unwrap();
    let (_admin, url) = cronbox_listening(
        &[
            "admin",
            "--bind",
            "127.0.0.1:0",
            "--token",
            TOKEN,
            "--executor-token",
            "exec-token",
            "--data-dir",
            data.path().to_str().unwrap(),
        ],
        "listening on ",
    );
    // 300 runs of a job without an executor: each ends at once, refused.
    let api = Client::new(&url, TOKEN);
    let uploaded = api.upload(cronbox_example_jobs::bytes("hello"), None, &[]);
    let digest = uploaded.await.unwrap().digest;
    let spec = JobSpec::of_digest("many", &digest);
    let job = api.create_job(&spec).await.unwrap().id;
    for _ in 0..300 {
        api.trigger(job, &TriggerRequest::default()).await.unwrap();
    }

    for format in [&["--json"][..], &[][..]] {
        let mut listing = Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(["runs", "--limit", "1000", "--admin", &url, "--token", TOKEN])
            .args(format)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = listing.stdout.take().unwrap();
        let mut first = [0_u8; 64];
        let read = stdout.read(&mut first).unwrap();
        assert!(read > 0, "the listing printed something");
        drop(stdout); // `head -1` has what it wants and goes away
        let output = listing.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        use std::os::unix::process::ExitStatusExt as _;
        assert!(
            output.status.success() || output.status.signal() == Some(13),
            "{format:?}: exit {:?}, stderr: {stderr}",
            output.status
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{format:?}: {stderr}"
        );
    }
}

/// Errors are one line naming the problem: no panic text, no backtrace,
/// even with `RUST_BACKTRACE=1`.
#[test]
fn errors_are_one_line_without_a_backtrace() {
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["runs", "--admin", "http://127.0.0.1:9", "--token", TOKEN])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("backtrace"), "{stderr}");
}
