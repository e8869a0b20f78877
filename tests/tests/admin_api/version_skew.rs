//! Version skew between the admin and its executors: an executor of the
//! previous protocol (its registration as recorded in
//! `tests/fixtures/protocol-1/`) is served beside a current one, runs
//! flowing to both and none lost; an executor newer than the admin is
//! refused with a message naming both versions.

use cronbox_protocol::RunCommand;

use super::*;

async fn register(stack: &Stack, body: String) -> reqwest::Response {
    stack
        .http
        .post(format!("{}/api/v1/registry", stack.base))
        .bearer_auth(EXEC)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_of_the_previous_protocol_is_served_beside_a_current_one_and_a_newer_refused() {
    let stack = stack(SchedulerConfig::default()).await;
    let sent: std::sync::Arc<std::sync::Mutex<Vec<RunCommand>>> = Default::default();
    // An executor of protocol 1 answers runs as this build's does.
    let address = stand_in_executor(sent.clone()).await;
    let recorded = include_str!("../../fixtures/protocol-1/registration.json");
    let answer = register(&stack, recorded.replace("ADDRESS", &address)).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        answer.headers()[cronbox_protocol::PROTOCOL_HEADER],
        cronbox_protocol::PROTOCOL_VERSION.to_string()
    );

    // Runs flow to both: the old executor's group and the current one's.
    let old_job = stack
        .job("on-the-old-one", "hello", json!({ "group": "previous" }))
        .await;
    let new_job = stack.job("on-the-new-one", "hello", json!({})).await;
    let mut old_runs = Vec::new();
    let mut new_runs = Vec::new();
    for n in 0..5 {
        old_runs.push(
            stack
                .api
                .trigger(old_job, json!({ "param": n.to_string() }))
                .await,
        );
        new_runs.push(
            stack
                .api
                .trigger(new_job, json!({ "param": n.to_string() }))
                .await,
        );
    }
    let commands = until("the old executor is sent its runs", || async {
        let sent = sent.lock().unwrap().clone();
        (sent.len() >= old_runs.len()).then_some(sent)
    })
    .await;
    let results = commands
        .iter()
        .map(|command| {
            cronbox_tests::stand_in_result(
                command.trigger.run_id,
                old_job.wire(),
                "from protocol 1",
                &address,
                &command.receipt,
            )
        })
        .collect();
    let posted = stack
        .http
        .post(format!("{}/api/v1/callback", stack.base))
        .bearer_auth(EXEC)
        .json(&cronbox_protocol::CallbackBatch { results })
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 200);
    for run in old_runs.iter().chain(&new_runs) {
        let ended = stack.api.ended(*run).await;
        assert_eq!(ended.status, RunStatus::Success, "{ended:?}");
    }
    assert_eq!(commands.len(), old_runs.len(), "each run sent once");

    // An executor newer than the admin: refused, naming both versions.
    let newer = json!({ "group": "previous", "address": address,
                        "protocol": cronbox_protocol::PROTOCOL_VERSION + 1 });
    let answer = register(&stack, newer.to_string()).await;
    assert_eq!(answer.status(), 422);
    let refusal: Value = answer.json().await.unwrap();
    let message = refusal["message"].as_str().unwrap();
    assert_eq!(refusal["field"], "protocol");
    assert!(
        message.contains(&format!(
            "speaks protocol {}",
            cronbox_protocol::PROTOCOL_VERSION + 1
        )) && message.contains(&format!(
            "admin protocol {}",
            cronbox_protocol::PROTOCOL_VERSION
        )) && message.contains("upgrade the admins first"),
        "{message}"
    );
    stack.shutdown().await;
}
