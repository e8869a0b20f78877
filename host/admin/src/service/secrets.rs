//! Tenants' secrets: set (sealed under the admin's key), list (names and
//! dates only), delete (refused while a job references the name unless
//! forced), and the check that a job references only secrets that exist.

use super::ServiceError;
use crate::secrets::{MAX_SECRET_BYTES, SecretBox, is_secret_name};
use crate::store::Store;

/// The secrets of `tenant` (`None`: every tenant's): names, dates and the
/// jobs referencing each, never their values.
pub async fn list(
    store: &Store,
    tenant: Option<&str>,
) -> Result<Vec<cronbox_api::Secret>, ServiceError> {
    let mut secrets = Vec::new();
    for (tenant, name, created_at_ms, updated_at_ms) in store.secrets(tenant).await? {
        let used_by = store.jobs_referencing_secret(&tenant, &name).await?;
        secrets.push(cronbox_api::Secret {
            tenant,
            name,
            created_at_ms,
            updated_at_ms,
            used_by,
        });
    }
    Ok(secrets)
}

/// Stores `value` as secret `name` of `tenant`, new or replaced.
pub async fn set(
    store: &Store,
    keys: Option<&SecretBox>,
    tenant: &str,
    name: &str,
    value: &str,
    now_ms: i64,
) -> Result<(), ServiceError> {
    let keys = keys.ok_or(ServiceError::SecretsDisabled)?;
    if !is_secret_name(name) {
        return Err(ServiceError::invalid(
            "name",
            format!("{name:?} is not a secret name (1 to 64 of A-Z a-z 0-9 _ - .)"),
        ));
    }
    if value.len() > MAX_SECRET_BYTES {
        return Err(ServiceError::invalid(
            "value",
            format!("{} bytes; at most {MAX_SECRET_BYTES}", value.len()),
        ));
    }
    let sealed = keys.seal(tenant, name, value);
    store.put_secret(tenant, name, &sealed, now_ms).await?;
    Ok(())
}

/// Deletes secret `name` of `tenant`; the jobs that still reference it
/// (only with `force`; without it, a referenced secret is refused).
pub async fn delete(
    store: &Store,
    tenant: &str,
    name: &str,
    force: bool,
) -> Result<Vec<i64>, ServiceError> {
    let users = store.jobs_referencing_secret(tenant, name).await?;
    if !users.is_empty() && !force {
        let ids: Vec<String> = users.iter().map(i64::to_string).collect();
        return Err(ServiceError::SecretInUse {
            name: name.to_owned(),
            jobs: ids.join(", "),
        });
    }
    if !store.delete_secret(tenant, name).await? {
        return Err(ServiceError::UnknownSecret(name.to_owned()));
    }
    Ok(users)
}

/// Refuses references to secrets `tenant` does not have.
pub async fn check_references(
    store: &Store,
    keys: Option<&SecretBox>,
    tenant: &str,
    names: &[String],
) -> Result<(), ServiceError> {
    if names.is_empty() {
        return Ok(());
    }
    if keys.is_none() {
        return Err(ServiceError::SecretsDisabled);
    }
    let found = store.sealed_secrets(tenant, names).await?;
    if let Some(missing) = names
        .iter()
        .find(|name| !found.iter().any(|(found, _)| found == *name))
    {
        return Err(ServiceError::invalid(
            "secrets",
            format!(
                "tenant {tenant:?} has no secret named {missing:?} (cronbox secret set {missing})"
            ),
        ));
    }
    Ok(())
}
