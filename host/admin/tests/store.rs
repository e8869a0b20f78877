//! The store's guarantees on both engines: a real SQLite file and a real
//! PostgreSQL server started by the test.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::HashMap;

use cronbox_admin::store::{
    AlarmState, DayUsage, Digest, DispatchMark, DueJob, JobId, JobRow, Moved, NewRun, RunCharge,
    RunEnd, RunFilter, RunId, RunOutcome, RunStatus, Store, StoreError, TenantUsage, VersionPush,
};
use cronbox_admin::store::{ExecutorLoad, Principal};
use cronbox_api::{Role, User};
use cronbox_tests::PostgresServer;

fn job() -> JobRow {
    JobRow {
        id: JobId(0),
        tenant: "default".into(),
        group_name: "default".into(),
        name: "job".into(),
        module_digest: "a".repeat(64).parse().unwrap(),
        schedule_type: cronbox_admin::schedule::ScheduleType::Cron,
        schedule_conf: "* * * * * ?".into(),
        time_zone: "UTC".into(),
        misfire: cronbox_admin::model::MisfirePolicy::DoNothing,
        misfire_threshold_ms: 5000,
        route: cronbox_admin::routing::RouteStrategy::First,
        block_strategy: cronbox_protocol::BlockStrategy::SerialExecution,
        max_concurrency: 1,
        timeout_ms: 1000,
        fuel: None,
        memory_bytes: 1 << 20,
        retry_count: 0,
        retry_interval_ms: 0,
        children: Vec::new(),
        param: String::new(),
        enabled: true,
        next_fire_at_ms: Some(1_000),
        module_name: None,
        module_version: None,
        alarm_url: String::new(),
        fresh_instance: false,
        config: Default::default(),
        http_allow: vec!["https://api.example.com".to_owned()],
        http_limits: Default::default(),
        secrets: Vec::new(),
        schedule_rules: Default::default(),
        pause: None,
    }
}

fn fire(job_id: JobId, at: i64) -> NewRun {
    NewRun {
        job_id,
        kind: cronbox_protocol::TriggerKind::Schedule,
        scheduled_at_ms: at,
        shard_index: 0,
        shard_total: 1,
        attempt: 0,
        param: String::new(),
        module_digest: "a".repeat(64).parse().unwrap(),
    }
}

/// Claims the jobs due by `until_ms` with the fires and next fire `plan`
/// gives each; answers each claimed job's id and the ids of its written
/// fires (`None`: dropped as a duplicate).
async fn claim(
    store: &Store,
    until_ms: i64,
    plan: impl Fn(&DueJob) -> (Vec<NewRun>, Option<i64>),
) -> Vec<(JobId, Vec<Option<RunId>>)> {
    store
        .claim_due_batch(until_ms, 100, 10, |job| Some(plan(job)))
        .await
        .unwrap()
        .into_iter()
        .map(|claimed| {
            let ids = claimed.written.iter().map(|(id, _)| *id).collect();
            (claimed.job.id, ids)
        })
        .collect()
}

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
    let failed_of = |runs: &[cronbox_admin::store::RunRow]| -> Vec<RunId> {
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

/// The daily reports of 1970-01-01 brought up to date: (success, failed,
/// running, cancelled) of tenant `default`.
async fn first_day_counts(store: &Store) -> Vec<(i64, i64, i64, i64)> {
    store.update_daily_reports().await.unwrap();
    store
        .daily_reports("default", "1970-01-01", "1970-01-02")
        .await
        .unwrap()
        .iter()
        .map(|day| (day.success, day.failed, day.running, day.cancelled))
        .collect()
}

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
    store.delete_job(follower).await.unwrap();
    store.delete_job(pinned).await.unwrap();
}

/// Tenants and tokens: stored by hash, revocable; module ownership.
async fn tenants_and_tokens(store: &Store) {
    let digest = |c: char| c.to_string().repeat(64);
    assert!(store.create_tenant("acme", 1).await.unwrap());
    assert!(!store.create_tenant("acme", 2).await.unwrap());
    let admin = Principal {
        tenant: "acme".to_owned(),
        role: Role::Admin,
        user: None,
    };
    let token = store.add_token(&admin, "ci", "hash-1", 3).await.unwrap();
    assert_eq!(store.token_principal("hash-1").await.unwrap(), Some(admin));
    assert_eq!(
        store.tenants().await.unwrap(),
        [("acme".to_owned(), 1), ("default".to_owned(), 0)]
    );
    assert!(!store.revoke_token("default", token).await.unwrap());
    assert!(store.revoke_token("acme", token).await.unwrap());
    assert_eq!(store.token_principal("hash-1").await.unwrap(), None);
    store.own_module("acme", &digest('1')).await.unwrap();
    assert!(store.owns_module("acme", &digest('1')).await.unwrap());
    assert!(!store.owns_module("default", &digest('1')).await.unwrap());
}

/// Registry: sorted, alive ones only; silent executors forgotten.
async fn registry(store: &Store) {
    store
        .registry_beat("default", "http://b", ExecutorLoad::default(), 100)
        .await
        .unwrap();
    store
        .registry_beat("default", "http://a", ExecutorLoad::default(), 100)
        .await
        .unwrap();
    store
        .registry_beat("default", "http://old", ExecutorLoad::default(), 10)
        .await
        .unwrap();
    assert_eq!(
        store.group_addresses("default", 50).await.unwrap(),
        ["http://a", "http://b"]
    );
    store.registry_remove("default", "http://a").await.unwrap();
    assert_eq!(
        store.group_addresses("default", 50).await.unwrap(),
        ["http://b"]
    );
    assert_eq!(store.forget_silent_executors(50).await.unwrap(), 1);
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

/// Users are unique across tenants; a session is found until it expires
/// or ends; a new password ends the user's sessions; removing a user ends
/// its sessions and revokes its tokens, not others'.
async fn users_and_sessions(store: &Store) {
    let ada = User {
        name: "ada".into(),
        tenant: "acme".into(),
        role: Role::Developer,
        created_at_ms: 1,
    };
    assert!(store.create_user(&ada, "hash-a").await.unwrap());
    let twin = User {
        tenant: "other".into(),
        ..ada.clone()
    };
    assert!(
        !store.create_user(&twin, "hash-b").await.unwrap(),
        "names are global"
    );
    let bob = User {
        name: "bob".into(),
        role: Role::Viewer,
        ..ada.clone()
    };
    assert!(store.create_user(&bob, "hash-b").await.unwrap());
    assert_eq!(
        store.user("ada").await.unwrap().unwrap().password_hash,
        "hash-a"
    );
    assert_eq!(
        store.users(Some("acme")).await.unwrap(),
        [ada.clone(), bob.clone()]
    );
    assert_eq!(store.users(Some("other")).await.unwrap(), []);
    assert_eq!(store.users(None).await.unwrap().len(), 2);

    store
        .open_session("s1", "ada", "csrf-1", 10, 100)
        .await
        .unwrap();
    store
        .open_session("s2", "ada", "csrf-2", 10, 100)
        .await
        .unwrap();
    store
        .open_session("s3", "bob", "csrf-3", 10, 100)
        .await
        .unwrap();
    assert_eq!(
        store.session("s1", 99).await.unwrap(),
        Some((ada.clone(), "csrf-1".to_owned()))
    );
    assert_eq!(store.session("s1", 100).await.unwrap(), None, "expired");
    assert!(store.end_session("s2").await.unwrap());
    assert_eq!(store.session("s2", 50).await.unwrap(), None, "ended");
    assert_eq!(store.set_password("ada", "hash-c").await.unwrap(), Some(1));
    assert_eq!(store.session("s1", 50).await.unwrap(), None);
    assert_eq!(store.set_password("nobody", "x").await.unwrap(), None);

    let as_ada = Principal {
        tenant: "acme".into(),
        role: Role::Viewer,
        user: Some("ada".into()),
    };
    let ada_token = store.add_token(&as_ada, "mine", "t-ada", 20).await.unwrap();
    let as_bob = Principal {
        user: Some("bob".into()),
        ..as_ada.clone()
    };
    store.add_token(&as_bob, "his", "t-bob", 21).await.unwrap();
    assert_eq!(store.tokens("acme", Some("ada")).await.unwrap().len(), 1);
    assert_eq!(store.tokens("acme", None).await.unwrap().len(), 2);
    let owner = store.token_owner("acme", ada_token).await.unwrap().unwrap();
    assert_eq!(owner.user.as_deref(), Some("ada"));
    assert_eq!(store.token_owner("globex", ada_token).await.unwrap(), None);
    assert_eq!(store.remove_user("bob").await.unwrap(), Some((1, 1)));
    assert_eq!(store.token_principal("t-bob").await.unwrap(), None);
    assert_eq!(store.token_principal("t-ada").await.unwrap(), Some(as_ada));
    assert_eq!(store.remove_user("bob").await.unwrap(), None);
    assert_eq!(store.delete_expired_sessions(1_000).await.unwrap(), 0);
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

/// One test per guarantee and engine: a fresh SQLite file, or a fresh
/// PostgreSQL server.
macro_rules! on_both_engines {
    ($($sqlite:ident, $postgres:ident => $check:ident;)*) => {$(
        #[tokio::test]
        async fn $sqlite() {
            let dir = tempfile::tempdir().unwrap();
            $check(&Store::open_sqlite(dir.path()).await.unwrap()).await;
        }

        #[tokio::test]
        async fn $postgres() {
            let server = PostgresServer::start();
            $check(&Store::connect(&server.url()).await.unwrap()).await;
        }
    )*};
}

on_both_engines! {
    sqlite_unreferenced_module_content_is_collected,
        postgres_unreferenced_module_content_is_collected => module_collection;
    sqlite_module_versions_are_numbered_kept_and_followed,
        postgres_module_versions_are_numbered_kept_and_followed => module_versions;
    sqlite_tenant_tokens_are_hashed_and_revocable,
        postgres_tenant_tokens_are_hashed_and_revocable => tenants_and_tokens;
    sqlite_users_sessions_and_their_tokens_end_together,
        postgres_users_sessions_and_their_tokens_end_together => users_and_sessions;
    sqlite_registry_lists_live_executors_in_order,
        postgres_registry_lists_live_executors_in_order => registry;
    sqlite_state_commits_conflict_and_stops_cancel,
        postgres_state_commits_conflict_and_stops_cancel => state_conflicts_and_cancellation;
    sqlite_child_links_are_unique_ordered_and_never_a_cycle,
        postgres_child_links_are_unique_ordered_and_never_a_cycle => child_links;
    sqlite_manual_group_addresses_keep_their_order,
        postgres_manual_group_addresses_keep_their_order => group_addresses;
    sqlite_quotas_are_kept_and_usage_counted,
        postgres_quotas_are_kept_and_usage_counted => quotas_and_usage;
    sqlite_console_and_schedule_records_are_kept,
        postgres_console_and_schedule_records_are_kept => console_and_schedule_records;
}

/// A tenant's own quotas are replaced as a set; its usage is counted from
/// its jobs, module names and bytes, open runs and state (keys and values
/// in bytes, not characters), and per day from what its ended runs added;
/// state that would grow past the quota is not committed.
async fn quotas_and_usage(store: &Store) {
    use cronbox_api::{Quota, QuotaSettings};
    let mut settings = QuotaSettings::default();
    settings.set(Quota::Jobs, Some(3));
    settings.set(Quota::StateBytes, Some(u64::MAX >> 1));
    store.set_tenant_quotas("acme", &settings).await.unwrap();
    assert_eq!(store.tenant_quotas("acme").await.unwrap(), settings);
    settings = QuotaSettings::default();
    settings.set(Quota::Modules, Some(2));
    store.set_tenant_quotas("acme", &settings).await.unwrap();
    assert_eq!(store.tenant_quotas("acme").await.unwrap(), settings);
    assert_eq!(
        store.tenant_quotas("other").await.unwrap(),
        QuotaSettings::default()
    );

    let digest = |c: char| c.to_string().repeat(64).parse::<Digest>().unwrap();
    store
        .put_module(digest('1').as_str(), b"wasm!", 1)
        .await
        .unwrap();
    store
        .own_module("acme", digest('1').as_str())
        .await
        .unwrap();
    for name in ["one", "two"] {
        let push = VersionPush {
            tenant: "acme",
            name,
            digest: &digest('1'),
            labels: &[],
            note: "",
            pushed_by: "",
        };
        store.add_module_version(&push, 5, 1).await.unwrap();
    }
    assert!(store.has_module_name("acme", "one").await.unwrap());
    assert!(!store.has_module_name("other", "one").await.unwrap());
    let acme = JobRow {
        tenant: "acme".into(),
        ..job()
    };
    let first = store.insert_job(&acme, 0).await.unwrap();
    store.insert_job(&acme, 0).await.unwrap();
    store.insert_job(&job(), 0).await.unwrap();
    let run = store.insert_run(&fire(first, 10), 10).await.unwrap();
    assert!(store.mark_dispatched(run, "http://e1", 20).await.unwrap());
    let mut state = HashMap::new();
    state.insert("clé".to_owned(), "värde".to_owned());
    store.replace_job_state(first, &state, 5).await.unwrap();

    let day = 19_000;
    let usage = |tenant: &str, run_ms: i64, log_bytes: i64| DayUsage {
        tenant: tenant.into(),
        day,
        run_ms,
        log_bytes,
    };
    store
        .add_day_usage(&[usage("acme", 100, 1_000), usage("other", 1, 1)])
        .await
        .unwrap();
    store.add_day_usage(&[usage("acme", 50, 24)]).await.unwrap();
    let counted = store.tenant_usage("acme", day).await.unwrap();
    assert_eq!(
        counted,
        TenantUsage {
            jobs: 2,
            modules: 2,
            module_bytes: 5,
            running_runs: 1,
            // "clé" and "värde": 4 and 6 bytes.
            state_bytes: 10,
            run_ms: 150,
            log_bytes: 1_024,
        }
    );
    let all = store.usage_by_tenant(day).await.unwrap();
    assert_eq!(
        store.tenant_run_usage("acme", day).await.unwrap(),
        TenantUsage {
            running_runs: 1,
            run_ms: 150,
            log_bytes: 1_024,
            ..TenantUsage::default()
        }
    );
    assert_eq!(all["acme"], counted);
    assert_eq!((all["other"].run_ms, all["other"].jobs), (1, 0));
    assert_eq!(all["default"].jobs, 1);
    assert_eq!(store.tenant_usage("acme", day + 1).await.unwrap().run_ms, 0);

    // 10 bytes now; replacing "clé" with 7 bytes of value and adding a
    // 1-byte key with a 1-byte value: 4 + 7 + 2 = 13 bytes.
    let mut changes = cronbox_protocol::StateChanges::new();
    changes.insert("clé".into(), Some("1234567".into()));
    changes.insert("k".into(), Some("v".into()));
    let end = |limit: u64| RunEnd {
        run_id: run,
        success: true,
        outcome: RunOutcome::Success,
        code: 200,
        message: "ok".into(),
        log: "[]".into(),
        started_at_ms: Some(25),
        state_changes: changes.clone(),
        finished_at_ms: 30,
        state_quota: Some(("acme".into(), limit)),
        ..RunEnd::default()
    };
    let refused = store.finish_run(&end(12)).await.unwrap().unwrap();
    assert_eq!(
        refused.outcome.map(RunOutcome::as_str),
        Some("quota_exceeded")
    );
    assert_eq!(refused.status, RunStatus::Failed);
    assert!(refused.message.unwrap().contains("13 bytes (limit 12)"));
    assert_eq!(
        store.tenant_usage("acme", day).await.unwrap().state_bytes,
        10
    );
    let run = store.insert_run(&fire(first, 40), 40).await.unwrap();
    let allowed = store
        .finish_run(&RunEnd {
            run_id: run,
            ..end(13)
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(allowed.status, RunStatus::Success);
    assert_eq!(
        store.tenant_usage("acme", day).await.unwrap().state_bytes,
        13
    );

    assert_eq!(store.delete_day_usage_before(day + 1).await.unwrap(), 2);
    assert_eq!(store.tenant_usage("acme", day).await.unwrap().run_ms, 0);

    // Ends charge their tenant's day in the transaction that ends them:
    // each once, however often its result comes.
    let finished_at_ms = day * cronbox_admin::store::DAY_MS + 5;
    let charged = |run_id: RunId, run_ms: i64| RunEnd {
        run_id,
        success: true,
        outcome: RunOutcome::Success,
        code: 200,
        log: "[]".into(),
        finished_at_ms,
        charge: Some(RunCharge {
            run_ms,
            log_bytes: 10,
        }),
        ..RunEnd::default()
    };
    let one = store.insert_run(&fire(first, 50), 50).await.unwrap();
    let two = store.insert_run(&fire(first, 60), 60).await.unwrap();
    let ends = [charged(one, 7), charged(two, 8), charged(one, 100)];
    let ended = store.finish_runs(&ends).await.unwrap();
    assert_eq!(
        ended.iter().map(Option::is_some).collect::<Vec<_>>(),
        [true, true, false],
        "a run named twice ends (and is charged) once"
    );
    let again = store.finish_runs(&ends).await.unwrap();
    assert!(again.iter().all(Option::is_none), "ended already");
    let usage = store.tenant_usage("acme", day).await.unwrap();
    assert_eq!((usage.run_ms, usage.log_bytes), (15, 20));
    assert_eq!(store.tenant_usage("acme", day - 1).await.unwrap().run_ms, 0);
}

/// Children are rows: kept in order, each once, found from the child's
/// side, and a write that would close a cycle is refused inside its own
/// transaction, even when two updates race to close one between them.
async fn child_links(store: &Store) {
    let a = store.insert_job(&job(), 0).await.unwrap();
    let b = store.insert_job(&job(), 0).await.unwrap();
    let c = store.insert_job(&job(), 0).await.unwrap();
    let with_children = |children: Vec<JobId>| JobRow { children, ..job() };
    assert!(
        store
            .update_job(a, &with_children(vec![c, b, c]), None, 1)
            .await
            .unwrap()
    );
    assert_eq!(
        store.job(a).await.unwrap().unwrap().children,
        [c, b],
        "in order, once each"
    );
    let parents: Vec<JobId> = store
        .parents_of(b)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.0)
        .collect();
    assert_eq!(parents, [a]);
    // b -> a would close a -> b -> a: refused, and b keeps no child.
    let refused = store.update_job(b, &with_children(vec![a]), None, 2).await;
    assert!(
        matches!(refused, Err(StoreError::ChildCycle(id)) if id == b),
        "{refused:?}"
    );
    assert!(store.job(b).await.unwrap().unwrap().children.is_empty());
    // Two updates that each add one link of a new cycle, at once: one
    // wins, the other is refused.
    let (d, e) = (
        store.insert_job(&job(), 0).await.unwrap(),
        store.insert_job(&job(), 0).await.unwrap(),
    );
    let (d_to_e, e_to_d) = (with_children(vec![e]), with_children(vec![d]));
    let (first, second) = tokio::join!(
        store.update_job(d, &d_to_e, None, 3),
        store.update_job(e, &e_to_d, None, 3),
    );
    let outcomes = [first.is_ok(), second.is_ok()];
    assert_eq!(
        outcomes.iter().filter(|ok| **ok).count(),
        1,
        "exactly one of two racing links stands: {first:?} {second:?}"
    );
    // A deleted parent takes its links with it.
    assert!(store.delete_job(a).await.unwrap());
    assert!(store.parents_of(b).await.unwrap().is_empty());
}

/// A MANUAL group's addresses come back in the order given, each once.
async fn group_addresses(store: &Store) {
    let given = [
        "http://b:1".to_owned(),
        "http://a:1".to_owned(),
        "http://b:1".to_owned(),
    ];
    store.put_group("pinned", "MANUAL", &given).await.unwrap();
    assert_eq!(
        store.group_addresses("pinned", 0).await.unwrap(),
        ["http://b:1", "http://a:1"]
    );
    store
        .put_group("pinned", "MANUAL", &given[1..2])
        .await
        .unwrap();
    let groups = store.groups().await.unwrap();
    let pinned = groups.iter().find(|group| group.name == "pinned").unwrap();
    assert_eq!(pinned.addresses, ["http://a:1"], "replaced, not added to");
}

/// Applies the migration files of one engine numbered from `from` and
/// below `before`.
async fn migrate(pool: &sqlx::AnyPool, engine: &str, from: &str, before: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(engine);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            from <= name.as_str() && name.as_str() < before
        })
        .collect();
    files.sort();
    for file in files {
        let sql = std::fs::read_to_string(&file).unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(pool)
            .await
            .unwrap();
    }
}

/// Migration 0006 turns comma-joined lists into rows and loses nothing:
/// each element once, in order, spaces trimmed, empty lists empty.
async fn lists_become_rows(pool: &sqlx::AnyPool, engine: &str) {
    migrate(pool, engine, "0001", "0006").await;
    sqlx::raw_sql(
        "INSERT INTO job (group_name, name, module_digest, schedule_type, children, created_at_ms, \
         updated_at_ms) VALUES ('default', 'p', 'd', 'NONE', '3, 2,3,', 0, 0), \
         ('default', 'q', 'd', 'NONE', '', 0, 0); \
         INSERT INTO module_version (tenant, name, version, digest, labels, created_at_ms) \
         VALUES ('default', 'm', 1, 'd1', 'stable,canary', 0), ('default', 'm', 2, 'd2', '', 0); \
         INSERT INTO executor_group (name, address_type, addresses) \
         VALUES ('pinned', 'MANUAL', 'http://b:1,http://a:1');",
    )
    .execute(pool)
    .await
    .unwrap();
    migrate(pool, engine, "0006", "0007").await;
    let rows = |sql: &'static str| async move {
        use sqlx::Row as _;
        sqlx::query(sql)
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                format!(
                    "{}:{}",
                    row.try_get::<String, _>(0).unwrap(),
                    row.try_get::<String, _>(1).unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        rows(
            "SELECT CAST(job_id AS TEXT), CAST(child_id AS TEXT) FROM job_child ORDER BY position"
        )
        .await,
        ["1:3", "1:2"]
    );
    assert_eq!(
        rows("SELECT label, CAST(version AS TEXT) FROM module_label ORDER BY label").await,
        ["canary:1", "stable:1"]
    );
    assert_eq!(
        rows(
            "SELECT g.name, a.address FROM group_address a \
             JOIN executor_group g ON g.id = a.group_id ORDER BY a.position"
        )
        .await,
        ["pinned:http://b:1", "pinned:http://a:1"]
    );
}

/// Migration 0021 keeps every tenant's jobs in the groups they use: each
/// (group, tenant) of a job outside the operator's tenant is granted, and
/// the group `default` is shared with every tenant.
async fn groups_are_granted_to_the_tenants_using_them(pool: &sqlx::AnyPool, engine: &str) {
    migrate(pool, engine, "0001", "0021").await;
    sqlx::raw_sql(
        "INSERT INTO job (tenant, group_name, name, module_digest, schedule_type, created_at_ms, \
         updated_at_ms) VALUES ('acme', 'etl', 'a', 'd', 'NONE', 0, 0), \
         ('acme', 'etl', 'b', 'd', 'NONE', 0, 0), ('default', 'ops', 'c', 'd', 'NONE', 0, 0), \
         ('globex', 'default', 'd', 'd', 'NONE', 0, 0);",
    )
    .execute(pool)
    .await
    .unwrap();
    migrate(pool, engine, "0021", "0022").await;
    use sqlx::Row as _;
    let grants: Vec<String> =
        sqlx::query("SELECT group_name, tenant FROM group_tenant ORDER BY group_name, tenant")
            .fetch_all(pool)
            .await
            .unwrap()
            .iter()
            .map(|row| {
                format!(
                    "{}:{}",
                    row.try_get::<String, _>(0).unwrap(),
                    row.try_get::<String, _>(1).unwrap()
                )
            })
            .collect();
    assert_eq!(grants, ["default:*", "default:globex", "etl:acme"]);
}

#[tokio::test]
async fn sqlite_groups_are_granted_in_migration_21() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    groups_are_granted_to_the_tenants_using_them(&pool, "sqlite").await;
}

#[tokio::test]
async fn postgres_groups_are_granted_in_migration_21() {
    sqlx::any::install_default_drivers();
    let server = PostgresServer::start();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    groups_are_granted_to_the_tenants_using_them(&pool, "postgres").await;
}

#[tokio::test]
async fn sqlite_lists_become_rows_in_migration_6() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    lists_become_rows(&sqlx::AnyPool::connect(&url).await.unwrap(), "sqlite").await;
}

/// The SQLite linked in is built as `.cargo/config.toml` asks: without
/// its memory statistics (with them, every allocation and free of every
/// connection takes one process-wide lock, which held firing back;
/// BENCHMARKS.md's history, "SQLite's allocation lock"), and with statement
/// journals kept in memory up to 32 MiB (past SQLite's 64 KiB, claims and
/// run ends wrote theirs to files; "Statement journals in memory").
#[tokio::test]
async fn sqlite_is_built_with_the_workspace_flags() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("any.db").display());
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let options: Vec<String> =
        sqlx::query_scalar("SELECT compile_options FROM pragma_compile_options")
            .fetch_all(&pool)
            .await
            .unwrap();
    for wanted in ["DEFAULT_MEMSTATUS=0", "STMTJRNL_SPILL=33554432"] {
        assert!(
            options.iter().any(|option| option == wanted),
            "{wanted} not in {options:?}"
        );
    }
}

#[tokio::test]
async fn postgres_lists_become_rows_in_migration_6() {
    sqlx::any::install_default_drivers();
    let server = PostgresServer::start();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    lists_become_rows(&pool, "postgres").await;
}

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

/// A guest's message or state holding U+0000 (which PostgreSQL cannot store
/// as text) ends its own run, not the write of every run ended with it: the
/// message is kept with U+FFFD in its place, state with it fails its run.
async fn results_holding_nul(store: &Store) {
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
async fn marks_written_with_ends(store: &Store, url: &str) {
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
async fn runs_name_their_module_in_bytes(store: &Store, url: &str) {
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
async fn job_rows_are_kept_while_their_revision_holds(store: &Store, url: &str) {
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
    let server = PostgresServer::start();
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

/// Two admins folding the ends of 300 runs into the reports at the same
/// time, a few rows a transaction: each end is counted once.
#[tokio::test]
async fn postgres_admins_folding_together_count_each_end_once() {
    let server = PostgresServer::start();
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

#[tokio::test]
async fn a_bad_database_url_is_refused_clearly() {
    let error = Store::connect("mysql://nope").await.unwrap_err();
    assert!(
        error.to_string().contains("unsupported database URL"),
        "{error}"
    );
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
    let orphan_ids = |runs: Vec<cronbox_admin::store::RunRow>| {
        runs.iter().map(|r| r.id).filter(|r| *r == run).count()
    };
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

/// Each table's columns, with their types in a common vocabulary (both
/// engines' integer types are `integer`, text is `text`, bytes `bytes`),
/// and whether each may be NULL; migration bookkeeping left out.
type Schema = std::collections::BTreeMap<String, Vec<(String, &'static str, bool)>>;

fn common_type(declared: &str) -> &'static str {
    match declared.to_ascii_lowercase().as_str() {
        "integer" | "bigint" | "int8" => "integer",
        "text" => "text",
        "blob" | "bytea" => "bytes",
        other => panic!("a column type the schemas should not use: {other}"),
    }
}

async fn sqlite_schema(url: &str) -> Schema {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_sqlx%' \
         AND name NOT LIKE 'job_name_search%'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for table in tables {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT name, type, \"notnull\" AS required, pk FROM pragma_table_info('{table}')"
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        let mut columns: Vec<(String, &'static str, bool)> = rows
            .iter()
            .map(|row| {
                use sqlx::Row as _;
                let declared: String = row.try_get("type").unwrap();
                let required: i64 = row.try_get("required").unwrap();
                let key: i64 = row.try_get("pk").unwrap();
                (
                    row.try_get("name").unwrap(),
                    common_type(&declared),
                    required == 0 && key == 0,
                )
            })
            .collect();
        columns.sort();
        schema.insert(table, columns);
    }
    schema
}

async fn postgres_schema(url: &str) -> Schema {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let rows = sqlx::query(
        "SELECT table_name::text AS table_name, column_name::text AS column_name, \
         data_type::text AS data_type, is_nullable::text AS is_nullable \
         FROM information_schema.columns WHERE table_schema = 'public' \
         AND table_name NOT LIKE '_sqlx%' AND table_name NOT IN \
         (SELECT relname FROM pg_class WHERE relispartition)",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut schema = Schema::new();
    for row in &rows {
        use sqlx::Row as _;
        let data_type: String = row.try_get("data_type").unwrap();
        let nullable: String = row.try_get("is_nullable").unwrap();
        schema
            .entry(row.try_get("table_name").unwrap())
            .or_default()
            .push((
                row.try_get("column_name").unwrap(),
                common_type(&data_type),
                nullable == "YES",
            ));
    }
    for columns in schema.values_mut() {
        columns.sort();
    }
    schema
}

/// The migrations of the two engines build the same tables, columns,
/// column kinds and nullability (PostgreSQL's run partitions aside: the
/// partitioned table is the one compared) (but SQLite's index of job names for
/// searches, an FTS5 table: PostgreSQL's is an index on the job table).
#[tokio::test]
async fn sqlite_and_postgres_schemas_are_the_same() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let url = format!("sqlite://{}", dir.path().join("cronbox.db").display());
    let sqlite = sqlite_schema(&url).await;
    drop(store);
    let server = PostgresServer::start();
    let _store = Store::connect(&server.url()).await.unwrap();
    let postgres = postgres_schema(&server.url()).await;
    assert!(
        sqlite["job"].contains(&("fresh_instance".to_owned(), "integer", false))
            && sqlite["job"].contains(&("fuel".to_owned(), "integer", true))
            && sqlite["module"].contains(&("content".to_owned(), "bytes", false)),
        "{:?}",
        sqlite["job"]
    );
    assert_eq!(
        sqlite.keys().collect::<Vec<_>>(),
        postgres.keys().collect::<Vec<_>>(),
        "the same tables"
    );
    for (table, columns) in &sqlite {
        assert_eq!(columns, &postgres[table], "columns of {table}");
    }
    // The indexes the migrations create by name (not the ones each engine
    // makes for keys and unique constraints).
    let sqlite_pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let mut sqlite_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
    )
    .fetch_all(&sqlite_pool)
    .await
    .unwrap();
    let postgres_pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    let mut postgres_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' \
         AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key' \
         AND tablename NOT IN (SELECT relname FROM pg_class WHERE relispartition)",
    )
    .fetch_all(&postgres_pool)
    .await
    .unwrap();
    sqlite_indexes.sort();
    postgres_indexes.sort();
    // Job names' trigrams: an index on PostgreSQL, a table on SQLite.
    let trigrams = postgres_indexes
        .iter()
        .position(|name| name == "job_name_trigrams")
        .expect("pg_trgm is there and the index made");
    postgres_indexes.remove(trigrams);
    assert!(
        sqlite_indexes.contains(&"run_by_tenant".to_owned()),
        "{sqlite_indexes:?}"
    );
    assert_eq!(sqlite_indexes, postgres_indexes, "the same indexes");

    // A tenant's run listing reads its page through the tenant index; the
    // partial indexes of open runs and alarms to send serve their queries,
    // whose parameters are bound.
    for (query, index) in [
        (
            "SELECT id FROM run WHERE tenant = $1 ORDER BY id DESC LIMIT $2",
            "run_by_tenant",
        ),
        (
            "SELECT id FROM run WHERE status IN ('pending', 'dispatched') AND status = $1 \
             AND lease_until_ms < $2 ORDER BY scheduled_at_ms LIMIT 10",
            "run_by_status",
        ),
        (
            "SELECT id FROM run WHERE job_id = $2 AND status IN ('pending', 'dispatched') \
             AND status = $1",
            "run_pending_by_job",
        ),
        (
            "SELECT id FROM run WHERE alarm_status IN ('due', 'sending') \
             AND alarm_status = $1 ORDER BY id LIMIT $2",
            "run_alarms",
        ),
    ] {
        let plan: Vec<String> =
            sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {query}")))
                .bind("pending")
                .bind(5_i64)
                .fetch_all(&sqlite_pool)
                .await
                .unwrap()
                .iter()
                .map(|row| {
                    use sqlx::Row as _;
                    row.try_get::<String, _>("detail").unwrap()
                })
                .collect();
        assert!(
            plan.iter().any(|step| step.contains(index)),
            "{query}: {plan:?}"
        );
    }
}

/// Migration 0018 partitions the run table without copying it: the runs
/// written before become its first partition, ids carry on after theirs,
/// a fire written before is still written only once, and an ended run
/// still leaves its row for the daily reports.
#[tokio::test]
async fn postgres_runs_written_before_partitioning_are_kept_and_still_unique() {
    sqlx::any::install_default_drivers();
    let server = PostgresServer::start();
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    migrate(&pool, "postgres", "0001", "0018").await;
    sqlx::raw_sql(
        "INSERT INTO job (group_name, name, module_digest, schedule_type, created_at_ms, \
         updated_at_ms) VALUES ('default', 'p', 'd', 'NONE', 0, 0); \
         INSERT INTO run (id, job_id, kind, scheduled_at_ms, status, module_digest, created_at_ms) \
         VALUES (41, 1, 'schedule', 1000, 'success', 'd', 1000), \
                (42, 1, 'schedule', 2000, 'pending', 'd', 2000);",
    )
    .execute(&pool)
    .await
    .unwrap();
    migrate(&pool, "postgres", "0018", "0019").await;
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        count("SELECT COUNT(*) FROM run_before_partitions").await,
        2,
        "the runs written before are its first partition"
    );
    let insert = "INSERT INTO run (job_id, kind, scheduled_at_ms, status, module_digest, \
                  created_at_ms) VALUES (1, 'schedule', $1, $2, 'd', $1) \
                  ON CONFLICT DO NOTHING RETURNING id";
    let written = |at: i64, status: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(insert)
                .bind(at)
                .bind(status)
                .fetch_optional(&pool)
                .await
                .unwrap()
        }
    };
    assert_eq!(
        written(2000, "pending").await,
        None,
        "a fire is written once"
    );
    let later = 4_000_000_000_000_i64; // 2096: the default partition's
    // (The fire refused as a duplicate took an id too.)
    let id = written(later, "success").await.unwrap();
    assert!(id > 42, "ids carry on after the old runs': {id}");
    assert_eq!(count("SELECT COUNT(*) FROM run_default").await, 1);
    assert_eq!(
        count("SELECT COUNT(*) FROM run_end WHERE status = 'success' AND day = '2096-10-02'").await,
        1,
        "a run written ended is counted for the reports"
    );
    sqlx::query("UPDATE run SET status = 'failed' WHERE id = 42")
        .execute(&pool)
        .await
        .unwrap();
    assert_eq!(
        count("SELECT COUNT(*) FROM run_end WHERE status = 'failed'").await,
        1,
        "an old run that ends is counted for the reports"
    );
}

/// On PostgreSQL retention drops whole days: housekeeping makes each
/// day's partition ahead, and drops one whose runs have all ended and were
/// all written before the retention's cutoff. A day holding an open run,
/// or a run written late (a backfill), is kept; the daily reports do not
/// change; runs of a day without a partition go to the default one.
#[tokio::test]
async fn postgres_run_partitions_are_made_ahead_and_dropped_whole() {
    use cronbox_admin::store::DAY_MS;
    let server = PostgresServer::start();
    let store = Store::connect(&server.url()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    // Days after the end of the first partition (the day after today).
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        / DAY_MS;
    let first = today + 10;
    let at = |day: i64, hour: i64| (first + day) * DAY_MS + hour * 3_600_000;
    let made = store.maintain_run_partitions(at(0, 1), 3, 0).await.unwrap();
    assert_eq!(made.created.len(), 4, "{made:?}");
    assert!(made.dropped.is_empty(), "{made:?}");
    let again = store.maintain_run_partitions(at(0, 2), 3, 0).await.unwrap();
    assert!(
        again.created.is_empty() && again.dropped.is_empty(),
        "{again:?}"
    );

    // Day 0: two ended runs. Day 1: one ended, one still open. Day 2: one
    // written on day 30 (late). Day 3: none. Day 5: no partition.
    let mut ended = Vec::new();
    for (day, created_day) in [(0, 0), (0, 0), (1, 1), (2, 30)] {
        let run = store
            .insert_run(&fire(id, at(day, ended.len() as i64)), at(created_day, 0))
            .await
            .unwrap();
        store
            .finish_run(&RunEnd::failed(
                run,
                RunOutcome::Failed,
                "no",
                at(created_day, 5),
            ))
            .await
            .unwrap()
            .unwrap();
        ended.push(run);
    }
    let open = store
        .insert_run(&fire(id, at(1, 9)), at(1, 9))
        .await
        .unwrap();
    let unpartitioned = store
        .insert_run(&fire(id, at(5, 0)), at(5, 0))
        .await
        .unwrap();
    let partition_of = |run: RunId| {
        let url = server.url();
        async move {
            let pool = sqlx::AnyPool::connect(&url).await.unwrap();
            sqlx::query_scalar::<_, String>(
                "SELECT tableoid::regclass::text FROM run WHERE id = $1",
            )
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(partition_of(ended[0]).await, made.created[0]);
    assert_eq!(partition_of(open).await, made.created[1]);
    assert_eq!(partition_of(unpartitioned).await, "run_default");
    store.update_daily_reports().await.unwrap();
    let reports = store
        .daily_reports("default", "1970-01-01", "2100-01-01")
        .await
        .unwrap();
    assert_eq!(
        reports.iter().map(|report| report.failed).sum::<i64>(),
        4,
        "{reports:?}"
    );

    // An update by run id that names the range of its runs' scheduled
    // times (as marks and ends do when they know them) visits only the
    // partitions of that range.
    let pool = sqlx::AnyPool::connect(&server.url()).await.unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN UPDATE run SET status = status WHERE id IN ($1) \
         AND scheduled_at_ms BETWEEN $2 AND $3",
    )
    .bind(open)
    .bind(at(1, 9))
    .bind(at(1, 9))
    .fetch_all(&pool)
    .await
    .unwrap();
    let visited: Vec<&String> = plan
        .iter()
        .filter(|line| line.contains("Update on run_"))
        .collect();
    assert!(
        visited.len() == 1 && visited[0].contains(&made.created[1]),
        "{plan:#?}"
    );

    // Day 40, a retention of 10 days: days 0 to 3 are past it, but the
    // run written on day 30 is not.
    let changes = store
        .maintain_run_partitions(at(40, 0), 3, at(30, 0))
        .await
        .unwrap();
    let name = |day: usize| made.created[day].clone();
    let mut dropped = changes.dropped.clone();
    dropped.sort();
    assert_eq!(
        dropped,
        ["run_before_partitions".to_owned(), name(0), name(3)],
        "the day of ended runs, the empty day and the (empty) runs from \
         before partitioning"
    );
    assert_eq!(changes.created.len(), 4, "days 40 to 43: {changes:?}");
    assert_eq!(store.run(ended[0]).await.unwrap(), None);
    assert_eq!(store.run(ended[1]).await.unwrap(), None);
    for kept in [ended[2], ended[3], open, unpartitioned] {
        assert!(store.run(kept).await.unwrap().is_some(), "run {kept:?}");
    }
    let names: Vec<String> = store
        .run_partitions()
        .await
        .unwrap()
        .into_iter()
        .map(|partition| partition.name)
        .collect();
    assert!(
        names.contains(&name(1)) && names.contains(&name(2)) && !names.contains(&name(0)),
        "{names:?}"
    );
    store.update_daily_reports().await.unwrap();
    assert_eq!(
        store
            .daily_reports("default", "1970-01-01", "2100-01-01")
            .await
            .unwrap(),
        reports,
        "the reports count the dropped runs still"
    );

    // Once the open run ends and the late run has aged out, their days go.
    store
        .finish_run(&RunEnd::failed(open, RunOutcome::Failed, "no", at(40, 1)))
        .await
        .unwrap()
        .unwrap();
    let changes = store
        .maintain_run_partitions(at(41, 0), 3, at(30, 0))
        .await
        .unwrap();
    assert_eq!(changes.dropped, vec![name(1)], "{changes:?}");
    let changes = store
        .maintain_run_partitions(at(41, 0), 3, at(30, 0) + 1)
        .await
        .unwrap();
    assert_eq!(changes.dropped, vec![name(2)], "{changes:?}");

    // A day detached by an admin that stopped before deleting it is
    // deleted by the next pass; nothing else is touched.
    sqlx::raw_sql(
        "CREATE TABLE run_d19990101 (id BIGINT); CREATE TABLE run_dusk (id BIGINT); \
         CREATE TABLE rundown (id BIGINT)",
    )
    .execute(&pool)
    .await
    .unwrap();
    store
        .maintain_run_partitions(at(41, 0), 0, at(30, 0) + 1)
        .await
        .unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT relname::text FROM pg_class WHERE relkind = 'r' AND NOT relispartition \
         AND relname LIKE 'run%' ORDER BY relname",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(tables, ["run_dusk", "run_end", "rundown"], "{tables:?}");
}

/// SQLite's log starts over while writes never pause: checkpointed only
/// from a reader, beside a writer that always had a transaction going, it
/// was never whole in the database when a transaction began, so SQLite
/// never went back to its start and it grew by every write (5.7 GB in 80 s
/// of firing at 8,000 runs/s). Here one task writes runs back to back
/// while the test checkpoints after every [`WRITES_PER_CHECKPOINT`] of
/// them; the log must stay a few checkpoints' worth, not all the writes.
#[tokio::test]
async fn sqlite_log_starts_over_under_writes_that_never_pause() {
    const WRITES: usize = 1_600;
    const WRITES_PER_CHECKPOINT: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    let written = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let writer = {
        let (store, written) = (store.clone(), written.clone());
        tokio::spawn(async move {
            for at in 0..WRITES as i64 {
                let run = NewRun {
                    param: "p".repeat(8 << 10),
                    ..fire(id, at)
                };
                store.insert_run(&run, at).await.unwrap();
                written.add_permits(1);
            }
        })
    };
    for _ in 0..WRITES / WRITES_PER_CHECKPOINT {
        written
            .acquire_many(WRITES_PER_CHECKPOINT as u32)
            .await
            .unwrap()
            .forget();
        store.checkpoint().await.unwrap();
    }
    writer.await.unwrap();
    let log = std::fs::metadata(dir.path().join("cronbox.db-wal"))
        .unwrap()
        .len();
    // Each write is at least eight pages of the log (the run, its 8 KiB
    // param's overflow pages, the run table's indexes; about twelve
    // measured): all of them, 77 MB here without a restart, would be over
    // 8 * WRITES pages. With restarts the log holds about one
    // checkpoint's interval, 2.5 MB on a quiet machine; on a loaded one a
    // restart can miss several checkpoints (a log of 25 MB was seen with
    // one every 100 writes), so the bound is half the least a log that
    // never restarted could be.
    let all_writes = 8 * 4096 * WRITES as u64;
    assert!(
        log < all_writes / 2,
        "the log is {log} bytes after {WRITES} writes ({all_writes} bytes or more without a restart)"
    );
}

/// The writer never checkpoints SQLite's log (a pause of every write at
/// rate); the store's checkpointer copies it into the database beside it.
#[tokio::test]
async fn sqlite_log_is_checkpointed_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(dir.path()).await.unwrap();
    let id = store.insert_job(&job(), 0).await.unwrap();
    let database = dir.path().join("cronbox.db");
    let before = std::fs::metadata(&database).unwrap().len();
    // About 8 MiB of runs: twice the log SQLite's writer would have
    // checkpointed by itself.
    for at in 0..1_000 {
        let run = NewRun {
            param: "p".repeat(8 << 10),
            ..fire(id, at)
        };
        store.insert_run(&run, at).await.unwrap();
    }
    cronbox_tests::until("the log is copied into the database", || async {
        let size = std::fs::metadata(&database).ok()?.len();
        (size >= before + (8 << 20)).then_some(())
    })
    .await;
}

/// The admin's data directory is made 0700 and its database files 0600
/// (they hold sealed secrets, token and password hashes); files left
/// readable by an earlier version are tightened at the next start.
#[tokio::test]
async fn the_data_directory_and_database_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let parent = tempfile::tempdir().unwrap();
    let data = parent.path().join("cronbox-data");
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    let store = Store::open_sqlite(&data).await.unwrap();
    store.ping().await.unwrap();
    assert_eq!(mode(&data), 0o700);
    for file in [
        "cronbox.db",
        "cronbox.db-wal",
        "cronbox.db-shm",
        "admin.lock",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }

    // An earlier version's world-readable files.
    let older = parent.path().join("older");
    std::fs::create_dir(&older).unwrap();
    for file in ["cronbox.db", "cronbox.db-wal"] {
        std::fs::write(older.join(file), b"").unwrap();
        std::fs::set_permissions(older.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let store = Store::open_sqlite(&older).await.unwrap();
    store.ping().await.unwrap();
    for file in ["cronbox.db", "cronbox.db-wal", "cronbox.db-shm"] {
        assert_eq!(mode(&older.join(file)), 0o600, "{file} tightened");
    }
}
