//! Builds the `example-jobs/` workspace for `wasm32-wasip2` with a nested
//! cargo invocation into this build's own target directory, and tells the
//! crate where the components landed (`CRONBOX_EXAMPLE_JOBS_DIR`).
//!
//! Components are never committed: every build makes them from source.
//! The guest target itself is made sure of by `cronbox-guest-target` (a
//! build dependency, so it has run by now).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use cronbox_guest_target::GUEST_TARGET;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .ancestors()
        .nth(2)
        .expect("host/example-jobs sits two levels below the repository root")
        .to_path_buf();
    let jobs_workspace = root.join("example-jobs");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out: keep one guest
    // target dir per host target dir, shared by every profile.
    let target_dir = out_dir
        .ancestors()
        .nth(4)
        .map(|target| target.join("example-jobs"))
        .unwrap_or_else(|| out_dir.join("example-jobs"));

    watch(&jobs_workspace);
    watch(&root.join("guest-sdk"));
    watch(&root.join("wit"));

    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&jobs_workspace)
        .args([
            "build",
            "--release",
            "--target",
            GUEST_TARGET,
            "--target-dir",
        ])
        .arg(&target_dir);
    // The outer build's settings are for the host, not the guests.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PROFILE_RELEASE_DEBUG",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(var);
    }

    let output = command
        .output()
        .unwrap_or_else(|error| panic!("could not start cargo to build example-jobs/: {error}"));
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        panic!("building example-jobs/ for {GUEST_TARGET} failed:\n{stderr}");
    }

    let components = target_dir.join(GUEST_TARGET).join("release");
    println!(
        "cargo:rustc-env=CRONBOX_EXAMPLE_JOBS_DIR={}",
        components.display()
    );
}

/// Re-runs this script when anything under `dir` changes, except build output.
fn watch(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        println!("cargo:rerun-if-changed={}", dir.display());
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|name| name == "target") {
            continue;
        }
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
