//! Ctrl-C of `cronbox up` with a run in flight and a job firing every
//! second: the admin fires nothing more while the executor drains, the run
//! in flight ends within the grace, the terminal says what the shutdown
//! waits for, and no run sent after it is recorded failed; started again,
//! cronbox carries on.

use super::session::{json, ok};
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_drains_the_run_in_flight_and_fails_nothing_never_tried() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let log = data.path().join("up.log");
    let (mut stack, _, at) =
        support::up_logging(data.path(), None, &[], std::fs::File::create(&log).unwrap());
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim().to_owned();
    let sleeper = cronbox_example_jobs::path("sleeper");
    ok(
        &base,
        &token,
        &["module", "push", "sleeper", sleeper.to_str().unwrap()],
    );
    let create = |name: &str, param: &str, more: &[&str]| {
        let mut args = vec!["job", "create", "--name", name, "--module", "sleeper"];
        args.extend(["--param", param]);
        args.extend(more);
        json(&base, &token, &args)["id"].as_i64().unwrap()
    };
    let slow = create("slow", "3000", &[]);
    create("every-second", "10", &["--cron", "* * * * * ?", "--start"]);
    let api = AdminClient::new(&base, &token);
    let run = json(&base, &token, &["job", "trigger", &slow.to_string()])["run_id"]
        .as_i64()
        .unwrap();
    let run = cronbox_api::RunId(run);
    until_within(Duration::from_secs(60), "the slow run starts", || async {
        api.api
            .run(run)
            .await
            .ok()
            .filter(|run| run.started_at_ms.is_some())
    })
    .await;

    // Ctrl-C while it runs: up exits 0 once the executor has drained.
    let interrupted_at = chrono::Utc::now().timestamp_millis();
    let status = Command::new("kill")
        .args(["-INT", &stack.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = stack.0.wait().unwrap();
    assert!(exit.success(), "cronbox up exited with {exit:?}");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains("no more fires; the executor finishes its running runs (at most 10s)")
            && said.contains("waiting for the running runs to finish"),
        "the shutdown says what it waits for: {said}"
    );

    // Started again: the run in flight finished, and nothing sent after
    // the Ctrl-C was failed (fires claimed but not sent waited, pending).
    // Runs sent just before it, held on the executor until their instant
    // (up to 300 ms ahead), are still reported as not run: the executor
    // has no way yet to hand them back.
    let (mut again, _, at) = up(data.path(), None);
    let api = AdminClient::new(format!("http://{}", at.admin), &token);
    let ended = api.api.run(run).await.unwrap();
    assert_eq!(ended.status, RunStatus::Success, "{ended:?}");
    assert_eq!(ended.message.as_deref(), Some("slept 3000 ms"));
    let runs = api
        .api
        .runs(&cronbox_api::RunQuery {
            limit: Some(1000),
            ..Default::default()
        })
        .await
        .unwrap();
    let failed: Vec<&Run> = runs
        .runs
        .iter()
        .filter(|run| run.status == RunStatus::Failed)
        .filter(|run| {
            let held_before = run.dispatched_at_ms.is_some_and(|at| at <= interrupted_at)
                && run.message.as_deref()
                    == Some("not run: the executor shut down before the run started");
            !held_before
        })
        .collect();
    assert!(failed.is_empty(), "recorded failed: {failed:#?}");
    terminate(&mut again.0);
}
