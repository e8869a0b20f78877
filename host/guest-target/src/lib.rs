//! Makes sure the Rust toolchain can build for the guest target
//! (`wasm32-wasip2`) before anything is built for it.
//!
//! Shared by the build script (which acts on the decision) and the library
//! (whose tests check the decision without a network). The rule: if the
//! toolchain's sysroot has the target's standard library, build; if not and
//! rustup manages that toolchain, add the target with rustup and say so in
//! one line; otherwise stop with one line naming the command to run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The target example jobs are built for.
pub const GUEST_TARGET: &str = "wasm32-wasip2";

/// Where the target's standard library lives in a sysroot.
pub fn target_libdir(sysroot: &Path) -> PathBuf {
    sysroot
        .join("lib")
        .join("rustlib")
        .join(GUEST_TARGET)
        .join("lib")
}

/// Whether `sysroot` holds the guest target's `core` library.
pub fn has_target(sysroot: &Path) -> bool {
    std::fs::read_dir(target_libdir(sysroot)).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libcore-") && name.ends_with(".rlib")
        })
    })
}

/// How to add a target to the toolchain that builds, when rustup manages it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rustup {
    /// The `rustup` program to run.
    pub program: PathBuf,
    /// The toolchain to add the target to (`RUSTUP_TOOLCHAIN`, or the
    /// sysroot's directory name under rustup's `toolchains/`).
    pub toolchain: String,
}

impl Rustup {
    /// The command a person would type.
    pub fn command_line(&self) -> String {
        format!(
            "rustup target add {GUEST_TARGET} --toolchain {}",
            self.toolchain
        )
    }
}

/// Finds rustup for the toolchain at `sysroot`: `None` when that toolchain
/// is not rustup's (Rust from a distribution's packages, for example).
///
/// `rustup_toolchain` is the `RUSTUP_TOOLCHAIN` variable rustup sets for
/// the processes it starts; `search_path` is `PATH`; `cargo_home` is where
/// rustup installs its proxies (`CARGO_HOME`, else `~/.cargo`).
pub fn find_rustup(
    sysroot: &Path,
    rustup_toolchain: Option<OsString>,
    search_path: Option<OsString>,
    cargo_home: Option<PathBuf>,
) -> Option<Rustup> {
    let in_rustup_home = sysroot
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|dir| dir == "toolchains");
    let toolchain = rustup_toolchain
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| {
            in_rustup_home
                .then(|| sysroot.file_name())
                .flatten()
                .map(|name| name.to_string_lossy().into_owned())
        })?;
    let mut candidates: Vec<PathBuf> = search_path
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("rustup"))
        .collect();
    if let Some(home) = cargo_home {
        candidates.push(home.join("bin").join("rustup"));
    }
    let program = candidates.into_iter().find(|path| path.is_file())?;
    Some(Rustup { program, toolchain })
}

/// What the build does about the guest target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The target was there.
    Present,
    /// rustup added it (the line to show the user).
    Added(String),
}

/// Why the guest target cannot be had: one line naming what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing(pub String);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Makes sure the toolchain at `sysroot` has the guest target: present,
/// added through `rustup`, or a [`Missing`] line saying what to run.
pub fn ensure(sysroot: &Path, rustup: Option<&Rustup>) -> Result<Outcome, Missing> {
    if has_target(sysroot) {
        return Ok(Outcome::Present);
    }
    let Some(rustup) = rustup else {
        return Err(Missing(format!(
            "the Rust standard library for {GUEST_TARGET} is not installed in {} and rustup \
             does not manage this toolchain: install it (with rustup: `rustup target add \
             {GUEST_TARGET}`; from a distribution, its package for {GUEST_TARGET}), then build \
             again",
            sysroot.display()
        )));
    };
    let added = Command::new(&rustup.program)
        .args(["target", "add", GUEST_TARGET, "--toolchain"])
        .arg(&rustup.toolchain)
        .stdin(Stdio::null())
        .output();
    let detail = match added {
        Ok(output) if output.status.success() && has_target(sysroot) => {
            return Ok(Outcome::Added(format!(
                "added the guest target {GUEST_TARGET} to toolchain {} (`{}`)",
                rustup.toolchain,
                rustup.command_line()
            )));
        }
        Ok(output) if output.status.success() => {
            format!(
                "it reported success but {} is still empty",
                target_libdir(sysroot).display()
            )
        }
        Ok(output) => {
            // rustup's own `error:` line, not the causes and backtrace below.
            let stderr = String::from_utf8_lossy(&output.stderr);
            let mut lines = stderr.lines().map(str::trim);
            lines
                .clone()
                .find_map(|line| line.strip_prefix("error:"))
                .or_else(|| lines.find(|line| !line.is_empty()))
                .unwrap_or("it failed")
                .trim()
                .to_owned()
        }
        Err(error) => format!("{}: {error}", rustup.program.display()),
    };
    Err(Missing(format!(
        "the Rust standard library for {GUEST_TARGET} is missing and rustup could not add it \
         ({detail}): run `{}`, then build again",
        rustup.command_line()
    )))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A sysroot with the guest target's `core` when `with_target`.
    fn sysroot(root: &Path, with_target: bool) -> PathBuf {
        let sysroot = root
            .join("toolchains")
            .join("stable-x86_64-unknown-linux-gnu");
        std::fs::create_dir_all(sysroot.join("lib/rustlib/x86_64-unknown-linux-gnu/lib")).unwrap();
        if with_target {
            install_target(&sysroot);
        }
        sysroot
    }

    fn install_target(sysroot: &Path) {
        std::fs::create_dir_all(target_libdir(sysroot)).unwrap();
        std::fs::write(target_libdir(sysroot).join("libcore-0123abcd.rlib"), b"").unwrap();
    }

    /// A stand-in `rustup` in `dir` running `script` (sh), recording its
    /// arguments in `dir/args`.
    fn fake_rustup(dir: &Path, script: &str) -> PathBuf {
        let program = dir.join("rustup");
        std::fs::write(
            &program,
            format!(
                "#!/bin/sh\necho \"$@\" > '{}/args'\n{script}\n",
                dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    #[test]
    fn a_sysroot_with_the_target_builds_as_it_is() {
        let root = tempfile::tempdir().unwrap();
        let sysroot = sysroot(root.path(), true);
        assert_eq!(ensure(&sysroot, None), Ok(Outcome::Present));
    }

    #[test]
    fn without_rustup_the_build_stops_naming_the_command() {
        let root = tempfile::tempdir().unwrap();
        let sysroot = sysroot(root.path(), false);
        let Missing(line) = ensure(&sysroot, None).unwrap_err();
        assert!(line.contains("rustup target add wasm32-wasip2"), "{line}");
        assert!(line.contains(&sysroot.display().to_string()), "{line}");
        assert!(!line.contains('\n'), "one line: {line}");
    }

    #[test]
    fn rustup_adds_the_missing_target_to_the_toolchain_that_builds() {
        let root = tempfile::tempdir().unwrap();
        let sysroot = sysroot(root.path(), false);
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let libdir = target_libdir(&sysroot);
        fake_rustup(
            &bin,
            &format!(
                "mkdir -p '{dir}' && touch '{dir}/libcore-feed.rlib'",
                dir = libdir.display()
            ),
        );
        let rustup = find_rustup(&sysroot, None, Some(bin.clone().into_os_string()), None)
            .expect("rustup found on PATH");
        assert_eq!(rustup.toolchain, "stable-x86_64-unknown-linux-gnu");
        let Ok(Outcome::Added(line)) = ensure(&sysroot, Some(&rustup)) else {
            panic!("the target was not added");
        };
        assert!(line.contains("wasm32-wasip2"), "{line}");
        let args = std::fs::read_to_string(bin.join("args")).unwrap();
        assert_eq!(
            args.trim(),
            "target add wasm32-wasip2 --toolchain stable-x86_64-unknown-linux-gnu"
        );
        assert!(has_target(&sysroot));
    }

    #[test]
    fn a_failing_rustup_stops_the_build_with_its_reason_and_the_command() {
        let root = tempfile::tempdir().unwrap();
        let sysroot = sysroot(root.path(), false);
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        fake_rustup(
            &bin,
            "echo 'info: downloading' >&2; echo 'error: could not download file' >&2; \
             echo '   0: backtrace' >&2; exit 1",
        );
        // Found through CARGO_HOME/bin when it is not on PATH.
        let rustup = find_rustup(
            &sysroot,
            Some("my-toolchain".into()),
            None,
            Some(root.path().to_path_buf()),
        )
        .unwrap();
        assert_eq!(rustup.program, bin.join("rustup"));
        let Missing(line) = ensure(&sysroot, Some(&rustup)).unwrap_err();
        assert!(line.contains("(could not download file)"), "{line}");
        assert!(!line.contains("backtrace"), "{line}");
        assert!(
            line.contains("rustup target add wasm32-wasip2 --toolchain my-toolchain"),
            "{line}"
        );
    }

    #[test]
    fn a_toolchain_outside_rustup_has_no_rustup_to_ask() {
        let root = tempfile::tempdir().unwrap();
        let distro = root.path().join("usr");
        std::fs::create_dir_all(&distro).unwrap();
        let bin = root.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        fake_rustup(&bin, "exit 0");
        assert_eq!(
            find_rustup(&distro, None, Some(bin.into_os_string()), None),
            None,
            "a sysroot not under rustup's toolchains/ and no RUSTUP_TOOLCHAIN"
        );
    }
}
