//! The database's primary lost under load: PostgreSQL under Patroni (two
//! nodes, etcd, HAProxy in front, as docs/deploying.md gives it), three
//! admins and two executors firing 200 jobs every second; once the
//! window's first five seconds have run, the primary's Patroni and
//! PostgreSQL are SIGKILLed. With synchronous replication every fire runs
//! exactly once, executions at the executors equal the run rows, and
//! firing resumes within Patroni's TTL and 5 s. With asynchronous
//! replication the same is measured and printed: what an operator risks
//! by choosing it. A planned switchover (the old primary lives on as a
//! standby) loses and doubles nothing either.

use super::*;

use std::time::Instant;

use cronbox_tests::{PATRONI_TTL, Patroni};

const JOBS: usize = 200;
/// The fault goes in once this many seconds of the window have run.
const SECONDS_BEFORE_THE_FAULT: i64 = 5;

/// What happens to the primary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// SIGKILL of its Patroni and PostgreSQL (a machine lost).
    Kill,
    /// A switchover Patroni is asked for.
    Switchover,
}

/// Until every job's run of the second at `second` has been written
/// and ended.
async fn until_second_ran(cluster: &Cluster, second: i64) {
    until_within(WAIT, "every job's run of the second ended", || async {
        let ended = cluster
            .runs(second, second + 1000)
            .await
            .iter()
            .filter(|run| run.kind == TriggerKind::Schedule && !run.status.is_open())
            .count();
        (ended >= JOBS).then_some(())
    })
    .await;
}

/// `fault` mid-window: the fires' counts, how long after the fault the
/// admins wrote a run again, and the cluster (its database kept up).
async fn fault_mid_window(
    synchronous: bool,
    fault: Fault,
    window_ms: i64,
) -> (FireCounts, Duration, Cluster, Patroni) {
    let mut patroni = Patroni::start(2, synchronous).await;
    let cluster = Cluster::on(None, patroni.url(), &[&[], &[], &[]], 2).await;
    let from = cluster.window_start(JOBS, 2_000).await;
    let to = from + window_ms;
    // Every fire stays due however long the fault takes.
    let (ids, from) = cluster
        .every_second_missing_after(JOBS, from, to, window_ms)
        .await;
    until_second_ran(&cluster, from + (SECONDS_BEFORE_THE_FAULT - 1) * 1000).await;
    let fault_at = now_ms();
    let since = Instant::now();
    let old = match fault {
        Fault::Kill => patroni.kill_primary().await,
        Fault::Switchover => patroni.switch_over().await,
    };
    let promoted = patroni.until_promoted(old, since).await;
    println!(
        "{fault:?}, synchronous replication {synchronous}: a new primary {} ms after it",
        promoted.as_millis()
    );
    until_second_ran(&cluster, to - 1000).await;
    // The admins' connections to the old primary were dropped before
    // use: every fire was written on the new one.
    let runs = cluster.settle(from, to).await;
    let resumed = runs
        .iter()
        .map(|run| run.created_at_ms)
        .filter(|created| *created > fault_at)
        .min()
        .expect("a run written after the fault");
    let resumed = Duration::from_millis((resumed - fault_at) as u64);
    println!(
        "{fault:?}, synchronous replication {synchronous}: runs written again {} ms after it",
        resumed.as_millis()
    );
    let counts = count_fires(&runs, &ids, from, to);
    (counts, resumed, cluster, patroni)
}

/// Each fire once, each execution a row, firing again within the TTL and
/// 5 s.
async fn nothing_lost_or_doubled(counts: FireCounts, resumed: Duration, cluster: &Cluster) {
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
        "firing resumed {resumed:?} after the fault"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_failover_with_synchronous_replication_loses_and_doubles_no_fire() {
    let _turn = TESTS.turn();
    let _load = firing_budget(JOBS as u32).await;
    let (counts, resumed, cluster, _database) = fault_mid_window(true, Fault::Kill, 30_000).await;
    nothing_lost_or_doubled(counts, resumed, &cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patroni_failover_with_asynchronous_replication_is_measured() {
    let _turn = TESTS.turn();
    let _load = firing_budget(JOBS as u32).await;
    let (counts, resumed, cluster, _database) = fault_mid_window(false, Fault::Kill, 30_000).await;
    let (succeeded, executed) = cluster.success_rows_and_executions().await;
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
    let _load = firing_budget(JOBS as u32).await;
    let (counts, resumed, cluster, _database) =
        fault_mid_window(true, Fault::Switchover, 20_000).await;
    nothing_lost_or_doubled(counts, resumed, &cluster).await;
}
