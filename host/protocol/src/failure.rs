//! [`Failure`]: an error answer of the admin's or the executor's HTTP API
//! (a status and an [`ApiError`] body, a `Retry-After` when there is one),
//! and how axum's JSON rejections become one. Behind the `axum` feature:
//! the runtime and the CLI never answer requests.

use axum::extract::rejection::JsonRejection;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::{ApiError, ErrorCode};

/// An error answered as a JSON [`ApiError`] with its status.
#[derive(Debug)]
pub struct Failure {
    status: StatusCode,
    body: ApiError,
    /// Seconds to wait before trying again (the `Retry-After` header).
    retry_after: Option<u64>,
}

impl Failure {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            status,
            body: ApiError {
                code,
                message: message.into(),
                field: None,
            },
            retry_after: None,
        }
    }

    /// The same failure naming `field` as the one at fault.
    pub fn field(mut self, field: &str) -> Self {
        self.body.field = Some(field.to_owned());
        self
    }

    /// Answered with a `Retry-After` of `seconds`.
    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    /// The status and the body, for an answer carried inside another (one
    /// run of a batch).
    pub fn into_parts(self) -> (StatusCode, ApiError) {
        (self.status, self.body)
    }

    /// A JSON body that could not be read: not JSON, no JSON content type,
    /// too large, or (for a typed body) not of the expected shape.
    pub fn from_json_rejection(rejection: JsonRejection) -> Self {
        let status = rejection.status();
        let code = match rejection {
            JsonRejection::JsonSyntaxError(_) => ErrorCode::MalformedJson,
            JsonRejection::JsonDataError(_) => ErrorCode::InvalidRequest,
            JsonRejection::MissingJsonContentType(_) => ErrorCode::UnsupportedMediaType,
            _ if status == StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
            _ => ErrorCode::BadRequest,
        };
        Failure::new(status, code, rejection.body_text())
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_answers_its_status_body_and_retry_after() {
        let response = Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::QuotaExceeded,
            "slow down",
        )
        .field("runs_per_minute")
        .retry_after(7)
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "7");
    }
}
