//! `cronbox new` (a job project in Rust, Python or JavaScript that builds
//! with one command) and `cronbox build` (that command).
//!
//! A project carries everything it builds from: the WIT contract
//! (`wit/`), and the SDK of its language (`cronbox-guest/` for Rust,
//! `cronbox_job/` for Python, `cronbox-job.js` for JavaScript), copied from
//! the ones this binary was built with, so that it builds anywhere without
//! this repository. Python and JavaScript builds use the pinned
//! componentize-py and componentize-js of `cronbox-guest-build`, installed
//! on first use under the user's cache directory.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};
use clap::{Args, ValueEnum};
use cronbox_guest_build::{Language, Tools, build_js, build_python};

/// Create a job project that builds to a component with `cronbox build`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  cronbox new greeter --lang python\n  cd greeter && cronbox build && cronbox run greeter.wasm --param world"
)]
pub(crate) struct NewArgs {
    /// The job's name: the project's directory and the component's file
    /// name (letters, digits, `-` and `_`).
    name: String,
    /// The language to write the job in.
    #[arg(long, value_enum, default_value = "rust")]
    lang: Lang,
    /// Where to create the project (default: ./NAME).
    #[arg(long)]
    dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Lang {
    Rust,
    Python,
    Js,
}

impl Lang {
    /// The language's name as people write it.
    fn title(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
}

/// Build a job project (made by `cronbox new`) into a component.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  cronbox build\n  cronbox build greeter -o dist/greeter.wasm")]
pub(crate) struct BuildArgs {
    /// The project's directory: `Cargo.toml` (Rust), `app.py` (Python) or
    /// `job.js` (JavaScript) tells its language.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The component to write (default: NAME.wasm in the project, NAME
    /// being the directory's name).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Where componentize-py and componentize-js are installed on first
    /// use (default: cronbox/tools under the user's cache directory).
    #[arg(long, env = "CRONBOX_TOOLS_DIR")]
    tools_dir: Option<PathBuf>,
}

/// The contract and the SDKs, as this binary was built with them.
mod embedded {
    pub const JOB_WIT: &str = include_str!("../../../wit/job.wit");
    /// Every package under `wit/deps`, by path.
    pub const WIT_DEPS: [(&str, &str); 4] = [
        (
            "config/store.wit",
            include_str!("../../../wit/deps/config/store.wit"),
        ),
        (
            "http/http.wit",
            include_str!("../../../wit/deps/http/http.wit"),
        ),
        ("io/io.wit", include_str!("../../../wit/deps/io/io.wit")),
        (
            "clocks/clocks.wit",
            include_str!("../../../wit/deps/clocks/clocks.wit"),
        ),
    ];
    pub const PYTHON_SDK: [(&str, &str); 2] = [
        (
            "__init__.py",
            include_str!("../../../guest-sdk/python/cronbox_job/__init__.py"),
        ),
        (
            "http.py",
            include_str!("../../../guest-sdk/python/cronbox_job/http.py"),
        ),
    ];
    /// The component `cronbox dev` runs a Python job's sources in.
    pub const PYTHON_DEV_RUNNER: &str =
        include_str!("../../../guest-sdk/python/dev-runner/cronbox_dev_runner.py");
    pub const JS_SDK: &str = include_str!("../../../guest-sdk/js/cronbox-job.js");
    pub const RUST_SDK: [(&str, &str); 4] = [
        ("lib.rs", include_str!("../../../guest-sdk/src/lib.rs")),
        (
            "context.rs",
            include_str!("../../../guest-sdk/src/context.rs"),
        ),
        ("http.rs", include_str!("../../../guest-sdk/src/http.rs")),
        (
            "logger.rs",
            include_str!("../../../guest-sdk/src/logger.rs"),
        ),
    ];
    /// The versions the example jobs are built with (unused entries are
    /// dropped by cargo).
    pub const CARGO_LOCK: &str = include_str!("../../../example-jobs/Cargo.lock");
}

pub(crate) fn new(args: NewArgs) -> anyhow::Result<()> {
    let name = args.name.as_str();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        || name.starts_with(['-', '_'])
    {
        bail!(
            "the job name {name:?} must be letters, digits, `-` and `_`, starting with a letter or digit"
        );
    }
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(true)
    {
        bail!("{} exists and is not empty: nothing written", dir.display());
    }
    let files = match args.lang {
        Lang::Rust => rust_project(name),
        Lang::Python => python_project(name),
        Lang::Js => js_project(name),
    };
    let files = files
        .into_iter()
        .chain([("job.toml".to_owned(), job_toml(name))]);
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    outln!(
        "created {} ({} job {name})",
        dir.display(),
        args.lang.title()
    );
    outln!(
        "build it:  cd {} && cronbox build   (writes {name}.wasm)",
        dir.display()
    );
    outln!("try it:    cronbox run {name}.wasm --param world");
    outln!("deploy it: cronbox deploy   (builds, pushes and starts it as job.toml says)");
    Ok(())
}

/// The `job.toml` of a new project: what `cronbox deploy` makes of it.
fn job_toml(name: &str) -> String {
    format!(
        r#"# The job `cronbox deploy` creates or updates from this folder: the
# fields of a job definition (`cronbox job create --file` reads the same).
name = "{name}"
module = "{name}"               # pushed from this folder's build
schedule_type = "CRON"
schedule_conf = "0 * * * * ?"   # every minute (Quartz, with seconds)
time_zone = "UTC"
param = "world"

[deploy]
source = "."                    # the project built (when its files changed)
start = true                    # started after deploying (false: stopped)
"#
    )
}

fn wit_files() -> Vec<(String, String)> {
    let mut files = vec![("wit/job.wit".to_owned(), embedded::JOB_WIT.to_owned())];
    for (path, text) in embedded::WIT_DEPS {
        files.push((format!("wit/deps/{path}"), text.to_owned()));
    }
    files
}

fn rust_project(name: &str) -> Vec<(String, String)> {
    let crate_name = name.replace('-', "_");
    let mut files = wit_files();
    files.push((
        "Cargo.toml".to_owned(),
        format!(
            r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
cronbox-guest = {{ path = "cronbox-guest" }}

[profile.release]
opt-level = 2
strip = true

# Build with `cronbox build` (or `cargo build --release --target
# wasm32-wasip2`, the component then being
# target/wasm32-wasip2/release/{crate_name}.wasm).
"#
        ),
    ));
    files.push((
        "src/lib.rs".to_owned(),
        format!(
            r#"//! The job {name}.

use cronbox_guest::{{Context, Job, Result, export_job, info}};

#[derive(Default)]
struct Task;

impl Job for Task {{
    fn execute(&mut self, ctx: &Context) -> Result<String> {{
        let who = if ctx.param().is_empty() {{ "world" }} else {{ ctx.param() }};
        info!("greeting {{who}}");
        Ok(format!("hello, {{who}}"))
    }}
}}
export_job!(Task);
"#
        ),
    ));
    files.push((
        "cronbox-guest/Cargo.toml".to_owned(),
        r#"[package]
name = "cronbox-guest"
description = "Write cronbox jobs in Rust (a copy made by `cronbox new`)."
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
wit-bindgen = { version = "0.61", default-features = false, features = ["macros", "realloc"] }
anyhow = "1"
log = { version = "0.4", features = ["std"] }
serde = { version = "1", features = ["derive"] }
serde_json = "1"
wasip2 = "1"
"#
        .to_owned(),
    ));
    for (file, text) in embedded::RUST_SDK {
        files.push((format!("cronbox-guest/src/{file}"), text.to_owned()));
    }
    files.push(("Cargo.lock".to_owned(), embedded::CARGO_LOCK.to_owned()));
    files.push((".gitignore".to_owned(), "/target\n*.wasm\n".to_owned()));
    files
}

fn python_project(name: &str) -> Vec<(String, String)> {
    let mut files = wit_files();
    files.push((
        "app.py".to_owned(),
        format!(
            r#""""The job {name}."""

from cronbox_job import Context, job


@job
def execute(ctx: Context) -> str:
    who = ctx.param or "world"
    ctx.log.info("greeting %s", who)
    return f"hello, {{who}}"
"#
        ),
    ));
    for (file, text) in embedded::PYTHON_SDK {
        files.push((format!("cronbox_job/{file}"), text.to_owned()));
    }
    files.push((".gitignore".to_owned(), "__pycache__/\n*.wasm\n".to_owned()));
    files
}

fn js_project(name: &str) -> Vec<(String, String)> {
    let mut files = wit_files();
    files.push((
        "job.js".to_owned(),
        format!(
            r#"// The job {name}.
import {{ job }} from './cronbox-job.js';

export const {{ init, execute, destroy }} = job((ctx) => {{
  const who = ctx.param || 'world';
  ctx.log.info(`greeting ${{who}}`);
  return `hello, ${{who}}`;
}});
"#
        ),
    ));
    files.push(("cronbox-job.js".to_owned(), embedded::JS_SDK.to_owned()));
    files.push((".gitignore".to_owned(), "*.wasm\n".to_owned()));
    files
}

pub(crate) fn build(args: BuildArgs) -> anyhow::Result<()> {
    let built = build_project(&args.dir, args.output, args.tools_dir)?;
    outln!(
        "built {} ({}, {:.1} s)",
        built.output.display(),
        bytesize::ByteSize(built.bytes),
        built.seconds
    );
    Ok(())
}

/// A component built from a project.
pub(crate) struct Built {
    pub output: PathBuf,
    pub bytes: u64,
    pub seconds: f64,
}

/// Builds the project in `dir` into `output` (default: NAME.wasm in the
/// project, NAME being the directory's name), its tools installed under
/// `tools_dir` (default: the user's cache).
pub(crate) fn build_project(
    dir: &Path,
    output: Option<PathBuf>,
    tools_dir: Option<PathBuf>,
) -> anyhow::Result<Built> {
    // Canonical: componentize-js resolves imports within a folder named
    // without `..`.
    let dir =
        std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    let Some(language) = Language::of_project(&dir) else {
        bail!(
            "{} is not a job project: no Cargo.toml (Rust), app.py (Python) or job.js (JavaScript); \
             `cronbox new NAME --lang rust|python|js` makes one",
            dir.display()
        );
    };
    let name = dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "job".to_owned());
    let output = output.unwrap_or_else(|| dir.join(format!("{name}.wasm")));
    let tools_dir = std::path::absolute(tools_dir.unwrap_or_else(default_tools_dir))
        .context("cannot resolve the tools directory")?;
    let tools = Tools::new(tools_dir.clone());
    // A project made by `cronbox new` carries its contract and SDK; one
    // that does not (a folder of the cronbox repository's examples) builds
    // with this binary's.
    let wit = match dir.join("wit") {
        own if own.is_dir() => own,
        _ => shared_tree(&tools_dir, "wit", &wit_files())?.join("wit"),
    };
    let started = std::time::Instant::now();
    match language {
        Language::Rust => build_rust(&dir, &output)?,
        Language::Python => {
            let sdk = match dir.join("cronbox_job") {
                own if own.is_dir() => dir.clone(),
                _ => shared_tree(&tools_dir, "python-sdk", &python_sdk_files())?,
            };
            build_python(&tools, &dir, &sdk, &wit, &output)?
        }
        Language::JavaScript => {
            let entry = dir.join("job.js");
            let root = js_root(&dir, &std::fs::read_to_string(&entry).unwrap_or_default());
            build_js(&tools, &entry, &root, &wit, &output)?
        }
    }
    let bytes = std::fs::metadata(&output)
        .map(|meta| meta.len())
        .unwrap_or(0);
    Ok(Built {
        output,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Where cargo builds the project in `dir` (its workspace's target
/// folder, `CARGO_TARGET_DIR`, or `target/` beside it), as cargo says.
fn cargo_target_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let metadata = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(dir)
        .output()
        .context("cannot run cargo metadata")?;
    if !metadata.status.success() {
        bail!(
            "cargo metadata failed in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&metadata.stderr).trim()
        );
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&metadata.stdout).context("cargo metadata answered no JSON")?;
    metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("cargo metadata names no target directory")
}

/// `files` (path, text) written once under `tools_dir`, in a folder named
/// by `kind` and their content's hash; the folder.
fn shared_tree(
    tools_dir: &Path,
    kind: &str,
    files: &[(String, String)],
) -> anyhow::Result<PathBuf> {
    use sha2::{Digest as _, Sha256};
    let mut hash = Sha256::new();
    for (path, text) in files {
        hash.update(path.as_bytes());
        hash.update([0]);
        hash.update(text.as_bytes());
        hash.update([0]);
    }
    let hex: String = hash.finalize()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let folder = tools_dir.join(format!("{kind}-{hex}"));
    for (path, text) in files {
        let file = folder.join(path);
        if std::fs::read_to_string(&file).is_ok_and(|written| written == *text) {
            continue;
        }
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    }
    Ok(folder)
}

/// The folder componentize-js reads a project's modules within: the
/// project, or the nearest folder above it that also holds every module
/// `source` imports by a relative path (`../../sdk/cronbox-job.js`).
fn js_root(dir: &Path, source: &str) -> PathBuf {
    let mut root = dir.to_owned();
    for quoted in source.split(['\'', '"']).skip(1).step_by(2) {
        if !(quoted.starts_with("./") || quoted.starts_with("../")) {
            continue;
        }
        // The import's folder, with `..` taken lexically.
        let mut folder = dir.to_owned();
        for part in Path::new(quoted)
            .parent()
            .into_iter()
            .flat_map(Path::components)
        {
            match part {
                std::path::Component::ParentDir => {
                    folder.pop();
                }
                std::path::Component::Normal(name) => folder.push(name),
                _ => {}
            }
        }
        while !folder.starts_with(&root) {
            if !root.pop() {
                break;
            }
        }
    }
    root
}

/// The dev runner's component (see `dev_python.rs`), built once for this
/// binary's runner, SDK and contract and kept under the tools directory.
pub(crate) fn python_dev_runner(tools_dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let tools_dir = std::path::absolute(tools_dir.unwrap_or_else(default_tools_dir))
        .context("cannot resolve the tools directory")?;
    let mut files = wit_files();
    files.extend(python_sdk_files());
    files.push((
        "cronbox_dev_runner.py".to_owned(),
        embedded::PYTHON_DEV_RUNNER.to_owned(),
    ));
    files.push((
        "componentize-py".to_owned(),
        cronbox_guest_build::COMPONENTIZE_PY.to_owned(),
    ));
    let tree = shared_tree(&tools_dir, "python-dev-runner", &files)?;
    let output = tree.join("runner.wasm");
    if !output.is_file() {
        eprintln!("-- building the Python dev runner (once)");
        let tools = Tools::new(tools_dir);
        let partial = tree.join("runner.wasm.partial");
        cronbox_guest_build::build_python_module(
            &tools,
            &tree,
            "cronbox_dev_runner",
            &tree,
            &tree.join("wit"),
            &partial,
        )?;
        std::fs::rename(&partial, &output)
            .with_context(|| format!("cannot write {}", output.display()))?;
    }
    Ok(output)
}

fn python_sdk_files() -> Vec<(String, String)> {
    embedded::PYTHON_SDK
        .iter()
        .map(|(file, text)| (format!("cronbox_job/{file}"), text.to_string()))
        .collect()
}

/// `$XDG_CACHE_HOME/cronbox/tools`, or `~/.cache/cronbox/tools`.
fn default_tools_dir() -> PathBuf {
    crate::dirs::cache()
        .unwrap_or_else(|| std::env::temp_dir().join("cronbox"))
        .join("tools")
}

/// `cargo build --release --target wasm32-wasip2`, then the component
/// copied to `output`.
fn build_rust(dir: &Path, output: &Path) -> anyhow::Result<()> {
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
        .with_context(|| format!("cannot read {}", dir.join("Cargo.toml").display()))?;
    let manifest: toml::Table = manifest
        .parse()
        .with_context(|| format!("{} is not valid TOML", dir.join("Cargo.toml").display()))?;
    let package = manifest
        .get("package")
        .and_then(|package| package.get("name"))
        .and_then(toml::Value::as_str)
        .context("Cargo.toml names no package")?
        .to_owned();
    let status = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(dir)
        .status()
        .context("cannot run cargo (install Rust with rustup)")?;
    if !status.success() {
        bail!(
            "cargo build failed ({status}); `rustup target add wasm32-wasip2` if the target is missing"
        );
    }
    let target = cargo_target_dir(dir)?;
    let built = target
        .join("wasm32-wasip2")
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    std::fs::copy(&built, output)
        .with_context(|| format!("cannot copy {} to {}", built.display(), output.display()))?;
    Ok(())
}
