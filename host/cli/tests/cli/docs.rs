//! The documents name only what exists: every `cronbox` command they show
//! parses (`cronbox SUBCOMMAND... --help` succeeds) and every flag given to
//! it is in that command's help, every repository path they name is in
//! the checkout, and every test ARCHITECTURE.md's invariants name exists.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

/// The documents a user or a newcomer reads.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut found = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("BENCHMARKS.md"),
        root.join("guest-sdk/README.md"),
    ];
    let mut guides: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    guides.sort();
    found.extend(guides);
    found
}

/// The text of inline code spans and of shell code blocks' lines.
fn code_of(markdown: &str) -> Vec<String> {
    let mut code = Vec::new();
    let mut fence: Option<String> = None;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(info.trim().to_owned()),
            };
            continue;
        }
        match &fence {
            Some(info) if info == "sh" || info.is_empty() => code.push(trimmed.to_owned()),
            Some(_) => {}
            None => {
                let mut parts = line.split('`');
                parts.next();
                while let Some(span) = parts.next() {
                    code.push(span.to_owned());
                    parts.next();
                }
            }
        }
    }
    code
}

/// Each `cronbox ...` invocation in `code`: its subcommand words and its
/// flags.
fn invocations(code: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut found = Vec::new();
    let words: Vec<&str> = code.split_whitespace().collect();
    for (at, word) in words.iter().enumerate() {
        if *word != "cronbox" || (at > 0 && !is_command_start(words[at - 1])) {
            continue;
        }
        let rest = &words[at + 1..];
        let end = rest
            .iter()
            .position(|word| ["|", "&&", ";", "#", ">", "<", "&"].contains(word))
            .unwrap_or(rest.len());
        let rest = &rest[..end];
        // `create|update`: the first of the alternatives stands for them.
        let subcommands: Vec<String> = rest
            .iter()
            .map(|word| word.split('|').next().unwrap())
            .take_while(|word| {
                word.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !word.starts_with('-')
            })
            .take(2)
            .map(|word| (*word).to_owned())
            .collect();
        let flags: Vec<String> = rest
            .iter()
            .filter(|word| word.starts_with("--") && word.len() > 2)
            .map(|word| {
                word.split(['=', ')', ',', '`', ':', ']'])
                    .next()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        found.push((subcommands, flags));
    }
    found
}

/// Whether `previous` may stand before a command (so that `cronbox` after
/// it is the program, not a word of a sentence or a path).
fn is_command_start(previous: &str) -> bool {
    ["|", "&&", ";", "$", "sudo", "exec", "--"].contains(&previous) || previous.ends_with('=')
}

/// `cronbox WORDS... --help`, if it succeeds.
fn help(words: &[String]) -> Option<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(words)
        .arg("--help")
        .output()
        .unwrap();
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn every_command_and_flag_the_documents_show_exists() {
    let mut wanted: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for document in documents() {
        let name = document.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&document).unwrap();
        for code in code_of(&text) {
            for (words, flags) in invocations(&code) {
                let entry = wanted.entry(words).or_default();
                for flag in flags {
                    entry.insert((flag, name.clone()));
                }
                entry.insert((String::new(), name.clone()));
            }
        }
    }
    assert!(wanted.len() > 20, "too few commands found: {wanted:?}");
    let mut missing = Vec::new();
    for (words, flags) in &wanted {
        // The longest prefix of the words that is a command: a second word
        // may be an argument (`cronbox logs 57`).
        let (command, text) = (0..=words.len())
            .rev()
            .find_map(|n| help(&words[..n]).map(|text| (&words[..n], text)))
            .unwrap();
        for (flag, document) in flags {
            if !flag.is_empty() && !text.contains(flag.as_str()) {
                missing.push(format!("{document}: cronbox {} {flag}", command.join(" ")));
            }
        }
        if command.is_empty() && !words.is_empty() {
            let documents: BTreeSet<&String> = flags.iter().map(|(_, d)| d).collect();
            missing.push(format!(
                "{documents:?}: cronbox {} is no command",
                words.join(" ")
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The top-level folders a path the documents name may start with.
const TOP: &[&str] = &[
    "host/",
    "tests/",
    "docs/",
    "example-jobs/",
    "guest-sdk/",
    "wit/",
    "vendor/",
    ".cargo/",
    ".ci/",
];

#[test]
fn every_repository_path_the_documents_name_exists() {
    let root = root();
    let mut missing = Vec::new();
    let mut checked = 0;
    for document in documents() {
        let text = std::fs::read_to_string(&document).unwrap();
        let mut spans = code_of(&text);
        // Link targets too.
        spans.extend(
            text.split("](")
                .skip(1)
                .filter_map(|rest| rest.split(')').next())
                .map(|target| target.split('#').next().unwrap().to_owned()),
        );
        for span in spans {
            for word in span.split_whitespace() {
                let path = word
                    .trim_matches(|c: char| "\"'(),;`".contains(c))
                    .trim_start_matches("../")
                    .split(':')
                    .next()
                    .unwrap();
                if !TOP.iter().any(|top| path.starts_with(top))
                    || path.contains(['*', '{', '<', '$', '…'])
                    || path.contains("...")
                {
                    continue;
                }
                checked += 1;
                let base = if word.trim_matches('`').starts_with("../") {
                    document.parent().unwrap().join(word.trim_matches('`'))
                } else {
                    root.join(path)
                };
                if !base.exists() && !root.join(path).exists() {
                    missing.push(format!(
                        "{}: {path}",
                        document.strip_prefix(&root).unwrap().display()
                    ));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} paths found");
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The `.rs` files of the repository's own code (not `target/`, not the
/// vendored driver).
fn rust_sources(folder: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if !["target", "vendor", "node_modules"].contains(&name.as_ref())
                && !name.starts_with('.')
            {
                rust_sources(&path, found);
            }
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// Every test ARCHITECTURE.md's invariants name exists: a rule is a line
/// `- the rule — test_one, test_two`, and each name after the dash is a
/// function in the code (a renamed or removed test fails here).
#[test]
fn every_test_the_architectures_invariants_name_exists() {
    let root = root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let invariants = text
        .split("\n## Invariants")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let mut named = BTreeSet::new();
    for rule in invariants.lines().filter(|line| line.starts_with("- ")) {
        // The tests follow the rule's last dash, and a `;` starts the next
        // rule on the same line.
        for part in rule.split("; ") {
            let Some((_, tests)) = part.rsplit_once(" — ") else {
                continue;
            };
            for span in tests.split('`').skip(1).step_by(2) {
                let is_name = span.contains('_')
                    && span.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':'
                    });
                if is_name {
                    named.insert(span.rsplit("::").next().unwrap().to_owned());
                }
            }
        }
    }
    let mut files = Vec::new();
    rust_sources(&root, &mut files);
    let code: String = files
        .iter()
        .map(|file| std::fs::read_to_string(file).unwrap())
        .collect();
    let missing: Vec<&String> = named
        .iter()
        // A test function, or one a macro makes from its name.
        .filter(|name| {
            !code.contains(&format!("fn {name}("))
                && !code.contains(&format!("{name},"))
                && !code.contains(&format!("{name} =>"))
        })
        .collect();
    assert!(named.len() > 50, "only {} tests named", named.len());
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names tests that do not exist: {missing:?}"
    );
}
