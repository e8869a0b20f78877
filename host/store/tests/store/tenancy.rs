//! What tenants hold: modules and versions, tokens, users and sessions, the registry, quotas, child links, groups, console records.

use super::*;

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
    assert_eq!(
        store.token_principal("hash-1").await.unwrap(),
        Some((admin, token))
    );
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
        .registry_beat(
            "default",
            "http://b",
            ExecutorLoad::default(),
            &Default::default(),
            100,
        )
        .await
        .unwrap();
    store
        .registry_beat(
            "default",
            "http://a",
            ExecutorLoad::default(),
            &Default::default(),
            100,
        )
        .await
        .unwrap();
    store
        .registry_beat(
            "default",
            "http://old",
            ExecutorLoad::default(),
            &Default::default(),
            10,
        )
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
    assert_eq!(
        store.token_principal("t-ada").await.unwrap(),
        Some((as_ada, ada_token))
    );
    assert_eq!(store.remove_user("bob").await.unwrap(), None);
    assert_eq!(store.delete_expired_sessions(1_000).await.unwrap(), 0);
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
            ..TenantUsage::default()
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
    let finished_at_ms = day * cronbox_store::DAY_MS + 5;
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
    store
        .put_group("pinned", "MANUAL", &given, None)
        .await
        .unwrap();
    assert_eq!(
        store.group_addresses("pinned", 0).await.unwrap(),
        ["http://b:1", "http://a:1"]
    );
    store
        .put_group("pinned", "MANUAL", &given[1..2], None)
        .await
        .unwrap();
    let groups = store.groups().await.unwrap();
    let pinned = groups.iter().find(|group| group.name == "pinned").unwrap();
    assert_eq!(pinned.addresses, ["http://a:1"], "replaced, not added to");
}

on_both_engines! {
    sqlite_tenant_tokens_are_hashed_and_revocable,
        postgres_tenant_tokens_are_hashed_and_revocable => tenants_and_tokens;
    sqlite_users_sessions_and_their_tokens_end_together,
        postgres_users_sessions_and_their_tokens_end_together => users_and_sessions;
    sqlite_registry_lists_live_executors_in_order,
        postgres_registry_lists_live_executors_in_order => registry;
    sqlite_child_links_are_unique_ordered_and_never_a_cycle,
        postgres_child_links_are_unique_ordered_and_never_a_cycle => child_links;
    sqlite_manual_group_addresses_keep_their_order,
        postgres_manual_group_addresses_keep_their_order => group_addresses;
    sqlite_quotas_are_kept_and_usage_counted,
        postgres_quotas_are_kept_and_usage_counted => quotas_and_usage;
}
