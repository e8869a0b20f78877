//! Users, their sessions, and API tokens with the role they carry.

use cronbox_api::{Role, TokenInfo, User};

use super::rows::{decode, decode_optional};
use super::*;

/// A user as stored, with its password hash (never answered).
#[derive(Debug, Clone)]
pub struct StoredUser {
    pub user: User,
    pub password_hash: String,
}

/// Who a token or a session acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: String,
    pub role: Role,
    /// The user behind it; `None` for a tenant token the operator made.
    pub user: Option<String>,
}

/// Whose a token is ([`Store::token_owner`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenOwner {
    /// The role the token carries.
    pub role: Role,
    pub user: Option<String>,
    /// The role of the user who made it.
    pub user_role: Option<Role>,
}

fn user_from_row(row: &AnyRow) -> Result<User, sqlx::Error> {
    Ok(User {
        name: row.try_get("name")?,
        tenant: row.try_get("tenant")?,
        role: decode(row, "role")?,
        created_at_ms: row.try_get("created_at_ms")?,
    })
}

impl Store {
    /// Creates a user; false if one of that name exists (in any tenant).
    pub async fn create_user(&self, user: &User, password_hash: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query(
            "INSERT INTO app_user (name, tenant, role, password_hash, created_at_ms) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(&user.name)
        .bind(&user.tenant)
        .bind(user.role.as_str())
        .bind(password_hash)
        .bind(user.created_at_ms)
        .execute(&self.writer)
        .await?
        .rows_affected()
            == 1)
    }

    /// The user `name` with its password hash.
    pub async fn user(&self, name: &str) -> Result<Option<StoredUser>, StoreError> {
        let row = sqlx::query(
            "SELECT name, tenant, role, password_hash, created_at_ms FROM app_user WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(StoredUser {
            user: user_from_row(&row)?,
            password_hash: row.try_get("password_hash")?,
        }))
    }

    /// The users of `tenant` (every user for `None`), by tenant and name.
    pub async fn users(&self, tenant: Option<&str>) -> Result<Vec<User>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, tenant, role, created_at_ms FROM app_user \
             WHERE tenant = $1 OR $2 = 1 ORDER BY tenant, name",
        )
        .bind(tenant.unwrap_or(""))
        .bind(i64::from(tenant.is_none()))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(user_from_row)
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)
    }

    /// Replaces a user's password hash and ends its sessions; the number
    /// of sessions ended, or `None` if there is no such user.
    pub async fn set_password(
        &self,
        name: &str,
        password_hash: &str,
    ) -> Result<Option<i64>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let changed = sqlx::query("UPDATE app_user SET password_hash = $1 WHERE name = $2")
            .bind(password_hash)
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if changed == 0 {
            return Ok(None);
        }
        let ended = sqlx::query("DELETE FROM user_session WHERE user_name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Some(ended as i64))
    }

    /// Removes a user with its sessions and tokens; (sessions ended,
    /// tokens revoked), or `None` if there is no such user.
    pub async fn remove_user(&self, name: &str) -> Result<Option<(i64, i64)>, StoreError> {
        let mut tx = self.writer.begin().await?;
        let removed = sqlx::query("DELETE FROM app_user WHERE name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if removed == 0 {
            return Ok(None);
        }
        let sessions = sqlx::query("DELETE FROM user_session WHERE user_name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let tokens = sqlx::query("DELETE FROM api_token WHERE user_name = $1")
            .bind(name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(Some((sessions as i64, tokens as i64)))
    }

    /// Opens a session of `user` under the sha256 of its cookie.
    pub async fn open_session(
        &self,
        id_hash: &str,
        user: &str,
        csrf_token: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO user_session (id_hash, user_name, csrf_token, created_at_ms, \
             expires_at_ms) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id_hash)
        .bind(user)
        .bind(csrf_token)
        .bind(now_ms)
        .bind(expires_at_ms)
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The user of an unexpired session, with the session's CSRF token.
    pub async fn session(
        &self,
        id_hash: &str,
        now_ms: i64,
    ) -> Result<Option<(User, String)>, StoreError> {
        let row = sqlx::query(
            "SELECT app_user.name, app_user.tenant, app_user.role, app_user.created_at_ms, \
             user_session.csrf_token FROM user_session \
             JOIN app_user ON app_user.name = user_session.user_name \
             WHERE user_session.id_hash = $1 AND user_session.expires_at_ms > $2",
        )
        .bind(id_hash)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some((user_from_row(&row)?, row.try_get("csrf_token")?)))
    }

    /// Ends a session; false if there was none.
    pub async fn end_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("DELETE FROM user_session WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.writer)
            .await?
            .rows_affected()
            == 1)
    }

    /// Deletes sessions expired by `now_ms`; how many.
    pub async fn delete_expired_sessions(&self, now_ms: i64) -> Result<u64, StoreError> {
        Ok(
            sqlx::query("DELETE FROM user_session WHERE expires_at_ms <= $1")
                .bind(now_ms)
                .execute(&self.writer)
                .await?
                .rows_affected(),
        )
    }

    /// Stores a token by its sha256, with the role it carries and the user
    /// who made it; returns its id.
    pub async fn add_token(
        &self,
        principal: &Principal,
        label: &str,
        token_hash: &str,
        now_ms: i64,
    ) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "INSERT INTO api_token (tenant, label, token_hash, created_at_ms, role, user_name) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(&principal.tenant)
        .bind(label)
        .bind(token_hash)
        .bind(now_ms)
        .bind(principal.role.as_str())
        .bind(principal.user.as_deref())
        .fetch_one(&self.writer)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Who the token with this sha256 acts as, and the token's id.
    pub async fn token_principal(
        &self,
        token_hash: &str,
    ) -> Result<Option<(Principal, i64)>, StoreError> {
        let row =
            sqlx::query("SELECT id, tenant, role, user_name FROM api_token WHERE token_hash = $1")
                .bind(token_hash)
                .fetch_optional(&self.pool)
                .await?;
        let Some(row) = row else { return Ok(None) };
        let principal = Principal {
            tenant: row.try_get("tenant")?,
            role: decode(&row, "role")?,
            user: row.try_get("user_name")?,
        };
        Ok(Some((principal, row.try_get("id")?)))
    }

    /// The tokens of `user` (of every user and none, for `None`) in
    /// `tenant`, newest first; never their values.
    pub async fn tokens(
        &self,
        tenant: &str,
        user: Option<&str>,
    ) -> Result<Vec<TokenInfo>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, tenant, label, role, user_name, created_at_ms FROM api_token \
             WHERE tenant = $1 AND (user_name = $2 OR $3 = 1) ORDER BY id DESC",
        )
        .bind(tenant)
        .bind(user.unwrap_or(""))
        .bind(i64::from(user.is_none()))
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(TokenInfo {
                    id: row.try_get("id")?,
                    tenant: row.try_get("tenant")?,
                    label: row.try_get("label")?,
                    role: decode(row, "role")?,
                    user: row.try_get("user_name")?,
                    created_at_ms: row.try_get("created_at_ms")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Whose token `id` of `tenant` is: its role, its user and that
    /// user's role (none for a tenant token).
    pub async fn token_owner(
        &self,
        tenant: &str,
        id: i64,
    ) -> Result<Option<TokenOwner>, StoreError> {
        let row = sqlx::query(
            "SELECT api_token.role, api_token.user_name, app_user.role AS user_role \
             FROM api_token LEFT JOIN app_user ON app_user.name = api_token.user_name \
             WHERE api_token.tenant = $1 AND api_token.id = $2",
        )
        .bind(tenant)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(TokenOwner {
            role: decode(&row, "role")?,
            user: row.try_get("user_name")?,
            user_role: decode_optional(&row, "user_role")?,
        }))
    }
}
