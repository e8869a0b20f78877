//! The session's access: secrets, HTTP grants within the ceiling, the
//! refusals that name their command, `job show`, users, and the audit log
//! of it all.

use super::*;

/// Secrets, HTTP grants under the tenant's ceiling, refusals and `job
/// show`.
pub(super) fn secrets_grants_and_show(s: &Session, id: &str) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let data = &s.data;
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
    let updated = json(base, token, &["job", "update", id, "--secret", "TOKEN"]);
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
    let (code, _, refused) = cli(base, token, &["job", "update", id, "--http-allow", base]);
    assert_eq!(code, 1);
    assert!(
        refused.contains("outside the HTTP ceiling")
            && refused.contains("`cronbox ceiling default --set ORIGIN...`"),
        "{refused}"
    );
    ok(base, token, &["ceiling", "default", "--set", base]);
    assert_eq!(ok(base, token, &["ceiling", "default"]).trim(), base);
    let granted = json(base, token, &["job", "update", id, "--http-allow", base]);
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
}

/// Users added, listed, given a new password, removed.
pub(super) fn users(s: &Session) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let data = &s.data;
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
            cronbox_tls::client()
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

    // All of it is in the audit log, passwords and secret values not.
    let logins = ok(
        base,
        token,
        &[
            "audit", "--actor", "ada", "--action", "session", "--since", "1h",
        ],
    );
    assert!(
        logins.contains("POST /api/v1/session") && logins.contains("401 refused"),
        "{logins}"
    );
    let everything = json(base, token, &["audit", "--limit", "1000"]);
    let actions: Vec<&str> = everything["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["action"].as_str().unwrap())
        .collect();
    for action in [
        "POST /api/v1/users",
        "DELETE /api/v1/users/{name}",
        "PUT /api/v1/secrets/{name}",
    ] {
        assert!(actions.contains(&action), "{action} not in {actions:?}");
    }
    let text = everything.to_string();
    for never in ["cli-secret-value", "ada-password-123", "ada-new-password-1"] {
        assert!(!text.contains(never), "{never:?} is in the audit log");
    }

    let versions = ok(base, token, &["module", "versions", "greeter"]);
    assert_eq!(
        versions.lines().count(),
        4,
        "a header and three versions: {versions}"
    );
    assert!(versions.contains("rollback to version 1"), "{versions}");

    // A note on a push: the same bytes again are a new version only with
    // one; the newest is marked as the one its followers run.
    let hello = cronbox_example_jobs::path("hello");
    let push = |more: &[&str]| {
        let mut args = vec!["module", "push", "noted", hello.to_str().unwrap()];
        args.extend(more);
        ok(base, token, &args)
    };
    assert!(push(&[]).contains("noted version 1"));
    assert!(push(&["--note", "rebuilt for the new SDK"]).contains("noted version 2"));
    assert!(push(&[]).contains("noted version 2"), "no note: unchanged");
    let versions = ok(base, token, &["module", "versions", "noted"]);
    let live = versions.lines().nth(1).unwrap();
    assert!(
        live.starts_with("2 (live)") && live.contains("rebuilt for the new SDK"),
        "{versions}"
    );
    let (code, _, said) = cli(
        base,
        token,
        &[
            "module",
            "push",
            "noted",
            hello.to_str().unwrap(),
            "--note",
            "bell \u{7}",
        ],
    );
    assert!(code == 1 && said.contains("note"), "{said}");
}
