//! `cronbox run` as a process: printed outcome and exit codes.

use std::process::{Command, Output};

use cronbox_example_jobs as jobs;

fn cronbox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .output()
        .expect("cronbox starts")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn path(job: &str) -> String {
    jobs::path(job).display().to_string()
}

#[test]
fn a_successful_run_prints_its_log_and_outcome_and_exits_zero() {
    let output = cronbox(&["run", &path("hello"), "--param", "world"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}{}", stderr(&output));
    assert!(text.contains("[INFO ] hello, world"), "{text}");
    assert!(
        text.contains("outcome: success (200): hello, world"),
        "{text}"
    );
    assert!(text.contains("fuel: "), "{text}");
}

#[test]
fn a_jobs_configuration_is_given_with_job_config() {
    let output = cronbox(&[
        "run",
        "--example",
        "config-echo",
        "--job-config",
        "greeting=hi",
        "--param",
        "greeting",
    ]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("success (200): hi"), "{text}");
}

/// http-fetch reaches a loopback server only with a grant and with the
/// network allowed; the log holds the request's line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_fetch_needs_a_grant_and_an_allowed_network() {
    let origin = cronbox_tests::TestOrigin::start().await;
    let url = origin.url("/bytes/42");
    let grant = origin.origin();
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cronbox(&args)
        })
    };
    let base = ["run", "--example", "http-fetch", "--param", &url];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter()
            .chain(extra)
            .map(|arg| arg.to_string())
            .collect()
    };
    let granted = run(with(&[
        "--http-allow",
        &grant,
        "--http-allow-nets",
        "127.0.0.1/32",
    ]))
    .await
    .unwrap();
    let text = stdout(&granted);
    assert_eq!(granted.status.code(), Some(0), "{text}");
    assert!(
        text.contains("success (200): status 200, 42 bytes"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "http GET http://127.0.0.1:{} 200, 0 B sent, 42 B received",
            origin.port()
        )),
        "{text}"
    );
    for extra in [&["--http-allow", &grant][..], &[][..]] {
        let denied = run(with(extra)).await.unwrap();
        let text = stdout(&denied);
        assert_eq!(denied.status.code(), Some(1), "{text}");
        assert!(text.contains("the request was denied"), "{text}");
    }
    assert_eq!(
        origin.requests().len(),
        1,
        "only the allowed run reached it"
    );
    let bad = run(with(&["--http-allow", "ftp://x"])).await.unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("the scheme must be http or https"),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn examples_run_by_name_with_state() {
    let output = cronbox(&["run", "--example", "counter", "--state", "count=41"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("count=42 instance_runs=1"), "{text}");
    assert!(text.contains("  count = 42"), "{text}");
}

#[test]
fn a_timeout_exits_one() {
    let output = cronbox(&["run", &path("runaway"), "--timeout", "200ms"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains("outcome: timeout (502): timed out after 200 ms"),
        "{text}"
    );
}

#[test]
fn fuel_and_memory_limits_apply() {
    let output = cronbox(&[
        "run",
        &path("fuel-burner"),
        "--param",
        "100000000",
        "--fuel",
        "50000",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("outcome: out_of_fuel (500)"),
        "{}",
        stdout(&output)
    );

    let output = cronbox(&["run", &path("memory-hog"), "--memory", "8MiB"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output)
            .contains("outcome: memory_limit (500): hit the memory limit of 8388608 bytes"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_panic_is_reported_as_a_trap_with_its_message() {
    let output = cronbox(&["run", &path("panicker")]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("outcome: trap (500): trapped:"), "{text}");
    assert!(text.contains("panicking on purpose"), "{text}");
}

#[test]
fn a_component_importing_the_filesystem_runs_with_a_note_and_reads_nothing() {
    let output = cronbox(&["run", &path("fs-snooper")]);
    let notes = stderr(&output);
    // One short line naming the packages, not every interface.
    let note = notes
        .lines()
        .find(|line| line.starts_with("note: "))
        .unwrap_or_else(|| panic!("a note in {notes}"));
    assert!(
        note.starts_with("note: wasi:filesystem")
            && note.ends_with("linked, granting nothing (a use fails inside the job)")
            && !note.contains('/')
            && note.len() < 120,
        "{note}"
    );
    let output = cronbox(&["run", &path("hello")]);
    assert!(!stderr(&output).contains("note:"), "{}", stderr(&output));
}

#[test]
fn json_output_parses() {
    let output = cronbox(&["run", &path("sharded"), "--shard", "1/3", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("valid JSON");
    assert_eq!(report["outcome"], "success");
    assert_eq!(report["message"], "shard 1/3");
    assert_eq!(report["code"], 200);
    assert_eq!(report["log"][0]["text"], "handling shard 1 of 3");
    assert_eq!(report["module_digest"].as_str().map(str::len), Some(64));
}

#[test]
fn refused_modules_and_bad_flags_exit_two_with_a_message() {
    let output = cronbox(&["run", &path("foreign-import")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("acme:vault/keys"),
        "{}",
        stderr(&output)
    );

    let output = cronbox(&["run", "/definitely/not/here.wasm"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("cannot read /definitely/not/here.wasm"),
        "{}",
        stderr(&output)
    );

    let output = cronbox(&["run", "--example", "nope"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no example job named \"nope\""),
        "{}",
        stderr(&output)
    );

    let output = cronbox(&["run", &path("hello"), "--timeout", "soon"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--timeout"), "{}", stderr(&output));

    let output = cronbox(&["run", &path("hello"), "--state", "novalue"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("expected KEY=VALUE"),
        "{}",
        stderr(&output)
    );
}

/// A new version compiles only what changed: the functions compiled for
/// one component are kept (signed) beside the artifacts, and a component
/// with other bytes but the same code — a new version, another job built
/// by the same toolchain — finds most of them instead of compiling them
/// again. A damaged entry is not trusted: that function is compiled again
/// and its entry written anew.
#[test]
fn a_new_version_compiles_only_the_functions_that_changed() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("cache");
    let functions = dir.join("artifacts/functions");
    let entries = || {
        let mut files = Vec::new();
        for sub in std::fs::read_dir(&functions).unwrap() {
            for file in std::fs::read_dir(sub.unwrap().path()).unwrap() {
                files.push(file.unwrap().path());
            }
        }
        files.sort();
        files
    };
    // The same code under another digest: a custom section appended.
    let version = |n: u8| {
        let mut wasm = std::fs::read(path("hello")).unwrap();
        let name = b"cronbox-version";
        let payload_len = 1 + name.len() + 1;
        wasm.extend_from_slice(&[0, payload_len as u8, name.len() as u8]);
        wasm.extend_from_slice(name);
        wasm.push(n);
        let file = cache.path().join(format!("hello-{n}.wasm"));
        std::fs::write(&file, wasm).unwrap();
        file.display().to_string()
    };
    let run = |wasm: &str| {
        let output = cronbox(&[
            "run",
            wasm,
            "--param",
            "v",
            "--cache-dir",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(stdout(&output).contains("success (200): hello, v"));
        let text = stderr(&output);
        assert!(
            text.contains("compiled in "),
            "a new digest compiles: {text}"
        );
    };
    run(&path("hello"));
    let first = entries();
    assert!(first.len() > 50, "functions kept: {}", first.len());
    run(&version(1));
    // Most functions are found: a few of wasmtime's are looked up under
    // a key that differs from one compilation to the next (about one in
    // ten), and are compiled again.
    let second = entries();
    let new = second.iter().filter(|file| !first.contains(file)).count();
    assert!(
        new * 2 < first.len(),
        "{new} of {} functions compiled again",
        first.len()
    );

    // Damaged entries: compiled again, rewritten, and the run is right.
    for file in &first {
        let mut bytes = std::fs::read(file).unwrap();
        *bytes.last_mut().unwrap() ^= 0xFF;
        std::fs::write(file, bytes).unwrap();
    }
    let damaged: Vec<Vec<u8>> = first
        .iter()
        .map(|file| std::fs::read(file).unwrap())
        .collect();
    run(&version(2));
    let rewritten = first
        .iter()
        .zip(&damaged)
        .filter(|(file, bytes)| std::fs::read(file).unwrap() != **bytes)
        .count();
    assert!(
        rewritten * 2 > first.len(),
        "{rewritten} of {} damaged entries written anew",
        first.len()
    );
}

/// Compilation runs in a child process bounded in CPU time, wall-clock
/// time and memory: past a bound the module is refused, naming the bound,
/// and nothing ran. (The CPU bound takes a component whose compile needs
/// more than a second of it: the Python interpreter.)
#[test]
fn compilation_is_bounded_in_time_and_memory() {
    let python = cronbox_language_jobs::path("python-hello");
    let python = python.to_str().unwrap();
    let hello = path("hello");
    for (component, flag, value, says) in [
        (
            python,
            "--compile-cpu",
            "1s",
            "used more than 1s of CPU time",
        ),
        (&hello, "--compile-timeout", "1ms", "--compile-timeout"),
        (&hello, "--compile-memory", "16MiB", "--compile-memory"),
    ] {
        // A cached artifact is not compiled again: compile.
        let output = cronbox(&["run", component, flag, value, "--no-cache"]);
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {text}");
        assert!(text.contains("cannot compile the component"), "{text}");
        assert!(text.contains(says), "{flag} {value}: {text}");
        assert!(!stdout(&output).contains("outcome"), "nothing ran");
    }
    // Within the bounds (the defaults), the child's artifact runs.
    let output = cronbox(&[
        "run",
        &path("hello"),
        "--compile-memory",
        "1GiB",
        "--no-cache",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}

/// A component is compiled once: the next run of the same bytes loads the
/// artifact from the cache directory (signed with the key beside it), and
/// runs the same; `--no-cache` compiles every time and keeps nothing.
#[test]
fn a_component_is_compiled_once_and_loaded_from_the_cache_after() {
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("cache");
    let dir = dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--example", "hello", "--param", "cache"];
        args.extend_from_slice(extra);
        let output = cronbox(&args);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert!(stdout(&output).contains("success (200): hello, cache"));
        stderr(&output)
    };
    let first = run(&["--cache-dir", dir]);
    assert!(first.contains("compiled in "), "{first}");
    let artifacts = std::fs::read_dir(cache.path().join("cache/artifacts"))
        .unwrap()
        .filter(|entry| {
            let name = entry.as_ref().unwrap().file_name();
            name.to_string_lossy().ends_with(".cwasm")
        })
        .count();
    assert_eq!(artifacts, 1, "one artifact kept (beside its lock file)");
    assert!(cache.path().join("cache/artifact-cache.key").is_file());
    let second = run(&["--cache-dir", dir]);
    assert!(second.contains("compiled earlier: loaded in "), "{second}");
    // CRONBOX_CACHE_DIR names it too; --no-cache compiles.
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["run", "--example", "hello"])
        .env("CRONBOX_CACHE_DIR", dir)
        .output()
        .unwrap();
    assert!(
        stderr(&output).contains("compiled earlier"),
        "{}",
        stderr(&output)
    );
    let uncached = run(&["--no-cache"]);
    assert!(uncached.contains("compiled in "), "{uncached}");
}
