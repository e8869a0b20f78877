//! People of lower roles and other tenants in the console: what each may
//! see and do (the audit log only for admins), and names that stay text
//! however they are written, in the audit log too.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn viewers_read_only_tenants_see_their_own_and_names_stay_text() {
    let _turn = TESTS.turn();
    let up = start();
    let operator = &up.operator;
    operator.add_user("reader", "default", "viewer").await;
    let (status, acme) = operator
        .call(
            Method::POST,
            "/api/v1/tenants",
            Some(json!({ "name": "acme" })),
        )
        .await;
    assert_eq!(status, 201, "{acme}");
    operator.add_user("acme-dev", "acme", "developer").await;
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
    assert!(
        !browser.has("header nav a[data-nav=audit]").await,
        "a developer is offered the audit log"
    );

    // The operator's audit log shows who logged in, and the hostile job's
    // creation with its name as text.
    browser.click("#logout").await;
    browser.element("#login-form").await;
    log_in(&browser, "admin", &up.admin_password).await;
    browser.click("header nav a[data-nav=audit]").await;
    browser.element("#audit table").await;
    let mut logins = Vec::new();
    for row in browser.all("#audit tr[data-entry]").await {
        let text = row.text().await.unwrap();
        if text.contains("POST /api/v1/session") {
            logins.push(text);
        }
    }
    assert!(
        logins
            .iter()
            .any(|row| row.contains("acme-dev") && row.contains("acme")),
        "{logins:?}"
    );
    let mut details = Vec::new();
    for cell in browser.all("#audit td.detail").await {
        details.push(cell.text().await.unwrap());
    }
    assert!(
        details
            .iter()
            .any(|detail| detail.contains("window.pwned=1")),
        "{details:?}"
    );
    assert!(!browser.has("#audit img").await, "no element from a detail");
    assert_eq!(
        browser.script("return window.pwned;", Value::Null).await,
        Value::Null
    );
}
