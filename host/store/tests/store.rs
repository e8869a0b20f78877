//! The store's guarantees on both engines: a real SQLite file and a real
//! PostgreSQL server started by the test.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::HashMap;

use cronbox_api::{Role, User};
use cronbox_store::{
    AlarmState, DayUsage, Digest, DispatchMark, DueJob, JobId, JobRow, Moved, NewRun, RunCharge,
    RunEnd, RunFilter, RunId, RunOutcome, RunStatus, Store, StoreError, TenantUsage, VersionPush,
};
use cronbox_store::{ExecutorLoad, Principal};
use cronbox_tests::PostgresServer;

fn job() -> JobRow {
    JobRow {
        id: JobId(0),
        tenant: "default".into(),
        group_name: "default".into(),
        name: "job".into(),
        module_digest: "a".repeat(64).parse().unwrap(),
        schedule_type: cronbox_schedule::ScheduleType::Cron,
        schedule_conf: "* * * * * ?".into(),
        time_zone: "UTC".into(),
        misfire: cronbox_api::MisfirePolicy::DoNothing,
        misfire_threshold_ms: 5000,
        route: cronbox_api::RouteStrategy::First,
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
        executor_handler: None,
        xxl_job_id: None,
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
    let claim = store.claim_due(until_ms, 100).await.unwrap();
    let plans = claim.jobs().iter().map(|job| Some(plan(job))).collect();
    claim
        .write(plans, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|claimed| {
            let ids = claimed.written.iter().map(|(id, _)| *id).collect();
            (claimed.job.id, ids)
        })
        .collect()
}

/// One test per guarantee and engine: a fresh SQLite file, or a fresh
/// database on the test process's PostgreSQL server.
macro_rules! on_both_engines {
    ($($sqlite:ident, $postgres:ident => $check:ident;)*) => {$(
        #[tokio::test]
        async fn $sqlite() {
            let dir = tempfile::tempdir().unwrap();
            $check(&Store::open_sqlite(dir.path()).await.unwrap()).await;
        }

        #[tokio::test]
        async fn $postgres() {
            let server = PostgresServer::fresh_database();
            $check(&Store::connect(&server.url()).await.unwrap()).await;
        }
    )*};
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

#[path = "store/ends.rs"]
mod ends;
#[path = "store/modules.rs"]
mod modules;
#[path = "store/runs.rs"]
mod runs;
#[path = "store/schema.rs"]
mod schema;
#[path = "store/sqlite.rs"]
mod sqlite;
#[path = "store/tenancy.rs"]
mod tenancy;
#[path = "store/trust.rs"]
mod trust;
#[path = "store/workflows.rs"]
mod workflows;
