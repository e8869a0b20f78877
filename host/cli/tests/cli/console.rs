//! The web console in a real browser: `cronbox up` as a process, Debian's
//! headless Chromium driven over WebDriver, every step through the page
//! as a person takes it. Screenshots of each main page are saved under
//! `target/console-screenshots/` for a person to look at. The shared
//! steps are here; the tests by who uses the console, in `console/`: an
//! operator's day, daily operation, lower roles and other tenants,
//! workflows.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use crate::support;

use std::path::{Path, PathBuf};

use cronbox_api::{JobQuery, JobSpec};
use cronbox_tests::{AdminClient, Browser, TestGroup, process_group_alive, until};
use reqwest::Method;
use serde_json::{Value, json};
use support::Process;

/// Two at a time: each drives a browser of its own.
static TESTS: TestGroup = TestGroup::new(2);

/// Where the screenshots go.
fn screenshots() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/console-screenshots")
}

/// `cronbox up` in a fresh data directory: the process, the console's
/// address, the operator's API client and the console user's password.
struct Up {
    _process: Process,
    base: String,
    operator: AdminClient,
    admin_password: String,
    _data: tempfile::TempDir,
}

fn start() -> Up {
    start_with(&[])
}

/// [`start`] with these environment variables set.
fn start_with(env: &[(&str, &Path)]) -> Up {
    let data = tempfile::tempdir().unwrap();
    let (process, printed, at) = support::up_with_env(data.path(), None, env);
    let password_file = data.path().join("admin-password");
    assert!(
        printed.contains(&format!("password in {}", password_file.display())),
        "cronbox up says where the console's password is: {printed}"
    );
    let base = format!("http://{}", at.admin);
    assert!(
        printed.contains(&format!("console     {base}/")),
        "{printed}"
    );
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    Up {
        _process: process,
        operator: AdminClient::new(base.clone(), token.trim()),
        admin_password: std::fs::read_to_string(password_file).unwrap(),
        base,
        _data: data,
    }
}

async fn log_in(browser: &Browser, user: &str, password: &str) {
    browser.fill("#login-user", user).await;
    browser.fill("#login-password", password).await;
    browser.click("#login-submit").await;
    browser.element("header #who").await;
}

/// A component of the example jobs, written to a file a file picker can
/// be given.
fn component_file(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.wasm"));
    std::fs::write(&path, cronbox_example_jobs::bytes(name)).unwrap();
    path
}

/// Uploads `file` as a version of module `name` from the modules page's
/// form (the page is open); the answer it shows.
async fn upload(browser: &Browser, file: &Path, name: &str) -> String {
    let picker = browser.element("#upload-file").await;
    picker
        .send_keys(file.to_str().unwrap())
        .await
        .expect("the file is chosen");
    browser.fill("#upload-name", name).await;
    browser.click("#upload-submit").await;
    browser
        .text_until("#upload-result", "the upload is answered", |text| {
            !text.is_empty()
        })
        .await
}

/// The id at the end of the page's address (`#/jobs/7` → 7).
async fn id_in_address(browser: &Browser, what: &str) -> i64 {
    until(&format!("the address names the {what}"), || async {
        let url = browser.client.current_url().await.ok()?;
        url.fragment()?.rsplit('/').next()?.parse().ok()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_a_strict_policy() {
    let _turn = TESTS.turn();
    let up = start();
    let http = cronbox_tls::client();
    for path in [
        "/",
        "/console/app.js",
        "/console/app.css",
        "/console/text.js",
    ] {
        let response = http.get(format!("{}{path}", up.base)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers();
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("script-src 'self'"), "{policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
        assert!(!policy.contains("unsafe-inline"), "{policy}");
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["x-content-type-options"], "nosniff");
    }
    let page = http
        .get(&up.base)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!page.contains("<script>"), "no inline script: {page}");
    let script = http
        .get(format!("{}/console/app.js", up.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !script.contains("innerHTML"),
        "the console never parses data as markup"
    );
    let missing = http
        .get(format!("{}/console/nothing.js", up.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}

/// A browser dropped (at a test's end, or when it panics) leaves no
/// process behind: Chromium and its helpers go with chromedriver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_browser_leaves_no_process_behind() {
    let _turn = TESTS.turn();
    let browser = Browser::start(&screenshots()).await;
    browser.goto("about:blank").await;
    let group = browser.process_group();
    assert!(process_group_alive(group), "the browser runs");
    drop(browser);
    until("no process of the browser is left", || async {
        (!process_group_alive(group)).then_some(())
    })
    .await;
}

mod daily;
mod operator;
mod roles;
mod workflows;
