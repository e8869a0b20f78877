//! Trust between machines, on loopback: an admin and three executors as
//! separate `cronbox` processes with data directories of their own, TLS on
//! every hop (CLI → admin, admin → executor, executor → admin) from a
//! private CA made by `cronbox cert`, each executor enrolled with a
//! credential of its own.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::path::Path;

use cronbox_api::{Client, ExecutorTokenSpec, JobId, JobSpec, RunStatus, TriggerRequest};
use cronbox_example_jobs as jobs;
use cronbox_tests::until;
use support::{Process, cronbox_listening};

const API: &str = "tls-api";
const SHARED: &str = "tls-shared-executor-token";

/// `cronbox ARGS`, with no context to fall back on.
fn cronbox_output(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .env("CRONBOX_CONTEXTS", "/nonexistent/contexts.toml")
        .output()
        .unwrap()
}

/// `cronbox ARGS`, which must succeed; its stdout.
fn cronbox(args: &[&str]) -> String {
    let output = cronbox_output(args);
    assert!(
        output.status.success(),
        "cronbox {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A private CA in `dir` and certificates for 127.0.0.1 named `names`.
fn private_ca(dir: &Path, names: &[&str]) {
    let dir = dir.to_str().unwrap();
    cronbox(&["cert", "ca", "--dir", dir]);
    for name in names {
        cronbox(&["cert", "issue", name, "--host", "127.0.0.1", "--dir", dir]);
    }
}

fn path(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

/// A client of `admin` trusting the CA file `ca`.
fn client(admin: &str, ca: &Path) -> Client {
    let http = cronbox_tls::client_builder(Some(ca))
        .unwrap()
        .build()
        .unwrap();
    Client::with_http(admin, API, http)
}

/// Where a test cluster's admin, certificates and data are.
struct Cluster<'a> {
    admin: &'a str,
    certs: &'a Path,
    data: &'a Path,
}

/// `cronbox executor` on `bind` in `group` with `token`, serving TLS with
/// the certificate `cert` and keeping its data in a directory named
/// after it; its process and advertised address.
fn executor(
    cluster: &Cluster<'_>,
    bind: &str,
    cert: &str,
    token: &str,
    group: &str,
) -> (Process, String) {
    let Cluster { admin, certs, data } = *cluster;
    cronbox_listening(
        &[
            "executor",
            "--bind",
            bind,
            "--admin",
            admin,
            "--token",
            token,
            "--group",
            group,
            "--beat-interval",
            "500ms",
            "--tls-cert",
            &path(certs, &format!("{cert}.pem")),
            "--tls-key",
            &path(certs, &format!("{cert}-key.pem")),
            "--ca-file",
            &path(certs, "ca.pem"),
            "--data-dir",
            &data.join(cert).display().to_string(),
        ],
        "advertised as ",
    )
}

/// Until `group` has exactly the live executors `addresses`.
async fn until_group_is(api: &Client, group: &str, addresses: &[&str]) {
    let mut wanted: Vec<&str> = addresses.to_vec();
    wanted.sort_unstable();
    until(
        &format!("group {group} is served by {wanted:?}"),
        || async {
            let executors = api.executors().await.ok()?;
            let mut alive: Vec<String> = executors
                .iter()
                .filter(|executor| executor.alive && executor.group == group)
                .map(|executor| executor.address.clone())
                .collect();
            alive.sort_unstable();
            (alive == wanted).then_some(())
        },
    )
    .await;
}

/// Triggers `job` and waits for the run's end: the executor that ran it.
async fn run_once(api: &Client, job: JobId) -> String {
    let run_id = api
        .trigger(job, &TriggerRequest::default())
        .await
        .unwrap()
        .run_id;
    let run = until("the triggered run ends", || async {
        let run = api.run(run_id).await.ok()?;
        matches!(run.status, RunStatus::Success | RunStatus::Failed).then_some(run)
    })
    .await;
    assert_eq!(
        run.status,
        RunStatus::Success,
        "run {run_id}: {:?}",
        run.message
    );
    run.executor.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_on_tls_with_enrolled_executors_refuses_strangers_and_survives_revocation_and_rotation()
 {
    let data = tempfile::tempdir().unwrap();
    let certs = data.path().join("certs");
    private_ca(&certs, &["admin", "exec-a1", "exec-a2", "exec-b"]);
    let strangers = data.path().join("strangers");
    private_ca(&strangers, &["admin"]);

    let (_admin, admin_url) = cronbox_listening(
        &[
            "admin",
            "--bind",
            "127.0.0.1:0",
            "--data-dir",
            &data.path().join("admin").display().to_string(),
            "--token",
            API,
            "--executor-token",
            SHARED,
            "--tls-cert",
            &path(&certs, "admin.pem"),
            "--tls-key",
            &path(&certs, "admin-key.pem"),
            "--ca-file",
            &path(&certs, "ca.pem"),
            "--dead-after",
            "2s",
        ],
        "listening on ",
    );
    assert!(admin_url.starts_with("https://"), "{admin_url}");
    let api = client(&admin_url, &certs.join("ca.pem"));
    until("the admin is ready", || async {
        api.ready().await.ok().filter(|ready| ready.ready)
    })
    .await;

    // Another CA's certificate, or none, is refused by the clients.
    let stranger = client(&admin_url, &strangers.join("ca.pem"));
    assert!(stranger.ready().await.is_err(), "a wrong CA is refused");
    assert!(
        Client::new(&admin_url, API).ready().await.is_err(),
        "no system root signs a private CA"
    );
    let job_list = |ca: &Path| {
        let ca = ca.display().to_string();
        [
            "job",
            "list",
            "--admin",
            &admin_url,
            "--token",
            API,
            "--ca-file",
            &ca,
        ]
        .map(str::to_owned)
    };
    let refused = job_list(&strangers.join("ca.pem"));
    let refused = cronbox_output(&refused.each_ref().map(String::as_str));
    assert!(
        !refused.status.success(),
        "the CLI refuses an admin its CA file does not sign"
    );
    // The CLI reaches it with the CA file (cronbox() asserts success).
    let listed = job_list(&certs.join("ca.pem"));
    cronbox(&listed.each_ref().map(String::as_str));

    // Enrolled executors: two in group alpha, one in beta.
    let enroll = |name: &str, group: &str| {
        let spec = ExecutorTokenSpec {
            name: name.to_owned(),
            groups: vec![group.to_owned()],
        };
        let api = api.clone();
        async move { api.enroll_executor(&spec).await.unwrap() }
    };
    let a1 = enroll("a1", "alpha").await;
    let a2 = enroll("a2", "alpha").await;
    let b = enroll("b", "beta").await;
    let cluster = Cluster {
        admin: &admin_url,
        certs: &certs,
        data: data.path(),
    };
    let any_port = "127.0.0.1:0";
    let (_a1_process, a1_address) = executor(&cluster, any_port, "exec-a1", &a1.token, "alpha");
    let (a2_process, a2_address) = executor(&cluster, any_port, "exec-a2", &a2.token, "alpha");
    let (_b_process, b_address) = executor(&cluster, any_port, "exec-b", &b.token, "beta");
    for address in [&a1_address, &a2_address, &b_address] {
        assert!(address.starts_with("https://"), "{address}");
    }
    until_group_is(&api, "alpha", &[&a1_address, &a2_address]).await;
    until_group_is(&api, "beta", &[&b_address]).await;

    // An impostor admin: one that knows an executor's address (and even
    // the shared token, and trusts the CA) but not the executor's
    // credential is refused.
    let impostor = cronbox_tls::client_builder(Some(&certs.join("ca.pem")))
        .unwrap()
        .build()
        .unwrap();
    let beat = impostor
        .post(format!(
            "{a1_address}{}",
            cronbox_protocol::executor_paths::BEAT
        ))
        .bearer_auth(SHARED)
        .send()
        .await
        .unwrap();
    assert_eq!(beat.status(), 401, "an impostor admin is refused");

    // Runs cross every hop over TLS: the admin sends to the executors'
    // https:// addresses, they post their results to the admin's.
    api.upload(jobs::bytes("hello"), Some("hello"), &[])
        .await
        .unwrap();
    let spec = |name: &str, group: &str| JobSpec {
        group: group.to_owned(),
        route: "ROUND".to_owned(),
        ..JobSpec::new(name, "hello")
    };
    let alpha = api
        .create_job(&spec("alpha-job", "alpha"))
        .await
        .unwrap()
        .id;
    let beta = api.create_job(&spec("beta-job", "beta")).await.unwrap().id;
    let mut ran_on = std::collections::BTreeSet::new();
    for _ in 0..4 {
        ran_on.insert(run_once(&api, alpha).await);
    }
    assert_eq!(
        ran_on,
        [a1_address.clone(), a2_address.clone()].into(),
        "round robin over alpha"
    );
    assert_eq!(run_once(&api, beta).await, b_address);

    // Revoked: a1's registration ends at once, and every later run goes
    // to a2, none lost.
    let revoked = api.revoke_executor_token(a1.id).await.unwrap();
    assert_eq!(revoked.registrations_ended, 1, "a1's registration ended");
    until_group_is(&api, "alpha", &[&a2_address]).await;
    for _ in 0..3 {
        assert_eq!(
            run_once(&api, alpha).await,
            a2_address,
            "a revoked executor gets no run"
        );
    }

    // Rotated: a2 restarts with its new token on the same data directory
    // and address; runs go on.
    let rotated = api
        .rotate_executor_token(a2.id, Some(60_000))
        .await
        .unwrap();
    assert!(rotated.token.starts_with("cbe_") && rotated.token != a2.token);
    drop(a2_process);
    let restarted_ms = api
        .executors()
        .await
        .unwrap()
        .iter()
        .map(|e| e.last_beat_ms)
        .max()
        .unwrap();
    let a2_port = a2_address.rsplit(':').next().unwrap().to_owned();
    let a2_bind = format!("127.0.0.1:{a2_port}");
    let (_a2_again, a2_again_address) =
        executor(&cluster, &a2_bind, "exec-a2", &rotated.token, "alpha");
    assert_eq!(a2_again_address, a2_address);
    // Sent with the proof of the token it registered with: wait for its
    // first beat with the new one.
    until("a2 registers with its new token", || async {
        let executors = api.executors().await.ok()?;
        executors
            .iter()
            .any(|e| e.address == a2_address && e.last_beat_ms > restarted_ms)
            .then_some(())
    })
    .await;
    for _ in 0..2 {
        assert_eq!(
            run_once(&api, alpha).await,
            a2_address,
            "runs go on after the rotation"
        );
    }
}
