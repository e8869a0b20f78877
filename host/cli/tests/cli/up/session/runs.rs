//! The session's runs: triggered and followed, killed, across module
//! versions and a rollback, with their state and configuration.

use super::*;

/// Runs triggered, followed and killed, across versions; the runaway
/// job's id.
pub(super) fn runs_versions_and_state(s: &Session, id: &str) -> String {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let counter = cronbox_example_jobs::path("counter");
    let runaway = cronbox_example_jobs::path("runaway");
    // Trigger with a parameter and follow the log to the end.
    let run = json(base, token, &["job", "trigger", id, "--param", "cli"])["run_id"]
        .as_i64()
        .unwrap();
    let (code, log, end) = cli(base, token, &["logs", &run.to_string(), "--follow"]);
    assert_eq!(code, 0, "{end}");
    assert!(log.contains("hello, cli"), "{log}");
    assert!(end.contains("ended: success"), "{end}");
    let listed = ok(base, token, &["runs", "--job", id]);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with(&run.to_string()) && line.contains("greeter-job")),
        "runs name their job: {listed}"
    );

    // Kill a runaway run.
    ok(
        base,
        token,
        &["module", "push", "spin", runaway.to_str().unwrap()],
    );
    let spin = json(
        base,
        token,
        &[
            "job",
            "create",
            "--name",
            "spin",
            "--module",
            "spin",
            "--timeout-ms",
            "60000",
        ],
    )["id"]
        .to_string();
    let spinning = json(base, token, &["job", "trigger", &spin])["run_id"]
        .as_i64()
        .unwrap();
    // Killable once it runs: its first line, followed, says so.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["logs", &spinning.to_string(), "--follow"])
        .env("CRONBOX_ADMIN", base)
        .env("CRONBOX_API_TOKEN", token)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(follower.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("spinning"), "{first:?}");
    let (code, stdout, stderr) = cli(base, token, &["kill", &spinning.to_string()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("killed"), "{stdout}");
    assert_eq!(
        follower.wait().unwrap().code(),
        Some(1),
        "a killed run's follower exits 1"
    );
    assert_eq!(ended(base, token, &spin, spinning)["outcome"], "killed");

    // A second version, then a rollback; runs name what ran.
    let second = ok(
        base,
        token,
        &["module", "push", "greeter", counter.to_str().unwrap()],
    );
    assert!(
        second.contains("version 2") && second.contains("1 job(s) moved"),
        "{second}"
    );
    let run = json(base, token, &["job", "trigger", id])["run_id"]
        .as_i64()
        .unwrap();
    let counted = ended(base, token, id, run);
    assert!(
        counted["message"].as_str().unwrap().starts_with("count=1"),
        "{counted}"
    );
    let state = json(base, token, &["state", id]);
    assert_eq!(state["state"]["count"], "1");
    let rolled = ok(base, token, &["module", "rollback", "greeter", "1"]);
    assert!(rolled.contains("now version 3"), "{rolled}");
    let run = json(base, token, &["job", "trigger", id, "--param", "again"])["run_id"]
        .as_i64()
        .unwrap();
    assert_eq!(ended(base, token, id, run)["message"], "hello, again");

    // Configuration flags add to the job's configuration.
    json(
        base,
        token,
        &["job", "update", id, "--job-config", "greeting=hi"],
    );
    let updated = json(
        base,
        token,
        &["job", "update", id, "--job-config", "other=x"],
    );
    assert_eq!(
        updated["config"],
        json!({ "greeting": "hi", "other": "x" }),
        "{updated}"
    );
    spin
}
