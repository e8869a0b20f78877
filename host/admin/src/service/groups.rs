//! Executor groups: `AUTO` (the executors that register in them) or
//! `MANUAL` (the addresses the operator lists).

use super::ServiceError;
use cronbox_api::LegacySpec;

use crate::store::{GroupRow, LegacyGroup, RegisteredExecutor, Store};

/// Every tenant, in a group's grants.
pub const EVERY_TENANT: &str = "*";

/// Every executor group, by name, with its addresses and grants.
pub async fn list(store: &Store) -> Result<Vec<GroupRow>, ServiceError> {
    Ok(store.groups().await?)
}

/// The tenants group `name` is granted to (none: no such group).
pub async fn tenants_of(store: &Store, name: &str) -> Result<Vec<String>, ServiceError> {
    Ok(list(store)
        .await?
        .into_iter()
        .find(|row| row.name == name)
        .map(|row| row.tenants)
        .unwrap_or_default())
}

/// The executors registered in any group, with their last heartbeat and
/// load, by group and address.
pub async fn registered_executors(store: &Store) -> Result<Vec<RegisteredExecutor>, ServiceError> {
    Ok(store.registered_executors().await?)
}

/// The executors registered in any group as the operator sees them:
/// alive or not by this admin's liveness rule.
pub async fn executors(
    services: &super::Services,
) -> Result<Vec<cronbox_api::Executor>, ServiceError> {
    let alive_since = services.alive_since_now().await?;
    Ok(registered_executors(services.store())
        .await?
        .into_iter()
        .map(|executor| cronbox_api::Executor {
            alive: executor.last_beat_ms >= alive_since,
            group: executor.group,
            address: executor.address,
            last_beat_ms: executor.last_beat_ms,
            busy: executor.load.busy,
            free_slots: executor.load.free_slots,
        })
        .collect())
}

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
    for address in addresses {
        check_executor_address(address).map_err(|why| invalid("addresses", why))?;
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

/// Longest executor address, in characters.
pub const MAX_EXECUTOR_ADDRESS_CHARS: usize = 512;

/// Whether `address` can be an executor's: an http(s) URL naming a host,
/// without credentials, control characters or commas (addresses are
/// listed comma-separated), of at most [`MAX_EXECUTOR_ADDRESS_CHARS`].
/// Why not, naming the address, when it cannot.
pub fn check_executor_address(address: &str) -> Result<(), String> {
    let refused = |why: &str| Err(format!("executor address {address:?} {why}"));
    if address.chars().count() > MAX_EXECUTOR_ADDRESS_CHARS {
        return refused(&format!("is over {MAX_EXECUTOR_ADDRESS_CHARS} characters"));
    }
    if address
        .chars()
        .any(|c| c.is_control() || c == ',' || c.is_whitespace())
    {
        return refused("holds a control character, a space or a comma");
    }
    let Ok(url) = reqwest::Url::parse(address) else {
        return refused("is not a URL");
    };
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return refused("is not an http(s) URL naming a host");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return refused("carries credentials");
    }
    Ok(())
}

#[cfg(test)]
mod address_tests {
    use super::check_executor_address;

    #[test]
    fn an_executor_address_is_an_http_url_of_a_host_and_nothing_else() {
        for good in [
            "http://127.0.0.1:9090",
            "https://exec-7.cluster.test:9090/",
            "http://[::1]:9999/xxl/",
        ] {
            assert_eq!(check_executor_address(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("file:///etc/passwd", "http(s)"),
            ("http://", "URL"),
            ("gopher://127.0.0.1:70", "http(s)"),
            ("http://127.0.0.1:9090\r\nX-Injected: 1", "control"),
            ("http://127.0.0.1:9090/\u{1b}[31m", "control"),
            ("http://a,http://b", "comma"),
            ("http://user:pw@127.0.0.1:9090", "credentials"),
        ] {
            let error = check_executor_address(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
        let long = format!("http://127.0.0.1/{}", "a".repeat(600));
        assert!(
            check_executor_address(&long)
                .unwrap_err()
                .contains("over 512")
        );
    }
}
