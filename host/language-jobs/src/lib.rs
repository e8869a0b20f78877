//! The Python and JavaScript jobs of `example-jobs/python` and
//! `example-jobs/js`, built into components by this crate's build script
//! (componentize-py and componentize-js at the versions
//! `cronbox-guest-build` pins).
//!
//! Names are `<language>-<job>`: `python-hello`, `js-counter`, ...

use std::path::{Path, PathBuf};

/// The example jobs a user may run, by name.
pub const JOBS: &[&str] = &["python-hello", "python-counter", "js-hello", "js-counter"];

/// The steps of the example ETL workflow (`example-jobs/etl`) in Python
/// and JavaScript (its first step is the Rust `extract`).
pub const ETL_STEPS: &[&str] = &["python-transform", "js-load"];

/// Test fixtures driven by their param (`raise`, `spin`, `hog`, `config
/// KEY`, `state`, ...; see each `probe` directory).
pub const PROBES: &[&str] = &["python-probe", "js-probe"];

/// The directory holding the built components.
pub fn dir() -> &'static Path {
    Path::new(env!("CRONBOX_LANGUAGE_JOBS_DIR"))
}

/// The component file of the job or fixture `name`.
pub fn path(name: &str) -> PathBuf {
    dir().join(format!("{name}.wasm"))
}

/// The bytes of the component `name`.
///
/// # Panics
/// When the component is missing: the build script builds every job, so a
/// missing file is a bug in the caller's name.
pub fn bytes(name: &str) -> Vec<u8> {
    let path = path(name);
    std::fs::read(&path)
        .unwrap_or_else(|error| panic!("language job {name} at {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_was_built_as_a_component() {
        for name in JOBS.iter().chain(PROBES).chain(ETL_STEPS) {
            let bytes = bytes(name);
            assert_eq!(
                &bytes[..8],
                b"\0asm\x0d\0\x01\0",
                "{name} is not a component"
            );
        }
    }
}
