//! Isolation and scheduling semantics through the path a user takes:
//! `cronbox admin` and `cronbox executor` as real processes on loopback
//! (each binds port 0 and says where it listens), driven through the HTTP
//! API and the CLI, with real example jobs and a real SQLite file.
//!
//! - the executor token never goes to an address a tenant names, and a
//!   forged result is refused;
//! - a SHARDING_BROADCAST retry reruns its shard only;
//! - FIX_DELAY carries on through failed dispatches, with one chain;
//! - stopping a job cancels what waits, without alarms;
//! - two executors writing one key lose no update;
//! - unknown groups are refused; edits keep a FIX_RATE phase;
//! - kill of a whole job; `api` and `manual` kinds; fresh instances;
//! - quota defaults from `cronbox admin`'s flags, `cronbox quota` to read
//!   and change a tenant's.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use cronbox_api::{AlarmState, JobId, Run, RunId, RunStatus, TriggerKind};
use cronbox_tests::{AdminClient, TestGroup, until};
use reqwest::Method;
use serde_json::{Value, json};
use support::{Process, cronbox_listening};

/// Two at a time, as libtest would on two cores.
static TESTS: TestGroup = TestGroup::new(2);

const API_TOKEN: &str = "api-token";

/// Whether a run has ended (any way).
fn ended(run: &Run) -> bool {
    !run.status.is_open()
}
const EXEC_TOKEN: &str = "exec-token";

/// An admin process and its executor processes, and the admin's API as the
/// operator sees it (`Deref`: `stack.call(...)`, `stack.trigger(...)`).
struct Stack {
    api: AdminClient,
    executors: Vec<(Process, String)>,
    _admin_process: Process,
    data: tempfile::TempDir,
}

impl std::ops::Deref for Stack {
    type Target = AdminClient;

    fn deref(&self) -> &AdminClient {
        &self.api
    }
}

impl Stack {
    /// An admin and `executors` executors in group `default`.
    async fn start(executors: usize) -> Stack {
        Stack::start_with(executors, &[]).await
    }

    /// [`Stack::start`] with more arguments for `cronbox admin`.
    async fn start_with(executors: usize, admin_args: &[&str]) -> Stack {
        let data = tempfile::tempdir().unwrap();
        let admin_dir = data.path().join("admin");
        let (admin_process, admin) = cronbox_listening(
            &[
                &[
                    "admin",
                    "--bind",
                    "127.0.0.1:0",
                    "--token",
                    API_TOKEN,
                    "--executor-token",
                    EXEC_TOKEN,
                    "--data-dir",
                    admin_dir.to_str().unwrap(),
                    // The alarm receivers of these tests listen on loopback.
                    "--alarm-allow-nets",
                    "127.0.0.1/32",
                ],
                admin_args,
            ]
            .concat(),
            "listening on ",
        );
        let mut stack = Stack {
            api: AdminClient::new(admin, API_TOKEN),
            executors: Vec::new(),
            _admin_process: admin_process,
            data,
        };
        for _ in 0..executors {
            stack.add_executor().await;
        }
        stack
    }

    /// Starts one more executor and waits until the admin counts it alive.
    async fn add_executor(&mut self) -> String {
        let dir = self
            .data
            .path()
            .join(format!("executor-{}", self.executors.len()));
        let (process, address) = cronbox_listening(
            &[
                "executor",
                "--bind",
                "127.0.0.1:0",
                "--admin",
                &self.api.base,
                "--token",
                EXEC_TOKEN,
                "--beat-interval",
                "1s",
                "--data-dir",
                dir.to_str().unwrap(),
            ],
            "listening on ",
        );
        self.executors.push((process, address.clone()));
        until("the executor registers", || async {
            let executors = self.api.api.executors().await.unwrap();
            executors
                .iter()
                .any(|e| e.address == address && e.alive)
                .then_some(())
        })
        .await;
        address
    }

    fn address(&self, index: usize) -> &str {
        &self.executors[index].1
    }

    /// Uploads an example job and creates a job running it with the fields
    /// of `extra`; its id.
    async fn job(&self, name: &str, module: &str, extra: Value) -> JobId {
        self.api
            .job(name, cronbox_example_jobs::bytes(module), extra)
            .await
    }

    /// Runs `cronbox ARGS` against this admin; its stdout.
    fn cli(&self, args: &[&str]) -> String {
        let output = self.try_cli(args);
        assert!(
            output.status.success(),
            "cronbox {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// Runs `cronbox ARGS` against this admin, however it ends.
    fn try_cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_cronbox"))
            .args(args)
            .args(["--admin", &self.api.base, "--token", API_TOKEN])
            .output()
            .unwrap()
    }
}

/// A listener that records every connection made to it.
struct Recorder {
    url: String,
    connections: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Recorder {
    async fn start() -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                use tokio::io::AsyncReadExt as _;
                let mut head = vec![0; 4096];
                let read = socket.read(&mut head).await.unwrap_or(0);
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head[..read]).into_owned());
            }
        });
        Recorder { url, connections }
    }

    fn seen(&self) -> Vec<String> {
        self.connections.lock().unwrap().clone()
    }
}

mod runs;
mod trust;
