//! Outbound HTTP from a warm guest against the same GET made by the host.
//! Prints a table; figures go into BENCHMARKS.md.
//!
//!     cargo bench -p cronbox-runtime --bench http
//!
//! A loopback server answers `GET /bytes/N`. Three cases, interleaved
//! round by round so that both see the same machine:
//!
//! - **host**: the GET made by the host with the stack the runtime uses
//!   (tokio TCP, hyper's HTTP/1 client connection, a new connection per
//!   request, the body read whole);
//! - **guest**: one run of `http-probe` on a warm instance sending the same
//!   GET through `wasi:http`, with the grant check, the address check, the
//!   metering and the log line;
//! - **guest, no request**: the same run with nothing to send, the fixed
//!   cost of a run.

#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::time::{Duration, Instant};

use bytes::Bytes;
use cronbox_example_jobs as jobs;
use cronbox_runtime::{
    InstanceMode, JobWorker, Outcome, RunHandle, RunRequest, Runtime, RuntimeConfig, Trigger,
};
use cronbox_tests::TestOrigin;
use http_body_util::{BodyExt, Empty};

const ROUNDS: usize = 2_000;
const WARM_UP: usize = 100;

fn main() {
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    threads.block_on(bench());
}

async fn bench() {
    let origin = TestOrigin::start().await;
    let runtime = Runtime::new(RuntimeConfig {
        http_nets: "127.0.0.1/32".parse().unwrap(),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let module = runtime.load(jobs::bytes("http-probe")).await.unwrap();
    let mut worker = JobWorker::new(&runtime, module, InstanceMode::Warm);
    let grant = [origin.origin().parse().unwrap()];

    println!("GET of a local server, {ROUNDS} requests per case after {WARM_UP} of warm-up");
    println!();
    println!("| body     | case              | p50       | p99       | p50 ratio |");
    println!("|----------|-------------------|-----------|-----------|-----------|");
    for size in [0_usize, 1_024, 65_536] {
        let path = format!("/bytes/{size}");
        let url = origin.url(&path);
        let request = |param: &str| RunRequest {
            http_allow: grant.clone().into(),
            ..RunRequest::new(Trigger::manual(param, 0))
        };
        let get = format!("GET {url}");
        let mut host = Vec::with_capacity(ROUNDS);
        let mut guest = Vec::with_capacity(ROUNDS);
        let mut fixed = Vec::with_capacity(ROUNDS);
        for round in 0..WARM_UP + ROUNDS {
            let started = Instant::now();
            let bytes = host_get(origin.port(), &path).await;
            let host_took = started.elapsed();
            assert_eq!(bytes, size);

            let started = Instant::now();
            let report = worker.run(request(&get), &RunHandle::new()).await;
            let guest_took = started.elapsed();
            assert_eq!(
                report.outcome,
                Outcome::Success {
                    message: format!("200 {size}")
                }
            );

            let started = Instant::now();
            let report = worker.run(request(""), &RunHandle::new()).await;
            let fixed_took = started.elapsed();
            assert!(report.outcome.is_success());

            if round >= WARM_UP {
                host.push(host_took);
                guest.push(guest_took);
                fixed.push(fixed_took);
            }
        }
        let host_p50 = percentile(&mut host, 50);
        let label = match size {
            0 => "0 B".to_owned(),
            n => format!("{} KiB", n / 1024),
        };
        for (case, timings) in [
            ("host", &mut host),
            ("guest", &mut guest),
            ("guest, no request", &mut fixed),
        ] {
            let p50 = percentile(timings, 50);
            let p99 = percentile(timings, 99);
            println!(
                "| {label:<8} | {case:<17} | {:>6.1} µs | {:>6.1} µs | {:>8.2}× |",
                micros(p50),
                micros(p99),
                p50.as_secs_f64() / host_p50.as_secs_f64()
            );
        }
    }
}

/// The host's GET: connect, HTTP/1 handshake, request, body read whole.
async fn host_get(port: u16, path: &str) -> usize {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(stream))
            .await
            .unwrap();
    let driver = tokio::spawn(connection);
    let request = http::Request::get(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    drop(sender);
    let _ = driver.await;
    body.len()
}

fn percentile(timings: &mut [Duration], percent: usize) -> Duration {
    timings.sort_unstable();
    let index = (timings.len() * percent / 100).min(timings.len() - 1);
    timings[index]
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}
