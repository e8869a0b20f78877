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
        migrations: Default::default(),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler: SchedulerConfig {
            secrets: Some(std::sync::Arc::new(cronbox_admin::secrets::SecretBox::new(
                &[7; 32],
            ))),
            ..SchedulerConfig::default()
        },
        max_request_bytes: max_module_bytes,
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

fn password(name: &str) -> String {
    cronbox_tests::test_password(name)
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
        self.operator.add_user(name, tenant, role).await;
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

    /// Tenant `acme` with an admin and a developer: their tokens.
    async fn acme_admin_and_developer(&self) -> (AdminClient, AdminClient) {
        self.tenant("acme").await;
        self.add_user("acme-admin", "acme", "admin").await;
        self.add_user("acme-dev", "acme", "developer").await;
        let (owner, _) = self.token_of("acme-admin", "admin").await;
        let (developer, _) = self.token_of("acme-dev", "developer").await;
        (owner, developer)
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

#[path = "authorization/credentials.rs"]
mod credentials;
#[path = "authorization/hostile.rs"]
mod hostile;
#[path = "authorization/matrix.rs"]
mod matrix;
#[path = "authorization/tenancy.rs"]
mod tenancy;
