//! Nothing secret is kept where it should not be. Through a `cronbox up`
//! logging at debug level, a tenant's token and secret value, a user's
//! password (and a wrong one), an enrolled executor's token and a legacy
//! group's access token are set and used; then every file of the data
//! directory (the database and its WAL, the spool, the caches), all it
//! logged and its metrics are searched for them: none is anywhere but in
//! the files made to hold the operator's own credentials.

use std::path::Path;

use super::*;

const SECRET: &str = "a-secret-value-to-look-for";
const WRONG: &str = "a-wrong-password-to-look-for";
const LEGACY: &str = "a-legacy-token-to-look-for";

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_is_kept_in_the_data_directory_the_logs_or_the_metrics() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let log_path = data.path().join("captured.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let debug = Path::new("debug");
    let (mut process, _, at) =
        support::up_logging(data.path(), None, &[("CRONBOX_LOG", debug)], log);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let operator = AdminClient::new(base.clone(), token.trim());

    let tenant = operator.api.create_tenant("acme").await.unwrap();
    let acme = operator.with_token(&tenant.token);
    let (status, _) = acme
        .call(
            reqwest::Method::PUT,
            "/api/v1/secrets/DB_PASSWORD",
            Some(json!({ "value": SECRET })),
        )
        .await;
    assert_eq!(status, 200);
    let echo = acme
        .job(
            "echo",
            cronbox_example_jobs::bytes("config-echo"),
            json!({ "secrets": ["DB_PASSWORD"] }),
        )
        .await;
    let run = acme.trigger(echo, json!({ "param": "DB_PASSWORD" })).await;
    let ended = acme.ended(run).await;
    assert_eq!(ended.status, RunStatus::Success, "{ended:?}");

    operator.add_user("ana", "acme", "developer").await;
    let password = cronbox_tests::test_password("ana");
    for (attempt, expected) in [(WRONG, 401), (password.as_str(), 200)] {
        let (status, _) = operator
            .call(
                reqwest::Method::POST,
                "/api/v1/session",
                Some(json!({ "user": "ana", "password": attempt })),
            )
            .await;
        assert_eq!(status, expected);
    }
    let enrolled = operator
        .api
        .enroll_executor(&cronbox_api::ExecutorTokenSpec {
            name: "elsewhere".to_owned(),
            groups: vec!["batch".to_owned()],
        })
        .await
        .unwrap();
    let (status, _) = operator
        .call(
            reqwest::Method::PUT,
            "/api/v1/groups/old-app",
            Some(json!({ "address_type": "AUTO",
                "legacy": { "protocol": "xxl-job-3.4", "access_token": LEGACY } })),
        )
        .await;
    assert_eq!(status, 200);
    let metrics = operator.metrics().await;
    terminate(&mut process.0);

    let secrets = [
        SECRET,
        WRONG,
        LEGACY,
        password.as_str(),
        tenant.token.as_str(),
        enrolled.token.as_str(),
    ];
    // The files made to hold the operator's own credentials.
    let credentials = ["api-token", "admin-password", "secrets.key"];
    let mut searched = 0;
    for file in files(data.path()) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        if credentials.contains(&name.as_str()) {
            continue;
        }
        let bytes = std::fs::read(&file).unwrap();
        for secret in secrets {
            assert!(
                !bytes
                    .windows(secret.len())
                    .any(|window| window == secret.as_bytes()),
                "{secret:?} is in {}",
                file.display()
            );
        }
        searched += 1;
    }
    assert!(searched >= 3, "{searched} files searched");
    let logged = std::fs::read_to_string(&log_path).unwrap();
    assert!(logged.lines().count() > 10, "the debug log: {logged}");
    for secret in secrets {
        assert!(!metrics.contains(secret), "{secret:?} is in the metrics");
        assert!(!logged.contains(secret), "{secret:?} is in the log");
    }
}
