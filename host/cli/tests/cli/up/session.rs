//! A whole CLI session against one `cronbox up`: modules, jobs, runs, logs,
//! secrets, grants, users, quotas, ceilings, settings, contexts and
//! workflows, in that order (each part in a file of its own beside this
//! one).

use super::*;

#[path = "session/access.rs"]
mod access;
#[path = "session/definitions.rs"]
mod definitions;
#[path = "session/runs.rs"]
mod runs;
#[path = "session/settings.rs"]
mod settings;
#[path = "session/workflows.rs"]
mod workflows;

/// The `cronbox up` a session talks to (with loopback granted to jobs),
/// and how to reach it.
struct Session {
    data: tempfile::TempDir,
    stack: support::Process,
    printed: String,
    base: String,
    token: String,
}

impl Session {
    fn start() -> Session {
        let data = tempfile::tempdir().unwrap();
        let (stack, printed, at) = up_with_env(
            data.path(),
            None,
            &[(
                "CRONBOX_EXECUTOR_HTTP_ALLOW_NETS",
                std::path::Path::new("127.0.0.1/32"),
            )],
        );
        let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
        Session {
            base: format!("http://{}", at.admin),
            token: token.trim().to_owned(),
            data,
            stack,
            printed,
        }
    }
}

/// Runs `cronbox ARGS` against the admin at `base` with `token`; returns
/// (exit code, stdout, stderr).
pub(crate) fn cli(base: &str, token: &str, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .env("CRONBOX_ADMIN", base)
        .env("CRONBOX_API_TOKEN", token)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `cli` that must succeed; returns stdout.
pub(crate) fn ok(base: &str, token: &str, args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(base, token, args);
    assert_eq!(code, 0, "cronbox {args:?} failed: {stderr}");
    stdout
}

/// `cli --json` that must succeed; returns the parsed output.
pub(crate) fn json(base: &str, token: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let stdout = ok(base, token, &args);
    serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{args:?}: {error}: {stdout}"))
}

/// Run `run` of job `job` once it has ended: `cronbox logs RUN --follow`
/// returns at the run's end (told by the admin's run events, not polled),
/// then the run is read from `cronbox runs --job JOB --json`.
pub(crate) fn ended(base: &str, token: &str, job: &str, run: i64) -> Value {
    let (_, _, said) = cli(base, token, &["logs", &run.to_string(), "--follow"]);
    assert!(said.contains(&format!("run {run} ended")), "{said}");
    let page = json(base, token, &["runs", "--job", job]);
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == run)
        .cloned()
        .unwrap_or_else(|| panic!("run {run} not listed: {page}"))
}

#[test]
fn a_cli_session_against_cronbox_up() {
    let _turn = TESTS.turn();
    let mut s = Session::start();
    let id = definitions::modules_and_definitions(&s);
    let spin = runs::runs_versions_and_state(&s, &id);
    access::secrets_grants_and_show(&s, &id);
    access::users(&s);
    definitions::job_lifecycle(&s, &id, &spin);
    settings::errors_and_configuration(&s);
    settings::contexts_and_calendars(&s);
    settings::groups(&s);
    workflows::workflows(&s);
    terminate(&mut s.stack.0);
}
