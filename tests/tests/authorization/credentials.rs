//! Credentials: passwords, the login throttle under concurrency, token revocation.

use std::collections::HashMap;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_never_changes_its_users_password() {
    let admin = admin().await;
    admin.add_user("root", "default", "operator").await;
    let (monitoring, _) = admin.token_of("root", "viewer").await;
    let (operator_token, _) = admin.token_of("root", "operator").await;
    let change = |current: Option<&str>| {
        let mut body = json!({ "password": "taken-over-password" });
        if let Some(current) = current {
            body["current_password"] = json!(current);
        }
        body
    };
    let path = "/api/v1/users/root/password";

    // Neither a read-only token nor one with the user's own role changes
    // the password, even knowing the current one.
    for token in [&monitoring, &operator_token] {
        for current in [None, Some(password("root"))] {
            let (status, body) = token
                .call(Method::PUT, path, Some(change(current.as_deref())))
                .await;
            assert_eq!(status, 403, "{body}");
            assert!(
                body["message"].as_str().unwrap().contains("session"),
                "{body}"
            );
        }
    }
    assert_eq!(admin.login_status("root", "taken-over-password").await, 401);

    // A session needs the current password too.
    let session = admin.login("root").await;
    for current in [None, Some("not-the-password")] {
        let (status, body) = admin
            .as_session(&session, Method::PUT, path, Some(change(current)))
            .await;
        assert_eq!(
            (status, &body["field"]),
            (403, &json!("current_password")),
            "{body}"
        );
    }
    let (status, body) = admin
        .as_session(
            &session,
            Method::PUT,
            path,
            Some(change(Some(&password("root")))),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(admin.login_status("root", "taken-over-password").await, 200);

    // An admin's token still sets another user's password, never one
    // above its own role.
    let (acme_admin, acme_dev) = admin.acme_admin_and_developer().await;
    let (status, body) = acme_admin
        .call(
            Method::PUT,
            "/api/v1/users/acme-dev/password",
            Some(change(None)),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = acme_dev
        .call(
            Method::PUT,
            "/api/v1/users/acme-admin/password",
            Some(change(None)),
        )
        .await;
    assert_eq!(status, 403, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_guesses_share_one_allowance() {
    let admin = admin().await;
    admin.add_user("bob", "default", "viewer").await;
    admin.add_user("carol", "default", "viewer").await;
    let burst = |user: &'static str, right_at: Option<usize>, count: usize| {
        let base = admin.base.clone();
        async move {
            let http = cronbox_tls::client();
            let attempts = (0..count).map(|n| {
                let guess = if Some(n) == right_at {
                    password(user)
                } else {
                    format!("wrong-guess-{n:04}")
                };
                let request = http
                    .post(format!("{base}/api/v1/session"))
                    .json(&json!({ "user": user, "password": guess }));
                async move { request.send().await.unwrap().status().as_u16() }
            });
            let mut counts: HashMap<u16, usize> = HashMap::new();
            for status in futures_join_all(attempts).await {
                *counts.entry(status).or_default() += 1;
            }
            counts
        }
    };

    // Eighty wrong passwords at once: five are checked, the rest wait.
    let counts = burst("bob", None, 80).await;
    assert_eq!(counts.get(&401), Some(&5), "{counts:?}");
    assert_eq!(counts.get(&429), Some(&75), "{counts:?}");

    // A right password inside a burst gets no more checks than the
    // allowance (twice it at most: a success forgives the name's failures).
    let counts = burst("carol", Some(39), 40).await;
    let checked = counts.get(&401).unwrap_or(&0) + counts.get(&200).unwrap_or(&0);
    assert!(checked <= 10, "{counts:?}");
    assert_eq!(checked + counts.get(&429).unwrap_or(&0), 40, "{counts:?}");
}

/// Every future of `futures` run at once, their answers in order.
async fn futures_join_all<F: std::future::Future<Output = u16> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<u16> {
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_revoked_only_at_or_below_ones_role() {
    let admin = admin().await;
    admin.add_user("root", "default", "operator").await;
    admin.add_user("local-admin", "default", "admin").await;
    admin.add_user("local-dev", "default", "developer").await;
    let (_, operator_users_token) = admin.token_of("root", "viewer").await;
    let (_, admins_own_token) = admin.token_of("local-admin", "admin").await;
    let (local_viewer, _) = admin.token_of("local-admin", "viewer").await;
    let (_, developers_token) = admin.token_of("local-dev", "developer").await;
    let local_admin = admin.login("local-admin").await;

    let revoke = |id: i64| format!("/api/v1/tokens/{id}");
    let (status, body) = admin
        .as_session(
            &local_admin,
            Method::DELETE,
            &revoke(operator_users_token),
            None,
        )
        .await;
    assert_eq!(status, 403, "an operator user's token: {body}");
    let (status, body) = local_viewer
        .call(Method::DELETE, &revoke(admins_own_token), None)
        .await;
    assert_eq!(status, 403, "its own user's admin token: {body}");
    let (status, body) = admin
        .as_session(
            &local_admin,
            Method::DELETE,
            &revoke(developers_token),
            None,
        )
        .await;
    assert_eq!(status, 200, "a developer's token: {body}");
    let (status, body) = admin
        .operator
        .call(Method::DELETE, &revoke(operator_users_token), None)
        .await;
    assert_eq!(status, 200, "the operator token: {body}");
}
