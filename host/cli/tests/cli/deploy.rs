//! The shipped systemd units (`deploy/systemd/`): `systemd-analyze verify`
//! takes each without a word, each runs a real `cronbox` role with only
//! variables that role reads, hardened, and the executor's stop waits
//! longer than its runs' grace.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const INSTALLED_AT: &str = "/usr/local/bin/cronbox";

fn units() -> Vec<PathBuf> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
    let mut units: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "service"))
        .collect();
    units.sort();
    units
}

/// Every `KEY=VALUE` of the unit, in order.
fn settings(unit: &str) -> Vec<(&str, &str)> {
    unit.lines()
        .filter(|line| !line.starts_with('#') && !line.starts_with('['))
        .filter_map(|line| line.split_once('='))
        .collect()
}

fn value<'a>(settings: &[(&str, &'a str)], key: &str) -> &'a str {
    settings
        .iter()
        .find(|(found, _)| *found == key)
        .map(|(_, value)| *value)
        .unwrap_or_else(|| panic!("no {key}="))
}

#[test]
fn the_systemd_units_verify_run_a_real_role_hardened_and_wait_out_the_grace() {
    let units = units();
    assert_eq!(units.len(), 2, "{units:?}");
    let checked = tempfile::tempdir().unwrap();
    for path in &units {
        let name = path.file_name().unwrap().to_str().unwrap();
        let text = std::fs::read_to_string(path).unwrap();
        let settings = settings(&text);
        // The role the unit starts, and that this binary has it.
        let command: Vec<&str> = value(&settings, "ExecStart").split(' ').collect();
        assert_eq!(command[0], INSTALLED_AT, "{name}");
        let help = Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(&command[1..])
            .arg("--help")
            .output()
            .unwrap();
        assert!(
            help.status.success(),
            "{name}: {command:?} is not a command"
        );
        let help = String::from_utf8(help.stdout).unwrap();
        for (key, assignment) in &settings {
            if *key == "Environment" {
                let variable = assignment.split_once('=').unwrap().0;
                assert!(
                    help.contains(&format!("[env: {variable}")),
                    "{name}: {} does not read {variable}",
                    command[1..].join(" ")
                );
            }
        }
        for hardening in [
            ("DynamicUser", "yes"),
            ("NoNewPrivileges", "yes"),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("CapabilityBoundingSet", ""),
        ] {
            assert_eq!(value(&settings, hardening.0), hardening.1, "{name}");
        }
        let state = value(&settings, "StateDirectory");
        assert!(
            settings
                .iter()
                .any(|(key, assignment)| *key == "Environment"
                    && assignment.ends_with(&format!("_DATA_DIR=%S/{state}"))),
            "{name}: its data directory is not its StateDirectory"
        );

        // systemd's own check, with the binary where the unit expects it.
        let copy = checked.path().join(name);
        std::fs::write(
            &copy,
            text.replace(INSTALLED_AT, env!("CARGO_BIN_EXE_cronbox")),
        )
        .unwrap();
        let verified = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&copy)
            .output()
            .expect("systemd-analyze (Debian's systemd package, which .ci/run installs)");
        let said = String::from_utf8_lossy(&verified.stderr);
        assert!(
            verified.status.success() && said.trim().is_empty(),
            "{name}: {said}"
        );
    }

    // The executor's runs finish within its grace; systemd waits longer.
    let executor = std::fs::read_to_string(&units[1]).unwrap();
    let settings = settings(&executor);
    let grace = settings
        .iter()
        .find_map(|(_, assignment)| assignment.strip_prefix("CRONBOX_EXECUTOR_SHUTDOWN_GRACE="))
        .unwrap();
    let grace: Duration = humantime::parse_duration(grace).unwrap();
    let stop = humantime::parse_duration(value(&settings, "TimeoutStopSec")).unwrap();
    assert!(
        stop > grace,
        "TimeoutStopSec {stop:?} within the grace {grace:?}"
    );
}
