//! Jobs written in Python and JavaScript (`example-jobs/python`,
//! `example-jobs/js`, built by componentize-py and componentize-js),
//! through `cronbox run` and through `cronbox up`'s executor: the same
//! results, state, failures and limits as Rust jobs.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use cronbox_language_jobs as languages;
use cronbox_tests::{TestGroup, until, until_within};
use serde_json::Value;
use support::Process;

/// Four at a time: each starts its own `cronbox up` or executor and
/// waits on compiles and interpreters' runs much of its time.
static TESTS: TestGroup = TestGroup::new(4);

const LANGUAGES: [&str; 2] = ["python", "js"];
/// Long enough for a Python component to compile on a busy machine.
const COMPILE_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("run")
        .args(args)
        .output()
        .expect("cronbox starts")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path(name: &str) -> String {
    languages::path(name).display().to_string()
}

/// Each language's interpreter compiled once, before the tests go on.
/// Every process here shares the user's cache, where a compilation keeps
/// the functions it compiled: each job's own compile then takes seconds,
/// instead of every test compiling the same interpreter at the same time.
fn interpreters_compiled() {
    static COMPILED: std::sync::Once = std::sync::Once::new();
    COMPILED.call_once(|| {
        let runs: Vec<_> = LANGUAGES
            .iter()
            .map(|language| {
                Command::new(env!("CARGO_BIN_EXE_cronbox"))
                    .args(["run", &path(&format!("{language}-hello"))])
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("cronbox starts")
            })
            .collect();
        for mut run in runs {
            assert!(run.wait().unwrap().success(), "an interpreter compiles");
        }
    });
}

#[test]
fn python_and_javascript_jobs_run_with_cronbox_run() {
    let _turn = TESTS.turn();
    interpreters_compiled();
    for language in LANGUAGES {
        let output = run(&[&path(&format!("{language}-hello")), "--param", "bob"]);
        let printed = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{printed}");
        assert!(
            printed.contains(&format!(
                "outcome: success (200): hello from {language}, bob"
            )),
            "{printed}"
        );
        assert!(printed.contains("[INFO ] greeting bob"), "{printed}");

        let output = run(&[&path(&format!("{language}-counter")), "--state", "count=41"]);
        let printed = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{printed}");
        assert!(
            printed.contains("success (200): count=42 instance_runs=1"),
            "{printed}"
        );
        assert!(printed.contains("count = 42"), "{printed}");
        assert!(
            printed.contains("counter instance retired after 1 runs"),
            "destroy ran: {printed}"
        );

        // A secret reaches the job through wasi:config/store, and is
        // masked wherever the run prints it.
        let output = run(&[
            &path(&format!("{language}-probe")),
            "--param",
            "config TOKEN",
            "--secret",
            "TOKEN=s3cr3t-value",
        ]);
        let printed = text(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{printed}");
        assert!(
            printed.contains("success (200): TOKEN=********"),
            "{language}: {printed}"
        );
        assert!(!printed.contains("s3cr3t-value"), "{language}: {printed}");

        // The trigger as the SDK gives it, and a refused state write as
        // an exception the job handles.
        let probe = path(&format!("{language}-probe"));
        let output = run(&[&probe, "--param", "context", "--shard", "1/3"]);
        let printed = text(&output.stdout);
        assert!(
            printed.contains("success (200): manual shard 1/3 attempt 0 job 0 run 0"),
            "{language}: {printed}"
        );
        let output = run(&[&probe, "--param", "state"]);
        let printed = text(&output.stdout);
        let refusal = if language == "python" {
            "refused: ValueTooLarge: state value is longer than 65536 bytes"
        } else {
            "refused: value-too-large: state value is longer than 65536 bytes"
        };
        assert!(printed.contains(refusal), "{language}: {printed}");
    }
}

/// `cronbox CLI ARGS --json` against `cronbox up`.
struct Cli {
    base: String,
    token: String,
}

impl Cli {
    /// `cronbox up` with its data in `data` (stopped when the process is
    /// dropped), and the CLI against it.
    fn up(data: &std::path::Path) -> (Process, Cli) {
        let (stack, _, at) = support::up_with_env(data, None, &[]);
        let token = std::fs::read_to_string(data.join("api-token")).unwrap();
        let cli = Cli {
            base: format!("http://{}", at.admin),
            token: token.trim().to_owned(),
        };
        (stack, cli)
    }

    fn call(&self, args: &[&str]) -> Value {
        let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(args)
            .arg("--json")
            .env("CRONBOX_ADMIN", &self.base)
            .env("CRONBOX_API_TOKEN", &self.token)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cronbox {args:?}: {}",
            text(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn trigger(&self, job: &str, param: &str) -> i64 {
        self.call(&["job", "trigger", job, "--param", param])["run_id"]
            .as_i64()
            .unwrap()
    }

    /// `cronbox ARGS` against the stack, its stdout piped.
    fn spawn(&self, args: &[&str]) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(args)
            .env("CRONBOX_ADMIN", &self.base)
            .env("CRONBOX_API_TOKEN", &self.token)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// The run once it has ended: `cronbox logs --follow` returns when it
    /// has (and its outcome is recorded), then the run is read.
    fn ended(&self, job: &str, run: i64) -> Value {
        let followed = self.spawn(&["logs", &run.to_string(), "--follow"]);
        let followed = followed.wait_with_output().unwrap().status;
        let page = self.call(&["runs", "--job", job]);
        let found = page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|found| found["id"] == run)
            .unwrap_or_else(|| panic!("run {run} is not listed: {page}"))
            .clone();
        assert!(
            found["status"] == "success" || found["status"] == "failed",
            "run {run} has not ended: {found}"
        );
        // The follower's exit says whether the run succeeded.
        assert_eq!(
            followed.success(),
            found["outcome"] == "success",
            "{followed}: {found}"
        );
        found
    }

    /// `cronbox deploy` of the repository's folder `folder`, with the
    /// pinned tools the build installed and the guest dependencies the
    /// example jobs compiled already.
    fn deploy_example(&self, folder: &str) -> Output {
        let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        support::authoring_command()
            .arg("deploy")
            .arg(repo.join(folder))
            .env("CRONBOX_ADMIN", &self.base)
            .env("CRONBOX_API_TOKEN", &self.token)
            .output()
            .unwrap()
    }

    /// A job of module `name` (pushed from `file`) with extra TOML fields
    /// (never scheduled unless they give a schedule).
    fn job(&self, dir: &std::path::Path, name: &str, file: &str, fields: &str) -> String {
        self.call(&["module", "push", name, file]);
        let toml = dir.join(format!("{name}.toml"));
        std::fs::write(
            &toml,
            if fields.contains("schedule_type") {
                format!("name = \"{name}\"\nmodule = \"{name}\"\n{fields}")
            } else {
                format!(
                    "name = \"{name}\"\nmodule = \"{name}\"\nschedule_type = \"NONE\"\n{fields}"
                )
            },
        )
        .unwrap();
        self.call(&["job", "create", "--file", toml.to_str().unwrap()])["id"].to_string()
    }
}

/// Through a real executor: state committed across runs, an exception a
/// failed run with its traceback or stack, an endless loop stopped by its
/// timeout and by a kill, a memory bomb ended at the memory limit.
#[test]
fn python_and_javascript_jobs_run_on_an_executor_within_their_limits() {
    let _turn = TESTS.turn();
    interpreters_compiled();
    let data = tempfile::tempdir().unwrap();
    let (_stack, cli) = Cli::up(data.path());
    for language in LANGUAGES {
        let counter = cli.job(
            data.path(),
            &format!("{language}-counter"),
            &path(&format!("{language}-counter")),
            "",
        );
        for expected in ["count=1 instance_runs=1", "count=2 instance_runs=2"] {
            let run = cli.trigger(&counter, "");
            let ended = cli.ended(&counter, run);
            assert_eq!(ended["message"], expected, "{language}: {ended}");
        }
        let failing = cli.trigger(&counter, "fail");
        let ended = cli.ended(&counter, failing);
        assert_eq!(ended["outcome"], "failed", "{ended}");
        assert_eq!(
            ended["message"], "failing on purpose after counting 3",
            "{ended}"
        );
        assert_eq!(
            cli.call(&["state", &counter])["state"]["count"],
            "2",
            "{language}: the failed run's write was not committed"
        );

        let probe = cli.job(
            data.path(),
            &format!("{language}-probe"),
            &path(&format!("{language}-probe")),
            "timeout_ms = 1500\nmemory_bytes = 33554432\n",
        );
        let raised = cli.trigger(&probe, "raise");
        let ended = cli.ended(&probe, raised);
        assert_eq!(ended["outcome"], "failed", "{ended}");
        let message = ended["message"].as_str().unwrap();
        assert!(message.ends_with("raised on purpose"), "{message}");
        let log = cli.call(&["logs", &raised.to_string()]);
        let log = log.to_string();
        // The traceback or stack names the job's own source file.
        let source = if language == "python" {
            "app.py"
        } else {
            "probe/job.js"
        };
        assert!(
            log.contains("raised on purpose") && log.contains(source),
            "{log}"
        );

        let spun = cli.trigger(&probe, "spin");
        let ended = cli.ended(&probe, spun);
        assert_eq!(ended["outcome"], "timeout", "{language}: {ended}");

        let hog = cli.trigger(&probe, "hog");
        let ended = cli.ended(&probe, hog);
        assert_eq!(ended["outcome"], "memory_limit", "{language}: {ended}");
    }
}

/// A kill ends a Python or JavaScript loop at once.
#[test]
fn a_kill_stops_a_python_or_javascript_loop() {
    let _turn = TESTS.turn();
    interpreters_compiled();
    let data = tempfile::tempdir().unwrap();
    let (_stack, cli) = Cli::up(data.path());
    for language in LANGUAGES {
        let probe = cli.job(
            data.path(),
            &format!("{language}-probe"),
            &path(&format!("{language}-probe")),
            "timeout_ms = 600000\n",
        );
        // A first run loads the module, so that the loop below starts at once.
        let warm = cli.trigger(&probe, "ok");
        assert_eq!(cli.ended(&probe, warm)["outcome"], "success");
        let spinning = cli.trigger(&probe, "spin");
        // The loop has started once its first line is in the live log.
        let mut follow = cli.spawn(&["logs", &spinning.to_string(), "--follow"]);
        let log = BufReader::new(follow.stdout.take().unwrap());
        let mut lines = log.lines();
        assert!(
            lines.any(|line| line.unwrap().contains("spinning")),
            "{language}: the loop never started"
        );
        let killed_at_ms = now_ms();
        let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(["kill", &spinning.to_string()])
            .env("CRONBOX_ADMIN", &cli.base)
            .env("CRONBOX_API_TOKEN", &cli.token)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output.stderr));
        for _ in lines {}
        // A killed run did not succeed: its follower exits 1.
        assert_eq!(follow.wait().unwrap().code(), Some(1));
        let ended = cli.ended(&probe, spinning);
        assert_eq!(ended["outcome"], "killed", "{language}: {ended}");
        // The executor's record of the run's end, against when the kill
        // was sent (one machine, one clock): the CLI start-up and the
        // admin's forwarding included.
        let took = ended["finished_at_ms"].as_i64().unwrap() - killed_at_ms;
        eprintln!("{language}: kill sent to run ended {took} ms");
        assert!(took < 2_000, "{language}: {took} ms");
    }
}

/// JavaScript's `fetch` and Python's `cronbox_job.http` go through the
/// job's grants like a Rust job's `wasi:http` calls: granted, they reach
/// the origin and the host logs the request; without a grant they are
/// denied and nothing arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_and_javascript_http_reaches_only_granted_origins() {
    let _turn = TESTS.turn();
    interpreters_compiled();
    let origin = cronbox_tests::TestOrigin::start().await;
    let url = origin.url("/bytes/5");
    let grant = origin.origin();
    let fetch = |language: &str, grants: Vec<String>| {
        let param = format!("fetch {url}");
        let probe = path(&format!("{language}-probe"));
        tokio::task::spawn_blocking(move || {
            let mut args = vec![probe, "--param".to_owned(), param];
            args.extend(grants);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&args)
        })
    };
    for (reached, language) in LANGUAGES.into_iter().enumerate() {
        let granted = fetch(
            language,
            vec![
                "--http-allow".to_owned(),
                grant.clone(),
                "--http-allow-nets".to_owned(),
                "127.0.0.1/32".to_owned(),
            ],
        )
        .await
        .unwrap();
        let printed = text(&granted.stdout);
        assert_eq!(granted.status.code(), Some(0), "{language}: {printed}");
        assert!(
            printed.contains("success (200): 200 "),
            "{language}: {printed}"
        );
        assert!(
            printed.contains(&format!("http GET http://127.0.0.1:{} 200", origin.port())),
            "{language}: {printed}"
        );
        assert_eq!(origin.requests().len(), reached + 1, "{language}");
        let denied = fetch(language, Vec::new()).await.unwrap();
        let printed = text(&denied.stdout);
        assert!(printed.contains("denied"), "{language}: {printed}");
        assert_eq!(
            origin.requests().len(),
            reached + 1,
            "{language}: only the granted run reached it"
        );
    }
}

/// The scheduled runs of `job` as (scheduled, started, digest), oldest
/// first.
fn scheduled_runs(cli: &Cli, job: &str) -> Vec<(i64, i64, String)> {
    let page = cli.call(&["runs", "--job", job, "--limit", "200"]);
    let mut runs: Vec<(i64, i64, String)> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|run| run["kind"] == "schedule" && run["status"] == "success")
        .map(|run| {
            (
                run["scheduled_at_ms"].as_i64().unwrap(),
                run["started_at_ms"].as_i64().unwrap(),
                run["module_digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    runs.sort();
    runs
}

/// A Python version pushed to a module whose job fires every second is
/// compiled ahead by the executor: the job keeps firing on time on its
/// earlier version while the new one compiles, then runs the new one, on
/// time too; another job firing every second stays on time throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_version_is_compiled_ahead_and_every_job_stays_on_time() {
    let _turn = TESTS.turn();
    interpreters_compiled();
    let data = tempfile::tempdir().unwrap();
    let (_stack, cli) = Cli::up(data.path());
    // A version no cache has an artifact of, so that it must compile: the
    // Python example with a custom section naming this test's start (its
    // interpreter's functions are in the cache; its artifact is not).
    let mut version = std::fs::read(path("python-hello")).unwrap();
    let stamp = format!("{}", now_ms());
    let name = b"cronbox-test";
    version.extend_from_slice(&[0, (1 + name.len() + stamp.len()) as u8, name.len() as u8]);
    version.extend_from_slice(name);
    version.extend_from_slice(stamp.as_bytes());
    let version_path = data.path().join("python-hello-new.wasm");
    std::fs::write(&version_path, version).unwrap();
    let every_second = "schedule_type = \"CRON\"\nschedule_conf = \"* * * * * ?\"\n";
    let hello = cronbox_example_jobs::path("hello").display().to_string();
    let ticker = cli.job(data.path(), "ticker", &hello, every_second);
    let other = cli.job(data.path(), "other", &hello, every_second);
    for job in [&ticker, &other] {
        cli.call(&["job", "start", job]);
    }
    until("the ticker ran twice", || async {
        (scheduled_runs(&cli, &ticker).len() >= 2).then_some(())
    })
    .await;
    let pushed = cli.call(&["module", "push", "ticker", version_path.to_str().unwrap()]);
    let new_digest = pushed["digest"].as_str().unwrap().to_owned();
    let pushed_at = now_ms();
    // The new version compiles first (seconds in a debug build).
    let runs = until_within(COMPILE_WAIT, "the new version ran three times", || async {
        let runs = scheduled_runs(&cli, &ticker);
        let on_new = runs
            .iter()
            .filter(|(_, _, digest)| *digest == new_digest)
            .count();
        (on_new >= 3).then_some(runs)
    })
    .await;
    let late = |runs: &[(i64, i64, String)]| -> i64 {
        runs.iter()
            .filter(|(scheduled, _, _)| *scheduled >= pushed_at)
            .map(|(scheduled, started, _)| started - scheduled)
            .max()
            .unwrap_or_default()
    };
    let on_old = runs
        .iter()
        .filter(|(scheduled, _, digest)| *scheduled >= pushed_at && *digest != new_digest)
        .count();
    let first_new = runs
        .iter()
        .find(|(_, _, digest)| *digest == new_digest)
        .unwrap();
    eprintln!(
        "after the push: {on_old} run(s) on the earlier version while compiling, first run on \
         the new one {} ms after its instant; latest start of the ticker {} ms, of the other \
         job {} ms",
        first_new.1 - first_new.0,
        late(&runs),
        late(&scheduled_runs(&cli, &other)),
    );
    assert!(
        on_old >= 1,
        "the ticker kept firing while the version compiled: {runs:?}"
    );
    assert!(late(&runs) < 1500, "the ticker stayed on time: {runs:?}");
    assert!(
        late(&scheduled_runs(&cli, &other)) < 1500,
        "the other job stayed on time"
    );
}

/// The three-language example workflow (`example-jobs/etl`) deployed with
/// the one command the docs give, then run: records made in Rust, each
/// transformed by Python (fanned out, two at a time), loaded by
/// JavaScript, every step's structured output read as JSON by the next; a
/// broken record takes the failure edge to notify.
#[test]
fn the_three_language_example_workflow_deploys_in_one_command_and_runs() {
    let _turn = TESTS.turn();
    interpreters_compiled();
    let data = tempfile::tempdir().unwrap();
    let (_stack, cli) = Cli::up(data.path());
    let deployed = cli.deploy_example("example-jobs/etl");
    let printed = format!("{}{}", text(&deployed.stdout), text(&deployed.stderr));
    assert!(deployed.status.success(), "{printed}");
    assert!(
        printed.contains("workflow saved: version 1, 4 node(s)"),
        "{printed}"
    );
    let run = cli.call(&[
        "workflow",
        "run",
        "etl",
        "--input",
        r#"{"records": 4}"#,
        "--wait",
    ]);
    assert_eq!(run["status"], "succeeded", "{run}");
    let node = |name: &str| {
        run["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|node| node["node"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(node("transform")["items"]["succeeded"], 4, "{run}");
    let loaded: Value = serde_json::from_str(node("load")["output"].as_str().unwrap()).unwrap();
    assert_eq!(
        loaded,
        serde_json::json!({
            "loaded": 4,
            "letters": 5 + 5 + 7 + 5,
            "names": ["ALPHA", "BRAVO", "CHARLIE", "DELTA"]
        })
    );
    assert_eq!(node("notify")["status"], "skipped");
    // A record without a name: transform fails, notify runs.
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args([
            "workflow",
            "run",
            "etl",
            "--input",
            r#"{"records": "broken"}"#,
        ])
        .args(["--wait", "--json"])
        .env("CRONBOX_ADMIN", &cli.base)
        .env("CRONBOX_API_TOKEN", &cli.token)
        .output()
        .unwrap();
    let broken: Value = serde_json::from_slice(&output.stdout).unwrap();
    let status = |name: &str| {
        broken["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|node| node["node"] == name)
            .map(|node| node["status"].clone())
    };
    assert_eq!(status("transform").unwrap(), "failed", "{broken}");
    assert_eq!(status("load").unwrap(), "skipped");
    assert_eq!(status("notify").unwrap(), "succeeded");
    // Deployed again with nothing changed: nothing changes.
    let again = cli.deploy_example("example-jobs/etl");
    let printed = text(&again.stdout);
    assert!(
        printed.contains("workflow unchanged (version 1)"),
        "{printed}"
    );
}
