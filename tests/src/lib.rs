//! The harness end-to-end tests share.
//!
//! [`PostgresServer`] is a real PostgreSQL started for a test (see
//! `postgres.rs`).
//!
//! [`StandInAdmin`] is a real HTTP server on loopback that speaks the admin
//! side of the executor protocol: it records registrations and callbacks,
//! serves modules by digest, checks the token, and can be made unavailable
//! (503) to test spooling and retries. The real admin replaces it in the
//! tests of the admin itself.
//!
//! [`WebhookReceiver`] records alarm webhooks.
//!
//! [`hostile`] builds job components no toolchain makes, to attack the
//! host's limits with.
//!
//! [`Browser`] is Debian's headless Chromium over WebDriver, for the
//! console's tests.
//!
//! [`tests_at_a_time!`] runs more of a binary's tests together when they
//! wait rather than compute.
//!
//! [`AdminClient`] drives the admin's user API over HTTP, and
//! [`ExecutorClient`] an executor's; [`until`] polls what a test waits for
//! within a bound.

pub mod allocations;
mod browser;
mod client;
mod executor_client;
pub mod hostile;
mod origin;
mod otlp;
mod patroni;
mod postgres;
mod python;
mod threads;
mod webhook;

pub use browser::{Browser, process_group_alive};
pub use client::{AdminClient, WAIT, run_summary, test_password, until, until_seen, until_within};
pub use executor_client::ExecutorClient;
pub use origin::{SeenRequest, TestOrigin};
pub use otlp::{OtlpReceiver, ReceivedPoint, ReceivedSpan};
pub use patroni::{PATRONI_TTL, Patroni};
pub use postgres::{PostgresServer, postgres_program};
pub use python::{python_tool, run_ok};
pub use threads::{TestGroup, Turn};
pub use webhook::WebhookReceiver;

/// User and system CPU time this process has used, in milliseconds
/// (`/proc/self/stat`, in the kernel's 100 Hz ticks): what the benchmarks
/// compare builds by.
pub fn process_cpu_ms() -> i64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat[stat.rfind(')').expect("a command") + 2..]
        .split(' ')
        .collect();
    // utime and stime are fields 14 and 15 of the whole line.
    let ticks: i64 =
        fields[11].parse::<i64>().expect("utime") + fields[12].parse::<i64>().expect("stime");
    ticks * 10
}

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use cronbox_protocol::{CallbackBatch, Registration, RunResult, admin_paths};
use sha2::{Digest, Sha256};

/// What the stand-in admin has received.
#[derive(Debug, Default)]
struct Received {
    /// Every callback result, in arrival order, duplicates included.
    results: Vec<RunResult>,
    registrations: Vec<Registration>,
    removals: Vec<Registration>,
}

#[derive(Debug)]
struct AdminState {
    token: String,
    available: AtomicBool,
    /// The protocol version its answers carry (0: none, as an admin of
    /// protocol 1 answered).
    protocol: std::sync::atomic::AtomicU32,
    modules: Mutex<HashMap<String, Vec<u8>>>,
    received: Mutex<Received>,
}

/// A stand-in admin on loopback. Stops when dropped.
#[derive(Debug)]
pub struct StandInAdmin {
    addr: SocketAddr,
    state: Arc<AdminState>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for StandInAdmin {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn authorized(state: &AdminState, headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value == format!("Bearer {}", state.token))
}

fn refusal(state: &AdminState, headers: &HeaderMap) -> Option<StatusCode> {
    if !state.available.load(Ordering::SeqCst) {
        Some(StatusCode::SERVICE_UNAVAILABLE)
    } else if !authorized(state, headers) {
        Some(StatusCode::UNAUTHORIZED)
    } else {
        None
    }
}

async fn callback(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    Json(batch): Json<CallbackBatch>,
) -> StatusCode {
    if let Some(status) = refusal(&state, &headers) {
        return status;
    }
    state
        .received
        .lock()
        .expect("lock")
        .results
        .extend(batch.results);
    StatusCode::OK
}

async fn registry(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    Json(registration): Json<Registration>,
) -> axum::response::Response {
    if let Some(status) = refusal(&state, &headers) {
        return status.into_response();
    }
    state
        .received
        .lock()
        .expect("lock")
        .registrations
        .push(registration);
    // It stands in for an admin of this build, unless told otherwise.
    match state.protocol.load(Ordering::SeqCst) {
        0 => StatusCode::OK.into_response(),
        version => (
            [(cronbox_protocol::PROTOCOL_HEADER, version.to_string())],
            StatusCode::OK,
        )
            .into_response(),
    }
}

async fn registry_remove(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    Json(registration): Json<Registration>,
) -> StatusCode {
    if let Some(status) = refusal(&state, &headers) {
        return status;
    }
    state
        .received
        .lock()
        .expect("lock")
        .removals
        .push(registration);
    StatusCode::OK
}

async fn module(
    State(state): State<Arc<AdminState>>,
    headers: HeaderMap,
    Path(digest): Path<String>,
) -> axum::response::Response {
    if let Some(status) = refusal(&state, &headers) {
        return status.into_response();
    }
    match state.modules.lock().expect("lock").get(&digest) {
        Some(bytes) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

impl StandInAdmin {
    /// Starts on a free loopback port.
    pub async fn start(token: &str) -> Self {
        Self::start_on("127.0.0.1:0".parse().expect("address"), token).await
    }

    /// Starts on `addr` (to come back on the same port after a stop).
    pub async fn start_on(addr: SocketAddr, token: &str) -> Self {
        let state = Arc::new(AdminState {
            token: token.to_owned(),
            available: AtomicBool::new(true),
            protocol: cronbox_protocol::PROTOCOL_VERSION.into(),
            modules: Mutex::new(HashMap::new()),
            received: Mutex::new(Received::default()),
        });
        let app = Router::new()
            .route(admin_paths::CALLBACK, post(callback))
            .route(admin_paths::REGISTRY, post(registry))
            .route(admin_paths::REGISTRY_REMOVE, post(registry_remove))
            .route("/api/v1/modules/{digest}/content", get(module))
            .with_state(state.clone());
        let (addr, server) = crate::serve_on(addr, app).await;
        StandInAdmin {
            addr,
            state,
            server,
        }
    }

    /// The base URL executors are configured with.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves `wasm` by its digest; returns the digest.
    pub fn add_module(&self, wasm: Vec<u8>) -> String {
        let digest = hex::encode(Sha256::digest(&wasm));
        self.state
            .modules
            .lock()
            .expect("lock")
            .insert(digest.clone(), wasm);
        digest
    }

    /// The protocol version its registration answers carry (`None`: none,
    /// as an admin of protocol 1's did).
    pub fn set_protocol(&self, version: Option<u32>) {
        self.state
            .protocol
            .store(version.unwrap_or(0), Ordering::SeqCst);
    }

    /// While unavailable, every request is answered 503.
    pub fn set_available(&self, available: bool) {
        self.state.available.store(available, Ordering::SeqCst);
    }

    /// Every result received, in order, duplicates included.
    pub fn results(&self) -> Vec<RunResult> {
        self.state.received.lock().expect("lock").results.clone()
    }

    /// Registrations (heartbeats) received.
    pub fn registrations(&self) -> Vec<Registration> {
        self.state
            .received
            .lock()
            .expect("lock")
            .registrations
            .clone()
    }

    /// Deregistrations received.
    pub fn removals(&self) -> Vec<Registration> {
        self.state.received.lock().expect("lock").removals.clone()
    }

    /// Waits until a result for `run_id` has arrived.
    pub async fn result_of(&self, run_id: u64, timeout: Duration) -> RunResult {
        let deadline = Instant::now() + timeout;
        loop {
            let results = self.results();
            if let Some(result) = results.iter().find(|r| r.run_id == run_id) {
                return result.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no result for run {run_id} within {timeout:?} (results of runs {:?} came; the executor was {})",
                results.iter().map(|r| r.run_id).collect::<Vec<_>>(),
                if self.registrations().is_empty() {
                    "never registered"
                } else {
                    "registered"
                },
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until at least `count` results have arrived.
    pub async fn wait_for_results(&self, count: usize, timeout: Duration) -> Vec<RunResult> {
        let deadline = Instant::now() + timeout;
        loop {
            let results = self.results();
            if results.len() >= count {
                return results;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {count} results within {timeout:?}",
                results.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Serves `app` on `addr` (port 0: one of the system's choosing) until the
/// returned task is aborted: where it listens, and the task.
pub(crate) async fn serve_on(
    addr: impl tokio::net::ToSocketAddrs,
    app: axum::Router,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("a loopback port to serve on");
    let addr = listener.local_addr().expect("its address");
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, server)
}

/// A successful result of run `run_id` of job `job_id` saying `message`,
/// as an executor at `executor` holding `receipt` would post it: nothing
/// logged, no state changed.
pub fn stand_in_result(
    run_id: u64,
    job_id: u64,
    message: &str,
    executor: &str,
    receipt: &str,
) -> RunResult {
    RunResult {
        run_id,
        job_id,
        scheduled_at_ms: None,
        outcome: cronbox_protocol::Outcome::Success {
            message: message.to_owned(),
        },
        code: 200,
        started_at_ms: 1,
        duration_ms: 1,
        fuel_consumed: None,
        peak_memory_bytes: 0,
        module_digest: Default::default(),
        log: Vec::new(),
        log_truncated: false,
        state_changes: Default::default(),
        traceparent: None,
        state_base: Default::default(),
        executor: executor.to_owned(),
        receipt: receipt.to_owned(),
    }
}
