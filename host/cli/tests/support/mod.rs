//! What the process tests share: child processes that are killed when
//! dropped, starting one on port 0 to read back where it listens, and
//! `cronbox up` the same way.
#![allow(dead_code)] // each test file uses its own part of it

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A child process, SIGKILLed and reaped when dropped.
#[derive(Debug)]
pub struct Process(pub Child);

impl Process {
    /// Runs the `cronbox` binary with `args`, output discarded.
    pub fn cronbox<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Process {
        Process(
            Command::new(env!("CARGO_BIN_EXE_cronbox"))
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("cronbox starts"),
        )
    }

    /// SIGKILL now, and wait for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs the `cronbox` binary with `args` (which bind port 0) and waits for
/// the line on its stderr that says where it listens: returns the process
/// and the `http://…` address after `marker` (for example `"listening on
/// "`). Its later stderr is discarded.
pub fn cronbox_listening<S: AsRef<std::ffi::OsStr>>(args: &[S], marker: &str) -> (Process, String) {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cronbox starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let process = Process(child);
    let address = loop {
        let line = lines
            .next()
            .expect("cronbox exited before saying where it listens")
            .expect("stderr is readable");
        if let Some(rest) = line.split(marker).nth(1) {
            let address = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .trim_end_matches([')', ',']);
            break if address.starts_with("http") {
                address.to_owned()
            } else {
                format!("http://{address}")
            };
        }
    };
    // Keep draining stderr so the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (process, address)
}

/// Where `cronbox up` listens, as it printed it.
#[derive(Debug, Clone, Copy)]
pub struct Listening {
    pub admin: SocketAddr,
    pub executor: SocketAddr,
}

/// `cronbox up` on `at` (`None`: port 0 for both), once it printed its
/// summary: the process (killed when dropped, so that a failed test leaves
/// none running), what it printed, and where it listens.
pub fn up(data_dir: &Path, at: Option<Listening>) -> (Process, String, Listening) {
    up_with_env(data_dir, at, &[])
}

/// [`up`] with these environment variables set.
pub fn up_with_env(
    data_dir: &Path,
    at: Option<Listening>,
    env: &[(&str, &Path)],
) -> (Process, String, Listening) {
    up_logging(data_dir, at, env, Stdio::null())
}

/// [`up_with_env`] writing its log (stderr) to `log`.
pub fn up_logging(
    data_dir: &Path,
    at: Option<Listening>,
    env: &[(&str, &Path)],
    log: impl Into<Stdio>,
) -> (Process, String, Listening) {
    let (bind, executor_bind) = at.map_or_else(
        || ("127.0.0.1:0".to_owned(), "127.0.0.1:0".to_owned()),
        |at| (at.admin.to_string(), at.executor.to_string()),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("up")
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--bind", &bind])
        .args(["--executor-bind", &executor_bind])
        .env_remove("CRONBOX_API_TOKEN")
        // Its context is recorded beside its data, not in the user's files.
        .env("CRONBOX_CONTEXTS", data_dir.join("contexts.toml"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        printed.push_str(&line);
        printed.push('\n');
        if line.starts_with("Ctrl-C") {
            break;
        }
    }
    // Keep reading so that the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let address_after = |label: &str| -> SocketAddr {
        let line = printed
            .lines()
            .find(|line| line.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in {printed}"));
        line.split_whitespace()
            .last()
            .unwrap()
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .parse()
            .unwrap_or_else(|_| panic!("no address in {line:?}"))
    };
    let listening = Listening {
        admin: address_after("admin API"),
        executor: address_after("executor"),
    };
    (Process(child), printed, listening)
}

/// `cronbox` as a job author runs it here: with the pinned tools the build
/// installed and the guest dependencies the example jobs compiled already,
/// and none of this build's own Rust flags.
pub fn authoring_command() -> Command {
    let target = cronbox_language_jobs::dir().parent().unwrap().to_owned();
    let mut command = Command::new(env!("CARGO_BIN_EXE_cronbox"));
    command
        .env("CRONBOX_TOOLS_DIR", target.join("tools"))
        .env("CARGO_TARGET_DIR", target.join("example-jobs"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET");
    command
}
