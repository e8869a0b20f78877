//! The session's settings: errors and exit codes, a configuration file
//! and the environment over it, contexts found from any folder, calendars.

use super::*;

/// Clear errors, non-zero exits; a configuration file and the
/// environment over it.
pub(super) fn errors_and_configuration(s: &Session) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let data = &s.data;
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
        format!(
            "admin = \"{base}\"\napi_token = \"{token}\"\n\
             # A standard variable's setting: its name as it is.\n\
             [otel]\nservice_name = \"cli-under-test\"\n"
        ),
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
    assert_eq!(setting("OTEL_SERVICE_NAME")["value"], "cli-under-test");
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
}

/// `up`'s context found from any folder; calendars.
pub(super) fn contexts_and_calendars(s: &Session) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let data = &s.data;
    let printed = &s.printed;
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
}

/// Executor groups from the command line: set by the operator, refused to
/// a tenant's job until granted (the refusal naming the command), granted.
pub(super) fn groups(s: &Session) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let acme = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(cronbox_api::Client::new(base, token).create_tenant("acme"))
        .unwrap()
        .token;
    let set = ok(base, token, &["group", "set", "batch"]);
    assert!(set.contains("group batch set: AUTO"), "{set}");
    let hello = cronbox_example_jobs::path("hello");
    ok(
        base,
        &acme,
        &["module", "push", "greeter", hello.to_str().unwrap()],
    );
    let create = [
        "job", "create", "--name", "nightly", "--module", "greeter", "--group", "batch",
    ];
    let (code, _, refused) = cli(base, &acme, &create);
    assert_eq!(code, 1, "{refused}");
    assert!(
        refused.contains("`cronbox group grant batch acme`"),
        "the refusal names the command: {refused}"
    );
    let granted = ok(base, token, &["group", "grant", "batch", "acme"]);
    assert!(granted.contains("group batch granted to acme"), "{granted}");
    let job = json(base, &acme, &create);
    assert_eq!(job["group_name"], "batch", "{job}");
    let listed = ok(base, token, &["group", "list"]);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("batch") && line.trim_end().ends_with("acme")),
        "{listed}"
    );

    // An executor enrolled for the group: its token once, then listed
    // without it, rotated, revoked; a tenant may not enroll one.
    let enrolled = json(
        base,
        token,
        &[
            "executor-token",
            "create",
            "--group",
            "batch",
            "--name",
            "b1",
        ],
    );
    let first = enrolled["token"].as_str().unwrap().to_owned();
    assert!(first.starts_with("cbe_"), "{enrolled}");
    let id = enrolled["id"].to_string();
    let listed = ok(base, token, &["executor-token", "list"]);
    assert!(
        listed.contains("b1") && listed.contains("active") && !listed.contains(&first),
        "{listed}"
    );
    let rotated = ok(
        base,
        token,
        &["executor-token", "rotate", &id, "--overlap", "10m"],
    );
    assert!(
        rotated.contains("token (shown once): cbe_") && rotated.contains("works until"),
        "{rotated}"
    );
    let revoked = ok(base, token, &["executor-token", "revoke", &id]);
    assert!(
        revoked.contains(&format!("executor {id} revoked")),
        "{revoked}"
    );
    let (code, _, refused) = cli(base, &acme, &["executor-token", "list"]);
    assert_eq!(code, 1, "{refused}");
    assert!(refused.contains("operator"), "{refused}");
}
