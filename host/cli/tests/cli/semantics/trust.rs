//! The executor token goes only to executors, and forged results are refused.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_executor_token_goes_only_to_executors_and_forged_results_are_refused() {
    let _turn = TESTS.turn();
    let stack = Stack::start(1).await;
    let recorder = Recorder::start().await;
    let (status, tenant) = stack
        .call(
            Method::POST,
            "/api/v1/tenants",
            Some(json!({ "name": "acme" })),
        )
        .await;
    assert_eq!(status, 201, "{tenant}");
    let tenant_token = tenant["token"].as_str().unwrap().to_owned();
    let tenant_api = stack.with_token(&tenant_token);
    let job = tenant_api
        .job(
            "tenant-job",
            cronbox_example_jobs::bytes("hello"),
            json!({}),
        )
        .await;

    // A tenant may not choose where its run goes.
    let (status, refused) = tenant_api
        .call(
            Method::POST,
            &format!("/api/v1/jobs/{job}/trigger"),
            Some(json!({ "addresses": [recorder.url] })),
        )
        .await;
    assert_eq!((status, &refused["field"]), (403, &json!("addresses")));
    // Nor may the operator send it outside the job's group.
    let (status, refused) = stack
        .call(
            Method::POST,
            &format!("/api/v1/jobs/{job}/trigger"),
            Some(json!({ "addresses": [recorder.url] })),
        )
        .await;
    assert_eq!((status, &refused["field"]), (422, &json!("addresses")));
    assert!(
        refused["message"].as_str().unwrap().contains(&recorder.url),
        "{refused}"
    );
    // An executor of the group is fine.
    let run = stack
        .trigger(job, json!({ "addresses": [stack.address(0)] }))
        .await;
    assert_eq!(stack.ended(run).await.status, RunStatus::Success);
    assert_eq!(
        stack.runs(job).await.len(),
        1,
        "the refused triggers wrote no run"
    );
    assert!(
        recorder.seen().is_empty(),
        "nothing reached the tenant's address: {:?}",
        recorder.seen()
    );

    // A result posted with the executor token but without the receipt of
    // the run's dispatch changes nothing.
    let sleeper = stack.job("sleeper", "sleeper", json!({})).await;
    let run = stack.trigger(sleeper, json!({ "param": "1500" })).await;
    until("the sleeper is dispatched", || async {
        (stack.run(run).await.status == RunStatus::Dispatched).then_some(())
    })
    .await;
    let mut forged = cronbox_tests::stand_in_result(
        run.wire(),
        sleeper.wire(),
        "forged",
        stack.address(0),
        &"00".repeat(32),
    );
    forged.state_changes = [("forged".to_owned(), Some("yes".to_owned()))].into();
    let response = stack
        .http
        .post(format!("{}/api/v1/callback", stack.base))
        .bearer_auth(EXEC_TOKEN)
        .json(&cronbox_protocol::CallbackBatch {
            results: vec![forged],
        })
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(stack.run(run).await.status, RunStatus::Dispatched);
    let real = stack.ended(run).await;
    assert_eq!(real.message.as_deref(), Some("slept 1500 ms"), "{real:?}");
    let (_, state) = stack
        .call(Method::GET, &format!("/api/v1/jobs/{sleeper}/state"), None)
        .await;
    assert_eq!(
        state["state"],
        json!({}),
        "the forged change set was dropped"
    );
    let metrics = stack.metrics().await;
    assert!(
        metrics.contains("cronbox_admin_results_refused_total 1"),
        "{metrics}"
    );
}
