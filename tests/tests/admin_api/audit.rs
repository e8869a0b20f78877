//! The audit log: every change through the API and every login, with who
//! made it, from where and how it ended; a tenant admin sees its tenant's;
//! append-only; no secret value, password or token in it; deleted past its
//! retention.

use cronbox_api::AuditPage;
use cronbox_tests::test_password;

use super::*;

/// The audit log as `token` reads it, newest first.
async fn audit(stack: &Stack, token: &str, query: &str) -> AuditPage {
    let (status, page) = stack
        .call_as(
            token,
            reqwest::Method::GET,
            &format!("/api/v1/audit{query}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{page}");
    serde_json::from_value(page).unwrap()
}

/// Logs in as `user` with `password` from a browser named `audit-test`:
/// the status and the session cookie.
async fn log_in(stack: &Stack, user: &str, password: &str) -> (u16, String) {
    let response = stack
        .http
        .post(format!("{}/api/v1/session", stack.base))
        .header("user-agent", "audit-test/1")
        .json(&json!({ "user": user, "password": password }))
        .send()
        .await
        .unwrap();
    let cookie = response
        .headers()
        .get("set-cookie")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .unwrap_or_default()
        .to_owned();
    (response.status().as_u16(), cookie)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_audited_with_who_and_never_a_secret() {
    use reqwest::Method as M;
    const SECRET: &str = "audited-secret-value-7";
    const WRONG: &str = "a-wrong-password-9";
    let scheduler = SchedulerConfig {
        secrets: Some(std::sync::Arc::new(cronbox_admin::secrets::SecretBox::new(
            &[7; 32],
        ))),
        ..SchedulerConfig::default()
    };
    let stack = stack(scheduler).await;
    let acme = tenant(&stack, "acme").await;
    stack.api.add_user("ana", "acme", "developer").await;
    assert_eq!(log_in(&stack, "ana", WRONG).await.0, 401);
    let (status, developer) = log_in(&stack, "ana", &test_password("ana")).await;
    assert_eq!(status, 200);

    let (status, _) = stack
        .call_as(
            &acme,
            M::PUT,
            "/api/v1/secrets/DB_PASSWORD",
            Some(json!({ "value": SECRET })),
        )
        .await;
    assert_eq!(status, 200);
    let job = stack.job_as(&acme, "audited", "hello", json!({})).await;
    let spec = serde_json::to_value(stack.api.api.job(job).await.unwrap()).unwrap();
    let update = json!({ "name": "audited", "module_digest": spec["module_digest"],
        "param": "second" });
    let (status, answer) = stack
        .call_as(&acme, M::PUT, &format!("/api/v1/jobs/{job}"), Some(update))
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = stack
        .call_as(
            &acme,
            M::PUT,
            &format!("/api/v1/jobs/{job}"),
            Some(
                json!({ "name": "audited", "module_digest": spec["module_digest"],
                "schedule_type": "CRON", "schedule_conf": "not a cron" }),
            ),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    stack
        .api
        .with_token(&acme)
        .trigger(job, json!({ "param": "by hand" }))
        .await;

    // The operator sees every tenant's, newest first: the scripted
    // session's entries exactly, in order.
    let all = audit(&stack, API, "").await.entries;
    let session: Vec<(&str, &str, u16, &str)> = all
        .iter()
        .rev()
        .map(|entry| {
            (
                entry.tenant.as_str(),
                entry.action.as_str(),
                entry.status,
                entry.outcome.as_str(),
            )
        })
        .collect();
    assert_eq!(
        session,
        [
            ("default", "POST /api/v1/tenants", 201, "ok"),
            ("acme", "POST /api/v1/users", 201, "ok"),
            ("acme", "POST /api/v1/session", 401, "refused"),
            ("acme", "POST /api/v1/session", 200, "ok"),
            ("acme", "PUT /api/v1/secrets/{name}", 200, "ok"),
            ("acme", "POST /api/v1/modules", 201, "ok"),
            ("acme", "POST /api/v1/jobs", 201, "ok"),
            ("acme", "PUT /api/v1/jobs/{id}", 200, "ok"),
            ("acme", "PUT /api/v1/jobs/{id}", 422, "refused"),
            ("acme", "POST /api/v1/jobs/{id}/trigger", 202, "ok"),
        ],
        "{all:#?}"
    );
    let find = |action: &str, status: u16| {
        all.iter()
            .find(|entry| entry.action == action && entry.status == status)
            .unwrap_or_else(|| panic!("no {action} answered {status} in {all:#?}"))
    };
    let failed = find("POST /api/v1/session", 401);
    assert_eq!(
        (
            failed.actor.as_str(),
            failed.tenant.as_str(),
            failed.outcome.as_str()
        ),
        ("ana", "acme", "refused")
    );
    assert_eq!(failed.address.as_deref(), Some("127.0.0.1"));
    assert_eq!(failed.user_agent.as_deref(), Some("audit-test/1"));
    assert_eq!(find("POST /api/v1/session", 200).actor, "ana");
    let secret = find("PUT /api/v1/secrets/{name}", 200);
    assert_eq!(secret.target, "/api/v1/secrets/DB_PASSWORD");
    assert!(secret.actor.starts_with("token "), "{secret:?}");
    assert_eq!(secret.tenant, "acme");
    let updated = find("PUT /api/v1/jobs/{id}", 200);
    assert_eq!(
        updated.detail.as_ref().unwrap()["changed"]["param"],
        json!({ "from": "", "to": "second" }),
        "{updated:?}"
    );
    assert_eq!(find("PUT /api/v1/jobs/{id}", 422).outcome, "refused");
    let triggered = find("POST /api/v1/jobs/{id}/trigger", 202);
    assert_eq!(triggered.detail.as_ref().unwrap()["param"], "by hand");
    let created = find("POST /api/v1/tenants", 201);
    assert_eq!(
        (created.actor.as_str(), created.tenant.as_str()),
        ("operator token", "default")
    );
    assert!(all.windows(2).all(|pair| pair[0].id > pair[1].id));

    // A tenant admin sees its own tenant's only (the operator's changes to
    // it included); filters and pages.
    set_quotas(&stack, "acme", json!({ "jobs": 50 })).await;
    let own = audit(&stack, &acme, "?tenant=default").await.entries;
    assert!(!own.is_empty() && own.iter().all(|entry| entry.tenant == "acme"));
    let quotas = own
        .iter()
        .find(|entry| entry.action == "PUT /api/v1/tenants/{name}/quotas")
        .unwrap_or_else(|| panic!("the operator's change to acme: {own:#?}"));
    assert_eq!(quotas.actor, "operator token");
    let logins = audit(&stack, API, "?action=session&actor=ana&limit=1").await;
    assert_eq!(logins.entries.len(), 1);
    let before = logins.next_before.unwrap();
    let older = audit(&stack, API, &format!("?action=session&before={before}")).await;
    assert_eq!(older.entries.len(), 1);
    assert_eq!(older.entries[0].status, 401);
    // A developer may not read it.
    let refused = stack
        .http
        .get(format!("{}/api/v1/audit", stack.base))
        .header("cookie", &developer)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // Append-only.
    for method in [M::DELETE, M::PUT, M::POST] {
        let (status, _) = stack.call(method, "/api/v1/audit", None).await;
        assert_eq!(status, 405);
    }
    // No secret value, password or token anywhere in the table.
    let rows: Vec<(String, String, Option<String>, Option<String>)> =
        sqlx::query_as("SELECT actor, target, user_agent, detail FROM audit")
            .fetch_all(&stack.admin_database().await)
            .await
            .unwrap();
    let text = format!("{rows:?}");
    for never in [SECRET, WRONG, &test_password("ana"), &acme, API] {
        assert!(!text.contains(never), "{never:?} is in the audit log");
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_entries_go_after_their_retention() {
    let clock = ManualClock::new(1_700_000_000_000);
    let stack = stack(SchedulerConfig {
        clock: clock.clone(),
        audit_retention: Duration::from_secs(3600),
        housekeeping_interval: Duration::from_millis(100),
        ..SchedulerConfig::default()
    })
    .await;
    tenant(&stack, "kept").await;
    assert_eq!(audit(&stack, API, "").await.entries.len(), 1);
    clock.advance(Duration::from_secs(3601));
    tenant(&stack, "newer").await;
    let left = until("the older entry is deleted", || async {
        let entries = audit(&stack, API, "").await.entries;
        (entries.len() == 1).then_some(entries)
    })
    .await;
    assert_eq!(left[0].target, "/api/v1/tenants");
    assert!(left[0].at_ms > 1_700_000_000_000 + 3_600_000);
    stack.shutdown().await;
}

/// A tenant's caller cannot write into another tenant's audit log: a
/// refused request to `/api/v1/tenants/OTHER/…`, with a user agent of the
/// caller's choosing, is filed in the caller's own tenant; an anonymous
/// one in no tenant's. The operator's changes to a tenant stay that
/// tenant's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_is_filed_in_the_callers_tenant_never_the_one_it_names() {
    let stack = stack(SchedulerConfig::default()).await;
    let acme = tenant(&stack, "acme").await;
    let other = tenant(&stack, "other").await;
    let forge = |token: Option<&str>| {
        let mut request = stack
            .http
            .put(format!("{}/api/v1/tenants/other/quotas", stack.base))
            .header("user-agent", "forged-entry/1")
            .json(&json!({ "jobs": 1 }));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(forge(Some(&acme)).await, 403);
    assert_eq!(forge(None).await, 401);
    let forged = |page: &AuditPage| {
        page.entries
            .iter()
            .filter(|entry| entry.user_agent.as_deref() == Some("forged-entry/1"))
            .count()
    };
    assert_eq!(forged(&audit(&stack, &other, "").await), 0);
    assert_eq!(forged(&audit(&stack, &acme, "").await), 1);
    // The operator's change to `other` is `other`'s to see.
    let (status, body) = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/tenants/other/quotas",
            Some(json!({ "jobs": 5 })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let seen = audit(&stack, &other, "").await;
    assert!(
        seen.entries
            .iter()
            .any(|entry| entry.action == "PUT /api/v1/tenants/{name}/quotas" && entry.status == 200),
        "{seen:?}"
    );
    stack.shutdown().await;
}
