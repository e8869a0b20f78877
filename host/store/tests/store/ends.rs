//! How runs end: state commits and their conflicts, text holding U+0000, dispatch marks written with ends, the module named in bytes, job rows kept by revision, admins folding ends together.

use super::*;

/// Two runs of one job that read the same state: the first commit wins,
/// the second is refused as a conflict (nothing of it applied), and stop
/// and kill cancel what waits.
async fn state_conflicts_and_cancellation(store: &Store) {
    let id = store.insert_job(&job(), 0).await.unwrap();
    let first = store.insert_run(&fire(id, 10_000), 1).await.unwrap();
    let second = store.insert_run(&fire(id, 11_000), 1).await.unwrap();
    let success = |run: RunId, value: &str, base: i64| RunEnd {
        run_id: run,
        success: true,
        outcome: RunOutcome::Success,
        code: 200,
        state_changes: [("count".to_owned(), Some(value.to_owned()))].into(),
        state_base: [("count".to_owned(), base)].into(),
        ..RunEnd::failed(run, RunOutcome::Success, "ok", 20)
    };
    let absent = cronbox_protocol::ABSENT_REVISION;
    let ended = store
        .finish_run(&success(first, "1", absent))
        .await
        .unwrap();
    assert_eq!(ended.unwrap().status, RunStatus::Success);
    // The second read `count` when it did not exist: its commit would
    // overwrite the first's write without having seen it.
    let ended = store
        .finish_run(&success(second, "1", absent))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.status, RunStatus::Failed);
    assert_eq!(
        ended.outcome.map(RunOutcome::as_str),
        Some("state_conflict")
    );
    assert!(
        ended.message.as_deref().unwrap_or("").contains("count"),
        "{:?}",
        ended.message
    );
    assert_eq!(
        ended.alarm_status,
        AlarmState::Due,
        "a conflict is a failure"
    );
    let state = store.job_state(id).await.unwrap();
    assert_eq!(state.revisions.get("count"), Some(&first.0));
    // A run based on the first's commit commits.
    let third = store.insert_run(&fire(id, 12_000), 1).await.unwrap();
    let ended = store
        .finish_run(&success(third, "2", first.0))
        .await
        .unwrap();
    assert_eq!(ended.unwrap().status, RunStatus::Success);
    assert_eq!(
        store.job_state(id).await.unwrap().values.get("count"),
        Some(&"2".to_owned())
    );

    // Stopping cancels the fires and retries waiting; a manual run stays.
    let fire_ahead = store.insert_run(&fire(id, 20_000), 1).await.unwrap();
    let retry = store
        .insert_run(
            &NewRun {
                kind: cronbox_protocol::TriggerKind::Retry,
                attempt: 1,
                ..fire(id, 21_000)
            },
            1,
        )
        .await
        .unwrap();
    let manual = store
        .insert_run(
            &NewRun {
                kind: cronbox_protocol::TriggerKind::Manual,
                ..fire(id, 22_000)
            },
            1,
        )
        .await
        .unwrap();
    let cancelled = store.stop_job(id, 30).await.unwrap().unwrap();
    assert_eq!(cancelled, [fire_ahead, retry]);
    let run = store.run(fire_ahead).await.unwrap().unwrap();
    assert_eq!(
        (run.status, run.alarm_status),
        (RunStatus::Cancelled, AlarmState::None)
    );
    assert_eq!(
        store.run(manual).await.unwrap().unwrap().status,
        RunStatus::Pending
    );
    // A kill of the whole job cancels every kind.
    let killed = store.cancel_waiting_runs(id, "killed", 40).await.unwrap();
    assert_eq!(killed, [manual]);
    // A cancelled run whose dispatch was already on its way and that ran
    // after all: its result is what happened. One that never started stays
    // cancelled.
    let never_started = RunEnd {
        executor: Some("http://e1".into()),
        ..RunEnd::failed(retry, RunOutcome::Rejected, "refused at its instant", 41)
    };
    assert!(store.finish_run(&never_started).await.unwrap().is_none());
    let ran_after_all = RunEnd {
        run_id: manual,
        success: true,
        outcome: RunOutcome::Success,
        code: 200,
        executor: Some("http://e1".into()),
        started_at_ms: Some(42),
        ..RunEnd::failed(manual, RunOutcome::Success, "ran", 43)
    };
    let ended = store.finish_run(&ran_after_all).await.unwrap().unwrap();
    assert_eq!(ended.status, RunStatus::Success);
    // Daily reports count cancelled runs apart from failures.
    assert_eq!(
        first_day_counts(store).await,
        [(3, 1, 0, 2)],
        "the run that ran after all counts as a success"
    );
    assert_eq!(store.stop_job(JobId(id.0 + 1000), 50).await.unwrap(), None);

    // Two results based on the same revision, ended at once (two callbacks
    // in flight): one commits, the other is a conflict, on either engine.
    let revision = store.job_state(id).await.unwrap().revisions["count"];
    let third = store.insert_run(&fire(id, 52_000), 1).await.unwrap();
    let fourth = store.insert_run(&fire(id, 53_000), 1).await.unwrap();
    let (three, four) = (
        success(third, "3", revision),
        success(fourth, "4", revision),
    );
    let (a, b) = tokio::join!(store.finish_run(&three), store.finish_run(&four));
    let mut outcomes = [a.unwrap().unwrap(), b.unwrap().unwrap()]
        .map(|run| run.outcome.map(RunOutcome::as_str).unwrap_or_default());
    outcomes.sort();
    assert_eq!(outcomes, ["state_conflict", "success"]);
    let value = &store.job_state(id).await.unwrap().values["count"];
    assert!(value == "3" || value == "4", "{value}");
}

/// A guest's message or state holding U+0000 (which PostgreSQL cannot store
/// as text) ends its own run, not the write of every run ended with it: the
/// message is kept with U+FFFD in its place, state with it fails its run.
pub(super) async fn results_holding_nul(store: &Store) {
    let job = store.insert_job(&job(), 0).await.unwrap();
    let trapped = store.insert_run(&fire(job, 5_000), 0).await.unwrap();
    let stateful = store.insert_run(&fire(job, 6_000), 0).await.unwrap();
    let plain = store.insert_run(&fire(job, 7_000), 0).await.unwrap();
    let ended = |run_id, success: bool| RunEnd {
        run_id,
        success,
        outcome: if success {
            RunOutcome::Success
        } else {
            RunOutcome::Trap
        },
        code: if success { 200 } else { 500 },
        finished_at_ms: 8_000,
        ..RunEnd::default()
    };
    let mut with_nul = ended(stateful, true);
    with_nul
        .state_changes
        .insert("cur\0sor".into(), Some("1".into()));
    with_nul
        .state_changes
        .insert("other".into(), Some("2".into()));
    let ends = [
        RunEnd {
            message: "bad\0byte".into(),
            ..ended(trapped, false)
        },
        with_nul,
        ended(plain, true),
    ];
    let answered = store.finish_runs(&ends).await.unwrap();
    assert!(answered.iter().all(Option::is_some), "{answered:?}");
    let trapped = store.run(trapped).await.unwrap().unwrap();
    assert_eq!(trapped.message.as_deref(), Some("bad\u{FFFD}byte"));
    let stateful = store.run(stateful).await.unwrap().unwrap();
    assert_eq!(
        (stateful.status, stateful.outcome.map(RunOutcome::as_str)),
        (RunStatus::Failed, Some("state_unstorable"))
    );
    assert!(
        stateful
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("U+0000"),
        "{stateful:?}"
    );
    let state = store.job_state(job).await.unwrap();
    assert!(state.values.is_empty(), "no change committed: {state:?}");
    let plain = store.run(plain).await.unwrap().unwrap();
    assert_eq!(plain.status, RunStatus::Success);
}

/// Dispatch marks written with run ends: a mark whose run an end ends is
/// written by that end (its dispatch time; its executor where the end
/// names none), in one write of the row on SQLite; every other mark is
/// written as a mark: one for a run no end names, one for a run that had
/// ended before, one for a run whose end commits state.
pub(super) async fn marks_written_with_ends(store: &Store, url: &str) {
    let job = store.insert_job(&job(), 0).await.unwrap();
    let mut runs = Vec::new();
    for at in 0..5 {
        runs.push(store.insert_run(&fire(job, 50_000 + at), 0).await.unwrap());
    }
    let [quick, unnamed, ended_before, committing, named_twice] = runs[..] else {
        unreachable!()
    };
    let ended = |run_id| RunEnd {
        run_id,
        success: true,
        outcome: RunOutcome::Success,
        code: 200,
        started_at_ms: Some(60_010),
        finished_at_ms: 60_020,
        ..RunEnd::default()
    };
    store.finish_runs(&[ended(ended_before)]).await.unwrap();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let sqlite = url.starts_with("sqlite:");
    if sqlite {
        // Every write of a run row, counted.
        for sql in [
            "CREATE TABLE run_write (run_id INTEGER)",
            "CREATE TRIGGER count_run_writes AFTER UPDATE ON run \
             BEGIN INSERT INTO run_write VALUES (NEW.id); END",
        ] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
    }
    let mark = |run_id, executor: &str| DispatchMark {
        run_id,
        executor: executor.into(),
        at_ms: 60_000,
        scheduled_at_ms: None,
    };
    let marks = [
        mark(quick, "http://e1"),
        mark(unnamed, "http://e2"),
        mark(ended_before, "http://e3"),
        mark(committing, "http://e4"),
        mark(named_twice, "http://e5"),
        // A second mark of one run (sent again): the first holds.
        mark(named_twice, "http://e6"),
    ];
    let mut commits = ended(committing);
    commits.state_changes.insert("k".into(), Some("v".into()));
    let ends = [
        ended(quick),
        ended(ended_before),
        commits,
        RunEnd {
            executor: Some("http://ran-here".into()),
            ..ended(named_twice)
        },
    ];
    let answered = store.finish_runs_marking(&marks, &ends).await.unwrap();
    let answered: Vec<Option<RunId>> = answered
        .iter()
        .map(|run| run.as_ref().map(|run| run.id))
        .collect();
    assert_eq!(
        answered,
        [Some(quick), None, Some(committing), Some(named_twice)]
    );
    let mut seen = Vec::new();
    for run in &runs {
        let run = store.run(*run).await.unwrap().unwrap();
        seen.push((run.status, run.dispatched_at_ms, run.executor));
    }
    let e = |name: &str| Some(name.to_owned());
    assert_eq!(
        seen,
        [
            (RunStatus::Success, Some(60_000), e("http://e1")),
            (RunStatus::Dispatched, Some(60_000), e("http://e2")),
            (RunStatus::Success, Some(60_000), e("http://e3")),
            (RunStatus::Success, Some(60_000), e("http://e4")),
            (RunStatus::Success, Some(60_000), e("http://ran-here")),
        ]
    );
    assert_eq!(store.job_state(job).await.unwrap().values.len(), 1);
    if sqlite {
        let writes: Vec<i64> = sqlx::query("SELECT run_id FROM run_write ORDER BY run_id")
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|row| sqlx::Row::try_get(row, "run_id").unwrap())
            .collect();
        // The quick run and the run named twice: one write each. The
        // others: a mark, then (committing) an end.
        let ids = |runs: &[RunId]| runs.iter().map(|run| run.0).collect::<Vec<_>>();
        assert_eq!(
            writes,
            ids(&[
                quick,
                unnamed,
                ended_before,
                committing,
                committing,
                named_twice
            ])
        );
        for sql in ["DROP TRIGGER count_run_writes", "DROP TABLE run_write"] {
            sqlx::query(sql).execute(&pool).await.unwrap();
        }
    }
}

/// A run names the module it runs in 32 bytes (migration 0019) and reads
/// back the digest it was written with, whether written alone or by a
/// claim; a run written before, in 64 characters, still reads, ends with
/// the module its executor names, and keeps that module from collection;
/// an end naming something that is no digest leaves the run's module as
/// it was (on PostgreSQL it would fail the whole batch of ends).
pub(super) async fn runs_name_their_module_in_bytes(store: &Store, url: &str) {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let digest = |c: char| c.to_string().repeat(64).parse::<Digest>().unwrap();
    let stored = |run: RunId| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, (String, Option<Vec<u8>>)>(
                "SELECT module_digest, module_sha FROM run WHERE id = $1",
            )
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let module_of =
        |run: RunId| async move { store.run(run).await.unwrap().unwrap().module_digest };
    let job_id = store
        .insert_job(
            &JobRow {
                next_fire_at_ms: Some(900_000),
                ..job()
            },
            0,
        )
        .await
        .unwrap();

    let alone = NewRun {
        module_digest: digest('b'),
        ..fire(job_id, 800_000)
    };
    let alone = store.insert_run(&alone, 100).await.unwrap();
    assert_eq!(stored(alone).await, (String::new(), Some(vec![0xbb; 32])));
    assert_eq!(module_of(alone).await, digest('b'));

    let claimed = claim(store, 900_000, |due| {
        if due.id == job_id {
            let run = NewRun {
                module_digest: digest('c'),
                ..fire(job_id, 900_000)
            };
            (vec![run], None)
        } else {
            (Vec::new(), due.next_fire_at_ms)
        }
    })
    .await;
    let by_claim = claimed
        .iter()
        .find(|(id, _)| *id == job_id)
        .and_then(|(_, ids)| ids[0])
        .expect("the claim wrote the fire");
    assert_eq!(
        stored(by_claim).await,
        (String::new(), Some(vec![0xcc; 32]))
    );
    assert_eq!(module_of(by_claim).await, digest('c'));

    // An end naming no digest: the run keeps its module.
    store
        .finish_run(&RunEnd {
            module_digest: Some("not a digest".to_owned()),
            ..RunEnd::failed(by_claim, RunOutcome::Failed, "no", 900_100)
        })
        .await
        .unwrap()
        .expect("the run ends");
    assert_eq!(module_of(by_claim).await, digest('c'));

    // A run written before migration 0019, open, its module uploaded long
    // ago: kept from collection, then ended by a module swapped in.
    store
        .put_module(digest('d').as_str(), b"wasm", 0)
        .await
        .unwrap();
    store
        .own_module("acme", digest('d').as_str())
        .await
        .unwrap();
    let before: RunId = sqlx::query_scalar(
        "INSERT INTO run (job_id, kind, scheduled_at_ms, status, module_digest, created_at_ms) \
         VALUES ($1, 'schedule', 950000, 'pending', $2, 100) RETURNING id",
    )
    .bind(job_id)
    .bind(digest('d').as_str())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(module_of(before).await, digest('d'));
    store.collect_unused_modules(1_000).await.unwrap();
    assert!(
        store.module(digest('d').as_str()).await.unwrap().is_some(),
        "an open run written before names its module in text"
    );
    store
        .finish_run(&RunEnd {
            module_digest: Some(digest('e').as_str().to_owned()),
            ..RunEnd::failed(before, RunOutcome::Failed, "no", 950_100)
        })
        .await
        .unwrap()
        .expect("the run ends");
    assert_eq!(module_of(before).await, digest('e'));
    assert_eq!(stored(before).await.1, Some(vec![0xee; 32]));
}

/// Job rows read through `jobs_by_id` are kept and served again only
/// while the job's revision holds. Every column a job row holds moves the
/// revision (a column added to `job` and left out of migration 0020's
/// trigger fails here), and so do its children; its next fire, read anew
/// each time, and the times it was written do not.
pub(super) async fn job_rows_are_kept_while_their_revision_holds(store: &Store, url: &str) {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    let other = store.insert_job(&job(), 0).await.unwrap();
    let run = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query(sql).bind(id).execute(&pool).await.unwrap();
        }
    };
    let revision = || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT revision FROM job WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let read = || async { store.jobs_by_id(&[id]).await.unwrap().remove(&id) };
    let columns: Vec<String> = sqlx::query_scalar(if url.starts_with("sqlite") {
        "SELECT name FROM pragma_table_info('job')"
    } else {
        "SELECT CAST(column_name AS TEXT) FROM information_schema.columns WHERE table_name = 'job'"
    })
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(columns.len() > 30, "{columns:?}");
    let outside_a_job_row = [
        "id",
        "revision",
        "next_fire_at_ms",
        "created_at_ms",
        "updated_at_ms",
        "pause_until_ms",
    ];
    for column in &columns {
        let before = revision().await;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE job SET {column} = {column} WHERE id = $1"
        )))
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
        let after = revision().await;
        if outside_a_job_row.contains(&column.as_str()) {
            assert_eq!(after, before, "writing {column} moved the revision");
        } else {
            assert!(
                after > before,
                "writing {column} left the revision at {before}"
            );
        }
    }

    // Read once, then served as kept while the revision holds: a change
    // whose revision is put back is not seen...
    assert_eq!(read().await.unwrap().param, "");
    run("UPDATE job SET param = 'behind' WHERE id = $1").await;
    run("UPDATE job SET revision = revision - 1 WHERE id = $1").await;
    assert_eq!(read().await.unwrap().param, "", "served as kept");
    // ...and is once the revision moves.
    run("UPDATE job SET revision = revision + 1 WHERE id = $1").await;
    assert_eq!(read().await.unwrap().param, "behind");
    // The next fire is read with the check, not kept.
    run("UPDATE job SET next_fire_at_ms = 123456 WHERE id = $1").await;
    assert_eq!(read().await.unwrap().next_fire_at_ms, Some(123_456));
    // An update through the store, and children added or taken away alone.
    let updated = JobRow {
        param: "updated".into(),
        children: vec![other],
        ..job()
    };
    assert!(store.update_job(id, &updated, None, 1).await.unwrap());
    let kept = read().await.unwrap();
    assert_eq!(
        (kept.param.as_str(), kept.children),
        ("updated", vec![other])
    );
    run("DELETE FROM job_child WHERE job_id = $1").await;
    assert_eq!(read().await.unwrap().children, []);
    sqlx::query("INSERT INTO job_child (job_id, position, child_id) VALUES ($1, 0, $2)")
        .bind(id)
        .bind(other)
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(read().await.unwrap().children, [other]);
    // A deleted job is not served.
    assert!(store.delete_job(id).await.unwrap());
    assert!(read().await.is_none());
    assert_eq!(
        store
            .jobs_by_id(&[id, other])
            .await
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        [&other]
    );
}

/// Two admins folding the ends of 300 runs into the reports at the same
/// time, a few rows a transaction: each end is counted once.
#[tokio::test]
async fn postgres_admins_folding_together_count_each_end_once() {
    let server = PostgresServer::fresh_database();
    let a = Store::connect(&server.url()).await.unwrap();
    let b = Store::connect(&server.url()).await.unwrap();
    let id = a.insert_job(&job(), 0).await.unwrap();
    for at in 0..300 {
        let run = a.insert_run(&fire(id, at * 1000), 1).await.unwrap();
        let end = if at % 3 == 0 {
            RunEnd::failed(run, RunOutcome::Trap, "no", 2)
        } else {
            RunEnd {
                success: true,
                outcome: RunOutcome::Success,
                code: 200,
                ..RunEnd::failed(run, RunOutcome::Success, "", 2)
            }
        };
        a.finish_run(&end).await.unwrap().unwrap();
    }
    let fold = |store: Store| async move {
        let mut folded = 0;
        loop {
            let batch = store.fold_run_ends(7).await.unwrap();
            folded += batch;
            if batch == 0 {
                return folded;
            }
        }
    };
    let (by_a, by_b) = tokio::join!(fold(a.clone()), fold(b.clone()));
    assert_eq!(by_a + by_b, 300, "a: {by_a}, b: {by_b}");
    let report = b
        .daily_reports("default", "1970-01-01", "1970-01-01")
        .await
        .unwrap();
    assert_eq!(
        report
            .iter()
            .map(|day| (day.success, day.failed))
            .collect::<Vec<_>>(),
        [(200, 100)]
    );
}

on_both_engines! {
    sqlite_state_commits_conflict_and_stops_cancel,
        postgres_state_commits_conflict_and_stops_cancel => state_conflicts_and_cancellation;
}
