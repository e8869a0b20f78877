//! Modules and the console: versions numbered, kept and followed, content collected, the console and schedule records.

use super::*;

/// Module versions: numbered per name, the same content twice is one
/// version, followers move, the newest `keep` stay (and pinned ones).
async fn module_versions(store: &Store) {
    let digest = |c: char| c.to_string().repeat(64).parse::<Digest>().unwrap();
    let follower = store
        .insert_job(
            &JobRow {
                module_name: Some("mod".into()),
                ..job()
            },
            0,
        )
        .await
        .unwrap();
    let pinned = store
        .insert_job(
            &JobRow {
                module_name: Some("mod".into()),
                module_version: Some(1),
                ..job()
            },
            0,
        )
        .await
        .unwrap();
    let push = |d: Digest, labels: Vec<String>| {
        let store = store.clone();
        async move {
            let push = VersionPush {
                tenant: "default",
                name: "mod",
                digest: &d,
                labels: &labels,
                note: "",
                pushed_by: "ada",
            };
            store.add_module_version(&push, 2, 100).await.unwrap()
        }
    };
    assert_eq!(push(digest('1'), vec![]).await.0.version, 1);
    assert_eq!(push(digest('1'), vec![]).await.0.version, 1, "same content");
    assert_eq!(push(digest('2'), vec!["beta".into()]).await.0.version, 2);
    let (third, moved) = push(digest('3'), vec!["beta".into()]).await;
    assert_eq!(third.version, 3);
    assert_eq!(
        moved,
        Moved {
            jobs: 1,
            from: Some(digest('2')),
            groups: vec![job().group_name],
        },
        "the following job moved from the second version's content"
    );
    let versions = store.module_versions("default", "mod").await.unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version, v.labels.clone()))
            .collect::<Vec<_>>(),
        [(3, vec!["beta".to_owned()]), (2, vec![]), (1, vec![])],
        "kept: the newest two and the pinned one; the label moved"
    );
    assert!(
        versions.iter().all(|v| v.pushed_by == "ada"),
        "who pushed each version is kept: {versions:?}"
    );
    assert_eq!(
        store.job(follower).await.unwrap().unwrap().module_digest,
        digest('3')
    );
    assert_eq!(
        store.job(pinned).await.unwrap().unwrap().module_digest,
        digest('a')
    );
    assert!(
        store
            .set_module_label("default", "mod", 1, "stable")
            .await
            .unwrap()
    );
    assert!(
        !store
            .set_module_label("default", "mod", 9, "stable")
            .await
            .unwrap()
    );
    let latest = store.latest_modules(None).await.unwrap();
    assert_eq!(latest.len(), 1);
    assert_eq!((latest[0].0.as_str(), latest[0].1.version), ("default", 3));
    assert!(
        store
            .latest_modules(Some("other"))
            .await
            .unwrap()
            .is_empty()
    );
    store.delete_job(pinned).await.unwrap();
    // A labelled version is kept as a pinned one is: versions 3 (`beta`)
    // and 1 (`stable`, which no job pins any more) outlive the newest two.
    push(digest('d'), vec![]).await;
    push(digest('e'), vec![]).await;
    let kept: Vec<i64> = store
        .module_versions("default", "mod")
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(kept, [5, 4, 3, 1], "the newest two and the labelled ones");
    store.delete_job(follower).await.unwrap();
}

/// Module content is collected once nothing refers to it: not a job, not
/// a kept version, not an open run; and never within its grace after an
/// upload (a second upload of the same bytes restarts it). Its owners go
/// with it.
async fn module_collection(store: &Store) {
    let digest = |c: char| c.to_string().repeat(64).parse::<Digest>().unwrap();
    for c in ['1', '2', '3', '4', '5', '6'] {
        store
            .put_module(digest(c).as_str(), b"wasm", 100)
            .await
            .unwrap();
        store.own_module("acme", digest(c).as_str()).await.unwrap();
    }
    // 2 runs a job; 3 is a kept version; 4 an open run's; 5 was one of an
    // ended run only; 6 was uploaded again later.
    let job = store
        .insert_job(
            &JobRow {
                module_digest: digest('2'),
                ..job()
            },
            0,
        )
        .await
        .unwrap();
    let push = VersionPush {
        tenant: "acme",
        name: "kept",
        digest: &digest('3'),
        labels: &[],
        note: "",
        pushed_by: "",
    };
    store.add_module_version(&push, 5, 100).await.unwrap();
    let open = NewRun {
        module_digest: digest('4'),
        ..fire(job, 1_000)
    };
    store.insert_run(&open, 100).await.unwrap();
    let ended = NewRun {
        module_digest: digest('5'),
        ..fire(job, 2_000)
    };
    let ended = store.insert_run(&ended, 100).await.unwrap();
    store
        .finish_run(&RunEnd::failed(ended, RunOutcome::Failed, "no", 200))
        .await
        .unwrap();
    store
        .put_module(digest('6').as_str(), b"wasm", 5_000)
        .await
        .unwrap();

    assert_eq!(
        store.collect_unused_modules(100).await.unwrap(),
        0,
        "in grace"
    );
    assert_eq!(
        store.collect_unused_modules(1_000).await.unwrap(),
        2,
        "1 and 5"
    );
    for (c, kept) in [
        ('1', false),
        ('2', true),
        ('3', true),
        ('4', true),
        ('5', false),
        ('6', true),
    ] {
        let d = digest(c);
        assert_eq!(
            store.module(d.as_str()).await.unwrap().is_some(),
            kept,
            "{c}"
        );
        assert_eq!(
            store.owns_module("acme", d.as_str()).await.unwrap(),
            kept,
            "owner of {c}"
        );
    }
    assert_eq!(store.collect_unused_modules(1_000).await.unwrap(), 0);
}

/// What the console and the schedule features read and write: counts by
/// hour and status, start lateness, runs in progress, the jobs failing
/// most, a backfill's progress and its runs written once per instant,
/// calendars, a pause and its end.
async fn console_and_schedule_records(store: &Store) {
    let job_id = store.insert_job(&job(), 0).await.unwrap();
    let hour = 3_600_000;
    let mut ends = Vec::new();
    for (n, at) in [hour + 10, hour + 20, 2 * hour + 5].into_iter().enumerate() {
        let id = store.insert_run(&fire(job_id, at), at).await.unwrap();
        ends.push(RunEnd {
            run_id: id,
            success: n != 1,
            outcome: if n == 1 {
                RunOutcome::Failed
            } else {
                RunOutcome::Success
            },
            started_at_ms: Some(at + 7),
            finished_at_ms: at + 9,
            ..RunEnd::default()
        });
    }
    store.finish_runs(&ends).await.unwrap();
    let pending = store
        .insert_run(&fire(job_id, 3 * hour), 3 * hour)
        .await
        .unwrap();
    let buckets = store
        .run_counts_by_bucket(None, hour, 4 * hour, hour)
        .await
        .unwrap();
    let counts: Vec<(i64, i64, i64, i64)> = buckets
        .iter()
        .map(|(bucket, c)| (*bucket, c.success, c.failed, c.running))
        .collect();
    assert_eq!(counts, [(0, 1, 1, 0), (1, 1, 0, 0), (2, 0, 0, 1)]);
    assert!(
        store
            .run_counts_by_bucket(Some("other"), hour, 4 * hour, hour)
            .await
            .unwrap()
            .is_empty()
    );
    let mut late = store.recent_start_lateness(None, 0, 10).await.unwrap();
    late.sort_unstable();
    assert_eq!(late, [7, 7, 7]);
    assert_eq!(store.runs_in_progress(None, 3 * hour).await.unwrap(), 1);
    assert_eq!(store.runs_in_progress(None, 3 * hour - 1).await.unwrap(), 0);
    assert_eq!(
        store.most_failing_jobs(None, 0, 5).await.unwrap(),
        [(job_id, "job".to_owned(), 1)]
    );
    assert!(store.running_runs(job_id).await.unwrap().is_empty());
    store
        .mark_dispatched(pending, "http://e1", 3 * hour)
        .await
        .unwrap();
    let running: Vec<RunId> = store
        .running_runs(job_id)
        .await
        .unwrap()
        .iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(running, [pending]);

    // A backfill: its runs once per instant, its progress, a cancel.
    let backfill = store
        .create_backfill(&cronbox_api::Backfill {
            id: 0,
            tenant: "default".into(),
            job_id,
            from_ms: 0,
            to_ms: 10_000,
            per_second: 2,
            planned: 3,
            written: 0,
            status: "running".into(),
            created_by: "ada".into(),
            created_at_ms: 1,
        })
        .await
        .unwrap();
    let backfilled = NewRun {
        kind: cronbox_protocol::TriggerKind::Backfill,
        ..fire(job_id, 5_000)
    };
    assert!(
        store
            .insert_backfill_run(&backfilled, 2)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        store.insert_backfill_run(&backfilled, 3).await.unwrap(),
        None,
        "once"
    );
    assert!(
        store
            .advance_backfill(backfill.id, 5_000, 1, false)
            .await
            .unwrap()
    );
    assert!(store.cancel_backfill(backfill.id).await.unwrap());
    assert!(
        !store
            .advance_backfill(backfill.id, 9_000, 1, true)
            .await
            .unwrap()
    );
    let read = store.backfill(backfill.id).await.unwrap().unwrap();
    assert_eq!((read.written, read.status.as_str()), (1, "cancelled"));
    assert_eq!(
        store
            .backfills(Some("default"), Some(job_id))
            .await
            .unwrap(),
        [read]
    );
    assert!(
        store
            .backfills(Some("other"), None)
            .await
            .unwrap()
            .is_empty()
    );

    // Calendars, by tenant.
    let calendar = cronbox_api::Calendar {
        tenant: "acme".into(),
        name: "holidays".into(),
        dates: vec!["2030-12-25".into()],
        updated_at_ms: 1,
    };
    store.put_calendar(&calendar).await.unwrap();
    store
        .put_calendar(&cronbox_api::Calendar {
            dates: vec!["2030-12-24".into(), "2030-12-25".into()],
            ..calendar.clone()
        })
        .await
        .unwrap();
    let listed = store.calendars(Some("acme")).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].dates, ["2030-12-24", "2030-12-25"]);
    assert!(store.calendars(Some("default")).await.unwrap().is_empty());
    assert!(store.delete_calendar("acme", "holidays").await.unwrap());
    assert!(!store.delete_calendar("acme", "holidays").await.unwrap());

    // A pause with an end: the job stays started, its record kept until
    // the end passes; a stop clears it.
    let pause = cronbox_api::Pause {
        by: "ada".into(),
        note: "migration".into(),
        paused_at_ms: 10,
        until_ms: Some(100),
    };
    store
        .pause_job(job_id, Some(&pause), Some(160), 10)
        .await
        .unwrap()
        .unwrap();
    let paused = store.job(job_id).await.unwrap().unwrap();
    assert_eq!(
        (paused.enabled, paused.next_fire_at_ms, paused.pause),
        (true, Some(160), Some(pause))
    );
    assert_eq!(store.clear_ended_pauses(99).await.unwrap(), 0);
    assert_eq!(store.clear_ended_pauses(100).await.unwrap(), 1);
    assert_eq!(store.job(job_id).await.unwrap().unwrap().pause, None);
}

on_both_engines! {
    sqlite_unreferenced_module_content_is_collected,
        postgres_unreferenced_module_content_is_collected => module_collection;
    sqlite_module_versions_are_numbered_kept_and_followed,
        postgres_module_versions_are_numbered_kept_and_followed => module_versions;
    sqlite_console_and_schedule_records_are_kept,
        postgres_console_and_schedule_records_are_kept => console_and_schedule_records;
}
