//! People and their sessions: users (a name, a tenant, a role, a password
//! stored as argon2id), the session a login opens, and the API tokens a
//! user makes for itself, which carry its role.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::names::Role;

/// `POST /api/v1/session`: a login.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Login {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Who is calling: `GET /api/v1/session`, and the answer to a login.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Session {
    /// The user's name; absent for an API token no user made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub tenant: String,
    pub role: Role,
    /// The value every state-changing request of this session sends in
    /// the `X-CSRF-Token` header; absent when the caller uses a bearer
    /// token (which needs none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub csrf_token: Option<String>,
}

/// The answer to `DELETE /api/v1/session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LoggedOut {
    pub ended: bool,
}

/// `POST /api/v1/users`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    /// 1 to 63 lowercase letters, digits, `-`, `_` or `.`; unique across
    /// tenants (it is what a person logs in with).
    #[schema(pattern = "^[a-z0-9._-]{1,63}$")]
    pub name: String,
    /// The caller's own tenant when left out; another only for the
    /// operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub role: Role,
    /// 12 to 1,024 bytes.
    pub password: String,
}

impl std::fmt::Debug for UserSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSpec")
            .field("name", &self.name)
            .field("tenant", &self.tenant)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// A user as listed (never its password).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct User {
    pub name: String,
    pub tenant: String,
    pub role: Role,
    pub created_at_ms: i64,
}

/// `PUT /api/v1/users/{name}/password`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordChange {
    /// 12 to 1,024 bytes.
    pub password: String,
    /// The user's password now: needed (with a login session, not a
    /// token) to change one's own; not read when an admin sets another
    /// user's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_password: Option<String>,
}

impl std::fmt::Debug for PasswordChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordChange(..)")
    }
}

/// The answer to removing a user or changing its password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserChanged {
    pub name: String,
    /// Sessions ended (all of the user's, on either change).
    pub sessions_ended: i64,
    /// Tokens revoked (all of the user's, when it is removed).
    pub tokens_revoked: i64,
}

/// `POST /api/v1/tokens`: a token of the calling user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserTokenSpec {
    /// What the token is for, as people read it.
    #[serde(default)]
    pub label: String,
    /// A role no higher than the user's (the user's when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// A token as listed: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    pub id: i64,
    pub tenant: String,
    pub label: String,
    pub role: Role,
    /// The user who made it; absent for a tenant's token made by the
    /// operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub created_at_ms: i64,
}

/// A new token of the calling user (its value shown this once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UserTokenCreated {
    pub id: i64,
    pub tenant: String,
    pub role: Role,
    pub token: String,
}
