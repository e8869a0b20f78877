//! [`python_tool`]: a Python package from PyPI that a test checks cronbox
//! against (schemathesis, cronsim), installed once into its own virtualenv
//! under `target/tools/` (Python 3 with `venv` needed).

use std::path::PathBuf;
use std::process::{Command, Output};

/// The virtualenv holding `requirement` (`name==version`), made on first
/// use beside the test binaries (`target/tools/NAME-VERSION`).
pub fn python_tool(requirement: &str) -> PathBuf {
    // target/<profile>/deps/<this test> → target/tools/
    let exe = std::env::current_exe().expect("the test binary's path");
    let target = exe.ancestors().nth(3).expect("the target directory");
    let venv = target.join("tools").join(requirement.replace("==", "-"));
    // Written once pip finished: a venv without it was cut short.
    let complete = venv.join("installed");
    if complete.exists() {
        return venv;
    }
    eprintln!("installing {requirement} into {} (once)", venv.display());
    let _ = std::fs::remove_dir_all(&venv);
    run_ok(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv (Python 3 with venv is needed for this test)",
    );
    run_ok(
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            requirement,
        ]),
        &format!("pip install {requirement}"),
    );
    std::fs::write(&complete, requirement).expect("the venv is marked complete");
    venv
}

/// Runs `command`, panicking with its output unless it succeeds.
pub fn run_ok(command: &mut Command, what: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{what}: cannot run: {error}"));
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}
