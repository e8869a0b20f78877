//! The example jobs of `example-jobs/`, built from source for
//! `wasm32-wasip2` by this crate's build script.
//!
//! Tests, benchmarks and `cronbox up` use these instead of committed
//! binaries: [`path`] gives the component file of a job by its crate name.

use std::path::{Path, PathBuf};

/// The jobs a user may run, by crate name.
pub const JOBS: &[&str] = &[
    "hello",
    "counter",
    "sharded",
    "runaway",
    "memory-hog",
    "panicker",
    "fuel-burner",
    "chatty",
    "sleeper",
    "config-echo",
    "http-fetch",
    "notify",
    "extract",
];

/// Components that cronbox must refuse (see `example-jobs/fixtures/`).
pub const REFUSED_FIXTURES: &[&str] = &["wrong-world", "foreign-import"];

/// Components that load but whose filesystem or socket use is denied
/// inside the guest (see `example-jobs/fixtures/`).
pub const DENIED_FIXTURES: &[&str] = &["fs-snooper", "net-snooper"];

/// Components that drive a capability from a test (see
/// `example-jobs/fixtures/`).
pub const PROBE_FIXTURES: &[&str] = &["http-probe"];

/// The directory holding the built components.
pub fn dir() -> &'static Path {
    Path::new(env!("CRONBOX_EXAMPLE_JOBS_DIR"))
}

/// The component file of the example job or fixture `name` (its crate name,
/// e.g. `memory-hog`).
pub fn path(name: &str) -> PathBuf {
    dir().join(format!("{}.wasm", name.replace('-', "_")))
}

/// The bytes of the component `name`.
///
/// # Panics
/// When the component is missing: the build script builds every member of
/// `example-jobs/`, so a missing file is a bug in the caller's name.
pub fn bytes(name: &str) -> Vec<u8> {
    let path = path(name);
    std::fs::read(&path)
        .unwrap_or_else(|error| panic!("example job {name} at {}: {error}", path.display()))
}

/// The demo jobs compiled into the binary, so that `cronbox up` can deploy
/// them wherever the binary goes: `hello`, `counter` and `sharded`.
pub fn embedded(name: &str) -> Option<&'static [u8]> {
    macro_rules! component {
        ($file:literal) => {
            include_bytes!(concat!(
                env!("CRONBOX_EXAMPLE_JOBS_DIR"),
                "/",
                $file,
                ".wasm"
            ))
        };
    }
    match name {
        "hello" => Some(component!("hello")),
        "counter" => Some(component!("counter")),
        "sharded" => Some(component!("sharded")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_demo_jobs_are_the_built_ones() {
        for name in ["hello", "counter", "sharded"] {
            assert_eq!(embedded(name), Some(bytes(name).as_slice()), "{name}");
        }
        assert_eq!(embedded("runaway"), None);
    }

    #[test]
    fn every_job_and_fixture_was_built_as_a_component() {
        for name in JOBS
            .iter()
            .chain(REFUSED_FIXTURES)
            .chain(DENIED_FIXTURES)
            .chain(PROBE_FIXTURES)
        {
            let bytes = bytes(name);
            // A component's preamble: magic, version 0x0d, layer 1.
            assert_eq!(
                &bytes[..8],
                b"\0asm\x0d\0\x01\0",
                "{name} is not a component"
            );
        }
    }
}
