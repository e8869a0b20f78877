//! The database's primary lost under load: PostgreSQL under Patroni (two
//! nodes, etcd, HAProxy in front, as docs/deploying.md gives it), three
//! admins and two executors firing 200 jobs every second; the primary's
//! Patroni and PostgreSQL are SIGKILLed 5 s into a 30 s window. With
//! synchronous replication every fire runs exactly once, executions at the
//! executors equal the run rows, and firing resumes within Patroni's TTL
//! and 5 s. With asynchronous replication the same is measured and
//! printed: what an operator risks by choosing it. A planned switchover
//! (the old primary lives on as a standby) loses and doubles nothing
//! either.

use super::*;

use std::time::Instant;

use cronbox_tests::{PATRONI_TTL, Patroni};

const JOBS: usize = 200;
/// Three admins that take no executor for dead while the database fails
/// over: no executor is stopped in these tests, and a beat cannot be
/// written while there is no primary (the tests' default of 3 s is
/// shorter than a failover).
const LIVE_EXECUTORS: &[&[&str]] = &[
    &["--dead-after", "30s"],
    &["--dead-after", "30s"],
    &["--dead-after", "30s"],
];
const WINDOW_MS: i64 = 30_000;
/// A failover's share of [`FIRING_BUDGET`]: more than its 200 jobs, so
/// that it never goes beside another failover, the 500-job test or the
/// database restart. A switchover beside two other clusters and the
/// Python compiles left runs open 60 s after its window on a slower
/// machine (admins waiting 7.6 s for a connection, results queued at the
/// executors): what it measures is a failover's effect, not the
/// machine's.
const FAILOVER_SHARE: u32 = 600;
/// How long a failover's runs may take to end once its window is over:
/// the fires that waited out the failover are dispatched late, all at
/// once.
const FAILOVER_SETTLE: Duration = Duration::from_secs(120);
const KILL_AFTER_MS: i64 = 5_000;

/// A failover mid-window: the fires' counts, how long after the kill the
/// admins wrote a run again, and the cluster (its database kept up).
async fn fail_over(synchronous: bool) -> (FireCounts, Duration, Cluster, Patroni) {
    let mut patroni = Patroni::start(2, synchronous).await;
    let cluster = Cluster::on(None, patroni.url(), LIVE_EXECUTORS, 2).await;
    let from = cluster.window_start(JOBS, 2_000).await;
    let to = from + WINDOW_MS;
    // Every fire stays due however long the failover takes.
    let (ids, from) = cluster
        .every_second_missing_after(JOBS, from, to, WINDOW_MS)
        .await;
    tokio::time::sleep(Duration::from_millis(
        (from + KILL_AFTER_MS - now_ms()).max(0) as u64,
    ))
    .await;
    let killed_at = now_ms();
    let since = Instant::now();
    let dead = patroni.kill_primary().await;
    let promoted = patroni.until_promoted(dead, since).await;
    println!(
        "synchronous replication {synchronous}: a replica was primary {} ms after the kill",
        promoted.as_millis()
    );
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    let runs = cluster.settle_within(FAILOVER_SETTLE, from, to).await;
    let resumed = runs
        .iter()
        .map(|run| run.created_at_ms)
        .filter(|created| *created > killed_at)
        .min()
        .expect("a run written after the kill");
    let resumed = Duration::from_millis((resumed - killed_at) as u64);
    println!(
        "synchronous replication {synchronous}: runs written again {} ms after the kill",
        resumed.as_millis()
    );
    let counts = count_fires(&runs, &ids, from, to);
    (counts, resumed, cluster, patroni)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_failover_with_synchronous_replication_loses_and_doubles_no_fire() {
    let _turn = TESTS.turn();
    let _load = firing_budget(FAILOVER_SHARE).await;
    let (counts, resumed, cluster, _database) = fail_over(true).await;
    assert!(
        counts.missing.is_empty() && counts.doubled.is_empty() && counts.failed.is_empty(),
        "missing {:?}, doubled {:?}, failed {:?}",
        &counts.missing[..counts.missing.len().min(10)],
        &counts.doubled[..counts.doubled.len().min(10)],
        &counts.failed[..counts.failed.len().min(3)]
    );
    cluster.until_executions_match_success_rows().await;
    assert!(
        resumed <= PATRONI_TTL + Duration::from_secs(5),
        "firing resumed {resumed:?} after the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_failover_with_asynchronous_replication_is_measured() {
    let _turn = TESTS.turn();
    let _load = firing_budget(FAILOVER_SHARE).await;
    let (counts, resumed, cluster, _database) = fail_over(false).await;
    let succeeded = cluster
        .settle_within(FAILOVER_SETTLE, 0, i64::MAX)
        .await
        .iter()
        .filter(|run| run.status == RunStatus::Success)
        .count() as u64;
    let executed = cluster.executions_succeeded().await;
    println!(
        "asynchronous replication: {} fires missing, {} doubled; {executed} successful executions \
         for {succeeded} successful run rows",
        counts.missing.len(),
        counts.doubled.len()
    );
    // What is lost is what the replica had not seen; firing goes on.
    assert!(
        resumed <= PATRONI_TTL + Duration::from_secs(5),
        "firing resumed {resumed:?} after the kill"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_switchover_under_load_loses_and_doubles_no_fire() {
    let _turn = TESTS.turn();
    let _load = firing_budget(FAILOVER_SHARE).await;
    let patroni = Patroni::start(2, true).await;
    let cluster = Cluster::on(None, patroni.url(), LIVE_EXECUTORS, 2).await;
    let from = cluster.window_start(JOBS, 2_000).await;
    let to = from + 20_000;
    let (ids, from) = cluster
        .every_second_missing_after(JOBS, from, to, 20_000)
        .await;
    tokio::time::sleep(Duration::from_millis(
        (from + KILL_AFTER_MS - now_ms()).max(0) as u64,
    ))
    .await;
    let since = Instant::now();
    let old = patroni.switch_over().await;
    let switched = patroni.until_promoted(old, since).await;
    println!(
        "switchover: a new primary {} ms after asking",
        switched.as_millis()
    );
    tokio::time::sleep(Duration::from_millis((to - now_ms() + 500).max(0) as u64)).await;
    // The admins' connections to the old primary, now a standby, were
    // dropped before use: every fire was written once, on the new one.
    let runs = cluster.settle_within(FAILOVER_SETTLE, from, to).await;
    exactly_once(&runs, &ids, from, to);
    cluster.until_executions_match_success_rows().await;
}
