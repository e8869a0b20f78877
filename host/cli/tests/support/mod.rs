//! What the process tests share: child processes that are killed when
//! dropped, starting one on port 0 to read back where it listens, and
//! `cronbox up` the same way.
//!
//! Every `cronbox` these helpers start keeps compiled components in one
//! cache ([`compiled_cache`]), into which every example job is compiled
//! once per test process before the first executor starts: a test's
//! first run then waits for its fire and its run, never for a compile
//! (compilers run at a low priority, and on a loaded machine a dozen of
//! them side by side took longer than a run's whole wait). And each keeps
//! the last lines it logged (at `info`: starts, compiles, warnings),
//! printed with the failure when a failing test drops it, so that a wait
//! that times out says what the processes were doing.
#![allow(dead_code)] // each test file uses its own part of it

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

/// A child process, SIGKILLed and reaped when dropped; dropped by a
/// failing test, it prints the last lines it logged (when they were kept).
#[derive(Debug)]
pub struct Process(pub Child, Option<LogTail>);

impl Process {
    /// `child`, its log not kept.
    pub fn new(child: Child) -> Process {
        Process(child, None)
    }

    /// Runs the `cronbox` binary with `args`, output discarded.
    pub fn cronbox<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Process {
        Process::new(
            cronbox_command(args)
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
        if std::thread::panicking()
            && let Some(tail) = &self.1
        {
            tail.print();
        }
    }
}

/// The last lines a process wrote to its stderr, kept as they come.
#[derive(Debug, Clone)]
pub struct LogTail {
    /// The command line, to say whose lines they are.
    command: String,
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl LogTail {
    /// Lines kept: enough to see what a process did in its last seconds.
    const KEPT: usize = 60;

    fn of(command: &Command) -> LogTail {
        let args: Vec<String> = command
            .get_args()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        LogTail {
            command: format!("cronbox {}", args.join(" ")),
            lines: Arc::default(),
        }
    }

    fn push(&self, line: String) {
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == Self::KEPT {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// Keeps reading `lines` on a thread of its own (so that the process
    /// never blocks on a full pipe), keeping the last of them.
    fn follow(&self, lines: impl Iterator<Item = std::io::Result<String>> + Send + 'static) {
        let tail = self.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                tail.push(line);
            }
        });
    }

    fn print(&self) {
        let lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        eprintln!("--- the last {} lines of `{}`:", lines.len(), self.command);
        for line in lines.iter() {
            eprintln!("  {line}");
        }
    }
}

/// The `cronbox` binary with `args`, in the tests' environment: the
/// shared [`compiled_cache`] (prepared first when the command starts an
/// executor), and logging at `info` unless the test's own environment
/// says otherwise.
fn cronbox_command<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Command {
    let role = args.first().map(|arg| arg.as_ref().to_owned());
    let starts_an_executor = role.is_some_and(|role| role == "executor" || role == "up");
    let mut command = Command::new(env!("CARGO_BIN_EXE_cronbox"));
    command.args(args);
    if starts_an_executor {
        let cache = compiled_cache();
        command
            .env("CRONBOX_EXECUTOR_CACHE_DIR", cache)
            .env("CRONBOX_CACHE_DIR", cache);
    }
    if std::env::var_os("CRONBOX_LOG").is_none() {
        command.env("CRONBOX_LOG", "info");
    }
    command
}

/// Where every `cronbox` these helpers start keeps compiled components:
/// the user's cache (where `cronbox up` and `cronbox run` keep theirs by
/// default, so that a machine compiles each version once), with every
/// example job compiled into it by the time this returns — once per test
/// process, by a real executor answering `prepare` for each (compiled
/// already, each answers at once). Waiting on it is bounded by the
/// executor's own bound on a compile (`--compile-timeout`).
pub fn compiled_cache() -> &'static Path {
    static PREPARED: OnceLock<PathBuf> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let dir = user_cache_dir();
        let into = dir.clone();
        // A thread of its own: the caller may be on an async runtime's.
        std::thread::spawn(move || compile_example_jobs(&into))
            .join()
            .unwrap_or_else(|_| panic!("the example jobs did not compile into {}", dir.display()));
        dir
    })
}

/// `$XDG_CACHE_HOME/cronbox`, else `$HOME/.cache/cronbox` (as `cronbox`
/// finds it), else a directory under the build's target.
fn user_cache_dir() -> PathBuf {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map_or_else(
            || Path::new(env!("CARGO_TARGET_TMPDIR")).join("cronbox-cache"),
            |base| base.join("cronbox"),
        )
}

/// Compiles every example job into the cache `dir` with an executor of
/// this build (so with the engine every test's executor has).
fn compile_example_jobs(dir: &Path) {
    const TOKEN: &str = "compile-ahead";
    let threads = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    threads.block_on(async {
        let admin = cronbox_tests::StandInAdmin::start(TOKEN).await;
        let jobs: Vec<(&str, String)> = cronbox_example_jobs::JOBS
            .iter()
            .map(|job| (*job, admin.add_module(cronbox_example_jobs::bytes(job))))
            .collect();
        let data = tempfile::tempdir().expect("a temporary directory");
        let admin_url = admin.url();
        let mut command = Command::new(env!("CARGO_BIN_EXE_cronbox"));
        command
            .args(["executor", "--bind", "127.0.0.1:0", "--token", TOKEN])
            .args(["--admin", &admin_url])
            .arg("--data-dir")
            .arg(data.path())
            .arg("--cache-dir")
            .arg(dir);
        let (_executor, url) = listening(command, "advertised as ");
        let executor = cronbox_tests::ExecutorClient::new(url, TOKEN);
        let started = Instant::now();
        let mut answers = tokio::task::JoinSet::new();
        for (job, digest) in jobs {
            let executor = executor.clone();
            answers.spawn(async move {
                let command = cronbox_protocol::PrepareCommand {
                    module_digest: digest.parse().expect("a digest"),
                };
                let response = executor
                    .post(cronbox_protocol::executor_paths::PREPARE, &command)
                    .await;
                let answer: cronbox_protocol::PrepareResponse =
                    response.json().await.expect("a prepare answer");
                (job, answer)
            });
        }
        while let Some(answer) = answers.join_next().await {
            let (job, answer) = answer.expect("a prepare request");
            assert!(
                answer.ready,
                "example job {job} does not compile: {:?}",
                answer.error
            );
        }
        eprintln!(
            "the example jobs are compiled in {} ({:.1} s)",
            dir.display(),
            started.elapsed().as_secs_f64()
        );
    });
}

/// Runs the `cronbox` binary with `args` (which bind port 0) and waits for
/// the line on its stderr that says where it listens: returns the process
/// and the `http://…` address after `marker` (for example `"listening on
/// "`). It keeps its last log lines (see [`Process`]).
pub fn cronbox_listening<S: AsRef<std::ffi::OsStr>>(args: &[S], marker: &str) -> (Process, String) {
    listening(cronbox_command(args), marker)
}

/// Starts `command` and waits for the line of its stderr after which
/// `marker` says where it listens.
fn listening(mut command: Command, marker: &str) -> (Process, String) {
    use std::io::BufRead as _;
    let tail = LogTail::of(&command);
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cronbox starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let process = Process(child, Some(tail.clone()));
    let address = loop {
        let Some(line) = lines.next().and_then(Result::ok) else {
            tail.print();
            panic!("`{}` exited before saying where it listens", tail.command);
        };
        tail.push(line.clone());
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
    tail.follow(lines);
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
    start_up(data_dir, at, env, None)
}

/// [`up_with_env`] writing its log (stderr) to `log`.
pub fn up_logging(
    data_dir: &Path,
    at: Option<Listening>,
    env: &[(&str, &Path)],
    log: impl Into<Stdio>,
) -> (Process, String, Listening) {
    start_up(data_dir, at, env, Some(log.into()))
}

/// `cronbox up`, its log written to `log` or else kept (see [`Process`]).
fn start_up(
    data_dir: &Path,
    at: Option<Listening>,
    env: &[(&str, &Path)],
    log: Option<Stdio>,
) -> (Process, String, Listening) {
    let (bind, executor_bind) = at.map_or_else(
        || ("127.0.0.1:0".to_owned(), "127.0.0.1:0".to_owned()),
        |at| (at.admin.to_string(), at.executor.to_string()),
    );
    let mut command = cronbox_command(&["up"]);
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--bind", &bind])
        .args(["--executor-bind", &executor_bind])
        .env_remove("CRONBOX_API_TOKEN")
        // Its context is recorded beside its data, not in the user's files.
        .env("CRONBOX_CONTEXTS", data_dir.join("contexts.toml"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped());
    let tail = log.is_none().then(|| LogTail::of(&command));
    let mut child = command
        .stderr(log.unwrap_or_else(Stdio::piped))
        .spawn()
        .unwrap();
    if let Some(tail) = &tail {
        tail.follow(BufReader::new(child.stderr.take().unwrap()).lines());
    }
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
    let process = Process(child, tail);
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
    (process, printed, listening)
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
