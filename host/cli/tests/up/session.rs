//! A whole CLI session against `cronbox up`: modules, jobs, runs, logs, secrets, users, quotas and ceilings.

use super::*;

/// Runs `cronbox ARGS` against the admin at `base` with `token`; returns
/// (exit code, stdout, stderr).
fn cli(base: &str, token: &str, args: &[&str]) -> (i32, String, String) {
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
fn ok(base: &str, token: &str, args: &[&str]) -> String {
    let (code, stdout, stderr) = cli(base, token, args);
    assert_eq!(code, 0, "cronbox {args:?} failed: {stderr}");
    stdout
}

/// `cli --json` that must succeed; returns the parsed output.
fn json(base: &str, token: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    let stdout = ok(base, token, &args);
    serde_json::from_str(&stdout).unwrap_or_else(|error| panic!("{args:?}: {error}: {stdout}"))
}

/// Polls `cronbox runs --job JOB --json` until run `run` has ended.
fn ended(base: &str, token: &str, job: &str, run: i64) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let page = json(base, token, &["runs", "--job", job]);
        if let Some(found) = page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == run && (r["status"] == "success" || r["status"] == "failed"))
        {
            return found.clone();
        }
        assert!(Instant::now() < deadline, "run {run} never ended: {page}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_cli_session_against_cronbox_up() {
    let data = tempfile::tempdir().unwrap();
    let (mut stack, printed, at) = up_with_env(
        data.path(),
        None,
        &[(
            "CRONBOX_EXECUTOR_HTTP_ALLOW_NETS",
            std::path::Path::new("127.0.0.1/32"),
        )],
    );
    let bind = at.admin;
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let (base, token) = (format!("http://{bind}"), token.trim().to_owned());
    let (base, token) = (base.as_str(), token.as_str());
    let hello = cronbox_example_jobs::path("hello");
    let counter = cronbox_example_jobs::path("counter");
    let runaway = cronbox_example_jobs::path("runaway");

    // Push a module and create a job from a TOML file.
    let pushed = ok(
        base,
        token,
        &[
            "module",
            "push",
            "greeter",
            hello.to_str().unwrap(),
            "--label",
            "first",
        ],
    );
    assert!(pushed.contains("greeter version 1"), "{pushed}");
    let file = data.path().join("greeter.toml");
    std::fs::write(
        &file,
        "name = \"greeter-job\"\nmodule = \"greeter\"\nschedule_type = \"NONE\"\nparam = \"toml\"\n",
    )
    .unwrap();
    let job = json(
        base,
        token,
        &["job", "create", "--file", file.to_str().unwrap()],
    );
    assert_eq!(
        (job["name"].as_str(), job["module_name"].as_str()),
        (Some("greeter-job"), Some("greeter"))
    );
    let id = job["id"].to_string();
    let listed = ok(base, token, &["job", "list"]);
    assert!(
        listed
            .lines()
            .any(|line| line.contains("greeter-job") && line.contains("greeter")),
        "{listed}"
    );

    // Export every job as definitions and import them again (copies,
    // stopped); a bad line is named and nothing of its file is sent.
    let exported = ok(base, token, &["job", "export"]);
    let before = exported.lines().count();
    assert!(
        exported
            .lines()
            .any(|line| line.contains("\"greeter-job\"")),
        "{exported}"
    );
    let file = data.path().join("jobs.jsonl");
    std::fs::write(&file, &exported).unwrap();
    let imported = ok(base, token, &["job", "import", file.to_str().unwrap()]);
    assert_eq!(
        imported.trim(),
        format!("imported {before} jobs (0 started)")
    );
    assert_eq!(
        ok(base, token, &["job", "export"]).lines().count(),
        2 * before
    );
    std::fs::write(&file, format!("{exported}{{\"name\": 7}}\n")).unwrap();
    let (code, _, stderr) = cli(base, token, &["job", "import", file.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(stderr.contains(&format!("line {}", before + 1)), "{stderr}");
    let copies: Vec<Value> = ok(base, token, &["job", "export"])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(copies.len(), 2 * before);
    // The copies go again (the rest of the session counts the jobs).
    let listed = json(base, token, &["job", "list"]);
    for copy in &listed.as_array().unwrap()[before..] {
        ok(base, token, &["job", "delete", &copy["id"].to_string()]);
    }

    // Trigger with a parameter and follow the log to the end.
    let run = json(base, token, &["job", "trigger", &id, "--param", "cli"])["run_id"]
        .as_i64()
        .unwrap();
    let (code, log, end) = cli(base, token, &["logs", &run.to_string(), "--follow"]);
    assert_eq!(code, 0, "{end}");
    assert!(log.contains("hello, cli"), "{log}");
    assert!(end.contains("ended: success"), "{end}");
    let listed = ok(base, token, &["runs", "--job", &id]);
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
    let deadline = Instant::now() + WAIT;
    loop {
        let (code, stdout, stderr) = cli(base, token, &["kill", &spinning.to_string()]);
        if code == 0 {
            assert!(stdout.contains("killed"), "{stdout}");
            break;
        }
        assert!(stderr.contains("not running"), "{stderr}");
        assert!(Instant::now() < deadline, "never became killable: {stderr}");
        std::thread::sleep(Duration::from_millis(100));
    }
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
    let run = json(base, token, &["job", "trigger", &id])["run_id"]
        .as_i64()
        .unwrap();
    let counted = ended(base, token, &id, run);
    assert!(
        counted["message"].as_str().unwrap().starts_with("count=1"),
        "{counted}"
    );
    let state = json(base, token, &["state", &id]);
    assert_eq!(state["state"]["count"], "1");
    let rolled = ok(base, token, &["module", "rollback", "greeter", "1"]);
    assert!(rolled.contains("now version 3"), "{rolled}");
    let run = json(base, token, &["job", "trigger", &id, "--param", "again"])["run_id"]
        .as_i64()
        .unwrap();
    assert_eq!(ended(base, token, &id, run)["message"], "hello, again");

    // Configuration flags add to the job's configuration.
    json(
        base,
        token,
        &["job", "update", &id, "--job-config", "greeting=hi"],
    );
    let updated = json(
        base,
        token,
        &["job", "update", &id, "--job-config", "other=x"],
    );
    assert_eq!(
        updated["config"],
        json!({ "greeting": "hi", "other": "x" }),
        "{updated}"
    );

    // Secrets: up made a key beside its database; set from a file, listed
    // by name only, referenced by a job, deleted only with force.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let key = std::fs::metadata(data.path().join("secrets.key")).unwrap();
        assert_eq!(key.permissions().mode() & 0o777, 0o600);
    }
    let value_file = data.path().join("token-value");
    std::fs::write(&value_file, "cli-secret-value").unwrap();
    ok(
        base,
        token,
        &[
            "secret",
            "set",
            "TOKEN",
            "--file",
            value_file.to_str().unwrap(),
        ],
    );
    let updated = json(base, token, &["job", "update", &id, "--secret", "TOKEN"]);
    assert_eq!(updated["secrets"], json!(["TOKEN"]), "{updated}");
    let listed = ok(base, token, &["secret", "list"]);
    assert!(
        listed.starts_with("TENANT")
            && listed.contains("TOKEN")
            && !listed.contains("cli-secret-value"),
        "{listed}"
    );
    let (code, _, refused) = cli(base, token, &["secret", "delete", "TOKEN"]);
    assert_eq!(code, 1);
    assert!(refused.contains("is referenced by job(s)"), "{refused}");
    let deleted = ok(base, token, &["secret", "delete", "TOKEN", "--force"]);
    assert!(deleted.contains("still referenced by job(s)"), "{deleted}");

    // HTTP grants need the tenant's ceiling first (the refusal names the
    // command that sets it); under `up --http-allow-nets`, a granted job
    // calls a service on this machine (here the admin itself).
    let (code, _, refused) = cli(base, token, &["job", "update", &id, "--http-allow", base]);
    assert_eq!(code, 1);
    assert!(
        refused.contains("outside the HTTP ceiling")
            && refused.contains("`cronbox ceiling default --set ORIGIN...`"),
        "{refused}"
    );
    ok(base, token, &["ceiling", "default", "--set", base]);
    assert_eq!(ok(base, token, &["ceiling", "default"]).trim(), base);
    let granted = json(base, token, &["job", "update", &id, "--http-allow", base]);
    assert_eq!(granted["http_allow"], json!([base]));
    let fetch = cronbox_example_jobs::path("http-fetch");
    ok(
        base,
        token,
        &["module", "push", "fetch", fetch.to_str().unwrap()],
    );
    let readiness = format!("{base}/readyz");
    // A module that was never pushed: the refusal names the command.
    let (code, _, refused) = cli(
        base,
        token,
        &["job", "create", "--name", "orphan", "--module", "nosuch"],
    );
    assert_eq!(code, 1);
    assert!(
        refused.contains("`cronbox module push nosuch FILE.wasm`"),
        "{refused}"
    );
    // No schedule given: said, not silent.
    let (code, created, note) = cli(
        base,
        token,
        &[
            "job",
            "create",
            "--name",
            "fetcher",
            "--module",
            "fetch",
            "--param",
            &readiness,
            "--http-allow",
            base,
            "--json",
        ],
    );
    assert_eq!(code, 0, "{note}");
    assert!(note.contains("note: no schedule given"), "{note}");
    let fetcher: Value = serde_json::from_str(&created).unwrap();
    let fetcher = fetcher["id"].to_string();
    let run = ok(base, token, &["job", "trigger", &fetcher]);
    let run: i64 = run.trim().trim_start_matches("run ").parse().unwrap();
    let fetched = ended(base, token, &fetcher, run);
    assert_eq!(fetched["status"], "success", "{fetched}");
    assert!(
        fetched["message"]
            .as_str()
            .unwrap()
            .starts_with("status 200"),
        "{fetched}"
    );
    // `job show` for a person: the definition, next fires in the job's
    // zone, the last runs.
    let shown = ok(base, token, &["job", "show", &fetcher]);
    for expected in [
        format!("  param      {readiness}\n"),
        "  module     fetch\n".to_owned(),
        "  next fires none\n".to_owned(),
        format!("    {run:>6}  success    "),
    ] {
        assert!(shown.contains(&expected), "{expected:?} in {shown}");
    }

    // Users: added with a password from a file (its line end dropped),
    // listed, given a new password, removed.
    let password_file = data.path().join("ada-password");
    std::fs::write(&password_file, "ada-password-123\n").unwrap();
    let password_path = password_file.to_str().unwrap();
    let added = ok(
        base,
        token,
        &[
            "user",
            "add",
            "ada",
            "--role",
            "Developer",
            "--password-file",
            password_path,
        ],
    );
    assert!(
        added.contains("user ada added to tenant default as developer"),
        "{added}"
    );
    let logs_in = |password: &str| {
        let body = json!({ "user": "ada", "password": password });
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            reqwest::Client::new()
                .post(format!("{base}/api/v1/session"))
                .json(&body)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    assert_eq!(logs_in("ada-password-123"), 200);
    let listed = ok(base, token, &["user", "list"]);
    assert!(
        listed
            .lines()
            .any(|line| line.contains("ada") && line.contains("developer")),
        "{listed}"
    );
    std::fs::write(&password_file, "ada-new-password-1").unwrap();
    let changed = ok(
        base,
        token,
        &["user", "passwd", "ada", "--password-file", password_path],
    );
    assert!(changed.contains("password of ada set"), "{changed}");
    assert_eq!(logs_in("ada-password-123"), 401);
    assert_eq!(logs_in("ada-new-password-1"), 200);
    let (code, _, refused) = cli(
        base,
        token,
        &[
            "user",
            "add",
            "Bad Name",
            "--role",
            "viewer",
            "--password-file",
            password_path,
        ],
    );
    assert_eq!(code, 1);
    assert!(refused.contains("user name"), "{refused}");
    let (code, _, refused) = cli(base, token, &["user", "add", "x", "--role", "boss"]);
    assert_eq!(code, 2, "{refused}");
    assert!(refused.contains("not a role"), "{refused}");
    let removed = ok(base, token, &["user", "remove", "ada"]);
    assert!(removed.contains("user ada removed"), "{removed}");
    assert_eq!(logs_in("ada-new-password-1"), 401);

    let versions = ok(base, token, &["module", "versions", "greeter"]);
    assert_eq!(
        versions.lines().count(),
        4,
        "a header and three versions: {versions}"
    );
    assert!(versions.contains("rollback to version 1"), "{versions}");

    // What users wrote is printed with its control characters escaped: a
    // pause note cannot clear or rewrite the operator's terminal.
    let greeter = data.path().join("greeter.toml");
    let noted = json(
        base,
        token,
        &["job", "create", "--file", greeter.to_str().unwrap()],
    )["id"]
        .to_string();
    ok(
        base,
        token,
        &["job", "pause", &noted, "--note", "\u{1b}[2Jgone\r"],
    );
    let listed = ok(base, token, &["job", "list"]);
    assert!(!listed.contains(['\u{1b}', '\r']), "{listed:?}");
    assert!(listed.contains("\\u{1b}[2Jgone\\r"), "{listed}");
    ok(base, token, &["job", "delete", &noted]);

    // Update, show, start, stop and delete.
    let updated = json(
        base,
        token,
        &[
            "job",
            "update",
            &spin,
            "--param",
            "changed",
            "--cron",
            "0 0 3 * * ?",
        ],
    );
    assert_eq!(
        (updated["param"].as_str(), updated["schedule_conf"].as_str()),
        (Some("changed"), Some("0 0 3 * * ?"))
    );
    assert_eq!(
        updated["module_name"], "spin",
        "the module reference survives an update"
    );
    let started = json(base, token, &["job", "start", &spin]);
    assert_eq!(started["enabled"], true);
    let shown = json(base, token, &["job", "show", &spin]);
    assert_eq!(shown["next_fires"].as_array().unwrap().len(), 5);
    assert!(ok(base, token, &["job", "stop", &spin]).contains("stopped"));

    // Pause with a note and an end; backfill the last three days of the
    // daily schedule, then cancel what is left.
    let paused = ok(
        base,
        token,
        &[
            "job",
            "pause",
            &spin,
            "--note",
            "maintenance",
            "--for",
            "1h",
        ],
    );
    assert!(
        paused.contains("paused by operator token until") && paused.contains(": maintenance"),
        "{paused}"
    );
    let (code, _, refused) = cli(
        base,
        token,
        &["job", "pause", &spin, "--until", "next tuesday"],
    );
    assert_eq!(code, 1);
    assert!(refused.contains("not an RFC 3339 instant"), "{refused}");
    let three_days_ago = (chrono::Utc::now() - chrono::Duration::days(3)).to_rfc3339();
    let backfill = json(
        base,
        token,
        &[
            "job",
            "backfill",
            &spin,
            "--from",
            &three_days_ago,
            "--per-second",
            "1",
        ],
    );
    assert!(
        (2..=3).contains(&backfill["planned"].as_i64().unwrap()),
        "{backfill}"
    );
    let backfill_id = backfill["id"].to_string();
    let cancelled = ok(base, token, &["job", "backfill-cancel", &backfill_id]);
    assert!(
        cancelled.contains(&format!("backfill {backfill_id}"))
            && cancelled.contains("run(s) written"),
        "{cancelled}"
    );
    assert!(ok(base, token, &["job", "stop", &spin]).contains("stopped"));
    assert!(ok(base, token, &["job", "delete", &spin]).contains("deleted"));
    let (code, _, stderr) = cli(base, token, &["job", "show", &spin]);
    assert_eq!(code, 1, "{stderr}");
    let modules = ok(base, token, &["module", "list"]);
    assert!(
        modules
            .lines()
            .any(|line| line.starts_with("greeter ") && line.contains(" 3 ")),
        "{modules}"
    );
    let runs = ok(base, token, &["runs", "--job", &id]);
    assert!(runs.lines().next().unwrap().starts_with("RUN"), "{runs}");
    assert_eq!(runs.lines().count(), 4, "a header and three runs: {runs}");

    // Errors: clear messages, non-zero exits.
    let (code, _, stderr) = cli(base, token, &["job", "show", "9999"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no job 9999"), "{stderr}");
    let (code, _, stderr) = cli("http://127.0.0.1:1", token, &["job", "list"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cannot reach the admin at http://127.0.0.1:1"),
        "{stderr}"
    );
    let (code, _, stderr) = cli(base, "wrong", &["job", "list"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("wrong token"), "{stderr}");
    let typo = data.path().join("typo.toml");
    std::fs::write(
        &typo,
        "name = \"x\"\nmodule = \"greeter\"\nshedule_type = \"CRON\"\n",
    )
    .unwrap();
    let (code, _, stderr) = cli(
        base,
        token,
        &["job", "create", "--file", typo.to_str().unwrap()],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("not a job definition") && stderr.contains("shedule_type"),
        "the client names the unknown field before sending: {stderr}"
    );
    let (code, _, stderr) = cli(base, token, &["job", "frobnicate"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("frobnicate"), "{stderr}");

    // A configuration file, and the environment overriding it.
    let config = data.path().join("cronbox.toml");
    std::fs::write(
        &config,
        format!("admin = \"{base}\"\napi_token = \"{token}\"\n"),
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args([
            "--config",
            config.to_str().unwrap(),
            "job",
            "list",
            "--json",
        ])
        .env_remove("CRONBOX_ADMIN")
        .env_remove("CRONBOX_API_TOKEN")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        5,
        "three demo jobs and our two"
    );
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args([
            "--config",
            config.to_str().unwrap(),
            "config",
            "show",
            "--json",
        ])
        .env("CRONBOX_ADMIN", "http://127.0.0.1:1")
        .env_remove("CRONBOX_API_TOKEN")
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&output.stdout).unwrap();
    let setting = |name: &str| {
        shown
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["setting"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(setting("CRONBOX_ADMIN")["source"], "environment");
    assert_eq!(setting("CRONBOX_ADMIN")["value"], "http://127.0.0.1:1");
    assert!(
        setting("CRONBOX_API_TOKEN")["source"]
            .as_str()
            .unwrap()
            .starts_with("file")
    );
    assert_eq!(setting("CRONBOX_API_TOKEN")["value"], "(hidden)");
    assert_eq!(setting("CRONBOX_ADMIN_PRE_READ")["value"], "5s");
    std::fs::write(&config, "colour = \"red\"\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["--config", config.to_str().unwrap(), "job", "list"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("unknown setting \"colour\""),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    // `up` recorded itself as the current context: every command finds it
    // from any folder, with nothing set; the banner says so in commands.
    assert!(
        printed.contains("this admin is the current context \"up\"")
            && printed.contains("  cronbox job list\n")
            && printed.contains(&format!("  export CRONBOX_ADMIN={base}\n")),
        "{printed}"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let from_anywhere = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(args)
            .current_dir(elsewhere.path())
            .env_remove("CRONBOX_ADMIN")
            .env_remove("CRONBOX_API_TOKEN")
            .env("CRONBOX_CONTEXTS", data.path().join("contexts.toml"))
            .output()
            .unwrap()
    };
    let output = from_anywhere(&["job", "list", "--json"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 5, "{listed}");
    let contexts = from_anywhere(&["context"]);
    let contexts = String::from_utf8_lossy(&contexts.stdout);
    assert!(
        contexts.starts_with(&format!("* up           {base}  (token in ")),
        "{contexts}"
    );
    // Its token never goes to another admin.
    let output = from_anywhere(&["job", "list", "--admin", "http://127.0.0.1:1"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no API token for http://127.0.0.1:1"),
        "{stderr}"
    );
    let output = from_anywhere(&["job", "list", "--context", "staging"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no context \"staging\" (known: up)"),
        "{stderr}"
    );
    // Calendars: set (dates sorted), listed, deleted.
    let set = ok(
        base,
        token,
        &["calendar", "set", "holidays", "2030-01-02", "2030-01-01"],
    );
    assert!(set.contains("calendar holidays set: 2 date(s)"), "{set}");
    let listed = ok(base, token, &["calendar", "list"]);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("holidays") && line.contains("2030-01-01 2030-01-02")),
        "{listed}"
    );
    let deleted = ok(base, token, &["calendar", "delete", "holidays"]);
    assert!(deleted.contains("calendar holidays deleted"), "{deleted}");
    terminate(&mut stack.0);
}
