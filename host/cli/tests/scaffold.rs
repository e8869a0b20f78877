//! `cronbox new` and `cronbox build` as a user runs them: a project in each
//! language, built with one command, runs with `cronbox run`.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::path::Path;
use std::process::{Command, Output};

fn cronbox(args: &[&str], dir: &Path) -> Output {
    let target = cronbox_language_jobs::dir().parent().unwrap().to_owned();
    Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .current_dir(dir)
        // The pinned tools the build installed, and the guest
        // dependencies the example jobs compiled already.
        .env("CRONBOX_TOOLS_DIR", target.join("tools"))
        .env("CARGO_TARGET_DIR", target.join("example-jobs"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .output()
        .expect("cronbox starts")
}

fn printed(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_new_project_in_each_language_builds_with_one_command_and_runs() {
    let home = tempfile::tempdir().unwrap();
    for (lang, title) in [("rust", "Rust"), ("python", "Python"), ("js", "JavaScript")] {
        let name = format!("greeter-{lang}");
        let created = cronbox(&["new", &name, "--lang", lang], home.path());
        assert!(created.status.success(), "{}", printed(&created));
        assert!(
            printed(&created).contains("cronbox build")
                && printed(&created).contains(&format!("({title} job {name})")),
            "{}",
            printed(&created)
        );
        let project = home.path().join(&name);
        let built = cronbox(&["build"], &project);
        assert!(built.status.success(), "{lang}: {}", printed(&built));
        let component = project.join(format!("{name}.wasm"));
        assert!(component.is_file(), "{lang}: {}", printed(&built));
        let ran = cronbox(
            &["run", component.to_str().unwrap(), "--param", "scaffold"],
            home.path(),
        );
        let text = printed(&ran);
        assert_eq!(ran.status.code(), Some(0), "{lang}: {text}");
        assert!(
            text.contains("outcome: success (200): hello, scaffold"),
            "{lang}: {text}"
        );
    }
}

#[test]
fn new_and_build_refuse_clearly_and_write_nothing() {
    let home = tempfile::tempdir().unwrap();
    let refused = cronbox(&["new", "bad name", "--lang", "python"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        printed(&refused).contains("must be letters, digits"),
        "{}",
        printed(&refused)
    );
    std::fs::create_dir(home.path().join("taken")).unwrap();
    std::fs::write(home.path().join("taken/notes.txt"), "mine").unwrap();
    let refused = cronbox(&["new", "taken", "--lang", "js"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        printed(&refused).contains("exists and is not empty"),
        "{}",
        printed(&refused)
    );
    assert_eq!(
        std::fs::read_dir(home.path().join("taken"))
            .unwrap()
            .count(),
        1,
        "nothing written"
    );
    let refused = cronbox(&["build", "taken"], home.path());
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        printed(&refused).contains("is not a job project"),
        "{}",
        printed(&refused)
    );
    let unknown = cronbox(&["new", "x", "--lang", "cobol"], home.path());
    assert_eq!(unknown.status.code(), Some(2), "{}", printed(&unknown));
}
