//! Workflows from the command line: the demo workflow `cronbox up` makes,
//! run as its banner says; a `workflow.toml` applied, run with an
//! input and followed to its end, its run shown node by node, and a
//! definition with a cycle refused naming it; a node fanned out over the
//! input, its elements listed; a nightly workflow backfilled over three
//! days, once.

use super::*;

pub(super) fn workflows(s: &Session) {
    let (base, token) = (s.base.as_str(), s.token.as_str());
    // The demo workflow runs as the banner's line says.
    assert!(
        s.printed
            .contains(r#"cronbox workflow run greet-twice --input '{"who": "you"}' --wait"#),
        "{}",
        s.printed
    );
    let demo = ok(
        base,
        token,
        &[
            "workflow",
            "run",
            "greet-twice",
            "--input",
            r#"{"who": "you"}"#,
            "--wait",
        ],
    );
    assert!(
        demo.lines()
            .any(|line| line.starts_with("second") && line.ends_with("hello, again: hello, you")),
        "{demo}"
    );
    ok(
        base,
        token,
        &["job", "create", "--name", "wf-greet", "--module", "greeter"],
    );
    let file = s.data.path().join("greetings.toml");
    std::fs::write(
        &file,
        r#"name = "greetings"
description = "greets, then greets the greeting"

[[nodes]]
name = "first"
job = "wf-greet"
param = "{{ input.who }}"

[[nodes]]
name = "second"
job = "wf-greet"
param = "again: {{ nodes.first.output }}"

[[edges]]
from = "first"
to = "second"
"#,
    )
    .unwrap();
    let applied = ok(base, token, &["workflow", "apply", file.to_str().unwrap()]);
    assert!(
        applied.contains("workflow greetings saved: version 1, 2 node(s)"),
        "{applied}"
    );
    let ran = ok(
        base,
        token,
        &[
            "workflow",
            "run",
            "greetings",
            "--input",
            r#"{"who": "ada"}"#,
            "--wait",
        ],
    );
    let first_line = ran.lines().next().unwrap();
    let id = first_line
        .strip_prefix("workflow run ")
        .and_then(|rest| rest.strip_suffix(" started"))
        .unwrap_or_else(|| panic!("{ran}"));
    assert!(
        ran.contains(&format!(
            "workflow run {id} of greetings (version 1): succeeded"
        )),
        "{ran}"
    );
    let second = ran
        .lines()
        .find(|line| line.starts_with("second"))
        .unwrap_or_else(|| panic!("{ran}"));
    assert!(
        second.contains("succeeded") && second.ends_with("hello, again: hello, ada"),
        "{second}"
    );
    let status = json(base, token, &["workflow", "status", id]);
    assert_eq!(status["status"], "succeeded", "{status}");
    assert_eq!(status["nodes"][1]["input"], "again: hello, ada", "{status}");
    let listed = ok(base, token, &["workflow", "list"]);
    assert!(
        listed
            .lines()
            .any(|line| line.starts_with("greetings") && line.contains(" 2 ")),
        "{listed}"
    );
    // A cycle is refused, naming it; nothing changes.
    std::fs::write(
        &file,
        "name = \"greetings\"\n[[nodes]]\nname = \"a\"\njob = \"wf-greet\"\n\
         [[nodes]]\nname = \"b\"\njob = \"wf-greet\"\n\
         [[edges]]\nfrom = \"a\"\nto = \"b\"\n[[edges]]\nfrom = \"b\"\nto = \"a\"\n",
    )
    .unwrap();
    let (code, _, said) = cli(base, token, &["workflow", "apply", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("the edges form a cycle through node \"a\"") && said.contains("edges"),
        "{said}"
    );
    let shown = json(base, token, &["workflow", "show", "greetings"]);
    assert_eq!(shown["version"], 1, "{shown}");
    // A node fanned out over the input, two at a time.
    let each = s.data.path().join("each.toml");
    std::fs::write(
        &each,
        r#"[[nodes]]
name = "greet"
job = "wf-greet"
for_each = "input.who"
concurrency = 2
param = "{{ index }}: {{ item }}"
"#,
    )
    .unwrap();
    ok(base, token, &["workflow", "apply", each.to_str().unwrap()]);
    let ran = ok(
        base,
        token,
        &[
            "workflow",
            "run",
            "each",
            "--input",
            r#"{"who": ["ada", "bo", "cy"]}"#,
            "--wait",
        ],
    );
    assert!(
        ran.lines().any(|line| line.starts_with("greet")
            && line.contains("succeeded (3/3 done)")
            && line.ends_with(r#"["hello, 0: ada","hello, 1: bo","hello, 2: cy"]"#)),
        "{ran}"
    );
    let id = ran
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("workflow run "))
        .and_then(|rest| rest.strip_suffix(" started"))
        .unwrap_or_else(|| panic!("{ran}"));
    let items = ok(base, token, &["workflow", "items", id, "greet"]);
    assert!(
        items.lines().any(|line| line.starts_with("2 ")
            && line.contains("2: cy")
            && line.ends_with("hello, 2: cy")),
        "{items}"
    );
    // A nightly workflow (a module node) backfilled over three days: one
    // run per night, and none again.
    let nightly = s.data.path().join("nightly.toml");
    std::fs::write(
        &nightly,
        r#"[[nodes]]
name = "greet"
module = "greeter"
param = "the past"

[schedule]
schedule_type = "CRON"
schedule_conf = "0 0 2 * * ?"
"#,
    )
    .unwrap();
    ok(
        base,
        token,
        &["workflow", "apply", nightly.to_str().unwrap()],
    );
    let from = "2026-01-01T12:00:00Z";
    let to = "2026-01-04T12:00:00Z";
    let args = [
        "workflow", "backfill", "nightly", "--from", from, "--to", to,
    ];
    let first = ok(base, token, &args);
    assert!(
        first.starts_with("3 instant(s): 3 run(s) started, 0 backfilled before"),
        "{first}"
    );
    let again = ok(base, token, &args);
    assert!(
        again.starts_with("3 instant(s): 0 run(s) started, 3 backfilled before"),
        "{again}"
    );
}
