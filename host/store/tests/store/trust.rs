//! The records trust between machines and people rests on, on both
//! engines: the audit log (appended, paged and filtered, deleted past its
//! retention), enrolled executors' credentials (looked up by hash, rotated
//! with an overlap, revoked with their registrations) and the kill marks
//! of legacy runs.

use std::collections::HashSet;

use cronbox_store::{AuditFilter, NewAuditEntry, RegisteredWith};
use serde_json::json;

use super::*;

fn entry(at_ms: i64, tenant: &str, actor: &str, action: &str, status: u16) -> NewAuditEntry {
    NewAuditEntry {
        id: 0,
        at_ms,
        tenant: tenant.to_owned(),
        actor: actor.to_owned(),
        role: Some(Role::Admin),
        token_id: None,
        action: action.to_owned(),
        target: "/api/v1/x".to_owned(),
        status,
        outcome: String::new(),
        address: Some("127.0.0.1".to_owned()),
        user_agent: None,
        detail: None,
    }
}

async fn audit_log(store: &Store) {
    store
        .append_audit(&entry(100, "acme", "ana", "POST /api/v1/session", 401))
        .await
        .unwrap();
    let changed = NewAuditEntry {
        detail: Some(json!({ "changed": { "param": { "from": "", "to": "x" } } })),
        ..entry(200, "acme", "ana", "PUT /api/v1/jobs/{id}", 200)
    };
    store.append_audit(&changed).await.unwrap();
    store
        .append_audit(&entry(
            300,
            "default",
            "operator token",
            "POST /api/v1/tenants",
            201,
        ))
        .await
        .unwrap();
    let page = |filter: AuditFilter| async move {
        store
            .audit_page(&AuditFilter {
                limit: filter.limit.max(1),
                ..filter
            })
            .await
            .unwrap()
    };
    let every = page(AuditFilter {
        limit: 10,
        ..AuditFilter::default()
    })
    .await;
    let ats: Vec<i64> = every.iter().map(|entry| entry.at_ms).collect();
    assert_eq!(ats, [300, 200, 100], "newest first");
    assert_eq!(every[1].detail, changed.detail);
    assert_eq!(every[2].outcome, "refused");
    assert_eq!(every[1].role, Some(Role::Admin));
    let acme = page(AuditFilter {
        tenant: Some("acme".to_owned()),
        limit: 10,
        ..AuditFilter::default()
    })
    .await;
    assert_eq!(acme.len(), 2);
    let jobs = page(AuditFilter {
        action: Some("jobs".to_owned()),
        limit: 10,
        ..AuditFilter::default()
    })
    .await;
    assert_eq!(jobs.len(), 1);
    let older = page(AuditFilter {
        actor: Some("ana".to_owned()),
        before_id: Some(every[1].id),
        limit: 10,
        ..AuditFilter::default()
    })
    .await;
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].at_ms, 100);
    let window = page(AuditFilter {
        from_ms: Some(150),
        to_ms: Some(250),
        limit: 10,
        ..AuditFilter::default()
    })
    .await;
    assert_eq!(window.len(), 1);
    assert_eq!(store.delete_audit_before(250).await.unwrap(), 2);
    let left = page(AuditFilter {
        limit: 10,
        ..AuditFilter::default()
    })
    .await;
    assert_eq!(left.len(), 1);
}

async fn enrolled_executors(store: &Store) {
    let groups = vec!["blue".to_owned()];
    let id = store
        .add_executor_credential("host-1", &groups, "hash-1", 10)
        .await
        .unwrap();
    let found = store
        .enrolled_executor("hash-1", 20)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((found.id, found.groups.clone()), (id, groups.clone()));
    assert!(
        store
            .enrolled_executor("hash-x", 20)
            .await
            .unwrap()
            .is_none()
    );

    // A rotation: the old hash works until the overlap ends.
    let rotated = store
        .rotate_executor_credential(id, "hash-2", 100, 30)
        .await
        .unwrap();
    assert_eq!(rotated, Some(("host-1".to_owned(), groups.clone())));
    assert!(
        store
            .enrolled_executor("hash-1", 99)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store
            .enrolled_executor("hash-1", 100)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .enrolled_executor("hash-2", 100)
            .await
            .unwrap()
            .is_some()
    );

    // Its registration, its proof, and the modules its groups run.
    let with = RegisteredWith {
        credential_id: Some(id),
        admin_proof: Some("proof-1".to_owned()),
    };
    store
        .registry_beat("blue", "http://e:1", ExecutorLoad::default(), &with, 40)
        .await
        .unwrap();
    assert_eq!(
        store.admin_proof_of("http://e:1").await.unwrap().as_deref(),
        Some("proof-1")
    );
    assert_eq!(
        store.address_credentials("http://e:1", 0).await.unwrap(),
        [Some(id)]
    );
    let digest: Digest = "a".repeat(64).parse().unwrap();
    store
        .insert_job(
            &JobRow {
                group_name: "blue".to_owned(),
                ..job()
            },
            0,
        )
        .await
        .unwrap();
    assert!(store.module_runs_in_groups(&digest, &groups).await.unwrap());
    let red = ["red".to_owned()];
    assert!(!store.module_runs_in_groups(&digest, &red).await.unwrap());
    let listed = store.executor_credentials().await.unwrap();
    assert_eq!(listed[0].registered, ["http://e:1"]);

    // Revoked: no hash works, its registrations are gone.
    assert_eq!(
        store.revoke_executor_credential(id, 60).await.unwrap(),
        Some(1)
    );
    assert!(
        store
            .enrolled_executor("hash-2", 70)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.admin_proof_of("http://e:1").await.unwrap().is_none());
    assert_eq!(
        store
            .rotate_executor_credential(id, "hash-3", 200, 70)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.revoke_executor_credential(id + 99, 70).await.unwrap(),
        None
    );
}

async fn legacy_kill_marks(store: &Store) {
    store.mark_legacy_kill(RunId(5), 1).await.unwrap();
    store.mark_legacy_kill(RunId(5), 2).await.unwrap();
    let marked = store.legacy_kills(&[RunId(5), RunId(6)]).await.unwrap();
    assert_eq!(marked, HashSet::from([RunId(5)]));
    store.forget_legacy_kill(RunId(5)).await.unwrap();
    assert!(store.legacy_kills(&[RunId(5)]).await.unwrap().is_empty());
}

on_both_engines! {
    sqlite_the_audit_log_is_paged_filtered_and_aged_out,
        postgres_the_audit_log_is_paged_filtered_and_aged_out => audit_log;
    sqlite_enrolled_executors_rotate_and_are_revoked_with_their_registrations,
        postgres_enrolled_executors_rotate_and_are_revoked_with_their_registrations => enrolled_executors;
    sqlite_legacy_kill_marks_are_kept_until_forgotten,
        postgres_legacy_kill_marks_are_kept_until_forgotten => legacy_kill_marks;
}
