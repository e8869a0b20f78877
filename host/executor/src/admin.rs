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
}

/// Talks to every configured admin with the executor's token.
#[derive(Debug, Clone)]
pub(crate) struct AdminClient {
    http: reqwest::Client,
    admins: Vec<String>,
    token: String,
}

impl AdminClient {
    pub(crate) fn new(admins: Vec<String>, token: String) -> Self {
        let http = reqwest::Client::builder()
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

    /// POSTs `body` to the first admin that accepts it.
    pub(crate) async fn post_any<B: Serialize>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<(), AdminError> {
        let mut last = None;
        for admin in &self.admins {
            match self.post(admin, path, body).await {
                Ok(()) => return Ok(()),
                Err(error) => last = Some(error),
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

    async fn post<B: Serialize>(&self, admin: &str, path: &str, body: &B) -> Result<(), String> {
        let response = self
            .http
            .post(format!("{admin}{path}"))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .map_err(|error| error.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("{admin} answered {}", response.status()))
        }
    }
}
