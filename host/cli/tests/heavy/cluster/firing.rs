//! Firing across admins: every second of hundreds of jobs exactly once,
//! with three admins, a killed admin, a database restart (workflow runs
//! in flight across it) and skewed clocks.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_admins_fire_every_second_of_500_jobs_exactly_once() {
    let _turn = TESTS.turn();
    let _load = firing_budget(500).await;
    let cluster = Cluster::start(&[&[], &[], &[]], 1).await;
    // 4,000 fires over 8 s (the firing benchmark runs longer).
    let from = cluster.window_start(500, 2_000).await;
    let to = from + 8_000;
    let (ids, from) = cluster.every_second(500, from, to).await;
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
    // Executed once, as the executors saw it: every successful run row
    // of the test is one successful execution, and no run was executed
    // twice (a double dispatch would count twice on the executors).
    cluster.until_executions_match_success_rows().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_admins_fires_are_taken_over() {
    let _turn = TESTS.turn();
    let _load = firing_budget(200).await;
    // Pre-reads of 2 s: the least a dead admin has written ahead.
    let pre_read = ["--pre-read", "2s"];
    let mut cluster = Cluster::start(&[&pre_read, &pre_read, &pre_read], 1).await;
    // The window goes on long enough after the kill (2 s in) for the
    // dead admin's last fires, written as far ahead as a pre-read reaches,
    // to be taken over once their write leases run out, and for firing
    // to go on after (checked once the admin is killed).
    let pre_read_reach = 2_000 + CLAIM_PAST_HORIZON_MS;
    let from = cluster.window_start(200, 2_000).await;
    let write_lease = Leases::with_dispatch(DISPATCH_LEASE).write_ms();
    let to = from + 2_000 + pre_read_reach + write_lease + 5_000;
    let (ids, from) = cluster.every_second(200, from, to).await;
    let store = Store::connect(&cluster.url).await.unwrap();
    // Once firing, the admin holding the most written fires dies with them
    // (which admin claims a pass's batch of jobs is a race, so ask).
    let (victim, _) = until("an admin holds written fires", || async {
        if now_ms() < from + 2_000 {
            return None;
        }
        let mut held = Vec::new();
        for (index, admin) in cluster.admins.iter().enumerate() {
            held.push((
                index,
                store.pending_leased_to(&admin.instance).await.ok()?.len(),
            ));
        }
        held.into_iter()
            .max_by_key(|(_, count)| *count)
            .filter(|(_, count)| *count > 0)
    })
    .await;
    cluster.admins[victim].process.take().unwrap().kill();
    // What it held is now fixed: nothing else may dispatch those runs until
    // their leases run out.
    let orphaned = store
        .pending_leased_to(&cluster.admins[victim].instance)
        .await
        .unwrap();
    assert!(!orphaned.is_empty(), "the killed admin held no fire");
    // Its last fires were written as far ahead as a pre-read reaches;
    // each is taken over once its write lease has run out, at the next
    // check for orphans (every second or so), well within the window.
    assert!(
        to - now_ms() >= pre_read_reach + write_lease + 2_000,
        "the admin was killed too late in the window"
    );
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
    // Each fire the dead admin held was dispatched by another admin, once
    // its lease ran out, and ran.
    let by_id: HashMap<RunId, &RunRow> = runs.iter().map(|run| (run.id, run)).collect();
    for id in &orphaned {
        let run = by_id
            .get(id)
            .unwrap_or_else(|| panic!("run {id} outside the window"));
        assert_eq!(run.status.as_str(), "success", "{run:?}");
    }
    println!(
        "{} fires held by the killed admin were taken over",
        orphaned.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restart_mid_load_loses_and_doubles_nothing() {
    let _turn = TESTS.turn();
    let _load = firing_budget(400).await;
    let cluster = Cluster::start(&[&[], &[]], 1).await;
    // 2 s of firing, a 3 s outage (a fault's length, not a wait for an
    // event), then at least 4 s of firing after the database is back; its
    // stop and start (a crash recovery) may take 3 s more on a loaded
    // machine (7 s down in all was seen), and the workflows' set-up may
    // start the outage seconds late there. Fires due meanwhile are late by all of it: a misfire
    // threshold of 15 s keeps every one of them due.
    let from = cluster.window_start(100, 2_000).await;
    let to = from + 20_000;
    let (ids, from) = cluster
        .every_second_missing_after(100, from, to, 15_000)
        .await;
    // Workflow runs in flight across the outage: a node, a node fanned
    // out over six elements two at a time, a node after them.
    // The napping job runs its elements side by side (each workflow run
    // two at a time, eight at most in all): serial, as jobs are by
    // default, the 24 naps would queue on the executor for 36 s.
    cluster.push("sleeper", "sleeper").await;
    cluster
        .create(
            0,
            json!({ "name": "wf-nap", "module": "sleeper", "param": "1",
                    "block_strategy": "CONCURRENT", "max_concurrency": 8 }),
        )
        .await;
    cluster
        .create(
            0,
            json!({ "name": "wf-hello", "module": "hello", "param": "x" }),
        )
        .await;
    let flow: cronbox_api::WorkflowSpec = serde_json::from_value(json!({
        "nodes": [
            { "name": "first", "job": "wf-hello" },
            { "name": "each", "job": "wf-nap", "for_each": "input.items", "concurrency": 2 },
            { "name": "last", "job": "wf-hello", "param": "{{ nodes.each.output.5 }}" }
        ],
        "edges": [{ "from": "first", "to": "each" }, { "from": "each", "to": "last" }]
    }))
    .unwrap();
    cluster.api(0).put_workflow("flow", &flow).await.unwrap();
    // Started now (3 to 4 s before the window opens, the outage 2 s
    // into it), they run three waves of 2.5 s elements: into the outage.
    let mut flows = Vec::new();
    for i in 0..4 {
        let input = r#"{"items": [2500, 2500, 2500, 2500, 2500, 2500]}"#;
        let run = cluster
            .api(i % 2)
            .start_workflow_run("flow", Some(input))
            .await
            .unwrap();
        flows.push(run.id);
    }
    tokio::time::sleep(Duration::from_millis(
        (from + 2_000 - now_ms()).max(0) as u64
    ))
    .await;
    let down_at = now_ms();
    cluster.postgres.as_ref().unwrap().stop();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.postgres.as_ref().unwrap().start_again();
    println!("the database was down for {} ms", now_ms() - down_at);
    assert!(
        to - now_ms() >= 4_000,
        "the database came back too late in the window"
    );
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    // Every fire is still due, late, and must happen once.
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
    // Every workflow run ended, each node and element run once.
    for id in &flows {
        let run = cluster.workflow_ended(1, *id).await;
        assert_eq!(
            run.status,
            cronbox_api::WorkflowRunStatus::Succeeded,
            "{run:#?}"
        );
        assert_eq!(run.nodes[2].input.as_deref(), Some("slept 2500 ms"));
    }
    let store = Store::connect(&cluster.url).await.unwrap();
    for (name, per_flow) in [("wf-nap", 6), ("wf-hello", 2)] {
        let job = store.jobs_named("default", name).await.unwrap().remove(0);
        let ran = store.runs_of_job(job.id).await.unwrap();
        assert_eq!(ran.len(), per_flow * flows.len(), "{name}: {ran:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_with_skewed_clocks_still_fire_once() {
    let _turn = TESTS.turn();
    let _load = firing_budget(100).await;
    // Heartbeats carry the clock of the admin that received them, so the
    // dead-after time must exceed the skew between admins (4 s here).
    let cluster = Cluster::start(
        &[
            &["--clock-offset", "2s", "--dead-after", "30s"],
            &["--clock-offset", "-2s", "--dead-after", "30s"],
        ],
        1,
    )
    .await;
    let from = cluster.window_start(100, 2_000).await;
    let to = from + 6_000;
    let (ids, from) = cluster.every_second(100, from, to).await;
    // Until every second of the window has fired and ended (on the slower
    // admin's clock, 2 s behind, it closes last).
    let expected = ids.len() * ((to - from) / 1000) as usize;
    until("every second of the window fired and ended", || async {
        let ended = cluster
            .runs(from, to)
            .await
            .iter()
            .filter(|run| run.kind == TriggerKind::Schedule && !run.status.is_open())
            .count();
        (ended >= expected).then_some(())
    })
    .await;
    let runs = cluster.settle(from, to).await;
    exactly_once(&runs, &ids, from, to);
}
