//! Failure alarms: private addresses and redirects refused, one webhook per failure, once across admins.

use super::*;

/// By default an alarm webhook may only point at the public internet: an
/// address written out that is not (loopback, the cloud metadata address,
/// their IPv6-mapped forms) is refused when the job is saved, naming the
/// field; a name that resolves to one is never called, and the alarm fails
/// with a message that does not say what is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_webhook_on_a_private_address_is_never_called() {
    let stack = stack(SchedulerConfig::default()).await;
    let receiver = WebhookReceiver::start(200).await;
    let (status, uploaded) = stack.upload_as(API, "", jobs::bytes("fuel-burner")).await;
    assert_eq!(status, 201, "{uploaded}");
    for url in [
        receiver.url(),
        receiver.url().replace("127.0.0.1", "[::ffff:127.0.0.1]"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[fd00:ec2::254]/".to_owned(),
    ] {
        let spec = json!({ "name": "refused", "module_digest": uploaded["digest"],
                           "alarm_url": url });
        let (status, refused) = stack
            .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
            .await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!("alarm_url")),
            "{url}"
        );
        assert!(
            refused["message"].as_str().unwrap().contains("not allowed"),
            "{refused}"
        );
    }

    let named = receiver.url().replace("127.0.0.1", "localhost");
    let job = stack
        .job("by-name", "fuel-burner", json!({ "alarm_url": named }))
        .await;
    let failed = stack.run_to_end(job, "not-a-number").await;
    let settled = alarm_status(&stack, failed.id.0).await;
    assert_eq!(settled["alarm_status"], "failed", "{settled}");
    assert!(
        settled["alarm_message"]
            .as_str()
            .unwrap()
            .contains("not one the admin may call"),
        "{settled}"
    );
    assert!(receiver.bodies().is_empty(), "nothing reached loopback");
    stack.shutdown().await;
}

/// A webhook that redirects is not followed: the alarm fails, and nothing
/// reaches where the redirect pointed (a tenant cannot steer the admin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_webhook_redirect_is_not_followed() {
    let stack = stack(loopback_alarms()).await;
    let target = WebhookReceiver::start(200).await;
    let redirector = WebhookReceiver::redirecting_to(&target.url()).await;
    let job = stack
        .job(
            "redirected",
            "fuel-burner",
            json!({ "alarm_url": redirector.url() }),
        )
        .await;
    let failed = stack.run_to_end(job, "not-a-number").await;
    let settled = alarm_status(&stack, failed.id.0).await;
    assert_eq!(settled["alarm_status"], "failed", "{settled}");
    assert_eq!(
        redirector.bodies().len(),
        3,
        "three attempts, each redirected"
    );
    assert!(
        target.bodies().is_empty(),
        "the redirect was never followed"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_alarms_its_webhook_once_and_records_how_it_went() {
    let stack = stack(loopback_alarms()).await;
    let receiver = WebhookReceiver::start(200).await;
    let refusing = WebhookReceiver::start(500).await;
    let watched = stack
        .job(
            "watched",
            "fuel-burner",
            json!({ "alarm_url": receiver.url() }),
        )
        .await;
    let unwatched = stack.job("unwatched", "fuel-burner", json!({})).await;
    let broken = stack
        .job(
            "broken-hook",
            "fuel-burner",
            json!({ "alarm_url": refusing.url() }),
        )
        .await;

    let ok = stack.run_to_end(watched, "10").await;
    assert_eq!(ok.status, RunStatus::Success, "{ok:?}");
    let failed = stack.run_to_end(watched, "not-a-number").await;
    let failed_id = failed.id.0;
    let received = alarms(&receiver, 1).await;
    assert_eq!(
        received.len(),
        1,
        "one alarm, for the failed run only: {received:?}"
    );
    let alarm = &received[0];
    assert_eq!(alarm["event"], "run_failed");
    assert_eq!(alarm["job"], json!({ "id": watched, "name": "watched" }));
    assert_eq!(alarm["run"]["id"], failed_id);
    assert_eq!(alarm["run"]["outcome"], "failed");
    assert_eq!(alarm["tenant"], "default");
    assert_eq!(
        alarm_status(&stack, failed_id).await["alarm_status"],
        "sent"
    );
    assert_eq!(alarm_status(&stack, ok.id.0).await["alarm_status"], "none");

    let quiet = stack.run_to_end(unwatched, "x").await;
    let quiet = alarm_status(&stack, quiet.id.0).await;
    assert_eq!(quiet["alarm_status"], "not_configured");

    let refused = stack.run_to_end(broken, "x").await;
    let refused = alarm_status(&stack, refused.id.0).await;
    assert_eq!(refused["alarm_status"], "failed", "{refused}");
    // The webhook's answer is the operator's to see (the admin's log),
    // not the tenant's: it would make webhooks a probe of the network.
    let message = refused["alarm_message"].as_str().unwrap();
    assert!(
        message.starts_with("not delivered after 3 attempts"),
        "{refused}"
    );
    assert!(!message.contains("500"), "{refused}");
    assert_eq!(refusing.bodies().len(), 3, "three attempts");

    let metrics = stack.api.metrics().await;
    for line in [
        "cronbox_admin_alarms_sent_total 1",
        "cronbox_admin_alarm_failures_total 1",
        "cronbox_admin_runs_total{outcome=\"success\"} 1",
        "cronbox_admin_runs_total{outcome=\"failed\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admins_on_one_database_send_each_alarm_once() {
    let url = PostgresServer::fresh_database().url();
    let receiver = WebhookReceiver::start(200).await;
    let data = tempfile::tempdir().unwrap();
    let mut admins = Vec::new();
    for _ in 0..2 {
        admins.push(
            cronbox_admin::start(AdminConfig {
                bind: "127.0.0.1:0".parse().unwrap(),
                database: Database::Url(url.clone()),
                migrations: Default::default(),
                api_token: API.into(),
                executor_token: EXEC.into(),
                scheduler: loopback_alarms(),
                max_request_bytes: 16 << 20,
                tls: None,
                metrics_export: None,
            })
            .await
            .unwrap(),
        );
    }
    let bases: Vec<String> = admins
        .iter()
        .map(|admin| format!("http://{}", admin.local_addr()))
        .collect();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        bases.clone(),
        EXEC.into(),
        data.path().join("executor"),
    );
    config.beat_interval = Duration::from_millis(300);
    let executor = cronbox_executor::start(config).await.unwrap();
    let stack = ready(admins.remove(0), executor, bases[0].clone(), data).await;
    let job = stack
        .job(
            "watched",
            "fuel-burner",
            json!({ "alarm_url": receiver.url() }),
        )
        .await;
    let mut failed = Vec::new();
    for _ in 0..6 {
        failed.push(stack.run_to_end(job, "nope").await.id.0);
    }
    let received = alarms(&receiver, failed.len()).await;
    let mut alarmed: Vec<i64> = received
        .iter()
        .map(|alarm| alarm["run"]["id"].as_i64().unwrap())
        .collect();
    alarmed.sort();
    assert_eq!(alarmed, failed, "each failed run alarmed exactly once");
    let other = admins.remove(0);
    other.shutdown().await;
    stack.shutdown().await;
}
