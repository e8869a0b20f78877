//! Authorization inside a tenant and around the operator's
//! infrastructure, through the admin's HTTP API on the path each attack
//! took: a token never changes its user's password, concurrent guesses
//! share one login allowance, secrets are read only by code an admin
//! approved, executor groups are the operator's to grant, names and labels
//! hold no control characters, tokens are revoked only at or below one's
//! role, rules out of range are refused, uploads are read within bounded
//! room; and the role matrix: every route answers every kind of caller as
//! the route table (stated in the OpenAPI document) says.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::collections::HashMap;

use cronbox_admin::{AdminConfig, Database, SchedulerConfig};
use cronbox_example_jobs as jobs;
use cronbox_tests::{AdminClient, until};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const API: &str = "operator-token";
const EXEC: &str = "exec-token";

struct Admin {
    _admin: cronbox_admin::RunningAdmin,
    operator: AdminClient,
    http: reqwest::Client,
    base: String,
    _data: tempfile::TempDir,
}

async fn admin() -> Admin {
    admin_with(1 << 20).await
}

/// An admin on loopback with a real SQLite file, secrets enabled, whose
/// largest upload is `max_module_bytes`.
async fn admin_with(max_module_bytes: usize) -> Admin {
    let data = tempfile::tempdir().unwrap();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Sqlite(data.path().join("admin")),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler: SchedulerConfig {
            secrets: Some(std::sync::Arc::new(cronbox_admin::secrets::SecretBox::new(
                &[7; 32],
            ))),
            ..SchedulerConfig::default()
        },
        max_request_bytes: max_module_bytes,
    })
    .await
    .unwrap();
    let base = format!("http://{}", admin.local_addr());
    Admin {
        _admin: admin,
        operator: AdminClient::new(base.clone(), API),
        http: reqwest::Client::new(),
        base,
        _data: data,
    }
}

fn password(name: &str) -> String {
    format!("{name}-password-1")
}

/// A logged-in session: its cookie and CSRF token.
#[derive(Debug, Clone)]
struct Session {
    cookie: String,
    csrf: String,
}

impl Admin {
    async fn tenant(&self, name: &str) -> AdminClient {
        let (status, body) = self
            .operator
            .call(
                Method::POST,
                "/api/v1/tenants",
                Some(json!({ "name": name })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        self.operator.with_token(body["token"].as_str().unwrap())
    }

    async fn add_user(&self, name: &str, tenant: &str, role: &str) {
        let (status, body) = self
            .operator
            .call(
                Method::POST,
                "/api/v1/users",
                Some(json!({ "name": name, "tenant": tenant, "role": role,
                             "password": password(name) })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }

    async fn login_status(&self, user: &str, password: &str) -> u16 {
        self.http
            .post(format!("{}/api/v1/session", self.base))
            .json(&json!({ "user": user, "password": password }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn login(&self, user: &str) -> Session {
        let response = self
            .http
            .post(format!("{}/api/v1/session", self.base))
            .json(&json!({ "user": user, "password": password(user) }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{user} logs in");
        let cookie = response.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let body: Value = response.json().await.unwrap();
        Session {
            cookie,
            csrf: body["csrf_token"].as_str().unwrap().to_owned(),
        }
    }

    /// A request made with `session` (and its CSRF token).
    async fn as_session(
        &self,
        session: &Session,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("cookie", &session.cookie)
            .header("x-csrf-token", &session.csrf);
        if let Some(body) = body {
            request = request.json(&body);
        }
        answer(request).await
    }

    /// A token `user` makes for itself with `role`, and its id.
    async fn token_of(&self, user: &str, role: &str) -> (AdminClient, i64) {
        let session = self.login(user).await;
        let (status, made) = self
            .as_session(
                &session,
                Method::POST,
                "/api/v1/tokens",
                Some(json!({ "label": "test", "role": role })),
            )
            .await;
        assert_eq!(status, 201, "{made}");
        (
            self.operator.with_token(made["token"].as_str().unwrap()),
            made["id"].as_i64().unwrap(),
        )
    }
}

async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn a_job(name: &str, module: &str) -> Value {
    json!({ "name": name, "module": module, "schedule_type": "NONE" })
}

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
    admin.tenant("acme").await;
    admin.add_user("acme-admin", "acme", "admin").await;
    admin.add_user("acme-dev", "acme", "developer").await;
    let (acme_admin, _) = admin.token_of("acme-admin", "admin").await;
    let (acme_dev, _) = admin.token_of("acme-dev", "developer").await;
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
            let http = reqwest::Client::new();
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
async fn only_the_role_that_manages_secrets_has_code_read_them() {
    let admin = admin().await;
    admin.tenant("acme").await;
    admin.add_user("acme-admin", "acme", "admin").await;
    admin.add_user("acme-dev", "acme", "developer").await;
    let (owner, _) = admin.token_of("acme-admin", "admin").await;
    let (developer, _) = admin.token_of("acme-dev", "developer").await;

    let (status, body) = owner
        .call(
            Method::PUT,
            "/api/v1/secrets/API_KEY",
            Some(json!({ "value": "the-secret-value" })),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = owner.upload("?name=reader", jobs::bytes("hello")).await;
    assert_eq!(status, 201, "{body}");

    // A developer names no secret in a job.
    let mut reads_secret = a_job("reads", "reader");
    reads_secret["secrets"] = json!(["API_KEY"]);
    let (status, body) = developer
        .call(Method::POST, "/api/v1/jobs", Some(reads_secret.clone()))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("secrets")), "{body}");
    let (status, body) = developer
        .call(
            Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({ "jobs": [a_job("plain", "reader"), reads_secret.clone()] })),
        )
        .await;
    assert_eq!(
        (status, &body["field"]),
        (403, &json!("jobs[1].secrets")),
        "{body}"
    );
    assert_eq!(developer.get("/api/v1/secrets").await.0, 403);

    // An admin's job that reads one: the developer changes neither it nor
    // the code it follows, and still runs it.
    let (status, job) = owner
        .call(Method::POST, "/api/v1/jobs", Some(reads_secret.clone()))
        .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();
    let mut changed = reads_secret.clone();
    changed["param"] = json!("print everything");
    let (status, body) = developer
        .call(Method::PUT, &format!("/api/v1/jobs/{id}"), Some(changed))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("secrets")), "{body}");
    let (status, body) = developer
        .upload("?name=reader", jobs::bytes("counter"))
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("name")), "{body}");
    let (status, body) = developer
        .call(
            Method::POST,
            "/api/v1/modules/reader/rollback",
            Some(json!({ "version": 1 })),
        )
        .await;
    assert_eq!((status, &body["field"]), (403, &json!("name")), "{body}");
    let (status, body) = developer
        .call(Method::POST, &format!("/api/v1/jobs/{id}/stop"), None)
        .await;
    assert_ne!(status, 403, "{body}");

    // Modules and jobs no secret touches are the developer's as before.
    let (status, body) = developer
        .upload("?name=scratch", jobs::bytes("counter"))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = developer
        .call(Method::POST, "/api/v1/jobs", Some(a_job("mine", "scratch")))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = owner.upload("?name=reader", jobs::bytes("counter")).await;
    assert_eq!((status, &body["jobs_moved"]), (201, &json!(1)), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_groups_are_the_operators_to_grant() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    let globex = admin.tenant("globex").await;
    for (group, spec) in [
        ("etl", json!({ "address_type": "AUTO" })),
        (
            "private",
            json!({ "address_type": "MANUAL", "addresses": ["http://127.0.0.1:9"] }),
        ),
    ] {
        let (status, body) = admin
            .operator
            .call(Method::PUT, &format!("/api/v1/groups/{group}"), Some(spec))
            .await;
        assert_eq!(status, 200, "{body}");
    }
    for tenant in [&acme, &globex] {
        let (status, body) = tenant.upload("?name=hello", jobs::bytes("hello")).await;
        assert_eq!(status, 201, "{body}");
    }
    let in_group = |group: &str| {
        let mut job = a_job("j", "hello");
        job["group"] = json!(group);
        job
    };

    // Another tenant's (or the operator's) MANUAL group is refused,
    // naming the field and no address; the shared `default` is not.
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(in_group("private")))
        .await;
    assert_eq!((status, &body["field"]), (422, &json!("group")), "{body}");
    assert!(!body.to_string().contains("127.0.0.1"), "{body}");
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(in_group("default")))
        .await;
    assert_eq!(status, 201, "{body}");

    // A tenant lists the groups it may use, without addresses.
    let names = |groups: &Value| -> Vec<String> {
        groups
            .as_array()
            .unwrap()
            .iter()
            .map(|group| group["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, groups) = acme.get("/api/v1/groups").await;
    assert_eq!(status, 200);
    assert_eq!(names(&groups), ["default"], "{groups}");
    assert!(!groups.to_string().contains("127.0.0.1"), "{groups}");

    // The operator grants a group; only the tenant granted gains it.
    let (status, body) = acme
        .call(
            Method::PUT,
            "/api/v1/groups/etl/tenants",
            Some(json!({ "tenants": ["acme"] })),
        )
        .await;
    assert_eq!(status, 403, "a tenant grants nothing: {body}");
    let (status, granted) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/groups/etl/tenants",
            Some(json!({ "tenants": ["acme"] })),
        )
        .await;
    assert_eq!(status, 200, "{granted}");
    assert_eq!(granted["tenants"], json!(["acme"]));
    let (status, body) = acme
        .call(Method::POST, "/api/v1/jobs", Some(in_group("etl")))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = globex
        .call(Method::POST, "/api/v1/jobs", Some(in_group("etl")))
        .await;
    assert_eq!((status, &body["field"]), (422, &json!("group")), "{body}");
    assert_eq!(
        names(&acme.get("/api/v1/groups").await.1),
        ["default", "etl"]
    );
    let (_, everything) = admin.operator.get("/api/v1/groups").await;
    assert!(
        everything.to_string().contains("http://127.0.0.1:9"),
        "the operator sees addresses: {everything}"
    );
    let (status, body) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/groups/etl/tenants",
            Some(json!({ "tenants": ["ghost"] })),
        )
        .await;
    assert_eq!((status, &body["field"]), (422, &json!("tenants")), "{body}");
    let (status, _) = admin
        .operator
        .call(
            Method::PUT,
            "/api/v1/groups/nowhere/tenants",
            Some(json!({ "tenants": ["*"] })),
        )
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_labels_and_rules_are_refused_naming_the_field() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    let (status, body) = acme.upload("?name=hello", jobs::bytes("hello")).await;
    assert_eq!(status, 201, "{body}");

    for name in ["\u{1b}[2Jclean", "two\r\nlines", "tab\there"] {
        let (status, body) = acme
            .call(Method::POST, "/api/v1/jobs", Some(a_job(name, "hello")))
            .await;
        assert_eq!((status, &body["field"]), (422, &json!("name")), "{body}");
    }
    for label in ["stable%0D%0A", "a%2Cb", "%09tab", "stable%0B"] {
        let (status, body) = acme
            .call(
                Method::PUT,
                &format!("/api/v1/modules/hello/labels/{label}"),
                Some(json!({ "version": 1 })),
            )
            .await;
        assert_eq!(
            (status, &body["field"]),
            (422, &json!("label")),
            "{label}: {body}"
        );
    }
    let (status, body) = acme
        .call(
            Method::PUT,
            "/api/v1/modules/hello/labels/stable",
            Some(json!({ "version": 1 })),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // An instant past chrono's range is refused, not dropped.
    for field in ["starts_at_ms", "ends_at_ms"] {
        let mut job = a_job("windowed", "hello");
        job["schedule_type"] = json!("FIX_RATE");
        job["schedule_conf"] = json!("60");
        job["schedule_rules"] = json!({ field: 9_000_000_000_000_000_i64 });
        let (status, body) = acme.call(Method::POST, "/api/v1/jobs", Some(job)).await;
        assert_eq!(
            (status, &body["field"]),
            (422, &json!(format!("schedule_rules.{field}"))),
            "{body}"
        );
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_are_read_within_bounded_room() {
    // Room for four of the largest uploads (64 KiB, with a 64 KiB
    // envelope): four stalled ones take all of it.
    let admin = admin_with(64 << 10).await;
    let address = admin.base.trim_start_matches("http://").to_owned();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        let head = format!(
            "POST /api/v1/modules HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {API}\r\n\
             Content-Type: application/wasm\r\nContent-Length: {}\r\n\r\n",
            128 << 10
        );
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(&[0; 1024]).await.unwrap();
        stalled.push(socket);
    }
    let probe = || async {
        let (status, body) = admin.operator.upload("", b"\0asm".to_vec()).await;
        (status, body)
    };
    let (status, body) = until("the stalled uploads hold the room", || async {
        let (status, body) = probe().await;
        (status == 503).then_some((status, body))
    })
    .await;
    assert_eq!((status, &body["code"]), (503, &json!("uploads_busy")));

    // One goes away: its room is free again.
    drop(stalled.pop());
    let (status, body) = until("a closed upload frees its room", || async {
        let (status, body) = probe().await;
        (status != 503).then_some((status, body))
    })
    .await;
    assert_eq!(status, 422, "read and refused as no component: {body}");
    drop(stalled);
}

/// A caller of the role matrix: how it authenticates, and the role it acts
/// with (`None`: no user role at all).
struct MatrixCaller {
    name: &'static str,
    auth: MatrixAuth,
    role: Option<&'static str>,
}

enum MatrixAuth {
    None,
    Bearer(String),
    Session(Session),
}

const RANKS: [&str; 4] = ["viewer", "developer", "admin", "operator"];

fn rank(role: &str) -> usize {
    RANKS.iter().position(|known| *known == role).unwrap()
}

/// Every route of the OpenAPI document (and so of the router's table)
/// called by every kind of caller: no token, the executor token, the
/// operator token, a tenant's token, and a session and a user token of
/// each role. A route open to all answers anyone; an executor route
/// answers the executor token only (401 for the rest); a user route
/// answers 401 with no or the wrong kind of credentials, 403 from the
/// router to a role below its `x-required-role`, and reaches its handler
/// (never that 403) at or above it. No answer is a server error, and a
/// route naming an id the operator has no object of answers 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_every_role_as_its_table_says() {
    let admin = admin().await;
    let acme = admin.tenant("acme").await;
    admin.add_user("root", "default", "operator").await;
    for role in ["viewer", "developer", "admin"] {
        admin.add_user(&format!("acme-{role}"), "acme", role).await;
    }
    let mut callers = vec![
        MatrixCaller {
            name: "no token",
            auth: MatrixAuth::None,
            role: None,
        },
        MatrixCaller {
            name: "executor token",
            auth: MatrixAuth::Bearer(EXEC.into()),
            role: None,
        },
        MatrixCaller {
            name: "operator token",
            auth: MatrixAuth::Bearer(API.into()),
            role: Some("operator"),
        },
        MatrixCaller {
            name: "tenant token",
            auth: MatrixAuth::Bearer(acme.token.clone()),
            role: Some("admin"),
        },
    ];
    for (user, role) in [
        ("acme-viewer", "viewer"),
        ("acme-developer", "developer"),
        ("acme-admin", "admin"),
        ("root", "operator"),
    ] {
        let (token, _) = admin.token_of(user, role).await;
        callers.push(MatrixCaller {
            name: role,
            auth: MatrixAuth::Bearer(token.token),
            role: Some(role),
        });
        callers.push(MatrixCaller {
            name: role,
            auth: MatrixAuth::Session(admin.login(user).await),
            role: Some(role),
        });
    }

    let (status, document) = admin.operator.get("/api/v1/openapi.json").await;
    assert_eq!(status, 200);
    let mut routes: Vec<(String, String, String)> = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let required = operation["x-required-role"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} states no x-required-role"))
                .to_owned();
            routes.push((method.clone(), path.clone(), required));
        }
    }
    // Ending a session last: it would log the session callers out.
    routes.sort_by_key(|(method, path, _)| method == "delete" && path == "/api/v1/session");
    assert!(routes.len() > 60, "{} routes", routes.len());

    let mut wrong = Vec::new();
    for (method, path, required) in &routes {
        let concrete = path
            .replace("{id}", "999999999")
            .replace("{digest}", &"0".repeat(64))
            .replace("{label}", "stable")
            .replace("{name}", "matrix-absent");
        let method: Method = method.to_uppercase().parse().unwrap();
        for caller in &callers {
            let mut request = admin
                .http
                .request(method.clone(), format!("{}{concrete}", admin.base));
            match &caller.auth {
                MatrixAuth::None => {}
                MatrixAuth::Bearer(token) => request = request.bearer_auth(token),
                MatrixAuth::Session(session) => {
                    request = request
                        .header("cookie", &session.cookie)
                        .header("x-csrf-token", &session.csrf);
                }
            }
            if method != Method::GET && method != Method::DELETE {
                request = request.json(&json!({}));
            }
            let (status, body) = answer(request).await;
            let refused_by_router = status == 403
                && body["message"]
                    .as_str()
                    .is_some_and(|message| message.starts_with(&format!("{method} ")));
            let expected_ok = match required.as_str() {
                "none" => status != 401 && status != 403,
                "executor" => match caller.name {
                    "executor token" => status != 401 && status != 403,
                    _ => status == 401,
                },
                "any" => match caller.role {
                    Some(_) => status != 401 && !refused_by_router,
                    None => status == 401,
                },
                role => match caller.role {
                    None => status == 401,
                    Some(has) if rank(has) >= rank(role) => status != 401 && !refused_by_router,
                    Some(_) => refused_by_router,
                },
            };
            // Nothing is a server error, and an unknown id is 404
            // everywhere (a change's body may be refused first).
            let unknown_id_ok = caller.name != "operator token"
                || !path.contains("{id}")
                || status == 404
                || (status == 400 && method != Method::GET && method != Method::DELETE);
            if !expected_ok || status >= 500 || !unknown_id_ok {
                wrong.push(format!(
                    "{method} {path} (needs {required}) as {} ({}): {status} {body}",
                    caller.name,
                    match caller.auth {
                        MatrixAuth::Session(_) => "session",
                        _ => "bearer",
                    }
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
