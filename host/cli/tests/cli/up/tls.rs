//! `cronbox up --tls`: both listeners on TLS from a CA it makes in its
//! data directory, recorded in its context so that the CLI trusts it from
//! any folder; the console's session cookie is `Secure`.

use std::path::Path;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_with_tls_serves_both_listeners_and_its_context_trusts_its_ca() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let (_up, printed, at) =
        up_with_env(data.path(), None, &[("CRONBOX_UP_TLS", Path::new("true"))]);
    let admin = format!("https://{}", at.admin);
    assert!(
        printed.contains(&format!("admin API   {admin}")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("executor    https://{}", at.executor)),
        "{printed}"
    );
    let ca = data.path().join("tls").join("ca.pem");
    assert!(printed.contains("CRONBOX_CA_FILE="), "{printed}");

    // The CLI, from another folder, finds the admin and trusts its CA
    // through the context `up` recorded.
    let elsewhere = tempfile::tempdir().unwrap();
    let listed = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["job", "list"])
        .current_dir(elsewhere.path())
        .env("CRONBOX_CONTEXTS", data.path().join("contexts.toml"))
        .env_remove("CRONBOX_API_TOKEN")
        .env_remove("CRONBOX_ADMIN")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success() && stdout.contains("hello"),
        "{stdout}{}",
        String::from_utf8_lossy(&listed.stderr)
    );

    // Plain HTTP, or TLS without the CA, gets nothing from it.
    let plain = cronbox_tls::client()
        .get(format!("http://{}/readyz", at.admin))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
    assert!(
        cronbox_tls::client()
            .get(format!("{admin}/readyz"))
            .send()
            .await
            .is_err()
    );

    // The console's session cookie is Secure: the admin serves TLS itself.
    let http = cronbox_tls::client_builder(Some(&ca))
        .unwrap()
        .build()
        .unwrap();
    let password = std::fs::read_to_string(data.path().join("admin-password")).unwrap();
    let login = http
        .post(format!("{admin}/api/v1/session"))
        .json(&json!({ "user": "admin", "password": password.trim() }))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 200);
    let cookie = login.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
}
