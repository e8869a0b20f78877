//! A legacy group: pyxxl (xxl-job's Python executor, from PyPI) started as
//! its own process against `cronbox up`, driven through the CLI: it
//! registers with its group's token, runs a handler with its param, reports
//! a failure, is killed mid-run, has its log read, and removes itself when
//! it stops.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;

use super::session::{cli, ended, json, ok};
use super::*;

/// The pyxxl release the legacy path is tested with.
const PYXXL: &str = "pyxxl==0.4.8";
const TOKEN: &str = "legacy-token-for-tests";

/// The executors registered in `group` that are alive.
async fn alive_in(api: &AdminClient, group: &str) -> Vec<String> {
    let (status, executors) = api.get("/api/v1/executors").await;
    assert_eq!(status, 200, "{executors}");
    executors
        .as_array()
        .unwrap()
        .iter()
        .filter(|executor| executor["group"] == group && executor["alive"] == true)
        .map(|executor| executor["address"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pyxxl_executor_runs_legacy_jobs_under_cronbox() {
    let venv = cronbox_tests::python_tool(PYXXL);
    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim();
    let api = AdminClient::new(&base, token);

    let set = ok(
        &base,
        token,
        &[
            "group",
            "set",
            "pyapp",
            "--legacy",
            "xxl-job-3.4",
            "--access-token",
            TOKEN,
        ],
    );
    assert!(set.contains("xxl-job executors (xxl-job-3.4)"), "{set}");
    let listed = ok(&base, token, &["group", "list"]);
    assert!(
        listed.contains("xxl-job-3.4") && !listed.contains(TOKEN),
        "{listed}"
    );

    // A registration with another token is refused, as xxl-job refuses it.
    let refused: Value = api
        .http
        .post(format!("{base}/xxl-job-admin/api/registry"))
        .header("XXL-JOB-ACCESS-TOKEN", "not-the-token")
        .json(&json!({
            "registryGroup": "EXECUTOR",
            "registryKey": "pyapp",
            "registryValue": "http://127.0.0.1:9/"
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["code"], 500, "{refused}");
    assert!(alive_in(&api, "pyapp").await.is_empty());

    // pyxxl, configured as for xxl-job's admin.
    let logs = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/legacy/pyxxl_executor.py");
    let mut pyxxl = Command::new(venv.join("bin").join("python"))
        .arg(script)
        .arg(format!("{base}/xxl-job-admin/api/"))
        .arg("pyapp")
        .arg(logs.path())
        .env("XXL_JOB_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut listening = String::new();
    BufReader::new(pyxxl.stdout.take().unwrap())
        .read_line(&mut listening)
        .unwrap();
    let address = listening
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("pyxxl did not start: {listening:?}"))
        .to_owned();
    until_within(Duration::from_secs(30), "pyxxl registers", || async {
        (alive_in(&api, "pyapp").await == [address.clone()]).then_some(())
    })
    .await;

    // A legacy job names a handler; what such a run cannot honour is refused.
    let create = |name: &str, handler: &str| {
        json(
            &base,
            token,
            &[
                "job",
                "create",
                "--name",
                name,
                "--group",
                "pyapp",
                "--handler",
                handler,
            ],
        )["id"]
            .to_string()
    };
    let (code, _, said) = cli(
        &base,
        token,
        &[
            "job", "create", "--name", "x", "--group", "pyapp", "--module", "hello",
        ],
    );
    assert!(code != 0 && said.contains("executor_handler"), "{said}");
    let (code, _, said) = cli(
        &base,
        token,
        &[
            "job",
            "create",
            "--name",
            "x",
            "--group",
            "pyapp",
            "--handler",
            "echo",
            "--secret",
            "db",
        ],
    );
    assert!(code != 0 && said.contains("secrets"), "{said}");
    let (code, _, said) = cli(
        &base,
        token,
        &["job", "create", "--name", "x", "--handler", "echo"],
    );
    assert!(code != 0 && said.contains("runs modules"), "{said}");

    // A run with its param echoed back, its log read from pyxxl.
    let echo = create("py-echo", "echo");
    let run = json(
        &base,
        token,
        &["job", "trigger", &echo, "--param", "from cronbox"],
    )["run_id"]
        .as_i64()
        .unwrap();
    let echoed = ended(&base, token, &echo, run);
    assert_eq!(echoed["status"], "success", "{echoed}");
    assert_eq!(echoed["message"], "echo: from cronbox", "{echoed}");
    assert_eq!(echoed["executor"], address.as_str(), "{echoed}");
    let log = ok(&base, token, &["logs", &run.to_string()]);
    assert!(log.contains("echoing from cronbox"), "{log}");

    // Moved to a module and back, keeping its id and its runs.
    ok(
        &base,
        token,
        &[
            "job", "update", &echo, "--group", "default", "--module", "hello",
        ],
    );
    let run = json(&base, token, &["job", "trigger", &echo, "--param", "wasm"])["run_id"]
        .as_i64()
        .unwrap();
    let greeted = ended(&base, token, &echo, run);
    assert_eq!(greeted["status"], "success", "{greeted}");
    assert!(
        greeted["message"].as_str().unwrap().contains("wasm"),
        "{greeted}"
    );
    assert_ne!(greeted["module_digest"], "", "{greeted}");
    ok(
        &base,
        token,
        &[
            "job",
            "update",
            &echo,
            "--group",
            "pyapp",
            "--handler",
            "echo",
        ],
    );
    let run = json(&base, token, &["job", "trigger", &echo, "--param", "back"])["run_id"]
        .as_i64()
        .unwrap();
    assert_eq!(ended(&base, token, &echo, run)["message"], "echo: back");
    let runs = json(&base, token, &["runs", "--job", &echo]);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 3, "{runs}");

    // A failure is reported as one (and retried as any run would be).
    let fail = create("py-fail", "fail");
    let run = json(&base, token, &["job", "trigger", &fail])["run_id"]
        .as_i64()
        .unwrap();
    let failed = ended(&base, token, &fail, run);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap()
            .contains("failed on purpose"),
        "{failed}"
    );

    // Killed mid-run: its first line, followed, says it runs.
    let slow = create("py-slow", "slow");
    let run = json(&base, token, &["job", "trigger", &slow])["run_id"]
        .as_i64()
        .unwrap();
    let mut follower = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["logs", &run.to_string(), "--follow"])
        .env("CRONBOX_ADMIN", &base)
        .env("CRONBOX_API_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    let first = lines
        .by_ref()
        .map(Result::unwrap)
        .find(|line| line.contains("slow handler started"));
    assert!(first.is_some(), "the slow handler's log was followed");
    let (code, killed, said) = cli(&base, token, &["kill", &run.to_string()]);
    assert_eq!(code, 0, "{said}");
    assert!(killed.contains("killed"), "{killed}");
    for _ in lines {}
    assert_eq!(
        follower.wait().unwrap().code(),
        Some(1),
        "a killed run's follower exits 1"
    );
    let killed = ended(&base, token, &slow, run);
    assert_eq!(killed["outcome"], "killed", "{killed}");

    // Stopped, pyxxl removes itself from the group.
    let status = Command::new("kill")
        .args(["-TERM", &pyxxl.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    pyxxl.wait().unwrap();
    until_within(Duration::from_secs(15), "pyxxl deregisters", || async {
        alive_in(&api, "pyapp").await.is_empty().then_some(())
    })
    .await;
    terminate(&mut stack.0);
}
