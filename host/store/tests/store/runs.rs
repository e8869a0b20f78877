//! Runs: written, claimed, leased, dispatched, ended once, with state commits, marks and job rows kept by revision.

use super::ends::{
    job_rows_are_kept_while_their_revision_holds, marks_written_with_ends, results_holding_nul,
    runs_name_their_module_in_bytes,
};
use super::*;

/// Every guarantee, on one store.
/// A run's life: claimed once, dispatched once, ended once (state with
/// success only), listed, counted, retained.
async fn run_lifecycle(store: &Store) {
    assert_eq!(store.earliest_due().await.unwrap(), None, "no job yet");
    let id = store.insert_job(&job(), 0).await.unwrap();
    assert_eq!(store.earliest_due().await.unwrap(), Some(1_000));

    // A claim moves the next fire and writes the runs atomically.
    let claimed = claim(store, 2_000, |_| {
        (vec![fire(id, 1_000), fire(id, 2_000)], Some(3_000))
    })
    .await;
    assert_eq!(claimed, [(id, vec![Some(RunId(1)), Some(RunId(2))])]);
    assert_eq!(store.earliest_due().await.unwrap(), Some(3_000));
    // A second pass over the same window finds nothing due: the job's next
    // fire moved with the claim.
    let stale = claim(store, 2_000, |_| (vec![fire(id, 1_000)], Some(3_000))).await;
    assert_eq!(stale, [], "a claimed job is not due again");
    // Even a claim that wins cannot write a fire twice: the unique key.
    let again = claim(store, 3_000, |_| {
        (vec![fire(id, 2_000), fire(id, 3_000)], Some(4_000))
    })
    .await;
    assert!(
        matches!(&again[..], [(job, ids)] if *job == id && matches!(ids[..], [None, Some(_)])),
        "the duplicate fire was dropped: {again:?}"
    );
    let runs = store.runs_of_job(id).await.unwrap();
    let times: Vec<i64> = runs.iter().map(|r| r.scheduled_at_ms).collect();
    assert_eq!(times, [1_000, 2_000, 3_000]);
    assert!(runs.iter().all(|r| r.status == RunStatus::Pending));
    assert_eq!(store.pending_runs().await.unwrap().len(), 3);

    // Dispatch is claimed once.
    let run = runs[0].id;
    assert!(store.mark_dispatched(run, "http://e1", 20).await.unwrap());
    assert!(!store.mark_dispatched(run, "http://e2", 21).await.unwrap());

    // A result ends a run once; state is committed with success only.
    let mut changes = cronbox_protocol::StateChanges::new();
    changes.insert("count".into(), Some("1".into()));
    let success = RunEnd {
        run_id: run,
        success: true,
        outcome: RunOutcome::Success,
        code: 200,
        message: "ok".into(),
        log: "[]".into(),
        executor: Some("http://e1".into()),
        started_at_ms: Some(25),
        state_changes: changes,
        state_base: [("count".to_owned(), cronbox_protocol::ABSENT_REVISION)].into(),
        finished_at_ms: 30,
        module_digest: None,
        state_quota: Some(("default".into(), 1 << 20)),
        fuel_consumed: Some(1234),
        peak_memory_bytes: Some(65536),
        scheduled_at_ms: Some(1_000),
        charge: None,
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
    };
    let ended = store.finish_run(&success).await.unwrap().unwrap();
    assert_eq!(
        (ended.id, ended.status, ended.finished_at_ms),
        (run, RunStatus::Success, Some(30))
    );
    assert_eq!(
        (ended.fuel_consumed, ended.peak_memory_bytes),
        (Some(1234), Some(65536)),
        "what the run used is kept"
    );
    let mut later = cronbox_protocol::StateChanges::new();
    later.insert("count".into(), Some("99".into()));
    let late = RunEnd {
        state_changes: later.clone(),
        ..RunEnd::failed(run, RunOutcome::Failed, "late", 40)
    };
    assert!(
        store.finish_run(&late).await.unwrap().is_none(),
        "a second result for a finished run changes nothing"
    );
    let failed = RunEnd {
        state_changes: later,
        ..RunEnd::failed(runs[1].id, RunOutcome::Failed, "no", 50)
    };
    assert!(store.finish_run(&failed).await.unwrap().is_some());
    let state = store.job_state(id).await.unwrap();
    assert_eq!(
        state.revisions.get("count"),
        Some(&run.0),
        "a committed key's revision is the run that wrote it"
    );
    let state = state.values;
    assert_eq!(
        state.get("count").map(String::as_str),
        Some("1"),
        "failed run's write not committed"
    );
    let ended = store.run(run).await.unwrap().unwrap();
    assert_eq!(
        (ended.status, ended.message.as_deref()),
        (RunStatus::Success, Some("ok"))
    );
    assert_eq!(
        ended.trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736"),
        "the run keeps its trace id"
    );

    // Batches: marks only move pending runs; a batch of ends ends each run
    // once, the already-ended one included. A scheduled time given as a
    // hint that is wrong (the third run is scheduled at 3,000) costs a
    // second statement, never the update.
    let third = runs[2].id;
    let marks = [
        DispatchMark {
            run_id: third,
            executor: "http://e1".into(),
            at_ms: 60,
            scheduled_at_ms: Some(999_000),
        },
        DispatchMark {
            run_id: run,
            executor: "http://e2".into(),
            at_ms: 60,
            scheduled_at_ms: Some(1_000),
        },
    ];
    assert_eq!(store.mark_dispatched_many(&marks).await.unwrap(), 1);
    let batch = [
        RunEnd {
            scheduled_at_ms: Some(1_000),
            ..RunEnd::failed(run, RunOutcome::Failed, "again", 70)
        },
        RunEnd {
            scheduled_at_ms: Some(5),
            ..RunEnd::failed(third, RunOutcome::Timeout, "slow", 70)
        },
    ];
    let ended: Vec<Option<RunId>> = store
        .finish_runs(&batch)
        .await
        .unwrap()
        .iter()
        .map(|run| run.as_ref().map(|run| run.id))
        .collect();
    assert_eq!(ended, [None, Some(third)]);
    let third = store.run(third).await.unwrap().unwrap();
    assert_eq!(
        (
            third.outcome.map(RunOutcome::as_str),
            third.executor.as_deref()
        ),
        (Some("timeout"), Some("http://e1"))
    );

    // A result that beats its run's mark: the mark, when it comes, gives
    // the run its dispatch time (and the executor its end did not name)
    // and leaves how it ended alone; a second mark changes nothing.
    let second = runs[1].id;
    assert!(
        !store
            .mark_dispatched(second, "http://e3", 55)
            .await
            .unwrap()
    );
    assert!(
        !store
            .mark_dispatched(second, "http://e4", 56)
            .await
            .unwrap()
    );
    let second = store.run(second).await.unwrap().unwrap();
    assert_eq!(
        (
            second.status,
            second.outcome.map(RunOutcome::as_str),
            second.executor.as_deref(),
            second.dispatched_at_ms
        ),
        (
            RunStatus::Failed,
            Some("failed"),
            Some("http://e3"),
            Some(55)
        )
    );

    // Listing runs by filter, newest first, on both engines.
    let all = store
        .list_runs(&RunFilter {
            job_id: Some(id),
            limit: 10,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 3);
    assert!(all[0].id > all[2].id);
    for (group, count) in [("default", 3), ("elsewhere", 0)] {
        let by_group = store
            .list_runs(&RunFilter {
                group: Some(group.to_owned()),
                limit: 10,
                ..RunFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(by_group.len(), count, "runs of group {group}");
    }
    let failed_runs = store
        .list_runs(&RunFilter {
            status: Some(RunStatus::Failed),
            from_ms: Some(2_000),
            to_ms: Some(3_001),
            before_id: Some(RunId(all[0].id.0 + 1)),
            limit: 10,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(
        failed_runs
            .iter()
            .map(|r| r.scheduled_at_ms)
            .collect::<Vec<_>>(),
        [3_000, 2_000]
    );
    // With `examine`, a page reads that many of the job's newest runs for
    // its status: the failures among the two newest, then, below the
    // oldest of them, the rest; the last page says nothing is left.
    let failed_of = |runs: &[cronbox_store::RunRow]| -> Vec<RunId> {
        runs.iter()
            .filter(|run| run.status == RunStatus::Failed)
            .map(|run| run.id)
            .collect()
    };
    let mut bounded = RunFilter {
        job_id: Some(id),
        status: Some(RunStatus::Failed),
        limit: 10,
        examine: Some(2),
        ..RunFilter::default()
    };
    let page = store.list_runs(&bounded).await.unwrap();
    assert_eq!(
        page.iter().map(|r| r.id).collect::<Vec<_>>(),
        failed_of(&all[..2])
    );
    let cursor = store.oldest_examined(&bounded).await.unwrap();
    assert_eq!(cursor, Some(all[1].id), "two runs examined, more below");
    bounded.before_id = cursor;
    let page = store.list_runs(&bounded).await.unwrap();
    assert_eq!(
        page.iter().map(|r| r.id).collect::<Vec<_>>(),
        failed_of(&all[2..])
    );
    assert_eq!(
        store.oldest_examined(&bounded).await.unwrap(),
        None,
        "all read"
    );
    // Nothing to narrow: every run read matches, the page stops at `limit`.
    let unnarrowed = RunFilter {
        job_id: Some(id),
        limit: 10,
        examine: Some(1),
        ..RunFilter::default()
    };
    assert_eq!(store.list_runs(&unnarrowed).await.unwrap().len(), 3);
    assert_eq!(store.oldest_examined(&unnarrowed).await.unwrap(), None);

    // Daily report: one success, two failed, written at 0 ms (1970-01-01).
    assert_eq!(first_day_counts(store).await, [(1, 2, 0, 0)]);

    // An operator's edit replaces the state.
    let mut edited = HashMap::new();
    edited.insert("other".to_owned(), "x".to_owned());
    store.replace_job_state(id, &edited, 500).await.unwrap();
    let state = store.job_state(id).await.unwrap();
    assert_eq!(state.values, edited);
    assert_eq!(
        state.revisions.get("other"),
        Some(&-500),
        "an operator's edit is a revision of its own"
    );

    // Retention deletes ended runs only, successes and the rest apart, in
    // batches; the report still counts them. Deleting the job keeps its
    // runs.
    let ended = [RunStatus::Failed, RunStatus::Cancelled];
    assert_eq!(
        store.delete_ended_runs(i64::MAX, &ended, 1).await.unwrap(),
        1
    );
    assert_eq!(
        store.delete_ended_runs(i64::MAX, &ended, 5).await.unwrap(),
        1
    );
    assert_eq!(
        store.delete_ended_runs(i64::MAX, &ended, 5).await.unwrap(),
        0
    );
    assert_eq!(
        store
            .delete_ended_runs(0, &[RunStatus::Success], 5)
            .await
            .unwrap(),
        0,
        "nothing was written before the cutoff"
    );
    assert_eq!(
        store
            .delete_ended_runs(i64::MAX, &[RunStatus::Success], 5)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        first_day_counts(store).await,
        [(1, 2, 0, 0)],
        "the report counts deleted runs"
    );
    assert!(store.delete_job(id).await.unwrap());
    assert!(store.job(id).await.unwrap().is_none());
    assert!(store.job_state(id).await.unwrap().values.is_empty());
    assert!(!store.delete_job(id).await.unwrap());
}

#[tokio::test]
async fn sqlite_runs_are_claimed_dispatched_and_ended_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    run_lifecycle(&store).await;
    results_holding_nul(&store).await;
    let url = format!("sqlite://{}", dir.path().join("cronbox.db").display());
    marks_written_with_ends(&store, &url).await;
    leases(&store, &Store::connect(&url).await.unwrap(), &url).await;
    runs_name_their_module_in_bytes(&store, &url).await;
    job_rows_are_kept_while_their_revision_holds(&store, &url).await;
    let second = Store::open_sqlite(dir.path()).await;
    assert!(
        matches!(second, Err(StoreError::Locked(_))),
        "one admin per data dir"
    );
}

#[tokio::test]
async fn postgres_runs_are_claimed_dispatched_and_ended_once() {
    let server = PostgresServer::fresh_database();
    let store = Store::connect(&server.url()).await.unwrap();
    run_lifecycle(&store).await;
    // Migrations are idempotent: a second admin connects to the same schema
    // and sees what the first one writes.
    let other = Store::connect(&server.url()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    assert_eq!(
        other
            .jobs()
            .await
            .unwrap()
            .iter()
            .map(|j| j.id)
            .collect::<Vec<_>>(),
        [id]
    );
    results_holding_nul(&store).await;
    marks_written_with_ends(&store, &server.url()).await;
    runs_name_their_module_in_bytes(&store, &server.url()).await;
    job_rows_are_kept_while_their_revision_holds(&store, &server.url()).await;
}

/// Two admins (`a` wrote the run) and one pending run: its dispatch goes to
/// one of them at a time, and to the other once `a`'s lease runs out.
async fn leases(a: &Store, b: &Store, url: &str) {
    let id = a.insert_job(&job(), 0).await.unwrap();
    let run = a.insert_run(&fire(id, 10_000), 10).await.unwrap();
    assert_eq!(
        b.take_leases(&[(run, 10_000)], 12_000).await.unwrap(),
        [] as [RunId; 0]
    );
    assert_eq!(
        a.take_leases(&[(run, 10_000)], 12_000).await.unwrap(),
        [run],
        "renewed"
    );
    let orphan_ids =
        |runs: Vec<cronbox_store::RunRow>| runs.iter().map(|r| r.id).filter(|r| *r == run).count();
    assert_eq!(orphan_ids(b.orphaned_runs(21_000, 10).await.unwrap()), 0);
    assert_eq!(orphan_ids(b.orphaned_runs(23_000, 10).await.unwrap()), 1);
    assert_eq!(
        b.take_leases(&[(run, 10_000)], 23_000).await.unwrap(),
        [run],
        "taken over"
    );
    assert_eq!(
        a.take_leases(&[(run, 10_000)], 23_500).await.unwrap(),
        [] as [RunId; 0]
    );
    assert!(b.mark_dispatched(run, "http://e", 23_600).await.unwrap());
    assert_eq!(
        b.take_leases(&[(run, 10_000)], 99_000).await.unwrap(),
        [] as [RunId; 0],
        "not pending"
    );
    // A lease only ever guards a pending run: the row drops it once
    // dispatched, not to carry it for as long as the run is kept.
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let lease: (Option<String>, Option<i64>) =
        sqlx::query_as("SELECT lease_owner, lease_until_ms FROM run WHERE id = $1")
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(lease, (None, None));
}

/// A stored value that is not one of its enum's names is a decode error
/// naming the column, never a default; a due job that does not decode is
/// stopped, and the others still fire.
#[tokio::test]
async fn a_corrupt_stored_value_is_an_error_not_a_default() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let corrupt = store.insert_job(&job(), 0).await.unwrap();
    let healthy = store.insert_job(&job(), 0).await.unwrap();
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}", dir.path().join("cronbox.db").display());
    let raw = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::query("UPDATE job SET misfire = 'SIDEWAYS' WHERE id = $1")
        .bind(corrupt)
        .execute(&raw)
        .await
        .unwrap();
    let error = store.job(corrupt).await.unwrap_err();
    assert!(error.is_undecodable_row(), "{error}");
    let error = error.to_string();
    assert!(
        error.contains("misfire") && error.contains("SIDEWAYS"),
        "{error}"
    );
    let due = claim(&store, 10_000, |_| (Vec::new(), None)).await;
    assert_eq!(due, [(healthy, Vec::new())]);
    let stopped: i64 = sqlx::query_scalar("SELECT enabled FROM job WHERE id = $1")
        .bind(corrupt)
        .fetch_one(&raw)
        .await
        .unwrap();
    assert_eq!(stopped, 0, "the corrupt job is stopped");
}

/// A job's schedule is parsed as its row is read: a stored zone that names
/// no zone is never read as UTC, a cron expression or rules that no longer
/// parse never plan a fire; each is a decode error naming its column, and
/// the pre-read stops that job only.
#[tokio::test]
async fn a_stored_schedule_that_does_not_parse_names_its_column_and_stops_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}", dir.path().join("cronbox.db").display());
    let raw = sqlx::AnyPool::connect(&url).await.unwrap();
    let damages = [
        (
            "time_zone",
            "UPDATE job SET time_zone = 'Mars/Olympus' WHERE id = $1",
        ),
        (
            "schedule_conf",
            "UPDATE job SET schedule_conf = '61 * * * * ?' WHERE id = $1",
        ),
        (
            "schedule_rules",
            "UPDATE job SET schedule_rules = '{\"exclude_dates\":[\"2026-02-30\"]}' WHERE id = $1",
        ),
    ];
    let healthy = store.insert_job(&job(), 0).await.unwrap();
    let mut damaged = Vec::new();
    for (column, damage) in damages {
        let id = store.insert_job(&job(), 0).await.unwrap();
        sqlx::query(damage).bind(id).execute(&raw).await.unwrap();
        damaged.push((column, id));
    }
    let error = store.job(damaged[0].1).await.unwrap_err().to_string();
    assert!(
        error.contains("time_zone") && error.contains("Mars/Olympus"),
        "a whole job's read names the zone: {error}"
    );
    let due = claim(&store, 10_000, |_| (Vec::new(), None)).await;
    assert_eq!(
        due,
        [(healthy, Vec::new())],
        "only the healthy job is claimed"
    );
    for (column, id) in damaged {
        let enabled: i64 = sqlx::query_scalar("SELECT enabled FROM job WHERE id = $1")
            .bind(id)
            .fetch_one(&raw)
            .await
            .unwrap();
        assert_eq!(enabled, 0, "the job with a damaged {column} is stopped");
    }
}
