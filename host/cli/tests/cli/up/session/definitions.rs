//! The session's modules and job definitions: a module pushed, a job
//! created from a TOML file, exported and imported; jobs updated, shown,
//! started, stopped, paused, backfilled and deleted.

use super::*;

/// Pushes a module, creates a job from a TOML file, exports and imports
/// every job; the job's id.
pub(super) fn modules_and_definitions(s: &Session) -> String {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let data = &s.data;
    let hello = cronbox_example_jobs::path("hello");
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
    id
}

/// What users wrote is printed escaped; a job's whole life from the CLI.
pub(super) fn job_lifecycle(s: &Session, id: &str, spin: &str) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    let data = &s.data;
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
            spin,
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
    let started = json(base, token, &["job", "start", spin]);
    assert_eq!(started["enabled"], true);
    let shown = json(base, token, &["job", "show", spin]);
    assert_eq!(shown["next_fires"].as_array().unwrap().len(), 5);
    assert!(ok(base, token, &["job", "stop", spin]).contains("stopped"));

    // Pause with a note and an end; backfill the last three days of the
    // daily schedule, then cancel what is left.
    let paused = ok(
        base,
        token,
        &["job", "pause", spin, "--note", "maintenance", "--for", "1h"],
    );
    assert!(
        paused.contains("paused by operator token until") && paused.contains(": maintenance"),
        "{paused}"
    );
    let (code, _, refused) = cli(
        base,
        token,
        &["job", "pause", spin, "--until", "next tuesday"],
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
            spin,
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
    assert!(ok(base, token, &["job", "stop", spin]).contains("stopped"));
    // The backfill's runs go on after a stop (as manual ones do): those
    // written run the runaway. Killing the job cancels the waiting ones
    // and ends any at an executor, as a person would before deleting it
    // (left going, one held the executor's shutdown for its whole grace).
    let (code, killed, stderr) = cli(base, token, &["kill", "--job", spin]);
    assert_eq!(code, 0, "{stderr}");
    let left = json(base, token, &["runs", "--job", spin]);
    for run in left["runs"].as_array().unwrap() {
        if run["kind"] == "backfill"
            && (run["status"] == "pending" || run["status"] == "dispatched")
        {
            let run = run["id"].as_i64().unwrap();
            assert_ne!(
                ended(base, token, spin, run)["outcome"],
                "success",
                "{killed}"
            );
        }
    }
    assert!(ok(base, token, &["job", "delete", spin]).contains("deleted"));
    let (code, _, stderr) = cli(base, token, &["job", "show", spin]);
    assert_eq!(code, 1, "{stderr}");
    let modules = ok(base, token, &["module", "list"]);
    assert!(
        modules
            .lines()
            .any(|line| line.starts_with("greeter ") && line.contains(" 3 ")),
        "{modules}"
    );
    let runs = ok(base, token, &["runs", "--job", id]);
    assert!(runs.lines().next().unwrap().starts_with("RUN"), "{runs}");
    assert_eq!(runs.lines().count(), 4, "a header and three runs: {runs}");
}
