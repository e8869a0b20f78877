//! Builds job components from Python and JavaScript sources.
//!
//! Python jobs are built by `componentize-py` (from PyPI), JavaScript jobs
//! by `@bytecodealliance/componentize-js` (from npm), both at pinned
//! versions ([`COMPONENTIZE_PY`], [`COMPONENTIZE_JS`]) against worlds
//! [`PYTHON_WORLD`] and [`JS_WORLD`] of `wit/job.wit`. [`Tools`] installs each tool on first use
//! into a directory of its own (a Python virtual environment, an npm
//! prefix), built under a temporary name and renamed into place, so that
//! concurrent builds never see half an installation. What must already be
//! on the machine: `python3` with `venv`, and `node` with `npm`.
//!
//! Used by the build script of `cronbox-language-jobs` (the example jobs)
//! and by `cronbox build`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The version of componentize-py Python jobs are built with.
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// The version of `@bytecodealliance/componentize-js` JavaScript jobs are
/// built with.
pub const COMPONENTIZE_JS: &str = "0.19.3";

/// The world Python jobs are built for: `job` with `wasi:config/store`
/// (configuration and secrets) and `wasi:http/outgoing-handler` (the
/// SDK's `http` client) imported.
pub const PYTHON_WORLD: &str = "job-with-http";

/// The world JavaScript jobs are built for: `job` with `wasi:config/store`
/// imported (StarlingMonkey's `fetch` brings its own `wasi:http` imports).
pub const JS_WORLD: &str = "job-with-config";

/// Why a component could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A program the build needs is not on this machine.
    #[error("`{program}` was not found: {advice}")]
    Missing {
        program: &'static str,
        advice: &'static str,
    },
    /// Installing a tool failed.
    #[error("installing {tool} failed ({command}):\n{output}")]
    Install {
        tool: String,
        command: String,
        output: String,
    },
    /// The tool ran and refused the sources.
    #[error("building {job} with {tool} failed:\n{output}")]
    Build {
        tool: &'static str,
        job: String,
        output: String,
    },
    /// A file or directory could not be read or written.
    #[error("{what} {}: {error}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
}

/// The language of a job's sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Rust,
    Python,
    JavaScript,
}

impl Language {
    /// The language of a project directory: `Cargo.toml` → Rust, `app.py`
    /// → Python, `job.js` → JavaScript.
    pub fn of_project(dir: &Path) -> Option<Language> {
        if dir.join("Cargo.toml").is_file() {
            Some(Language::Rust)
        } else if dir.join("app.py").is_file() {
            Some(Language::Python)
        } else if dir.join("job.js").is_file() {
            Some(Language::JavaScript)
        } else {
            None
        }
    }
}

/// Where the pinned tools are installed.
#[derive(Debug, Clone)]
pub struct Tools {
    dir: PathBuf,
}

impl Tools {
    /// Tools installed under `dir` (created when needed).
    pub fn new(dir: impl Into<PathBuf>) -> Tools {
        Tools { dir: dir.into() }
    }

    /// The Python of a virtual environment holding componentize-py,
    /// installed from PyPI on first use.
    pub fn componentize_py(&self) -> Result<PathBuf, BuildError> {
        let home = self.dir.join(format!("componentize-py-{COMPONENTIZE_PY}"));
        let python = home.join("bin").join("python");
        if python.is_file() {
            return Ok(python);
        }
        self.install(&home, "componentize-py", |staging| {
            run_install(
                Command::new("python3").args(["-m", "venv"]).arg(staging),
                "python3",
                "install Python 3 with its venv module (Debian: apt-get install python3-venv)",
                "componentize-py",
            )?;
            run_install(
                Command::new(staging.join("bin").join("python"))
                    .args([
                        "-m",
                        "pip",
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                    ])
                    .arg(format!("componentize-py=={COMPONENTIZE_PY}")),
                "python3",
                "install Python 3 with its venv module",
                "componentize-py",
            )
        })?;
        Ok(python)
    }

    /// The command-line script of componentize-js, installed from npm on
    /// first use (run it with `node`).
    pub fn componentize_js(&self) -> Result<PathBuf, BuildError> {
        let home = self.dir.join(format!("componentize-js-{COMPONENTIZE_JS}"));
        let cli = home.join("node_modules/@bytecodealliance/componentize-js/src/cli.js");
        if cli.is_file() {
            return Ok(cli);
        }
        self.install(&home, "componentize-js", |staging| {
            run_install(
                Command::new("npm")
                    .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
                    .arg(staging)
                    .arg(format!(
                        "@bytecodealliance/componentize-js@{COMPONENTIZE_JS}"
                    )),
                "npm",
                "install Node.js 20 or newer with npm (Debian: apt-get install nodejs npm)",
                "componentize-js",
            )
        })?;
        Ok(cli)
    }

    /// Installs into a staging directory, then renames it to `home`.
    fn install(
        &self,
        home: &Path,
        tool: &str,
        fill: impl FnOnce(&Path) -> Result<(), BuildError>,
    ) -> Result<(), BuildError> {
        let staging = self
            .dir
            .join(format!(".{tool}-staging-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&self.dir).map_err(|error| BuildError::Io {
            what: "cannot create",
            path: self.dir.clone(),
            error,
        })?;
        // The first build of a language waits for this (half a minute or
        // more): say so to a person at a terminal (quiet when piped).
        let person = std::io::IsTerminal::is_terminal(&std::io::stderr());
        if person {
            eprintln!(
                "installing {tool} into {} (first build only; about a minute)…",
                home.display()
            );
        }
        let started = std::time::Instant::now();
        let filled = fill(&staging);
        if person && filled.is_ok() {
            eprintln!(
                "installed {tool} ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
        }
        if filled.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
            return filled;
        }
        if let Err(error) = std::fs::rename(&staging, home) {
            let _ = std::fs::remove_dir_all(&staging);
            // Another build installed it first.
            if !home.is_dir() {
                return Err(BuildError::Io {
                    what: "cannot install into",
                    path: home.to_owned(),
                    error,
                });
            }
        }
        Ok(())
    }
}

fn run_install(
    command: &mut Command,
    program: &'static str,
    advice: &'static str,
    tool: &str,
) -> Result<(), BuildError> {
    let output = run(command, program, advice)?;
    if output.status.success() {
        return Ok(());
    }
    Err(BuildError::Install {
        tool: tool.to_owned(),
        command: describe(command),
        output: text_of(&output),
    })
}

fn run(
    command: &mut Command,
    program: &'static str,
    advice: &'static str,
) -> Result<Output, BuildError> {
    command.output().map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => BuildError::Missing { program, advice },
        _ => BuildError::Io {
            what: "cannot run",
            path: PathBuf::from(command.get_program()),
            error,
        },
    })
}

fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(OsStr::to_string_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

fn text_of(output: &Output) -> String {
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    text.trim_end().to_owned()
}

/// A Python job: the directory holding its `app.py` (and any other
/// modules it imports), the directory holding the `cronbox_job` package
/// (`guest-sdk/python`, or the project itself when it has a copy), and the
/// `wit` directory with `job.wit` and its `deps`.
pub fn build_python(
    tools: &Tools,
    app_dir: &Path,
    sdk_dir: &Path,
    wit_dir: &Path,
    output: &Path,
) -> Result<(), BuildError> {
    build_python_module(tools, app_dir, "app", sdk_dir, wit_dir, output)
}

/// [`build_python`] with the module exporting the job named `module`
/// (`MODULE.py` in `app_dir`) rather than `app`.
pub fn build_python_module(
    tools: &Tools,
    app_dir: &Path,
    module: &str,
    sdk_dir: &Path,
    wit_dir: &Path,
    output: &Path,
) -> Result<(), BuildError> {
    let python = tools.componentize_py()?;
    let mut command = Command::new(python);
    command
        .args([
            "-c",
            "import sys; from componentize_py import script; sys.exit(script())",
            "--quiet",
            "--wit-path",
        ])
        .arg(wit_dir)
        .args(["--world", PYTHON_WORLD, "componentize", "--python-path"])
        .arg(app_dir)
        .arg("--python-path")
        .arg(sdk_dir)
        .arg(module)
        .arg("--output")
        .arg(output)
        // componentize-py looks for a virtual environment to add to the
        // path; the tool's own is not the job's.
        .env_remove("VIRTUAL_ENV")
        // Leave no __pycache__ in the job's sources.
        .env("PYTHONDONTWRITEBYTECODE", "1");
    finish(
        command,
        ("python3", "componentize-py"),
        app_dir.join(format!("{module}.py")),
        output,
        "install Python 3 with its venv module",
    )
}

/// A JavaScript job: its entry module (`job.js`) and the directory its
/// imports resolve within (componentize-js resolves relative imports
/// inside the working directory only: the repository root for the
/// examples, which import `guest-sdk/js/cronbox-job.js`; the project for
/// a scaffolded job, which has its own copy).
pub fn build_js(
    tools: &Tools,
    entry: &Path,
    root: &Path,
    wit_dir: &Path,
    output: &Path,
) -> Result<(), BuildError> {
    let cli = tools.componentize_js()?;
    let absolute = |path: &Path| -> Result<PathBuf, BuildError> {
        std::path::absolute(path).map_err(|error| BuildError::Io {
            what: "cannot resolve",
            path: path.to_owned(),
            error,
        })
    };
    let relative_entry = absolute(entry)?
        .strip_prefix(absolute(root)?)
        .map(Path::to_owned)
        .unwrap_or_else(|_| entry.to_owned());
    let mut command = Command::new("node");
    command
        .arg(cli)
        .arg(&relative_entry)
        .arg("--wit")
        .arg(absolute(wit_dir)?)
        .args(["--world-name", JS_WORLD, "--out"])
        .arg(absolute(output)?)
        .current_dir(root);
    finish(
        command,
        ("node", "componentize-js"),
        entry.to_owned(),
        output,
        "install Node.js 20 or newer",
    )
}

/// Runs a build's `command` (`program` with `tool`) and checks it wrote
/// `output`.
fn finish(
    mut command: Command,
    (program, tool): (&'static str, &'static str),
    source: PathBuf,
    output: &Path,
    advice: &'static str,
) -> Result<(), BuildError> {
    let ran = run(&mut command, program, advice)?;
    if ran.status.success() && output.is_file() {
        return Ok(());
    }
    Err(BuildError::Build {
        tool,
        job: source.display().to_string(),
        output: text_of(&ran),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projects_language_is_told_by_its_entry_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Language::of_project(dir.path()), None);
        std::fs::write(dir.path().join("job.js"), "").unwrap();
        assert_eq!(Language::of_project(dir.path()), Some(Language::JavaScript));
        std::fs::write(dir.path().join("app.py"), "").unwrap();
        assert_eq!(Language::of_project(dir.path()), Some(Language::Python));
        std::fs::write(dir.path().join("Cargo.toml"), "").unwrap();
        assert_eq!(Language::of_project(dir.path()), Some(Language::Rust));
    }

    #[test]
    fn a_missing_program_is_named_with_advice() {
        let error = run(
            &mut Command::new("/nonexistent/npm"),
            "npm",
            "install Node.js",
        )
        .unwrap_err();
        assert_eq!(error.to_string(), "`npm` was not found: install Node.js");
    }
}
