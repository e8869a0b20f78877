//! The console for daily operation: the job list's last runs and row
//! actions, triggers recorded as `manual`, a run's page linking its trace
//! to the operator's trace viewer, a message that goes with its page, fires in the job's own zone, the job form in sections with
//! people's units (and a legacy job's handler), and a phone-sized window.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_operates_jobs_from_the_list_on_any_screen() {
    let _turn = TESTS.turn();
    // Traced, with the operator's trace viewer named.
    let receiver = cronbox_tests::OtlpReceiver::start().await;
    let endpoint = receiver.endpoint();
    let up = start_with(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", Path::new(&endpoint)),
        (
            "CRONBOX_ADMIN_TRACE_URL",
            Path::new("http://127.0.0.1:16686/trace/{trace_id}"),
        ),
    ]);
    let browser = Browser::start(&screenshots()).await;
    browser.goto(&format!("{}/", up.base)).await;
    log_in(&browser, "admin", &up.admin_password).await;
    let hello = JobQuery {
        name: Some("hello".to_owned()),
        ..JobQuery::default()
    };
    // `hello` fires every 5 s: once it has run, the list shows its last run.
    let hello = until("hello has run", || async {
        let listed = up.operator.api.jobs(&hello).await.unwrap();
        let listed = listed.first()?;
        listed.last_run.as_ref().map(|_| listed.job.id)
    })
    .await;
    browser.goto(&format!("{}/#/jobs", up.base)).await;
    let row = format!("#jobs tr[data-job='{hello}']");
    let last = browser
        .element(&format!("{row} td.last-run"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        ["success", "failed", "pending", "dispatched"]
            .iter()
            .any(|status| last.starts_with(status)),
        "{last}"
    );
    let next = browser
        .element(&format!("{row} td.next-fire"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        next.ends_with(" UTC"),
        "the next fire names its zone: {next}"
    );
    browser.screenshot("jobs-with-last-runs").await;

    // Run once from its row: recorded as manual; its run's page opens
    // with the message, which goes when the person moves on.
    browser.click(&format!("{row} button.run-once")).await;
    let run = id_in_address(&browser, "run").await;
    let message = browser
        .text_until("#flash", "the trigger is confirmed", |text| {
            !text.is_empty()
        })
        .await;
    assert_eq!(message, format!("Triggered run {run}."));
    let ran = up.operator.run(cronbox_api::RunId(run)).await;
    assert_eq!(ran.kind, cronbox_api::TriggerKind::Manual);
    assert_eq!(
        ran.job_name.as_deref(),
        Some("hello"),
        "a run names its job"
    );
    assert_eq!(
        ran.module.as_deref(),
        Some("hello@1"),
        "and its module version"
    );
    browser
        .text_until(
            "#run-fields",
            "the run page names the module version",
            |text| text.contains("hello@1 ("),
        )
        .await;
    // Once it ended, its trace is linked to the trace viewer (read in
    // one script: the page of a run renders anew as it changes, so an
    // element found a moment earlier may be gone).
    browser.element("#run-trace-link").await;
    let ended = up.operator.run(cronbox_api::RunId(run)).await;
    let trace_id = ended.trace_id.expect("the run keeps its trace id");
    browser
        .text_until(
            "#run-trace-link",
            "the run page shows its trace id",
            |text| text == trace_id,
        )
        .await;
    let link = browser
        .script(
            "return document.querySelector('#run-trace-link').getAttribute('href');",
            Value::Null,
        )
        .await;
    assert_eq!(
        link.as_str(),
        Some(format!("http://127.0.0.1:16686/trace/{trace_id}").as_str())
    );
    // Lists show the job's name, not its id.
    browser
        .goto(&format!("{}/#/runs?job={hello}", up.base))
        .await;
    let named = browser
        .element(&format!("#runs tr[data-run='{run}'] td.job-name"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(named, "hello");
    browser.goto(&format!("{}/#/jobs", up.base)).await;
    browser
        .text_until("#flash", "the message goes with its page", |text| {
            text.is_empty()
        })
        .await;

    // Stopped and started from its row.
    browser.click(&format!("{row} button.stop")).await;
    until("hello is stopped", || async {
        let job = up.operator.api.job(hello).await.unwrap();
        (!job.enabled).then_some(())
    })
    .await;
    browser.click(&format!("{row} button.start")).await;
    until("hello is started again", || async {
        let job = up.operator.api.job(hello).await.unwrap();
        job.enabled.then_some(())
    })
    .await;
    // The list draws itself again after the start: read the link from
    // the row as it is drawn now.
    let logs = until("the row's logs link", || async {
        browser
            .element(&format!("{row} a.logs"))
            .await
            .attr("href")
            .await
            .ok()
            .flatten()
    })
    .await;
    assert_eq!(logs, format!("#/runs?job={hello}"));

    // A job in Berlin: its page lists the next fires in Berlin's time,
    // and says so.
    let berlin = JobSpec {
        time_zone: "Europe/Berlin".to_owned(),
        ..JobSpec::new("berlin", "hello").with_cron("0 30 9 * * ?")
    };
    let berlin = up.operator.api.create_job(&berlin).await.unwrap().id;
    up.operator.api.start_job(berlin).await.unwrap();
    browser.goto(&format!("{}/#/jobs/{berlin}", up.base)).await;
    let fires = browser.element("#next-fires").await.text().await.unwrap();
    assert_eq!(fires.matches(" 09:30:00 ").count(), 5, "{fires}");
    let page = browser.element("#job").await.text().await.unwrap();
    assert!(page.contains("Next fires (Europe/Berlin)"), "{page}");

    // The job form in sections, durations in seconds, memory in MiB.
    browser.goto(&format!("{}/#/jobs/new", up.base)).await;
    let sections = browser.all("#job-form fieldset legend").await;
    assert_eq!(sections.len(), 6);
    browser.fill("#job-form input[name=name]", "measured").await;
    browser.fill("#job-form input[name=module]", "hello").await;
    browser
        .choose("#job-form select[name=schedule_type]", "NONE")
        .await;
    browser.fill("#job-form input[name=timeout_s]", "90").await;
    browser.fill("#job-form input[name=memory_mib]", "32").await;
    browser
        .fill("#job-form input[name=retry_interval_s]", "1.5")
        .await;
    browser.click("#job-save").await;
    browser.element("#job #job-actions").await;
    let measured = id_in_address(&browser, "job").await;
    let saved = up
        .operator
        .api
        .job(cronbox_api::JobId(measured))
        .await
        .unwrap();
    assert_eq!(
        (
            saved.timeout_ms,
            saved.memory_bytes,
            saved.retry_interval_ms
        ),
        (90_000, 32 << 20, 1_500)
    );
    // A refusal of a field in other units is shown next to its input.
    browser
        .goto(&format!("{}/#/jobs/{measured}/edit", up.base))
        .await;
    browser.fill("#job-form input[name=timeout_s]", "0").await;
    browser.click("#job-save").await;
    let refused = browser
        .text_until(
            ".field-error[data-field=timeout_ms]",
            "the timeout is refused next to its input",
            |text| !text.is_empty(),
        )
        .await;
    assert!(refused.contains("must be between 1 and"), "{refused}");

    // A legacy job names its xxl-job handler in the same form.
    let legacy = cronbox_api::GroupSpec {
        address_type: "AUTO".to_owned(),
        addresses: Vec::new(),
        legacy: Some(cronbox_api::LegacySpec {
            protocol: cronbox_api::LegacyProtocol::XxlJob34,
            access_token: "a-legacy-token".to_owned(),
        }),
    };
    up.operator
        .api
        .put_group("legacy-app", &legacy)
        .await
        .unwrap();
    browser.goto(&format!("{}/#/jobs/new", up.base)).await;
    browser
        .fill("#job-form input[name=name]", "by-handler")
        .await;
    browser
        .fill("#job-form input[name=group]", "legacy-app")
        .await;
    browser
        .fill("#job-form input[name=executor_handler]", "demoJobHandler")
        .await;
    browser
        .choose("#job-form select[name=schedule_type]", "NONE")
        .await;
    browser.click("#job-save").await;
    browser.element("#job #job-actions").await;
    let by_handler = id_in_address(&browser, "job").await;
    let saved = up
        .operator
        .api
        .job(cronbox_api::JobId(by_handler))
        .await
        .unwrap();
    assert_eq!(saved.executor_handler.as_deref(), Some("demoJobHandler"));
    let shown = browser.element("#job").await.text().await.unwrap();
    assert!(shown.contains("xxl-job handler demoJobHandler"), "{shown}");

    // On a phone: nothing is wider than the window.
    browser.client.set_window_size(420, 900).await.unwrap();
    for page in ["#/jobs", "#/runs", &format!("#/jobs/{hello}"), "#/"] {
        browser.goto(&format!("{}/{page}", up.base)).await;
        browser.element("header nav").await;
        browser.element("#main > div").await;
        let widths = browser
            .script(
                "return [document.documentElement.scrollWidth, window.innerWidth];",
                Value::Null,
            )
            .await;
        let (page_width, window) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
        let wide = browser
            .script(
                "return [...document.querySelectorAll('body *')]
                   .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
                   .slice(0, 6)
                   .map((e) => e.tagName + '#' + e.id + '.' + e.className);",
                Value::Null,
            )
            .await;
        assert!(
            page_width <= window,
            "{page}: {page_width} px wide in a {window} px window: {wide}"
        );
    }
    browser.screenshot("jobs-narrow").await;
}
