//! What a job can reach: outbound HTTP under its grants, limits and the
//! executor's network policy, and filesystem and sockets that are linked
//! but grant nothing. Real example components against a real HTTP server
//! on loopback.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cronbox_example_jobs as jobs;
use cronbox_runtime::{
    HttpLimits, InstanceMode, JobWorker, LogSource, NetPolicy, OriginPattern, Outcome, RunHandle,
    RunLimits, RunReport, RunRequest, Runtime, RuntimeConfig, Trigger,
};
use cronbox_tests::TestOrigin;

/// A runtime whose jobs may reach 127.0.0.1 (and nothing else private).
fn loopback_runtime() -> Runtime {
    runtime_allowing("127.0.0.1/32")
}

fn runtime_allowing(nets: &str) -> Runtime {
    Runtime::new(RuntimeConfig {
        http_nets: nets.parse::<NetPolicy>().expect("networks"),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

async fn worker(runtime: &Runtime, job: &str) -> JobWorker {
    let module = runtime.load(jobs::bytes(job)).await.expect("job loads");
    JobWorker::new(runtime, module, InstanceMode::Warm)
}

fn grants(origins: &[&str]) -> Arc<[OriginPattern]> {
    origins
        .iter()
        .map(|origin| origin.parse().expect("origin"))
        .collect()
}

/// A run of the http-probe fixture sending `lines`, granted `origins`.
fn probe(lines: &[String], origins: &[&str], limits: HttpLimits) -> RunRequest {
    RunRequest {
        http_allow: grants(origins),
        http_limits: limits,
        ..RunRequest::new(Trigger::manual(lines.join("\n"), 0))
    }
}

/// Runs http-probe on `worker` sending `lines`, granted `origins`.
async fn run_probe(
    worker: &mut JobWorker,
    lines: &[String],
    origins: &[&str],
    limits: HttpLimits,
) -> RunReport {
    worker
        .run(probe(lines, origins, limits), &RunHandle::new())
        .await
}

fn message(report: &RunReport) -> String {
    match &report.outcome {
        Outcome::Success { message } => message.clone(),
        other => panic!("expected success, got {other:?}; log {:?}", report.log),
    }
}

fn host_lines(report: &RunReport) -> Vec<String> {
    report
        .log
        .iter()
        .filter(|line| line.source == LogSource::Host)
        .map(|line| line.text.clone())
        .collect()
}

#[tokio::test]
async fn granted_requests_succeed_and_each_is_logged_without_headers_or_bodies() {
    let origin = TestOrigin::start().await;
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let lines = [
        format!("GET {}", origin.url("/bytes/1234")),
        format!("POST {} top-secret-body", origin.url("/echo")),
    ];
    let report = run_probe(
        &mut probe_job,
        &lines,
        &[&origin.origin()],
        HttpLimits::default(),
    )
    .await;
    assert_eq!(message(&report), "200 1234 | 200 15");
    let seen = origin.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[1].method.as_str(), seen[1].body_bytes), ("POST", 15));
    // Traces are off (no OpenTelemetry layer): no trace context is sent.
    assert!(
        seen.iter()
            .all(|request| !request.headers.contains_key("traceparent")),
        "{seen:?}"
    );
    let logged = host_lines(&report);
    let port = origin.port();
    assert_eq!(logged.len(), 2, "{logged:?}");
    assert!(
        logged[0].starts_with(&format!(
            "http GET http://127.0.0.1:{port} 200, 0 B sent, 1234 B received, "
        )),
        "{logged:?}"
    );
    assert!(
        logged[1].starts_with(&format!(
            "http POST http://127.0.0.1:{port} 200, 15 B sent, 15 B received, "
        )),
        "{logged:?}"
    );
    assert!(logged.iter().all(|line| !line.contains("top-secret")));
    let stats = runtime.http_stats();
    assert_eq!((stats.requests, stats.denied), (2, 0));
    assert_eq!((stats.bytes_sent, stats.bytes_received), (15, 1249));
}

#[tokio::test]
async fn an_origin_outside_the_grants_is_denied_inside_the_guest_and_logged() {
    let origin = TestOrigin::start().await;
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let lines = [format!("GET {}", origin.url("/bytes/1"))];
    for granted in [&[][..], &["http://127.0.0.1:1"][..]] {
        let report = run_probe(&mut probe_job, &lines, granted, HttpLimits::default()).await;
        assert!(
            message(&report).starts_with("error: the request was denied"),
            "{report:?}"
        );
        let logged = host_lines(&report);
        let why = if granted.is_empty() {
            "the job has no HTTP grant"
        } else {
            "no grant of the job covers this origin"
        };
        assert_eq!(
            logged,
            [format!(
                "http GET http://127.0.0.1:{} denied: {why}",
                origin.port()
            )]
        );
    }
    assert!(origin.requests().is_empty(), "nothing reached the server");
    assert_eq!(runtime.http_stats().denied, 2);
}

#[tokio::test]
async fn private_and_metadata_addresses_are_denied_even_when_granted() {
    let origin = TestOrigin::start().await;
    // The operator allowed no private network: a granted name resolving
    // to loopback is refused after resolution.
    let strict = runtime_allowing("");
    let mut probe_job = worker(&strict, "http-probe").await;
    let by_name = format!("http://localhost:{}", origin.port());
    let report = run_probe(
        &mut probe_job,
        &[format!("GET {by_name}/bytes/1")],
        &[&by_name],
        HttpLimits::default(),
    )
    .await;
    assert!(
        message(&report).contains("an address the operator does not allow"),
        "{report:?}"
    );
    let logged = host_lines(&report).join("\n");
    assert!(
        logged.contains("is a loopback address") && logged.contains("--http-allow-nets"),
        "the denial names the flag that allows it: {logged}"
    );

    // Loopback allowed, the metadata service granted by address: still
    // link-local, still refused, with no connection attempted.
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let report = run_probe(
        &mut probe_job,
        &["GET http://169.254.169.254/latest/meta-data/".to_owned()],
        &["http://169.254.169.254"],
        HttpLimits::default(),
    )
    .await;
    assert!(
        message(&report).contains("an address the operator does not allow"),
        "{report:?}"
    );
    let logged = host_lines(&report).join("\n");
    assert!(logged.contains("link-local (cloud metadata)"), "{logged}");
    assert!(origin.requests().is_empty());
}

#[tokio::test]
async fn a_redirect_to_an_ungranted_origin_is_denied_on_the_second_hop() {
    let origin = TestOrigin::start().await;
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    // Granted by address; the redirect names the same server by another
    // host, which no grant covers.
    let elsewhere = format!("http://localhost:{}/bytes/5", origin.port());
    let lines = [
        format!("GET {}", origin.url(&format!("/redirect?to={elsewhere}"))),
        format!(
            "GET {}",
            origin.url(&format!("/redirect?to={}", origin.url("/bytes/7")))
        ),
    ];
    let report = run_probe(
        &mut probe_job,
        &lines,
        &[&origin.origin()],
        HttpLimits::default(),
    )
    .await;
    let answer = message(&report);
    let (first, second) = answer.split_once(" | ").expect("two results");
    assert!(
        first.starts_with("error: the request was denied"),
        "{answer}"
    );
    assert_eq!(second, "200 7", "a granted hop is followed");
    let paths: Vec<String> = origin.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/redirect", "/redirect", "/bytes/7"]);
    let logged = host_lines(&report);
    assert!(
        logged[1].contains(&format!(
            "http GET http://localhost:{} denied",
            origin.port()
        )),
        "{logged:?}"
    );
}

#[tokio::test]
async fn byte_and_request_limits_hold_with_clear_errors() {
    let origin = TestOrigin::start().await;
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let limits = HttpLimits {
        max_requests: 2,
        max_bytes_received: 1_000,
        ..HttpLimits::default()
    };
    let lines = [
        format!("GET {}", origin.url("/bytes/600")),
        format!("GET {}", origin.url("/bytes/600")),
        format!("GET {}", origin.url("/bytes/1")),
    ];
    let report = run_probe(&mut probe_job, &lines, &[&origin.origin()], limits).await;
    let answer = message(&report);
    let results: Vec<&str> = answer.split(" | ").collect();
    assert_eq!(results[0], "200 600", "{answer}");
    assert!(
        results[1].starts_with("error: reading the response failed")
            && results[1].contains("exceeds limit: 1000 bytes"),
        "{answer}"
    );
    assert!(
        results[2].starts_with("error: the request was denied"),
        "{answer}"
    );
    let logged = host_lines(&report);
    assert!(
        logged[1].contains("(cut: the run's limit of 1000 bytes received is reached)"),
        "{logged:?}"
    );
    assert!(
        logged[2].ends_with("denied: the run's limit of 2 requests is reached"),
        "{logged:?}"
    );
    assert_eq!(
        origin.requests().len(),
        2,
        "the third request was never sent"
    );
}

#[tokio::test]
async fn a_slow_server_is_cut_off_by_the_run_timeout_and_by_a_kill() {
    let origin = TestOrigin::start().await;
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let slow = [format!("GET {}", origin.url("/slow"))];

    let timed = RunRequest {
        limits: RunLimits {
            timeout: Duration::from_millis(300),
            ..RunLimits::default()
        },
        ..probe(&slow, &[&origin.origin()], HttpLimits::default())
    };
    let started = Instant::now();
    let report = probe_job.run(timed, &RunHandle::new()).await;
    assert_eq!(report.outcome, Outcome::Timeout { timeout_ms: 300 });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let handle = RunHandle::new();
    let run = {
        let handle = handle.clone();
        let request = probe(&slow, &[&origin.origin()], HttpLimits::default());
        async move { probe_job.run(request, &handle).await }
    };
    let killer = async {
        origin.until_requests(2).await;
        let killed_at = Instant::now();
        handle.kill();
        killed_at
    };
    let (report, killed_at) = tokio::join!(run, killer);
    let ended_after = killed_at.elapsed();
    assert_eq!(report.outcome, Outcome::Killed);
    println!("a run blocked on a slow response ended {ended_after:?} after its kill");
    assert!(ended_after < Duration::from_secs(2), "{ended_after:?}");

    // The runtime is healthy: the next run of the same job goes through.
    let mut probe_job = worker(&runtime, "http-probe").await;
    let report = run_probe(
        &mut probe_job,
        &[format!("GET {}", origin.url("/bytes/3"))],
        &[&origin.origin()],
        HttpLimits::default(),
    )
    .await;
    assert_eq!(message(&report), "200 3");
}

#[tokio::test]
async fn a_filesystem_import_loads_and_sees_no_directory() {
    let runtime = loopback_runtime();
    let mut snooper = worker(&runtime, "fs-snooper").await;
    let report = snooper
        .run(RunRequest::new(Trigger::manual("", 0)), &RunHandle::new())
        .await;
    let Outcome::Failed { message } = &report.outcome else {
        panic!("expected failed, got {:?}", report.outcome);
    };
    for attempt in [
        "read /etc/passwd",
        "read job.wasm",
        "list /",
        "list .",
        "write /tmp/dropped",
    ] {
        assert!(message.contains(&format!("{attempt}: ")), "{message}");
    }
    assert!(!std::path::Path::new("/tmp/dropped").exists());
}

#[tokio::test]
async fn a_sockets_import_loads_and_can_open_no_socket() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    // Even with loopback allowed for HTTP, sockets stay closed.
    let runtime = loopback_runtime();
    let mut snooper = worker(&runtime, "net-snooper").await;
    let targets = format!(
        "{},{},1.1.1.1:53,[::1]:{}",
        listener.local_addr().unwrap(),
        udp.local_addr().unwrap(),
        listener.local_addr().unwrap().port()
    );
    let report = snooper
        .run(
            RunRequest::new(Trigger::manual(targets, 0)),
            &RunHandle::new(),
        )
        .await;
    let Outcome::Failed { message } = &report.outcome else {
        panic!("expected failed, got {:?}", report.outcome);
    };
    assert_eq!(message.matches("tcp ").count(), 4, "{message}");
    assert_eq!(message.matches("udp ").count(), 4, "{message}");
    // The run is over: nothing connected, nothing arrived.
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
    let mut buffer = [0_u8; 16];
    assert_eq!(
        udp.recv(&mut buffer).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

#[tokio::test]
async fn the_operators_maximum_lowers_a_jobs_limits() {
    let origin = TestOrigin::start().await;
    let runtime = Runtime::new(RuntimeConfig {
        http_nets: "127.0.0.1/32".parse().expect("networks"),
        http_max: HttpLimits {
            max_requests: 1,
            ..HttpLimits::MAX
        },
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let mut probe_job = worker(&runtime, "http-probe").await;
    let twice = [
        format!("GET {}", origin.url("/bytes/1")),
        format!("GET {}", origin.url("/bytes/1")),
    ];
    let report = run_probe(
        &mut probe_job,
        &twice,
        &[&origin.origin()],
        HttpLimits::default(),
    )
    .await;
    assert!(
        message(&report).starts_with("200 1 | error: the request was denied"),
        "{report:?}"
    );
    assert!(
        host_lines(&report)[1].ends_with("the run's limit of 1 requests is reached"),
        "{:?}",
        host_lines(&report)
    );
}

/// A guest holding more host resources than an instance may have traps
/// (that run only); the next run gets a new instance and goes through.
#[tokio::test]
async fn hoarding_host_resources_ends_the_run_not_the_host() {
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let few = run_probe(
        &mut probe_job,
        &["HOARD 100".to_owned()],
        &[],
        HttpLimits::default(),
    )
    .await;
    assert_eq!(message(&few), "hoarded 100");
    let many = run_probe(
        &mut probe_job,
        &["HOARD 100000".to_owned()],
        &[],
        HttpLimits::default(),
    )
    .await;
    let Outcome::Trap { message: trap } = &many.outcome else {
        panic!("expected a trap, got {:?}", many.outcome);
    };
    assert!(trap.contains("resource table"), "{trap}");
    let again = run_probe(
        &mut probe_job,
        &["HOARD 1".to_owned()],
        &[],
        HttpLimits::default(),
    )
    .await;
    assert_eq!(message(&again), "hoarded 1");
    assert!(again.new_instance);
}

#[tokio::test]
async fn concurrency_and_bytes_sent_limits_hold() {
    let origin = TestOrigin::start().await;
    let runtime = loopback_runtime();
    let mut probe_job = worker(&runtime, "http-probe").await;
    let pair = format!("PAIR {} {}", origin.url("/bytes/5"), origin.url("/bytes/6"));
    // Two at once allowed: both answered.
    let report = run_probe(
        &mut probe_job,
        std::slice::from_ref(&pair),
        &[&origin.origin()],
        HttpLimits::default(),
    )
    .await;
    assert_eq!(message(&report), "200 5 & 200 6");
    // One at a time: the second is refused while the first is in flight.
    let one_at_a_time = HttpLimits {
        max_concurrent: 1,
        ..HttpLimits::default()
    };
    let report = run_probe(
        &mut probe_job,
        std::slice::from_ref(&pair),
        &[&origin.origin()],
        one_at_a_time,
    )
    .await;
    assert_eq!(
        message(&report),
        "200 5 & error: ErrorCode::ConnectionLimitReached"
    );
    assert!(
        host_lines(&report)
            .iter()
            .any(|line| line.ends_with("denied: the run's limit of 1 requests at once is reached")),
        "{:?}",
        host_lines(&report)
    );

    // Bytes sent: the body over the run's limit is cut, named.
    let small = HttpLimits {
        max_bytes_sent: 10,
        ..HttpLimits::default()
    };
    let posts = [
        format!("POST {} 12345", origin.url("/echo")),
        format!("POST {} {}", origin.url("/echo"), "x".repeat(5000)),
    ];
    let report = run_probe(&mut probe_job, &posts, &[&origin.origin()], small).await;
    let answer = message(&report);
    assert!(
        answer.starts_with("200 5 | error: the request is over the run's limit of 10 bytes sent"),
        "{answer}"
    );
    let logged = host_lines(&report);
    assert!(
        logged[1].contains("(cut: the run's limit of 10 bytes sent is reached)"),
        "{logged:?}"
    );
}
