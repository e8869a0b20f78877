//! Checks, before the crates that depend on this one compile, that the
//! toolchain has the guest target `wasm32-wasip2` (see `src/lib.rs`):
//! present, added with rustup (one line says so), or the build stops at
//! once with one line naming the command to run.
//!
//! The host crates depend on this crate so that cargo runs this script
//! early, before wasmtime and its kin spend minutes compiling; the example
//! jobs' build, which needs the target, depends on it too.

use std::env;
use std::path::PathBuf;
use std::process::Command;

#[path = "src/lib.rs"]
mod guest_target;

fn main() {
    println!("cargo::rerun-if-changed=src/lib.rs");
    println!("cargo::rerun-if-env-changed=RUSTUP_TOOLCHAIN");
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    let Some(sysroot) = sysroot else {
        fail(&format!(
            "cannot ask {} for its sysroot to look for the {} target",
            rustc.to_string_lossy(),
            guest_target::GUEST_TARGET
        ));
    };
    // Checked on every build (cheap), so that a target removed later is
    // noticed: the sysroot's target directory is watched.
    println!(
        "cargo::rerun-if-changed={}",
        guest_target::target_libdir(&sysroot).display()
    );
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    let rustup = guest_target::find_rustup(
        &sysroot,
        env::var_os("RUSTUP_TOOLCHAIN"),
        env::var_os("PATH"),
        cargo_home,
    );
    match guest_target::ensure(&sysroot, rustup.as_ref()) {
        Ok(guest_target::Outcome::Present) => {}
        Ok(guest_target::Outcome::Added(line)) => println!("cargo::warning={line}"),
        Err(missing) => fail(&missing.0),
    }
}

/// Ends the build script with `line` as cargo's error (cargo prints it as
/// `error: cronbox-guest-target@…: line` and stops the build).
fn fail(line: &str) -> ! {
    println!("cargo::error={line}");
    std::process::exit(0);
}
