//! Routing over several executors and MANUAL groups.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_over_three_executors() {
    let _turn = TESTS.turn();
    let mut cluster = Cluster::start().await;
    let mut others = Vec::new();
    for i in 2..=3 {
        others.push(spawn_executor(
            cluster.admin_addr,
            &cluster.data.path().join(format!("executor-{i}")),
            &[],
        ));
    }
    let others_addresses: Vec<&str> = others.iter().map(|(_, address)| address.as_str()).collect();
    cluster.wait_for_executors(&others_addresses).await;
    let hello = cluster.upload("hello").await;
    let sharded = cluster.upload("sharded").await;
    let sleeper = cluster.upload("sleeper").await;
    // Learn the three addresses, sorted as the admin sorts them.
    let probe = cluster
        .create(json!({ "name": "probe", "module_digest": hello, "route": "SHARDING_BROADCAST" }))
        .await;
    cluster.trigger(probe, json!({})).await;
    let mut addresses: Vec<String> = cluster
        .wait_runs(probe, 3)
        .await
        .iter()
        .map(|r| r.executor.as_deref().unwrap().to_owned())
        .collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), 3, "{addresses:?}");

    let executor_of = |run: &Run| run.executor.as_deref().unwrap().to_owned();
    let once = |route: &'static str, digest: &Digest, param: &str| json!({ "name": route, "module_digest": digest, "route": route, "param": param });

    let broadcast = cluster
        .create(once("SHARDING_BROADCAST", &sharded, ""))
        .await;
    cluster.trigger(broadcast, json!({})).await;
    let shards = cluster.wait_runs(broadcast, 3).await;
    let mut seen: Vec<(i64, String, String)> = shards
        .iter()
        .map(|r| {
            (
                r.shard_index,
                executor_of(r),
                r.message.as_deref().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    for (i, (index, executor, message)) in seen.iter().enumerate() {
        assert_eq!(*index, i as i64);
        assert_eq!(*executor, addresses[i], "shard i goes to the i-th executor");
        assert_eq!(*message, format!("shard {i}/3"));
    }

    for (route, expected) in [("FIRST", &addresses[0]), ("LAST", &addresses[2])] {
        let job = cluster.create(once(route, &hello, "")).await;
        let run = cluster.trigger(job, json!({})).await;
        assert_eq!(executor_of(&cluster.run(run).await), *expected, "{route:?}");
    }

    let hashed = cluster.create(once("CONSISTENT_HASH", &hello, "")).await;
    let run = cluster.trigger(hashed, json!({})).await;
    let expected = cronbox_admin::routing::consistent_hash_pick(hashed.wire(), &addresses).unwrap();
    assert_eq!(executor_of(&cluster.run(run).await), *expected);

    // LFU starts new executors at a random count below the list's size
    // (as xxl-job does), so it reaches all three within nine runs.
    let lfu = cluster
        .create(once("LEAST_FREQUENTLY_USED", &hello, ""))
        .await;
    let mut used = std::collections::BTreeSet::new();
    for _ in 0..9 {
        let run = cluster.trigger(lfu, json!({})).await;
        used.insert(executor_of(&cluster.run(run).await));
    }
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        addresses,
        "LFU reaches every executor"
    );
    for route in ["ROUND", "LEAST_RECENTLY_USED"] {
        let job = cluster.create(once(route, &hello, "")).await;
        let mut used = Vec::new();
        for _ in 0..3 {
            let run = cluster.trigger(job, json!({})).await;
            used.push(executor_of(&cluster.run(run).await));
        }
        used.sort();
        assert_eq!(
            used, addresses,
            "{route} spreads three runs over three executors"
        );
    }
    let random = cluster.create(once("RANDOM", &hello, "")).await;
    let run = cluster.trigger(random, json!({})).await;
    assert!(addresses.contains(&executor_of(&cluster.run(run).await)));

    // BUSYOVER: the first executor is busy with this job, the next is idle.
    let busy = cluster.create(once("BUSYOVER", &sleeper, "2000")).await;
    let first = cluster.trigger(busy, json!({})).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, row) = cluster
            .call(reqwest::Method::GET, &format!("/api/v1/runs/{first}"), None)
            .await;
        if row["status"] == "dispatched" {
            break;
        }
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Accepted means queued on that executor: its idle beat says busy.
    let second = cluster.trigger(busy, json!({})).await;
    let (first, second) = (cluster.run(first).await, cluster.run(second).await);
    assert_eq!(executor_of(&first), addresses[0]);
    assert_eq!(
        executor_of(&second),
        addresses[1],
        "BUSYOVER skipped the busy executor"
    );

    // FAILOVER: the three executors die (they stay registered until
    // --dead-after), a fourth starts; FAILOVER walks the list calling beat
    // and skips the dead ones.
    let failover = cluster.create(once("FAILOVER", &hello, "")).await;
    drop(cluster.executor.take());
    others.clear();
    let (_survivor, survivor) = spawn_executor(
        cluster.admin_addr,
        &cluster.data.path().join("executor-4"),
        &[],
    );
    cluster.wait_for_executors(&[&survivor]).await;
    let run = cluster.trigger(failover, json!({})).await;
    let run = cluster.run(run).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(
        executor_of(&run),
        survivor,
        "FAILOVER skipped the dead executors"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_group_routes_to_its_listed_addresses() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start().await;
    let hello = cluster.upload("hello").await;
    // A second executor that registers in another group: only the manual
    // list of group "pinned" may receive its jobs.
    let (_pinned, pinned_addr) = spawn_executor(
        cluster.admin_addr,
        &cluster.data.path().join("pinned"),
        &["--group", "elsewhere"],
    );
    cluster.wait_for_executors(&[&pinned_addr]).await;
    let (status, body) = cluster
        .call(
            reqwest::Method::PUT,
            "/api/v1/groups/pinned",
            Some(json!({ "address_type": "MANUAL", "addresses": [pinned_addr] })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let job = cluster
        .create(json!({ "name": "pinned", "group": "pinned", "module_digest": hello }))
        .await;
    let run = cluster.trigger(job, json!({})).await;
    let run = cluster.run(run).await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(run.executor.as_deref(), Some(pinned_addr.as_str()));
    let (status, body) = cluster
        .call(
            reqwest::Method::PUT,
            "/api/v1/groups/bad",
            Some(json!({ "address_type": "SOMETIMES" })),
        )
        .await;
    assert_eq!(status, 422);
    assert_eq!(body["field"], "address_type");
    let (_, groups) = cluster
        .call(reqwest::Method::GET, "/api/v1/groups", None)
        .await;
    // `default` always exists; `elsewhere` since an executor registered in
    // it; `pinned` as configured.
    let names: Vec<(&str, &str)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["name"].as_str().unwrap(),
                g["address_type"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("default", "AUTO"),
            ("elsewhere", "AUTO"),
            ("pinned", "MANUAL")
        ]
    );
}
