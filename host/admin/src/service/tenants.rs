//! Tenants and their API tokens: names, creation with a first token (a
//! tenant admin's), more tokens. A token is shown once and stored as its sha256.

use super::ServiceError;
use cronbox_api::Role;

use crate::store::{Principal, Store};

/// The sha256 (hex) under which a token is stored (tenants', users',
/// sessions', enrolled executors').
pub use cronbox_protocol::credentials::token_hash;

/// A new random token: `prefix` and 24 random bytes in hex.
pub fn random_token(prefix: &str) -> String {
    format!("{prefix}{}", hex::encode(rand::random::<[u8; 24]>()))
}

/// A new random API token.
pub fn new_token() -> String {
    random_token("cbx_")
}

/// Creates tenant `name` with a first token; returns the token's id and
/// the token (to show once).
pub async fn create(store: &Store, name: &str, now_ms: i64) -> Result<(i64, String), ServiceError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(ServiceError::InvalidTenant(name.to_owned()));
    }
    if !store.create_tenant(name, now_ms).await? {
        return Err(ServiceError::TenantExists(name.to_owned()));
    }
    let admin = Principal {
        tenant: name.to_owned(),
        role: Role::Admin,
        user: None,
    };
    add_token(store, &admin, "first", now_ms).await
}

/// Adds a token labelled `label` acting as `principal`; returns its id and
/// the token.
pub async fn add_token(
    store: &Store,
    principal: &Principal,
    label: &str,
    now_ms: i64,
) -> Result<(i64, String), ServiceError> {
    let token = new_token();
    let id = store
        .add_token(principal, label, &token_hash(&token), now_ms)
        .await?;
    Ok((id, token))
}

/// Most origins in a tenant's HTTP ceiling.
pub const MAX_CEILING_ORIGINS: usize = 64;

/// A tenant's HTTP ceiling, each origin parsed and in its canonical form.
pub fn checked_ceiling(origins: &[String]) -> Result<Vec<String>, ServiceError> {
    if origins.len() > MAX_CEILING_ORIGINS {
        return Err(ServiceError::invalid(
            "origins",
            format!("{} origins; at most {MAX_CEILING_ORIGINS}", origins.len()),
        ));
    }
    let parsed = cronbox_net_policy::parse_origins(origins)
        .map_err(|error| ServiceError::invalid("origins", error.to_string()))?;
    Ok(parsed.iter().map(ToString::to_string).collect())
}

/// Refuses grants that do not lie within `tenant`'s ceiling, naming the
/// first such origin.
pub async fn check_within_ceiling(
    store: &Store,
    tenant: &str,
    grants: &[String],
) -> Result<(), ServiceError> {
    if grants.is_empty() {
        return Ok(());
    }
    let top = store.http_ceiling_patterns(tenant).await?;
    let grants = cronbox_net_policy::parse_origins(grants)
        .map_err(|error| ServiceError::invalid("http_allow", error.to_string()))?;
    if let Some(outside) = cronbox_net_policy::first_outside(&grants, &top) {
        let allowed = if top.is_empty() {
            format!(
                "none (the operator sets it: `cronbox ceiling {tenant} --set ORIGIN...`, or PUT \
                 /api/v1/tenants/{tenant}/http-ceiling)"
            )
        } else {
            top.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(ServiceError::invalid(
            "http_allow",
            format!(
                "{outside} is outside the HTTP ceiling of tenant {tenant:?}, which allows {allowed}"
            ),
        ));
    }
    Ok(())
}

/// Every tenant with its number of tokens.
pub async fn list(store: &Store) -> Result<Vec<(String, i64)>, ServiceError> {
    Ok(store.tenants().await?)
}

/// Refuses a tenant that was never created ([`ServiceError::UnknownTenant`]).
pub async fn known(store: &Store, name: &str) -> Result<(), ServiceError> {
    let known = store
        .tenants()
        .await?
        .iter()
        .any(|(tenant, _)| tenant == name);
    if known {
        Ok(())
    } else {
        Err(ServiceError::UnknownTenant(name.to_owned()))
    }
}

/// [`known`], or the operator's own tenant (which has quotas and a
/// ceiling without being created).
pub async fn known_or_default(store: &Store, name: &str) -> Result<(), ServiceError> {
    if name == cronbox_api::DEFAULT_TENANT {
        return Ok(());
    }
    known(store, name).await
}

/// A tenant's quotas with its use today.
pub async fn quotas(
    services: &super::Services,
    tenant: &str,
) -> Result<cronbox_api::TenantQuotas, ServiceError> {
    known_or_default(services.store(), tenant).await?;
    Ok(services
        .quotas()
        .report(services.store(), tenant, services.now_ms())
        .await?)
}

/// Replaces a tenant's quotas: them with its use, as now enforced.
pub async fn set_quotas(
    services: &super::Services,
    tenant: &str,
    settings: &cronbox_api::QuotaSettings,
) -> Result<cronbox_api::TenantQuotas, ServiceError> {
    let store = services.store();
    known_or_default(store, tenant).await?;
    store.set_tenant_quotas(tenant, settings).await?;
    services.quotas().forget(tenant);
    quotas(services, tenant).await
}

/// A tenant's HTTP ceiling: the origins its jobs' grants lie within.
pub async fn http_ceiling(store: &Store, tenant: &str) -> Result<Vec<String>, ServiceError> {
    known_or_default(store, tenant).await?;
    Ok(store.http_ceiling(tenant).await?)
}

/// Replaces a tenant's HTTP ceiling: the origins as stored (canonical).
pub async fn set_http_ceiling(
    store: &Store,
    tenant: &str,
    origins: &[String],
) -> Result<Vec<String>, ServiceError> {
    known_or_default(store, tenant).await?;
    let origins = checked_ceiling(origins)?;
    store.set_http_ceiling(tenant, &origins).await?;
    Ok(origins)
}

/// Revokes token `id` of `tenant`, refused when it has none such.
pub async fn revoke_token(store: &Store, tenant: &str, id: i64) -> Result<(), ServiceError> {
    if store.revoke_token(tenant, id).await? {
        Ok(())
    } else {
        Err(ServiceError::UnknownToken {
            tenant: tenant.to_owned(),
            id,
        })
    }
}

/// Who holds API token `token` (a tenant's or a user's) and the token's
/// id; none: no such token.
pub async fn principal_of(
    store: &Store,
    token: &str,
) -> Result<Option<(Principal, i64)>, ServiceError> {
    Ok(store.token_principal(&token_hash(token)).await?)
}
