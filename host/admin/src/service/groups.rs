//! Executor groups: `AUTO` (the executors that register in them) or
//! `MANUAL` (the addresses the operator lists).

use super::ServiceError;
use cronbox_api::LegacySpec;

use crate::store::{GroupRow, LegacyGroup, Store};

/// Every tenant, in a group's grants.
pub const EVERY_TENANT: &str = "*";

/// Grants group `name` to `tenants` (known tenants, or `*`), replacing the
/// grants before; the group as stored after.
pub async fn grant(
    store: &Store,
    name: &str,
    tenants: &[String],
) -> Result<GroupRow, ServiceError> {
    let invalid = |field, message: String| ServiceError::InvalidGroup { field, message };
    if !store.group_exists(name).await? {
        return Err(ServiceError::UnknownGroup(name.to_owned()));
    }
    let known: Vec<String> = store
        .tenants()
        .await?
        .into_iter()
        .map(|(tenant, _)| tenant)
        .collect();
    if let Some(unknown) = tenants.iter().find(|tenant| {
        tenant.as_str() != EVERY_TENANT
            && tenant.as_str() != crate::model::DEFAULT_TENANT
            && !known.contains(tenant)
    }) {
        return Err(invalid(
            "tenants",
            format!("no tenant {unknown:?} (name known tenants, or \"*\" for every tenant)"),
        ));
    }
    store.set_group_tenants(name, tenants).await?;
    store
        .groups()
        .await?
        .into_iter()
        .find(|row| row.name == name)
        .ok_or_else(|| ServiceError::UnknownGroup(name.to_owned()))
}

/// Creates or replaces group `name`; returns its address type as stored
/// (`AUTO` or `MANUAL`). A MANUAL group needs http(s) addresses. A legacy
/// group (xxl-job executors) needs its access token; a group changes
/// between legacy and cronbox executors only while no job is in it.
pub async fn put(
    store: &Store,
    name: &str,
    address_type: &str,
    addresses: &[String],
    legacy: Option<&LegacySpec>,
    secrets: Option<&crate::secrets::SecretBox>,
) -> Result<String, ServiceError> {
    let invalid = |field, message: String| ServiceError::InvalidGroup { field, message };
    if let Some(legacy) = legacy {
        let token = &legacy.access_token;
        if !(8..=256).contains(&token.len())
            || token.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(invalid(
                "legacy.access_token",
                "must be 8 to 256 characters, without spaces or control characters".to_owned(),
            ));
        }
    }
    let was_legacy = store.legacy_group(name).await?.is_some();
    if was_legacy != legacy.is_some() {
        let jobs = store.jobs_in_group(name).await?;
        if jobs > 0 {
            return Err(invalid(
                "legacy",
                format!(
                    "group {name:?} has {jobs} jobs: a group changes between xxl-job and \
                     cronbox executors only while it has none (move them to another group first)"
                ),
            ));
        }
    }
    let kind = address_type.to_ascii_uppercase();
    if kind != "AUTO" && kind != "MANUAL" {
        return Err(invalid(
            "address_type",
            format!("unknown address_type {address_type:?}: use AUTO or MANUAL"),
        ));
    }
    if kind == "MANUAL" && addresses.is_empty() {
        return Err(invalid(
            "addresses",
            "a MANUAL group needs addresses".to_owned(),
        ));
    }
    if let Some(bad) = addresses.iter().find(|address| {
        !(address.starts_with("http://") || address.starts_with("https://"))
            || address.contains(',')
    }) {
        return Err(invalid(
            "addresses",
            format!("address {bad:?} is not an http(s) URL"),
        ));
    }
    let legacy = legacy.map(|legacy| LegacyGroup {
        protocol: legacy.protocol,
        token: crate::legacy::stored_token(secrets, name, &legacy.access_token),
    });
    store
        .put_group(name, &kind, addresses, legacy.as_ref())
        .await?;
    Ok(kind)
}
