//! The operator's resources: readiness, executor groups and executors,
//! tenants and their tokens.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Ready {
    pub ready: bool,
    /// This admin instance's name, the lease owner of the runs it holds.
    pub instance: String,
}

/// `PUT /api/v1/groups/{name}`: how the group finds its executors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// `AUTO` (executors that register) or `MANUAL` (the listed addresses).
    pub address_type: String,
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// An executor group: `AUTO` (addresses from the registry) or `MANUAL`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Group {
    pub name: String,
    #[schema(example = "AUTO")]
    pub address_type: String,
    /// A `MANUAL` group's addresses, in order.
    pub addresses: Vec<String>,
}

/// A registered executor and its last heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Executor {
    pub group: String,
    pub address: String,
    pub last_beat_ms: i64,
    /// Beat within the admin's dead-after time.
    pub alive: bool,
}

/// `POST /api/v1/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    pub name: String,
}

/// `POST /api/v1/tenants/{name}/tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// What the token is for, as people read it.
    #[serde(default)]
    pub label: String,
}

/// A tenant and how many API tokens it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Tenant {
    pub name: String,
    pub tokens: i64,
}

/// A new tenant with its first token (shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantCreated {
    pub name: String,
    pub token_id: i64,
    pub token: String,
}

/// A new token of a tenant (shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreated {
    pub tenant: String,
    pub token_id: i64,
    pub token: String,
}

/// A revoked token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenRevoked {
    pub tenant: String,
    pub revoked: i64,
}
