//! The error body every answer of the admin and the executor carries:
//! [`ApiError`] (a stable code, a message, the field at fault) and the one
//! list of [`ErrorCode`]s both services answer with.

use serde::{Deserialize, Serialize};

/// Every error body: a stable code, a human message, the offending field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Every error code the admin and the executor answer with, by wire name
/// (`ApiError::code`). One list for both services, so that a client can
/// match on them and the OpenAPI document lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request could not be read (other than the cases below).
    BadRequest,
    /// The body is not JSON.
    MalformedJson,
    /// The JSON does not have the request's shape, or a field is invalid.
    InvalidRequest,
    /// A JSON body without `Content-Type: application/json`.
    UnsupportedMediaType,
    /// The body is over the route's limit.
    PayloadTooLarge,
    /// No token, or a wrong one.
    Unauthorized,
    /// The token may not do this (operator-only).
    Forbidden,
    /// No such route.
    NotFound,
    /// The route exists, not with this method.
    MethodNotAllowed,
    /// No such job (or another tenant's).
    UnknownJob,
    /// No such run (or another tenant's).
    UnknownRun,
    /// No such module.
    UnknownModule,
    /// No such tenant.
    UnknownTenant,
    /// No such token.
    UnknownToken,
    /// A job definition refused; `field` names the field.
    InvalidJob,
    /// A workflow definition or run request refused; `field` names the
    /// node, edge or field.
    InvalidWorkflow,
    /// An uploaded module refused (not a component, another world, ...).
    InvalidModule,
    /// An upload that could not be read (multipart, labels, name).
    InvalidUpload,
    /// A query parameter refused; `field` names it.
    InvalidQuery,
    /// A state edit refused (sizes).
    InvalidState,
    /// An executor group definition refused.
    InvalidGroup,
    /// A tenant name refused.
    InvalidTenant,
    /// The job cannot be started (schedule NONE, or a one-shot in the past).
    CannotStart,
    /// The job is another job's child.
    JobInUse,
    /// The run is not running.
    NotRunning,
    /// A tenant of that name exists.
    TenantExists,
    /// The executor already has this run id.
    DuplicateRun,
    /// A module over the upload limit.
    ModuleTooLarge,
    /// The executor holding the run did not answer.
    ExecutorUnreachable,
    /// The service cannot serve yet (its database does not answer).
    NotReady,
    /// The executor is shutting down.
    ShuttingDown,
    /// A tenant's quota would be exceeded; the message names the quota
    /// and its limit, `field` the quota.
    QuotaExceeded,
    /// No such secret (of the caller's tenant).
    UnknownSecret,
    /// The secret is referenced by jobs (delete with `force=true`).
    SecretInUse,
    /// The admin has no secrets key, so no secret can be set or used.
    SecretsDisabled,
    /// A user refused (name, role, tenant or password); `field` names it.
    InvalidUser,
    /// A user of that name exists.
    UserExists,
    /// No such user (that the caller may see).
    UnknownUser,
    /// Too many failed logins for that user or from that address; retry
    /// after the `Retry-After` header's seconds.
    TooManyAttempts,
    /// The admin is reading as many uploads at once as it holds room for;
    /// retry after the `Retry-After` header's seconds.
    UploadsBusy,
    /// The admin is checking as many passwords at once as it may; retry
    /// after the `Retry-After` header's seconds.
    LoginsBusy,
    /// An executor address is registered with another executor credential.
    AddressTaken,
    /// No such enrolled executor.
    UnknownExecutorToken,
    /// An unexpected error on the server (its detail is logged there, not sent).
    Internal,
}

impl ErrorCode {
    /// Every code.
    pub const ALL: &'static [ErrorCode] = &[
        ErrorCode::BadRequest,
        ErrorCode::MalformedJson,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::UnknownJob,
        ErrorCode::UnknownRun,
        ErrorCode::UnknownModule,
        ErrorCode::UnknownTenant,
        ErrorCode::UnknownToken,
        ErrorCode::InvalidJob,
        ErrorCode::InvalidWorkflow,
        ErrorCode::InvalidModule,
        ErrorCode::InvalidUpload,
        ErrorCode::InvalidQuery,
        ErrorCode::InvalidState,
        ErrorCode::InvalidGroup,
        ErrorCode::InvalidTenant,
        ErrorCode::CannotStart,
        ErrorCode::JobInUse,
        ErrorCode::NotRunning,
        ErrorCode::TenantExists,
        ErrorCode::DuplicateRun,
        ErrorCode::ModuleTooLarge,
        ErrorCode::ExecutorUnreachable,
        ErrorCode::NotReady,
        ErrorCode::ShuttingDown,
        ErrorCode::QuotaExceeded,
        ErrorCode::UnknownSecret,
        ErrorCode::SecretInUse,
        ErrorCode::SecretsDisabled,
        ErrorCode::InvalidUser,
        ErrorCode::UserExists,
        ErrorCode::UnknownUser,
        ErrorCode::TooManyAttempts,
        ErrorCode::UploadsBusy,
        ErrorCode::LoginsBusy,
        ErrorCode::AddressTaken,
        ErrorCode::UnknownExecutorToken,
        ErrorCode::Internal,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::MalformedJson => "malformed_json",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::UnknownJob => "unknown_job",
            ErrorCode::UnknownRun => "unknown_run",
            ErrorCode::UnknownModule => "unknown_module",
            ErrorCode::UnknownTenant => "unknown_tenant",
            ErrorCode::UnknownToken => "unknown_token",
            ErrorCode::InvalidJob => "invalid_job",
            ErrorCode::InvalidWorkflow => "invalid_workflow",
            ErrorCode::InvalidModule => "invalid_module",
            ErrorCode::InvalidUpload => "invalid_upload",
            ErrorCode::InvalidQuery => "invalid_query",
            ErrorCode::InvalidState => "invalid_state",
            ErrorCode::InvalidGroup => "invalid_group",
            ErrorCode::InvalidTenant => "invalid_tenant",
            ErrorCode::CannotStart => "cannot_start",
            ErrorCode::JobInUse => "job_in_use",
            ErrorCode::NotRunning => "not_running",
            ErrorCode::TenantExists => "tenant_exists",
            ErrorCode::DuplicateRun => "duplicate_run",
            ErrorCode::ModuleTooLarge => "module_too_large",
            ErrorCode::ExecutorUnreachable => "executor_unreachable",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::UnknownSecret => "unknown_secret",
            ErrorCode::SecretInUse => "secret_in_use",
            ErrorCode::SecretsDisabled => "secrets_disabled",
            ErrorCode::InvalidUser => "invalid_user",
            ErrorCode::UserExists => "user_exists",
            ErrorCode::UnknownUser => "unknown_user",
            ErrorCode::TooManyAttempts => "too_many_attempts",
            ErrorCode::UploadsBusy => "uploads_busy",
            ErrorCode::LoginsBusy => "logins_busy",
            ErrorCode::AddressTaken => "address_taken",
            ErrorCode::UnknownExecutorToken => "unknown_executor_token",
            ErrorCode::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod error_code_tests {
    use super::*;

    #[test]
    fn every_error_code_serializes_as_its_wire_name_and_back() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap_or_default();
            assert_eq!(json, serde_json::Value::String(code.as_str().to_owned()));
            let back: ErrorCode = serde_json::from_value(json).unwrap_or(ErrorCode::Internal);
            assert_eq!(back, *code);
        }
        let unknown: Result<ApiError, _> =
            serde_json::from_str(r#"{"code": "made_up", "message": "?"}"#);
        assert!(unknown.is_err(), "codes are a closed list");
    }
}
