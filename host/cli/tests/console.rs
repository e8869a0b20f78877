//! The web console in a real browser: `cronbox up` as a process, Debian's
//! headless Chromium driven over WebDriver, every step through the page
//! as a person takes it. Screenshots of each main page are saved under
//! `target/console-screenshots/` for a person to look at.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

mod support;

use std::path::{Path, PathBuf};

use cronbox_api::{JobQuery, JobSpec};
use cronbox_tests::{AdminClient, Browser, process_group_alive, until};
use reqwest::Method;
use serde_json::{Value, json};
use support::{Process, up};

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
    let data = tempfile::tempdir().unwrap();
    let (process, printed, at) = up(data.path(), None);
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
async fn an_operator_runs_cronbox_from_the_console() {
    let up = start();
    let browser = Browser::start(&screenshots()).await;
    let files = tempfile::tempdir().unwrap();

    // A wrong password is refused; the right one opens the dashboard.
    browser.goto(&format!("{}/", up.base)).await;
    browser.fill("#login-user", "admin").await;
    browser.fill("#login-password", "not-the-password").await;
    browser.click("#login-submit").await;
    let refusal = browser
        .text_until("#login-error", "the login is refused", |text| {
            !text.is_empty()
        })
        .await;
    assert!(refusal.contains("Wrong user name or password"), "{refusal}");
    browser.screenshot("login").await;
    browser.fill("#login-password", &up.admin_password).await;
    browser.click("#login-submit").await;
    browser.element("#dashboard #chart-hours svg").await;
    let who = browser.element("#who").await.text().await.unwrap();
    assert!(who.contains("admin") && who.contains("operator"), "{who}");
    browser.screenshot("dashboard").await;

    // A job made from the form: a bad expression is refused next to its
    // field as it is typed; a good one is previewed in the job's zone.
    browser.goto(&format!("{}/#/jobs", up.base)).await;
    browser.element("#jobs table").await;
    browser.screenshot("jobs").await;
    browser.click("#job-new").await;
    browser.fill("#job-form input[name=name]", "greeter").await;
    browser.fill("#job-form input[name=module]", "hello").await;
    browser
        .fill("#job-form input[name=schedule_conf]", "61 * * * * ?")
        .await;
    let error = browser
        .text_until(
            ".field-error[data-field=schedule_conf]",
            "the bad expression is refused next to its field",
            // The preview may first answer for the field as cleared.
            |text| text.contains("61"),
        )
        .await;
    assert!(error.contains("61"), "{error}");
    browser
        .fill("#job-form input[name=schedule_conf]", "0 30 9 * * ?")
        .await;
    browser
        .fill("#job-form input[name=time_zone]", "Europe/Berlin")
        .await;
    let preview = browser
        .text_until(
            "#schedule-preview",
            "the preview shows fires in Berlin",
            |text| text.contains("09:30:00.000+01:00"),
        )
        .await;
    assert_eq!(
        preview.matches("09:30:00.000+01:00").count(),
        5,
        "{preview}"
    );
    assert!(preview.contains("Europe/Berlin"), "{preview}");
    // A holiday: the first of those days, excluded, leaves the preview.
    let first_day = preview
        .split_whitespace()
        .find_map(|word| word.strip_suffix("T09:30:00.000+01:00"))
        .unwrap()
        .to_owned();
    browser
        .fill("#job-form textarea[name=exclude_dates]", &first_day)
        .await;
    let preview = browser
        .text_until(
            "#schedule-preview",
            "the holiday leaves the preview",
            |text| !text.contains(&first_day) && text.matches("09:30:00.000+01:00").count() == 5,
        )
        .await;
    assert!(!preview.contains(&first_day), "{preview}");
    browser.screenshot("job-form").await;
    browser.click("#job-save").await;
    browser.element("#job #job-actions").await;
    let job = id_in_address(&browser, "job").await;
    let saved = up.operator.api.job(cronbox_api::JobId(job)).await.unwrap();
    assert_eq!(
        (
            saved.name.as_str(),
            saved.schedule_conf.as_str(),
            saved.time_zone.as_str()
        ),
        ("greeter", "0 30 9 * * ?", "Europe/Berlin")
    );
    assert_eq!(
        saved.schedule_rules.exclude_dates,
        std::slice::from_ref(&first_day)
    );
    let definition = browser.element("#job dl").await.text().await.unwrap();
    assert!(
        definition.contains(&first_day),
        "the holiday is shown: {definition}"
    );
    browser.screenshot("job").await;

    // Paused with a note from its page, then started again.
    browser
        .fill("#pause-note", "waiting for the mail server")
        .await;
    browser.click("#job-pause").await;
    let status = browser
        .text_until("#job dl", "the pause is shown", |text| {
            text.contains("paused by admin: waiting for the mail server")
        })
        .await;
    assert!(status.contains("paused by admin"), "{status}");
    let paused = up.operator.api.job(cronbox_api::JobId(job)).await.unwrap();
    assert_eq!(paused.pause.unwrap().note, "waiting for the mail server");
    browser.click("#job-start").await;
    until("the job is started again", || async {
        let job = up.operator.api.job(cronbox_api::JobId(job)).await.unwrap();
        (job.enabled && job.pause.is_none()).then_some(())
    })
    .await;
    browser.element("#job #job-stop").await;

    // A backfill of the last three days from the job's page.
    browser
        .script(
            "const from = new Date(Date.now() - 3 * 86400000 - new Date().getTimezoneOffset() * 60000);
             document.querySelector('#backfill-form input[name=from]').value =
                 from.toISOString().slice(0, 16);",
            Value::Null,
        )
        .await;
    browser.click("#backfill-form button[type=submit]").await;
    browser
        .text_until("#flash", "the backfill starts", |text| {
            text.contains("Backfill started")
        })
        .await;
    browser.element("#job tr[data-backfill]").await;
    let backfills = up
        .operator
        .get(&format!("/api/v1/backfills?job={job}"))
        .await
        .1;
    assert_eq!(backfills[0]["created_by"], "admin", "{backfills}");

    // Triggered with a parameter: its run's page shows the log.
    browser.fill("#trigger-param", "from the console").await;
    browser.click("#job-trigger").await;
    browser
        .text_until("#run-log", "the run's log arrives", |text| {
            text.contains("hello, from the console")
        })
        .await;
    browser
        .text_until("#run-status", "the run succeeds", |text| text == "success")
        .await;
    let run = id_in_address(&browser, "run").await;
    let ran = up.operator.run(cronbox_api::RunId(run)).await;
    let peak = ran
        .peak_memory_bytes
        .expect("the run's peak memory is kept");
    assert!(peak > 0, "{ran:?}");
    let fields = browser
        .text_until("#run-fields", "the run's use is shown", |text| {
            text.contains("Peak memory")
        })
        .await;
    assert!(fields.contains("KiB") || fields.contains("MiB"), "{fields}");
    browser.screenshot("run").await;

    // A new module uploaded through the file picker, with progress.
    browser.goto(&format!("{}/#/modules", up.base)).await;
    let uploaded = upload(
        &browser,
        &component_file(files.path(), "runaway"),
        "runaway",
    )
    .await;
    assert!(
        uploaded.contains("Uploaded runaway version 1"),
        "{uploaded}"
    );
    let progress = browser
        .script(
            "return document.getElementById('upload-progress').value;",
            Value::Null,
        )
        .await;
    assert_eq!(progress.as_f64(), Some(1.0), "the progress bar is full");
    browser.screenshot("modules").await;

    // A runaway run: its first log line arrives live while it spins, and
    // the kill button on its page ends it.
    browser.goto(&format!("{}/#/jobs/new", up.base)).await;
    browser.fill("#job-form input[name=name]", "spinner").await;
    browser
        .fill("#job-form input[name=module]", "runaway")
        .await;
    browser
        .choose("#job-form select[name=schedule_type]", "NONE")
        .await;
    browser.fill("#job-form input[name=timeout_s]", "600").await;
    browser.click("#job-save").await;
    browser.element("#job #job-trigger").await;
    browser.click("#job-trigger").await;
    browser
        .text_until("#run-log", "the loop's first line arrives live", |text| {
            text.contains("spinning forever")
        })
        .await;
    // The status follows: running, with its start time, as its executor
    // tells (the row has both only once the run ends).
    browser
        .text_until("#run-status", "the run shows as running", |text| {
            text == "running"
        })
        .await;
    let started = browser
        .script(
            "const term = [...document.querySelectorAll('#run-fields dt')]
               .find((dt) => dt.textContent === 'Started');
             return term.nextElementSibling.textContent;",
            Value::Null,
        )
        .await;
    let started = started.as_str().unwrap_or_default();
    assert!(
        started.starts_with("20"),
        "the start time is shown: {started:?}"
    );
    assert_eq!(
        browser.element("#log-state").await.text().await.unwrap(),
        "live"
    );
    browser.click("#run-kill").await;
    browser
        .text_until("#run-outcome", "the run is killed", |text| text == "killed")
        .await;
    browser
        .text_until("#log-state", "the log ends", |text| text == "ended")
        .await;

    // A new version of a module, and a rollback from its page.
    let versions = up.operator.api.module_versions("hello").await.unwrap();
    let first = versions
        .iter()
        .find(|v| v.version == 1)
        .unwrap()
        .digest
        .clone();
    browser.goto(&format!("{}/#/modules", up.base)).await;
    let uploaded = upload(&browser, &component_file(files.path(), "counter"), "hello").await;
    assert!(uploaded.contains("Uploaded hello version 2"), "{uploaded}");
    let greeter = cronbox_api::JobId(job);
    assert_ne!(
        up.operator.api.job(greeter).await.unwrap().module_digest,
        first
    );
    browser.click("#upload-result a").await;
    browser.element("#module tr[data-version='2']").await;
    browser.screenshot("module").await;
    browser.click("button.rollback[data-version='1']").await;
    browser
        .text_until("#flash", "the rollback is answered", |text| {
            text.contains("Now at version")
        })
        .await;
    let pusher = |version: u32| {
        let browser = &browser;
        async move {
            browser
                .element(&format!(
                    "#module tr[data-version='{version}'] td.pushed-by"
                ))
                .await
                .text()
                .await
                .unwrap()
        }
    };
    assert_eq!(
        pusher(3).await,
        "admin",
        "the rollback is recorded as the user's"
    );
    assert_eq!(pusher(2).await, "admin");
    assert_eq!(
        pusher(1).await,
        "operator token",
        "cronbox up pushed the demos"
    );
    until("the job follows the rollback", || async {
        (up.operator.api.job(greeter).await.unwrap().module_digest == first).then_some(())
    })
    .await;
    browser
        .fill(
            "#module form.label-form[data-version='1'] input[name=label]",
            "stable",
        )
        .await;
    browser
        .click("#module form.label-form[data-version='1'] button")
        .await;
    browser
        .text_until("#flash", "the label is answered", |text| {
            text.contains("Label stable now on version 1")
        })
        .await;
    let versions = up.operator.api.module_versions("hello").await.unwrap();
    let one = versions.iter().find(|v| v.version == 1).unwrap();
    assert_eq!(one.labels, ["stable"]);

    // Executors and administration: a user added from the form.
    browser.goto(&format!("{}/#/executors", up.base)).await;
    let busy = browser
        .element("#executors tr[data-executor] td.busy")
        .await;
    let busy = busy.text().await.unwrap();
    assert!(
        busy.parse::<u32>().is_ok(),
        "the executor says how busy it is: {busy}"
    );
    let free = browser
        .element("#executors tr[data-executor] td.free-slots")
        .await
        .text()
        .await
        .unwrap();
    assert!(free.parse::<u32>().unwrap() > 0, "{free}");
    browser.screenshot("executors").await;
    browser.goto(&format!("{}/#/runs", up.base)).await;
    browser.element("#runs tr[data-run]").await;
    browser.screenshot("runs").await;
    browser.goto(&format!("{}/#/admin", up.base)).await;
    browser.fill("#user-form input[name=name]", "watcher").await;
    browser
        .choose("#user-form select[name=role]", "viewer")
        .await;
    browser
        .fill("#user-form input[name=password]", "watcher-password-1")
        .await;
    browser.click("#user-form button[type=submit]").await;
    browser.element("#admin tr[data-user=watcher]").await;
    browser
        .choose("#quota-form select[name=quota]", "jobs")
        .await;
    browser.fill("#quota-form input[name=value]", "500").await;
    browser.click("#quota-form button[type=submit]").await;
    browser
        .text_until("#flash", "the quota is set", |text| {
            text.contains("set to 500")
        })
        .await;
    let quotas = up.operator.api.quotas("default").await.unwrap();
    let jobs = quotas
        .quotas
        .iter()
        .find(|q| q.quota == cronbox_api::Quota::Jobs)
        .unwrap();
    assert_eq!((jobs.limit, jobs.own), (500, true));
    browser.screenshot("admin").await;
    let (status, users) = up.operator.get("/api/v1/users").await;
    assert_eq!(status, 200);
    assert!(
        users
            .as_array()
            .unwrap()
            .iter()
            .any(|user| user["name"] == "watcher" && user["role"] == "viewer"),
        "{users}"
    );
}

async fn add_user(operator: &AdminClient, name: &str, tenant: &str, role: &str) {
    let (status, body) = operator
        .call(
            Method::POST,
            "/api/v1/users",
            Some(json!({ "name": name, "tenant": tenant, "role": role,
                         "password": format!("{name}-password-1") })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_read_only_tenants_see_their_own_and_names_stay_text() {
    let up = start();
    let operator = &up.operator;
    add_user(operator, "reader", "default", "viewer").await;
    let (status, acme) = operator
        .call(
            Method::POST,
            "/api/v1/tenants",
            Some(json!({ "name": "acme" })),
        )
        .await;
    assert_eq!(status, 201, "{acme}");
    add_user(operator, "acme-dev", "acme", "developer").await;
    let acme = operator.with_token(acme["token"].as_str().unwrap());
    acme.api
        .upload(cronbox_example_jobs::bytes("hello"), Some("acme-mod"), &[])
        .await
        .unwrap();
    let acme_job = acme
        .api
        .create_job(&JobSpec::new("acme-job", "acme-mod"))
        .await
        .unwrap()
        .id;
    let acme_run = acme.trigger(acme_job, json!({ "param": "acme" })).await;
    acme.ended(acme_run).await;
    let hostile = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">";
    let hostile_job = operator
        .api
        .create_job(&JobSpec::new(hostile, "hello"))
        .await
        .unwrap()
        .id;
    let demo = operator.api.jobs(&JobQuery::default()).await.unwrap()[0]
        .job
        .id;

    let browser = Browser::start(&screenshots()).await;
    browser.goto(&format!("{}/", up.base)).await;
    log_in(&browser, "reader", "reader-password-1").await;

    // A job name with markup is shown as text and never runs.
    browser.goto(&format!("{}/#/jobs", up.base)).await;
    let cell = browser
        .element(&format!("#jobs tr[data-job='{hostile_job}'] td.job-name"))
        .await;
    assert_eq!(cell.text().await.unwrap(), hostile);
    assert!(
        !browser.has("#jobs img").await,
        "no element from a job's name"
    );
    assert_eq!(
        browser.script("return window.pwned;", Value::Null).await,
        Value::Null
    );
    browser
        .goto(&format!("{}/#/jobs/{hostile_job}", up.base))
        .await;
    assert_eq!(
        browser
            .element("#job h1 .job-name")
            .await
            .text()
            .await
            .unwrap(),
        hostile
    );
    assert_eq!(
        browser.script("return window.pwned;", Value::Null).await,
        Value::Null
    );

    // A viewer sees no edit control, and the API refuses its writes.
    browser.goto(&format!("{}/#/jobs", up.base)).await;
    browser.element("#jobs table").await;
    assert!(!browser.has("#job-new").await);
    browser.goto(&format!("{}/#/jobs/{demo}", up.base)).await;
    browser.element("#job dl").await;
    for control in [
        "#job-actions",
        "#job-trigger",
        "#state-editor",
        "#job-delete",
    ] {
        assert!(!browser.has(control).await, "a viewer sees {control}");
    }
    browser.goto(&format!("{}/#/modules", up.base)).await;
    browser.element("#modules table").await;
    assert!(!browser.has("#upload-form").await);
    let refused = browser
        .script_async(
            "const done = arguments[arguments.length - 1];
             fetch('/api/v1/session').then(r => r.json()).then(me =>
               fetch(`/api/v1/jobs/${arguments[0]}/trigger`, {
                 method: 'POST', headers: {'x-csrf-token': me.csrf_token,
                 'content-type': 'application/json'}, body: '{}' }))
             .then(r => done(r.status));",
            json!(demo.0),
        )
        .await;
    assert_eq!(refused, json!(403), "a viewer's write through its session");

    // Another tenant's user sees its own jobs, runs and modules only.
    browser.click("#logout").await;
    browser.element("#login-form").await;
    log_in(&browser, "acme-dev", "acme-dev-password-1").await;
    browser.goto(&format!("{}/#/jobs", up.base)).await;
    browser.element("#jobs table").await;
    let mut names = Vec::new();
    for cell in browser.all("#jobs td.job-name").await {
        names.push(cell.text().await.unwrap());
    }
    assert_eq!(names, ["acme-job"]);
    browser.goto(&format!("{}/#/runs", up.base)).await;
    browser.element("#runs table").await;
    let runs = browser.all("#runs tr[data-run]").await;
    assert_eq!(runs.len(), 1, "acme's one run");
    assert_eq!(
        runs[0].attr("data-run").await.unwrap().as_deref(),
        Some(acme_run.to_string().as_str())
    );
    browser.goto(&format!("{}/#/modules", up.base)).await;
    browser.element("#modules table").await;
    let modules = browser.all("#modules tr[data-module]").await;
    assert_eq!(modules.len(), 1);
    assert_eq!(
        modules[0].attr("data-module").await.unwrap().as_deref(),
        Some("acme-mod")
    );
    browser.goto(&format!("{}/#/jobs/{demo}", up.base)).await;
    let missing = browser
        .text_until("#main .error", "another tenant's job is unknown", |text| {
            !text.is_empty()
        })
        .await;
    assert!(missing.contains(&format!("no job {demo}")), "{missing}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_with_a_strict_policy() {
    let up = start();
    let http = reqwest::Client::new();
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

#[path = "console/daily.rs"]
mod daily;
