//! Enrolled executors: a credential per executor (or fleet), made by the
//! operator, scoped to executor groups, rotated with an overlap and
//! revoked at once (`/api/v1/executor-tokens`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /api/v1/executor-tokens`: enrolls an executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutorTokenSpec {
    /// Who holds it (a host, a fleet): 1 to 64 characters.
    #[schema(example = "batch-host-1", min_length = 1, max_length = 64)]
    pub name: String,
    /// The executor groups it may register in (at least one).
    #[schema(example = json!(["batch"]))]
    pub groups: Vec<String>,
}

/// An enrolled executor's credential, as listed (never its token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExecutorToken {
    pub id: i64,
    pub name: String,
    pub groups: Vec<String>,
    pub created_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotated_at_ms: Option<i64>,
    /// Until when the token before the last rotation still works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_valid_until_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<i64>,
    /// The addresses registered with it now.
    #[serde(default)]
    pub registered: Vec<String>,
}

/// A new or rotated enrolled executor's token (shown once): the executor
/// is started with it (`CRONBOX_TOKEN`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExecutorTokenIssued {
    pub id: i64,
    pub name: String,
    pub groups: Vec<String>,
    #[schema(example = "cbe_3f9c…")]
    pub token: String,
    /// Until when the token it replaces still works (a rotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_valid_until_ms: Option<i64>,
}

/// `POST /api/v1/executor-tokens/{id}/rotate`: how long the token before
/// keeps working beside the new one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutorTokenRotation {
    /// Milliseconds (default an hour, at most 7 days; 0 ends the old
    /// token now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 604800000)]
    pub overlap_ms: Option<i64>,
}

/// A revoked enrolled executor: its registrations ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExecutorTokenRevoked {
    pub id: i64,
    pub registrations_ended: u64,
}
