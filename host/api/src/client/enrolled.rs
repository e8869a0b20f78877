//! The client's enrolled executors: enroll, list, rotate, revoke.

use reqwest::Method;

use super::{Client, ClientError};
use crate::{
    ExecutorToken, ExecutorTokenIssued, ExecutorTokenRevoked, ExecutorTokenRotation,
    ExecutorTokenSpec,
};

impl Client {
    /// Enrolls an executor; its token is in the answer, once.
    pub async fn enroll_executor(
        &self,
        spec: &ExecutorTokenSpec,
    ) -> Result<ExecutorTokenIssued, ClientError> {
        self.call(Method::POST, "/api/v1/executor-tokens", Some(spec))
            .await
    }

    pub async fn executor_tokens(&self) -> Result<Vec<ExecutorToken>, ClientError> {
        self.call(Method::GET, "/api/v1/executor-tokens", None::<&()>)
            .await
    }

    /// A new token for enrolled executor `id`; the old one works for
    /// `overlap_ms` more (the admin's default when `None`).
    pub async fn rotate_executor_token(
        &self,
        id: i64,
        overlap_ms: Option<i64>,
    ) -> Result<ExecutorTokenIssued, ClientError> {
        let path = format!("/api/v1/executor-tokens/{id}/rotate");
        self.call(
            Method::POST,
            &path,
            Some(&ExecutorTokenRotation { overlap_ms }),
        )
        .await
    }

    pub async fn revoke_executor_token(
        &self,
        id: i64,
    ) -> Result<ExecutorTokenRevoked, ClientError> {
        let path = format!("/api/v1/executor-tokens/{id}");
        self.call(Method::DELETE, &path, None::<&()>).await
    }
}
