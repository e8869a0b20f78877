//! The audit log: every change a person or program made through the user
//! API (and every login), who made it, from where, and how it ended.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::names::Role;

/// One change, as the audit log keeps it. It holds names and ids, never a
/// secret's value, a password or a token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    /// When the answer was given, ms since the epoch.
    pub at_ms: i64,
    /// The tenant the change was made in (empty for a failed login of no
    /// known user).
    pub tenant: String,
    /// Who: a user's name, `token N` (a tenant token no user made), the
    /// `operator token`, or `anonymous`.
    #[schema(example = "ana")]
    pub actor: String,
    /// The role it acted with (absent when it was not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The API token used, when one was (its id, never its value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_id: Option<i64>,
    /// What: the method and the route's path template.
    #[schema(example = "PUT /api/v1/jobs/{id}")]
    pub action: String,
    /// On what: the request's path.
    #[schema(example = "/api/v1/jobs/7")]
    pub target: String,
    /// The answer's HTTP status.
    pub status: u16,
    /// `ok` (2xx), `refused` (4xx) or `failed` (5xx).
    #[schema(example = "ok")]
    pub outcome: String,
    /// The client's address, as the admin saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// What the change was, where the route says more than its path: a
    /// job's changed fields (old and new), a trigger's param, a login's
    /// user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub detail: Option<serde_json::Value>,
}

/// `GET /api/v1/audit`: entries newest first, and the cursor to the next
/// page (`before`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}
