//! An operator's day in the console: logging in, a job made from the form
//! with its schedule previewed, paused, backfilled and triggered, a
//! runaway run followed and killed, modules uploaded and rolled back,
//! executors, runs and administration.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_runs_cronbox_from_the_console() {
    let _turn = TESTS.turn();
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
    // An executor enrolled from the page: its token shown once, then
    // revoked with a confirmation.
    browser
        .fill("#executor-token-form input[name=name]", "console-host")
        .await;
    browser
        .fill("#executor-token-form input[name=groups]", "batch, nightly")
        .await;
    browser.click("#executor-token-form button").await;
    let token = browser
        .text_until(
            "#executor-token-shown code",
            "the new token is shown",
            |text| text.starts_with("cbe_"),
        )
        .await;
    let enrolled = up.operator.api.executor_tokens().await.unwrap();
    let console_host = enrolled
        .iter()
        .find(|credential| credential.name == "console-host")
        .unwrap();
    assert_eq!(console_host.groups, ["batch", "nightly"]);
    browser.screenshot("executors").await;
    // Shown again (another address of the same page), it lists it.
    browser
        .goto(&format!("{}/#/executors?enrolled", up.base))
        .await;
    let row = format!("#executors tr[data-credential='{}']", console_host.id);
    let listed = browser.element(&row).await.text().await.unwrap();
    assert!(
        listed.contains("console-host") && !listed.contains(&token),
        "{listed}"
    );
    let revoke = format!("#revoke-{}", console_host.id);
    browser.click(&revoke).await;
    browser.click(&revoke).await;
    browser
        .text_until(
            &format!("{row} td.state"),
            "the executor is revoked",
            |text| text.starts_with("revoked"),
        )
        .await;
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
