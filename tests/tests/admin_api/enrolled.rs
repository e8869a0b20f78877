//! Enrolled executors: a token that registers only in its groups, fetches
//! only the modules its groups run, is sent runs with a proof the shared
//! token cannot stand in for, works on beside its successor for a
//! rotation's overlap, and is gone with its registrations when revoked.

use cronbox_api::ExecutorTokenSpec;
use cronbox_protocol::credentials::{admin_proof, token_hash};

use super::*;

/// The status of a registration of `address` in `group` presenting `token`.
async fn register(stack: &Stack, token: &str, group: &str, address: &str) -> u16 {
    stack
        .http
        .post(format!("{}/api/v1/registry", stack.base))
        .bearer_auth(token)
        .json(&json!({ "group": group, "address": address }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The status of a fetch of module `digest` presenting `token`.
async fn fetch_module(stack: &Stack, token: &str, digest: &str) -> u16 {
    stack
        .http
        .get(format!("{}/api/v1/modules/{digest}/content", stack.base))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enrolled_executor_serves_only_its_groups_and_ends_with_its_credential() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api.api;
    let spec = |name: &str| ExecutorTokenSpec {
        name: name.to_owned(),
        groups: vec!["blue".to_owned()],
    };
    let issued = api.enroll_executor(&spec("blue-1")).await.unwrap();
    assert!(issued.token.starts_with("cbe_"), "{issued:?}");
    let listed = serde_json::to_string(&api.executor_tokens().await.unwrap()).unwrap();
    assert!(
        !listed.contains(&issued.token),
        "a token is listed: {listed}"
    );

    // An executor started with it registers in its group and runs its jobs.
    let data = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![stack.base.clone()],
        issued.token.clone(),
        data.path().to_path_buf(),
    );
    config.group = "blue".to_owned();
    config.beat_interval = Duration::from_millis(300);
    let blue = cronbox_executor::start(config).await.unwrap();
    let blue_address = blue.address().to_owned();
    until("the enrolled executor registers", || async {
        let executors = api.executors().await.unwrap();
        executors
            .iter()
            .any(|e| e.address == blue_address && e.group == "blue" && e.alive)
            .then_some(())
    })
    .await;
    let job = stack
        .job("blue-hello", "hello", json!({ "group": "blue" }))
        .await;
    let ran = stack.run_to_end(job, "blue").await;
    assert_eq!(ran.status, RunStatus::Success, "{ran:?}");
    assert_eq!(ran.executor.as_deref(), Some(blue_address.as_str()));

    // It takes its admins' proof, never the shared token.
    let beat = |bearer: String| {
        let url = format!("{blue_address}{}", cronbox_protocol::executor_paths::BEAT);
        async move {
            cronbox_tls::client()
                .post(url)
                .bearer_auth(bearer)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(beat(EXEC.to_owned()).await, 401);
    assert_eq!(beat(admin_proof(&token_hash(&issued.token))).await, 200);

    // Only its groups, only their modules, only its own address.
    assert_eq!(
        register(&stack, &issued.token, "default", "http://127.0.0.1:9/").await,
        403
    );
    let hello = api.job(job).await.unwrap().module_digest;
    assert_eq!(
        fetch_module(&stack, &issued.token, hello.as_str()).await,
        200
    );
    let elsewhere = stack.job("elsewhere", "sleeper", json!({})).await;
    let sleeper = api.job(elsewhere).await.unwrap().module_digest;
    assert_eq!(
        fetch_module(&stack, &issued.token, sleeper.as_str()).await,
        404
    );
    assert_eq!(fetch_module(&stack, EXEC, sleeper.as_str()).await, 200);
    let shared_address = stack.executor.address().to_owned();
    assert_eq!(
        register(&stack, &issued.token, "blue", &shared_address).await,
        409
    );

    // A rotation: old and new both work during the overlap.
    let rotated = api
        .rotate_executor_token(issued.id, Some(60_000))
        .await
        .unwrap();
    assert_ne!(rotated.token, issued.token);
    for token in [&issued.token, &rotated.token] {
        assert_eq!(
            register(&stack, token, "blue", "http://127.0.0.1:9/").await,
            200
        );
    }

    // Revoked: its registrations end now and neither token works again.
    let revoked = api.revoke_executor_token(issued.id).await.unwrap();
    assert!(revoked.registrations_ended >= 2, "{revoked:?}");
    let executors = api.executors().await.unwrap();
    assert!(
        !executors.iter().any(|e| e.group == "blue"),
        "{executors:?}"
    );
    for token in [&issued.token, &rotated.token] {
        assert_eq!(
            register(&stack, token, "blue", "http://127.0.0.1:9/").await,
            401
        );
    }

    // A rotation without overlap ends the old token at once.
    let second = api.enroll_executor(&spec("blue-2")).await.unwrap();
    let replaced = api.rotate_executor_token(second.id, Some(0)).await.unwrap();
    assert_eq!(
        register(&stack, &second.token, "blue", "http://127.0.0.1:9/").await,
        401
    );
    assert_eq!(
        register(&stack, &replaced.token, "blue", "http://127.0.0.1:9/").await,
        200
    );
    blue.shutdown().await;
    stack.shutdown().await;
}

/// A result counts only from a credential that serves its run's group:
/// a stand-in executor enrolled in group `blue` takes a run (with its
/// receipt), and the same result posted with an enrolled token of group
/// `green`, receipt and all, changes nothing; with `blue`'s, it ends the
/// run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_counts_only_from_a_credential_of_its_runs_group() {
    use cronbox_protocol::RunCommand;
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api.api;
    let enroll = |name: &str, group: &str| ExecutorTokenSpec {
        name: name.to_owned(),
        groups: vec![group.to_owned()],
    };
    let blue = api
        .enroll_executor(&enroll("blue-1", "blue"))
        .await
        .unwrap();
    let green = api
        .enroll_executor(&enroll("green-1", "green"))
        .await
        .unwrap();

    // The stand-in: accepts every run it is sent and keeps the commands.
    let sent: std::sync::Arc<std::sync::Mutex<Vec<RunCommand>>> = Default::default();
    let address = stand_in_executor(sent.clone()).await;
    // An address is an executor's http(s) URL, nothing else.
    for bad in [
        "file:///etc/passwd",
        "http://127.0.0.1:9/\r\nX: y",
        "http://127.0.0.1:9/\u{1b}[2J",
    ] {
        assert_eq!(
            register(&stack, &blue.token, "blue", bad).await,
            422,
            "{bad:?}"
        );
    }
    assert_eq!(register(&stack, &blue.token, "blue", &address).await, 200);

    let job = stack
        .job("blue-hello", "hello", json!({ "group": "blue" }))
        .await;
    let run = stack.api.trigger(job, json!({ "param": "x" })).await;
    let command = until("the stand-in is sent the run", || async {
        sent.lock()
            .unwrap()
            .iter()
            .find(|c| c.trigger.run_id == run.wire())
            .cloned()
    })
    .await;
    let result = cronbox_tests::stand_in_result(
        run.wire(),
        job.wire(),
        "from a stand-in",
        &address,
        &command.receipt,
    );
    let post_result = |token: String| {
        let (http, base, result) = (stack.http.clone(), stack.base.clone(), result.clone());
        async move {
            http.post(format!("{base}/api/v1/callback"))
                .bearer_auth(token)
                .json(&cronbox_protocol::CallbackBatch {
                    results: vec![result],
                })
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(post_result(green.token.clone()).await, 200);
    assert_eq!(stack.api.run(run).await.status, RunStatus::Dispatched);
    assert_eq!(post_result(blue.token.clone()).await, 200);
    let ended = stack.api.ended(run).await;
    assert_eq!(
        ended.message.as_deref(),
        Some("from a stand-in"),
        "{ended:?}"
    );
    stack.shutdown().await;
}
