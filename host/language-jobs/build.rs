//! Builds the Python and JavaScript jobs of `example-jobs/python` and
//! `example-jobs/js` into components with the pinned tools of
//! `cronbox-guest-build`, installed on first use under
//! `<target>/tools/`, and tells the crate where the components landed
//! (`CRONBOX_LANGUAGE_JOBS_DIR`). Components are never committed.

use std::env;
use std::path::{Path, PathBuf};

use cronbox_guest_build::{Tools, build_js, build_python};

/// The jobs of each language (directories under `example-jobs/<language>`).
const JOBS: &[&str] = &["hello", "counter", "probe"];
/// Built for one language only: the example ETL workflow's steps.
const PYTHON_ONLY: &[&str] = &["transform"];
const JS_ONLY: &[&str] = &["load"];

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest_dir
        .ancestors()
        .nth(2)
        .expect("host/language-jobs sits two levels below the repository root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out.
    let target = out_dir
        .ancestors()
        .nth(4)
        .map(Path::to_owned)
        .unwrap_or_else(|| out_dir.clone());
    let components = target.join("language-jobs");
    let tools = Tools::new(target.join("tools"));
    let wit = root.join("wit");

    // A directory is watched whole: cargo scans every file under it.
    for dir in [
        "example-jobs/python",
        "example-jobs/js",
        "guest-sdk/python",
        "guest-sdk/js",
        "wit",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    std::fs::create_dir_all(&components)
        .unwrap_or_else(|error| panic!("cannot create {}: {error}", components.display()));

    // Install both tools first (one at a time: they download), then build
    // every job, each language's builds side by side.
    tools
        .componentize_py()
        .unwrap_or_else(|error| panic!("{error}"));
    tools
        .componentize_js()
        .unwrap_or_else(|error| panic!("{error}"));
    std::thread::scope(|scope| {
        let python = scope.spawn(|| {
            for job in JOBS.iter().chain(PYTHON_ONLY) {
                let app = root.join("example-jobs/python").join(job);
                let output = components.join(format!("python-{job}.wasm"));
                build_python(&tools, &app, &root.join("guest-sdk/python"), &wit, &output)
                    .unwrap_or_else(|error| panic!("{error}"));
            }
        });
        for job in JOBS.iter().chain(JS_ONLY) {
            let entry = root.join("example-jobs/js").join(job).join("job.js");
            let output = components.join(format!("js-{job}.wasm"));
            build_js(&tools, &entry, &root, &wit, &output)
                .unwrap_or_else(|error| panic!("{error}"));
        }
        python.join().expect("the Python builds panicked");
    });
    println!(
        "cargo:rustc-env=CRONBOX_LANGUAGE_JOBS_DIR={}",
        components.display()
    );
}
