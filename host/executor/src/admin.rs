//! The executor's HTTP client for its admins: registration, module
//! downloads, result callbacks.

use std::time::Duration;

use serde::Serialize;

/// Why a request to the admins failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// No admin is configured.
    #[error("no admin address is configured")]
    NoAdmins,
    /// Every admin failed; the last failure is given.
    #[error("no admin answered {path}: {last}")]
    Unreachable { path: String, last: String },
    /// Every admin answered, and each refused the body itself (400, 413 or
    /// 422): sending it again cannot help.
    #[error("every admin refused {path} with {status}")]
    Refused { path: String, status: u16 },
}

/// Why one admin did not accept a request.
#[derive(Debug)]
enum PostError {
    /// It answered with this status.
    Status(u16),
    /// It did not answer.
    Transport(String),
}

impl PostError {
    /// Whether the admin refused the body itself (as opposed to being
    /// down, busy or not trusting the token).
    fn refuses_the_body(&self) -> Option<u16> {
        match self {
            PostError::Status(status @ (400 | 413 | 422)) => Some(*status),
            _ => None,
        }
    }
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PostError::Status(status) => write!(f, "answered {status}"),
            PostError::Transport(error) => f.write_str(error),
        }
    }
}

/// Talks to every configured admin with the executor's token.
#[derive(Debug, Clone)]
pub(crate) struct AdminClient {
    http: reqwest::Client,
    admins: Vec<String>,
    token: String,
}

impl AdminClient {
    /// Sends through `http` (trusting the roots the executor was given).
    pub(crate) fn new(http: reqwest::ClientBuilder, admins: Vec<String>, token: String) -> Self {
        let http = http
            .timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap_or_default();
        let admins = admins
            .into_iter()
            .map(|admin| admin.trim_end_matches('/').to_owned())
            .collect();
        AdminClient {
            http,
            admins,
            token,
        }
    }

    /// POSTs `body` to every admin; returns how many accepted it.
    pub(crate) async fn post_all<B: Serialize>(&self, path: &str, body: &B) -> usize {
        let mut accepted = 0;
        for admin in &self.admins {
            match self.post(admin, path, body).await {
                Ok(()) => accepted += 1,
                Err(error) => tracing::debug!(%admin, %path, %error, "admin did not accept"),
            }
        }
        accepted
    }

    /// Registers (beats) with every admin whose protocol version this
    /// executor may serve; returns how many accepted. An admin too old for
    /// it that took the registration anyway (it speaks protocol 1, before
    /// versions were checked) is sent a deregistration at once, so it
    /// routes no run here; a refusal is logged with the admin's reason.
    pub(crate) async fn beat_all(&self, registration: &cronbox_protocol::Registration) -> usize {
        use cronbox_protocol::{PROTOCOL_HEADER, PROTOCOL_VERSION, UNVERSIONED, admin_paths};
        let mut accepted = 0;
        for admin in &self.admins {
            let response = match self
                .http
                .post(format!("{admin}{}", admin_paths::REGISTRY))
                .bearer_auth(&self.token)
                .json(registration)
                .send()
                .await
            {
                Ok(response) => response,
                Err(error) => {
                    tracing::debug!(%admin, %error, "admin did not accept the heartbeat");
                    continue;
                }
            };
            let status = response.status();
            if status == reqwest::StatusCode::UNPROCESSABLE_ENTITY {
                let reason = response.text().await.unwrap_or_default();
                tracing::error!(%admin, %reason, "the admin refused this executor's registration");
                continue;
            }
            if !status.is_success() {
                tracing::debug!(%admin, %status, "admin did not accept the heartbeat");
                continue;
            }
            let version = response
                .headers()
                .get(PROTOCOL_HEADER)
                .and_then(|value| value.to_str().ok()?.parse().ok())
                .unwrap_or(UNVERSIONED);
            if let Err(skew) = cronbox_protocol::check_skew(version, PROTOCOL_VERSION) {
                tracing::error!(%admin, %skew, "not registering with this admin");
                let _ = self
                    .post(admin, admin_paths::REGISTRY_REMOVE, registration)
                    .await;
                continue;
            }
            accepted += 1;
        }
        accepted
    }

    /// POSTs `body` to the first admin that accepts it.
    pub(crate) async fn post_any<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(), AdminError> {
        let mut last = None;
        let mut refusals = Vec::new();
        for admin in &self.admins {
            match self.post(admin, path, body).await {
                Ok(()) => return Ok(()),
                Err(error) => {
                    refusals.push(error.refuses_the_body());
                    last = Some(format!("{admin} {error}"));
                }
            }
        }
        if let Some(Some(status)) = refusals.first()
            && refusals.iter().all(Option::is_some)
        {
            return Err(AdminError::Refused {
                path: path.to_owned(),
                status: *status,
            });
        }
        Err(match last {
            None => AdminError::NoAdmins,
            Some(last) => AdminError::Unreachable {
                path: path.to_owned(),
                last,
            },
        })
    }

    /// GETs bytes from the first admin that has them.
    pub(crate) async fn get_any(&self, path: &str) -> Result<Vec<u8>, AdminError> {
        let mut last = None;
        for admin in &self.admins {
            let response = self
                .http
                .get(format!("{admin}{path}"))
                .bearer_auth(&self.token)
                .send()
                .await;
            match response {
                Ok(response) if response.status().is_success() => match response.bytes().await {
                    Ok(bytes) => return Ok(bytes.to_vec()),
                    Err(error) => last = Some(error.to_string()),
                },
                Ok(response) => last = Some(format!("{admin} answered {}", response.status())),
                Err(error) => last = Some(error.to_string()),
            }
        }
        Err(match last {
            None => AdminError::NoAdmins,
            Some(last) => AdminError::Unreachable {
                path: path.to_owned(),
                last,
            },
        })
    }

    async fn post<B: Serialize>(&self, admin: &str, path: &str, body: &B) -> Result<(), PostError> {
        let response = self
            .http
            .post(format!("{admin}{path}"))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .map_err(|error| PostError::Transport(error.to_string()))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(PostError::Status(response.status().as_u16()))
        }
    }
}
