//! The client's tenants and what belongs to one: its tokens, quotas, HTTP
//! ceiling, secrets, calendars and users, and the caller's own session.

use reqwest::Method;

use super::{Client, ClientError};
use crate::*;

impl Client {
    pub async fn tenants(&self) -> Result<Vec<Tenant>, ClientError> {
        self.call(Method::GET, "/api/v1/tenants", None::<&()>).await
    }

    pub async fn create_tenant(&self, name: &str) -> Result<TenantCreated, ClientError> {
        let spec = TenantSpec {
            name: name.to_owned(),
        };
        self.call(Method::POST, "/api/v1/tenants", Some(&spec))
            .await
    }

    pub async fn create_token(
        &self,
        tenant: &str,
        label: &str,
    ) -> Result<TokenCreated, ClientError> {
        let spec = TokenSpec {
            label: label.to_owned(),
        };
        let path = format!("/api/v1/tenants/{tenant}/tokens");
        self.call(Method::POST, &path, Some(&spec)).await
    }

    pub async fn revoke_token(&self, tenant: &str, id: i64) -> Result<TokenRevoked, ClientError> {
        let path = format!("/api/v1/tenants/{tenant}/tokens/{id}");
        self.call(Method::DELETE, &path, None::<&()>).await
    }

    /// A tenant's quotas with its usage (the operator for any tenant, a
    /// tenant for itself).
    pub async fn quotas(&self, tenant: &str) -> Result<TenantQuotas, ClientError> {
        let path = format!("/api/v1/tenants/{tenant}/quotas");
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// Replaces a tenant's own quotas (operator).
    pub async fn set_quotas(
        &self,
        tenant: &str,
        settings: &QuotaSettings,
    ) -> Result<TenantQuotas, ClientError> {
        let path = format!("/api/v1/tenants/{tenant}/quotas");
        self.call(Method::PUT, &path, Some(settings)).await
    }

    /// The origins a tenant's jobs may be granted.
    pub async fn http_ceiling(&self, tenant: &str) -> Result<HttpCeiling, ClientError> {
        let path = format!("/api/v1/tenants/{tenant}/http-ceiling");
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// Replaces a tenant's HTTP ceiling (operator).
    pub async fn set_http_ceiling(
        &self,
        tenant: &str,
        ceiling: &HttpCeiling,
    ) -> Result<HttpCeiling, ClientError> {
        let path = format!("/api/v1/tenants/{tenant}/http-ceiling");
        self.call(Method::PUT, &path, Some(ceiling)).await
    }

    /// Sets a secret of the caller's tenant (new or replaced).
    pub async fn set_secret(&self, name: &str, value: &str) -> Result<Secret, ClientError> {
        let path = format!("/api/v1/secrets/{name}");
        let body = SecretValue {
            value: value.to_owned(),
        };
        self.call(Method::PUT, &path, Some(&body)).await
    }

    /// The caller's tenant's calendars.
    pub async fn calendars(&self) -> Result<Vec<Calendar>, ClientError> {
        self.call(Method::GET, "/api/v1/calendars", None::<&()>)
            .await
    }

    /// Sets calendar `name`'s dates (`YYYY-MM-DD`), making it if needed.
    pub async fn put_calendar(
        &self,
        name: &str,
        dates: &[String],
    ) -> Result<Calendar, ClientError> {
        let body = CalendarDates {
            dates: dates.to_vec(),
        };
        self.call(
            Method::PUT,
            &format!("/api/v1/calendars/{name}"),
            Some(&body),
        )
        .await
    }

    /// Deletes calendar `name` (jobs naming it fire on its dates from then on).
    pub async fn delete_calendar(&self, name: &str) -> Result<Calendar, ClientError> {
        self.call(
            Method::DELETE,
            &format!("/api/v1/calendars/{name}"),
            None::<&()>,
        )
        .await
    }

    /// The caller's secrets (names and dates, never values).
    pub async fn secrets(&self) -> Result<Vec<Secret>, ClientError> {
        self.call(Method::GET, "/api/v1/secrets", None::<&()>).await
    }

    /// Deletes a secret; with `force`, even while jobs reference it.
    pub async fn delete_secret(
        &self,
        name: &str,
        force: bool,
    ) -> Result<SecretDeleted, ClientError> {
        let path = format!("/api/v1/secrets/{name}?force={force}");
        self.call(Method::DELETE, &path, None::<&()>).await
    }

    // Users.

    /// The users the caller manages (its tenant's; everyone's for the
    /// operator, or `tenant`'s).
    pub async fn users(&self, tenant: Option<&str>) -> Result<Vec<User>, ClientError> {
        let path = match tenant {
            Some(tenant) => format!("/api/v1/users?tenant={tenant}"),
            None => "/api/v1/users".to_owned(),
        };
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// Creates a user.
    pub async fn create_user(&self, spec: &UserSpec) -> Result<User, ClientError> {
        self.call(Method::POST, "/api/v1/users", Some(spec)).await
    }

    /// Sets another user's password (as its admin); its sessions end.
    /// One's own password is changed from a login session, with the
    /// current one (the console's Admin page).
    pub async fn set_password(
        &self,
        name: &str,
        password: &str,
    ) -> Result<UserChanged, ClientError> {
        let path = format!("/api/v1/users/{name}/password");
        let body = PasswordChange {
            password: password.to_owned(),
            current_password: None,
        };
        self.call(Method::PUT, &path, Some(&body)).await
    }

    /// Removes a user with its sessions and tokens.
    pub async fn remove_user(&self, name: &str) -> Result<UserChanged, ClientError> {
        let path = format!("/api/v1/users/{name}");
        self.call(Method::DELETE, &path, None::<&()>).await
    }

    /// Who the caller is.
    pub async fn session(&self) -> Result<Session, ClientError> {
        self.call(Method::GET, "/api/v1/session", None::<&()>).await
    }
}
