//! Users, roles, sessions and user tokens through the admin's HTTP API,
//! with an admin in this process on loopback and a real SQLite file: a
//! login sets an HttpOnly SameSite=Strict cookie, a session's changes need
//! its CSRF token, failed logins are throttled, logout ends the session on
//! the server, each role does what it may and no more, and a tenant's
//! admin never reaches another tenant's users.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use cronbox_admin::{AdminConfig, Database, SchedulerConfig};
use cronbox_tests::AdminClient;
use reqwest::Method;
use serde_json::{Value, json};

const API: &str = "operator-token";

struct Admin {
    _admin: cronbox_admin::RunningAdmin,
    operator: AdminClient,
    http: reqwest::Client,
    base: String,
    _data: tempfile::TempDir,
}

async fn admin() -> Admin {
    let data = tempfile::tempdir().unwrap();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Sqlite(data.path().join("admin")),
        migrations: Default::default(),
        api_token: API.into(),
        executor_token: "exec-token".into(),
        scheduler: SchedulerConfig::default(),
        max_request_bytes: 1 << 20,
        tls: None,
        metrics_export: None,
    })
    .await
    .unwrap();
    let base = format!("http://{}", admin.local_addr());
    Admin {
        _admin: admin,
        operator: AdminClient::new(base.clone(), API),
        http: cronbox_tls::client(),
        base,
        _data: data,
    }
}

/// A logged-in browser, as far as the admin can tell: its cookie and CSRF
/// token.
struct Browser {
    cookie: String,
    csrf: String,
    set_cookie: String,
    session: Value,
}

impl Admin {
    async fn login(&self, user: &str, password: &str) -> Result<Browser, (u16, Value)> {
        let response = self
            .http
            .post(format!("{}/api/v1/session", self.base))
            .json(&json!({ "user": user, "password": password }))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let set_cookie = response
            .headers()
            .get("set-cookie")
            .map(|value| value.to_str().unwrap().to_owned());
        let retry_after = response
            .headers()
            .get("retry-after")
            .map(|value| value.to_str().unwrap().to_owned());
        let mut body: Value = response.json().await.unwrap();
        if status != 200 {
            if let Some(retry_after) = retry_after {
                body["retry_after"] = json!(retry_after);
            }
            return Err((status, body));
        }
        let set_cookie = set_cookie.expect("a login sets its cookie");
        let cookie = set_cookie.split(';').next().unwrap().to_owned();
        Ok(Browser {
            cookie,
            csrf: body["csrf_token"].as_str().unwrap().to_owned(),
            set_cookie,
            session: body,
        })
    }

    /// A request with the browser's cookie, and its CSRF token if `csrf`.
    async fn as_browser(
        &self,
        browser: &Browser,
        csrf: bool,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", &browser.cookie);
        if csrf {
            request = request.header("x-csrf-token", &browser.csrf);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn add_user(&self, name: &str, tenant: &str, role: &str) {
        self.operator.add_user(name, tenant, role).await;
    }

    async fn tenant(&self, name: &str) {
        let (status, body) = self
            .operator
            .call(
                Method::POST,
                "/api/v1/tenants",
                Some(json!({ "name": name })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
}

fn password(name: &str) -> String {
    cronbox_tests::test_password(name)
}

const JOB: &str = "/api/v1/jobs";

fn a_job(name: &str) -> Value {
    // The digest names no module: the refusal that follows is about the
    // job's content, after the caller's role was accepted.
    json!({ "name": name, "module_digest": "0".repeat(64), "schedule_type": "NONE" })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_opens_a_session_whose_changes_need_its_csrf_token() {
    let admin = admin().await;
    admin.add_user("ada", "default", "developer").await;

    let (status, refused) = admin.login("ada", "not-her-password").await.err().unwrap();
    assert_eq!(status, 401, "{refused}");
    assert_eq!(refused["code"], "unauthorized");
    assert_eq!(
        admin
            .login("nobody", "whatever-it-is")
            .await
            .err()
            .unwrap()
            .0,
        401
    );

    let browser = admin.login("ada", &password("ada")).await.unwrap();
    assert_eq!(browser.session["user"], "ada");
    assert_eq!(browser.session["role"], "developer");
    let cookie = browser.set_cookie.to_ascii_lowercase();
    for attribute in ["httponly", "samesite=strict", "path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("secure"),
        "plain HTTP gets no Secure: {cookie}"
    );

    let (status, me) = admin
        .as_browser(&browser, false, Method::GET, "/api/v1/session", None)
        .await;
    assert_eq!((status, &me["user"]), (200, &json!("ada")));
    assert_eq!(me["csrf_token"], json!(browser.csrf));

    // A change without the CSRF token is refused before it is looked at.
    let (status, body) = admin
        .as_browser(&browser, false, Method::POST, JOB, Some(a_job("j")))
        .await;
    assert_eq!(status, 403, "{body}");
    assert!(body["message"].as_str().unwrap().contains("CSRF"), "{body}");
    // With it, the request reaches the job's own checks.
    let (status, body) = admin
        .as_browser(&browser, true, Method::POST, JOB, Some(a_job("j")))
        .await;
    assert_ne!(status, 403, "{body}");
    assert_ne!(status, 401, "{body}");

    // Logout ends the session on the server: the old cookie is refused.
    let (status, body) = admin
        .as_browser(&browser, true, Method::DELETE, "/api/v1/session", None)
        .await;
    assert_eq!((status, &body["ended"]), (200, &json!(true)), "{body}");
    let (status, _) = admin
        .as_browser(&browser, false, Method::GET, "/api/v1/session", None)
        .await;
    assert_eq!(status, 401);

    // Behind a TLS proxy the cookie is Secure.
    let response = admin
        .http
        .post(format!("{}/api/v1/session", admin.base))
        .header("x-forwarded-proto", "https")
        .json(&json!({ "user": "ada", "password": password("ada") }))
        .send()
        .await
        .unwrap();
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("; Secure"), "{cookie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_logins_are_throttled_and_a_new_password_ends_sessions() {
    let admin = admin().await;
    admin.add_user("bob", "default", "viewer").await;
    let browser = admin.login("bob", &password("bob")).await.unwrap();

    for attempt in 0..5 {
        let (status, _) = admin.login("bob", "guessing-password").await.err().unwrap();
        assert_eq!(status, 401, "attempt {attempt}");
    }
    let (status, body) = admin.login("bob", &password("bob")).await.err().unwrap();
    assert_eq!(status, 429, "even the right password waits: {body}");
    assert_eq!(body["code"], "too_many_attempts");
    let wait: u64 = body["retry_after"].as_str().unwrap().parse().unwrap();
    assert!((1..=300).contains(&wait), "{body}");

    // The user changes its own password: every session of it ends.
    let (status, body) = admin
        .as_browser(
            &browser,
            true,
            Method::PUT,
            "/api/v1/users/bob/password",
            Some(json!({ "password": "a-brand-new-password",
                         "current_password": password("bob") })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["sessions_ended"], 1);
    let (status, _) = admin
        .as_browser(&browser, false, Method::GET, "/api/v1/session", None)
        .await;
    assert_eq!(status, 401);

    // A password too short is refused naming the field.
    let (status, body) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/users/bob/password",
            Some(json!({ "password": "short" })),
        )
        .await;
    assert_eq!(
        (status, &body["field"]),
        (422, &json!("password")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_does_what_it_may_and_tokens_carry_their_role() {
    let admin = admin().await;
    admin.tenant("acme").await;
    admin.tenant("globex").await;
    admin.add_user("acme-admin", "acme", "admin").await;
    admin.add_user("acme-viewer", "acme", "viewer").await;
    admin.add_user("globex-admin", "globex", "admin").await;

    let viewer = admin
        .login("acme-viewer", &password("acme-viewer"))
        .await
        .unwrap();
    let (status, _) = admin
        .as_browser(&viewer, false, Method::GET, JOB, None)
        .await;
    assert_eq!(status, 200, "a viewer reads");
    let (status, body) = admin
        .as_browser(&viewer, true, Method::POST, JOB, Some(a_job("v")))
        .await;
    assert_eq!(status, 403, "a viewer changes nothing: {body}");
    assert!(
        body["message"].as_str().unwrap().contains("developer"),
        "{body}"
    );

    // A tenant admin manages its own tenant's users, up to its own role.
    let acme = admin
        .login("acme-admin", &password("acme-admin"))
        .await
        .unwrap();
    let (status, body) = admin
        .as_browser(
            &acme,
            true,
            Method::POST,
            "/api/v1/users",
            Some(json!({ "name": "dev", "role": "developer", "password": password("dev") })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["tenant"], "acme");
    // It sets the password of a user below it, never a peer's: whoever
    // sets it logs in as that user.
    admin.add_user("acme-admin-2", "acme", "admin").await;
    for (user, expected) in [("dev", 200), ("acme-admin-2", 403)] {
        let (status, body) = admin
            .as_browser(
                &acme,
                true,
                Method::PUT,
                &format!("/api/v1/users/{user}/password"),
                Some(json!({ "password": "a-password-set-for-them" })),
            )
            .await;
        assert_eq!(status, expected, "{user}: {body}");
    }
    let (status, body) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/users/acme-admin-2/password",
            Some(json!({ "password": "a-password-set-for-them" })),
        )
        .await;
    assert_eq!(status, 200, "the operator sets a tenant admin's: {body}");
    let (status, body) = admin
        .operator
        .call(Method::DELETE, "/api/v1/users/acme-admin-2", None)
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = admin
        .as_browser(
            &acme,
            true,
            Method::POST,
            "/api/v1/users",
            Some(json!({ "name": "boss", "role": "operator", "password": password("boss") })),
        )
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("role")), "{body}");
    let (status, body) = admin
        .as_browser(
            &acme,
            true,
            Method::POST,
            "/api/v1/users",
            Some(json!({ "name": "spy", "tenant": "globex", "role": "viewer",
                         "password": password("spy") })),
        )
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("tenant")), "{body}");
    let (status, users) = admin
        .as_browser(&acme, false, Method::GET, "/api/v1/users", None)
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = users
        .as_array()
        .unwrap()
        .iter()
        .map(|user| user["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["acme-admin", "acme-viewer", "dev"],
        "never globex's"
    );
    assert_eq!(
        admin
            .as_browser(
                &acme,
                true,
                Method::DELETE,
                "/api/v1/users/globex-admin",
                None
            )
            .await
            .0,
        404,
        "another tenant's user is unknown"
    );
    // A viewer may not list users.
    assert_eq!(
        admin
            .as_browser(&viewer, false, Method::GET, "/api/v1/users", None)
            .await
            .0,
        403
    );

    // A user's token carries its role (or a lower one), shown once.
    let (status, made) = admin
        .as_browser(
            &acme,
            true,
            Method::POST,
            "/api/v1/tokens",
            Some(json!({ "label": "ci", "role": "viewer" })),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let token = made["token"].as_str().unwrap().to_owned();
    let as_token = admin.operator.with_token(&token);
    assert_eq!(as_token.get(JOB).await.0, 200);
    assert_eq!(
        as_token.call(Method::POST, JOB, Some(a_job("t"))).await.0,
        403,
        "a viewer token changes nothing"
    );
    let (status, session) = as_token.get("/api/v1/session").await;
    assert_eq!(status, 200);
    assert_eq!(
        (&session["user"], &session["role"]),
        (&json!("acme-admin"), &json!("viewer"))
    );
    assert!(session.get("csrf_token").is_none(), "{session}");
    // A token makes no token: one made by a leaked token would outlive
    // the leaked one's revocation.
    let (status, body) = as_token
        .call(
            Method::POST,
            "/api/v1/tokens",
            Some(json!({ "role": "viewer" })),
        )
        .await;
    assert_eq!(status, 403, "a token made a token: {body}");
    assert!(
        body["message"].as_str().unwrap().contains("login session"),
        "{body}"
    );
    let (_, listed) = admin
        .as_browser(&acme, false, Method::GET, "/api/v1/tokens", None)
        .await;
    assert!(!listed.to_string().contains(&token), "never shown again");
    let (status, body) = admin
        .as_browser(
            &viewer,
            true,
            Method::POST,
            "/api/v1/tokens",
            Some(json!({ "role": "admin" })),
        )
        .await;
    assert_eq!(status, 403, "no token above one's role: {body}");

    // Removing the user revokes its tokens.
    let (status, body) = admin
        .operator
        .call(Method::DELETE, "/api/v1/users/acme-admin", None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tokens_revoked"], 1);
    assert_eq!(as_token.get(JOB).await.0, 401);
}
