//! Tests synchronise on events, not on sleeps. Every `sleep(` left in the
//! test code is listed here, per file with its count and the reason it is
//! there; a new one fails this test until it is replaced by an event (bind
//! port 0 and read the address, `until` over what the test waits for, an
//! injected clock) or listed with its reason. A count that falls must be
//! lowered here too, so the list only shrinks.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where test code lives: test folders, the harness, benches.
const TEST_FOLDERS: &[&str] = &[
    "tests/tests",
    "tests/src",
    "host/admin/tests",
    "host/cli/tests",
    "host/executor/tests",
    "host/runtime/tests",
    "host/component-check/tests",
];

/// (file, sleeps in it, why).
const ALLOWED: &[(&str, usize, &str)] = &[
    (
        "tests/src/client.rs",
        1,
        "`until`'s own interval between two polls of what a test waits for",
    ),
    (
        "tests/src/lib.rs",
        2,
        "the stand-in admin's waits for a result: polls between reads of what it recorded",
    ),
    (
        "tests/src/postgres.rs",
        1,
        "polls pg_isready-style between connection attempts while the server starts",
    ),
    (
        "host/runtime/tests/runs.rs",
        2,
        "a kill sent after a chosen delay (what is tested is the time to stop after it), \
         and a live-log reader's interval between pages",
    ),
    (
        "host/cli/tests/heavy/cluster/firing.rs",
        5,
        "fires on the real clock across processes: the test waits for a window of whole \
         seconds to pass, and for PostgreSQL to stay down for a while",
    ),
    (
        "host/cli/tests/heavy/cluster/failover.rs",
        4,
        "fires on the real clock across processes: the test waits for a window of whole \
         seconds to open (the primary's kill or switchover goes into it) and to pass",
    ),
    (
        "host/cli/tests/cli/admin.rs",
        1,
        "a hand-written poll of a process's answers, to become `until`",
    ),
    (
        "host/cli/tests/cli/admin/routing.rs",
        1,
        "a hand-written poll of a process's answers, to become `until`",
    ),
    (
        "host/cli/tests/cli/admin/runs.rs",
        2,
        "polls of a fire being written and of the live log endpoint itself (what the \
         test reads)",
    ),
    (
        "host/cli/tests/cli/executor.rs",
        2,
        "hand-written polls of a process's answers, to become `until`",
    ),
    (
        "host/executor/tests/executor.rs",
        1,
        "the fixture's poll of the executor's idle beat until a job runs",
    ),
    (
        "host/executor/tests/executor/results.rs",
        1,
        "a reader paging a run's live log at its own pace while it runs (the executor's log \
         endpoint is what the test reads; it offers no push)",
    ),
    (
        "host/executor/tests/executor/strategies.rs",
        1,
        "the idle beat sampled while runs go, for the peak of concurrent runs (a sample, \
         not a wait)",
    ),
    (
        "tests/tests/admin_api.rs",
        3,
        "hand-written polls of the admin's answers, to become `until`; one waits past an \
         alarm's retry interval to see that nothing more is sent",
    ),
    (
        "tests/tests/admin_api/runs.rs",
        2,
        "hand-written polls of reports and retention, to become `until`",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

#[test]
fn no_test_sleeps_to_synchronise_beyond_the_listed_ones() {
    let root = root();
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    let mut files = Vec::new();
    let mut folders: Vec<PathBuf> = TEST_FOLDERS
        .iter()
        .map(|folder| root.join(folder))
        .collect();
    // Test files' own modules sit in folders beside them.
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    for path in files {
        if path.extension().is_none_or(|ext| ext != "rs") || path.ends_with("sleeps.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let count = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .map(|line| line.matches("sleep(").count())
            .sum();
        if count > 0 {
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            found.insert(name, count);
        }
    }
    let allowed: BTreeMap<String, usize> = ALLOWED
        .iter()
        .map(|(file, count, _)| ((*file).to_owned(), *count))
        .collect();
    let mut wrong = Vec::new();
    for (file, count) in &found {
        match allowed.get(file) {
            None => wrong.push(format!("{file}: {count} sleep(s), none allowed")),
            Some(most) if count > most => {
                wrong.push(format!("{file}: {count} sleep(s), {most} allowed"))
            }
            Some(most) if count < most => wrong.push(format!(
                "{file}: {count} sleep(s) now, {most} listed: lower the list"
            )),
            Some(_) => {}
        }
    }
    for file in allowed.keys().filter(|file| !found.contains_key(*file)) {
        wrong.push(format!(
            "{file}: listed but sleeps no more: take it off the list"
        ));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
