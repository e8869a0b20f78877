//! The client's audit log reads.

use reqwest::Method;
use serde::Serialize;

use super::{Client, ClientError};
use crate::AuditPage;

/// Which entries `GET /api/v1/audit` lists, newest first (every field
/// narrows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AuditQuery {
    /// A tenant's (the operator's choice; a tenant admin reads its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// Actions containing this text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Made at or after (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    /// The `next_before` of the previous page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl Client {
    /// A page of the audit log.
    pub async fn audit(&self, query: &AuditQuery) -> Result<AuditPage, ClientError> {
        let request = self.request(Method::GET, "/api/v1/audit").query(query);
        self.send(request).await
    }
}
