//! Enrolled executors: a credential made per executor (or fleet) by the
//! operator, scoped to executor groups; rotated with an overlap in which
//! the old and new token both work; revoked at once, ending its
//! registrations (see `api/auth.rs` for how the token is checked, and
//! `cronbox_protocol::credentials` for what admins present back).

use cronbox_api::{ExecutorToken, ExecutorTokenIssued, ExecutorTokenRevoked, ExecutorTokenSpec};
use cronbox_protocol::credentials::ENROLLED_PREFIX;

use super::tenants::{random_token, token_hash};
use super::{ServiceError, Services};
use crate::store::Store;

/// The overlap of a rotation when none is asked for.
pub const DEFAULT_OVERLAP_MS: i64 = 3_600_000;
/// The longest overlap of a rotation: a week.
pub const MAX_OVERLAP_MS: i64 = 7 * 24 * 3_600_000;

fn new_token() -> String {
    random_token(ENROLLED_PREFIX)
}

fn invalid(field: &'static str, message: String) -> ServiceError {
    ServiceError::InvalidExecutorToken { field, message }
}

/// Every executor credential, never its token.
pub async fn list(store: &Store) -> Result<Vec<ExecutorToken>, ServiceError> {
    Ok(store.executor_credentials().await?)
}

/// Enrolls an executor: its credential, and its token (shown once).
pub async fn create(
    store: &Store,
    spec: &ExecutorTokenSpec,
    now_ms: i64,
) -> Result<ExecutorTokenIssued, ServiceError> {
    let name = spec.name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(invalid(
            "name",
            "name must be 1 to 64 characters, none of them control characters".to_owned(),
        ));
    }
    if spec.groups.is_empty() {
        return Err(invalid(
            "groups",
            "name at least one executor group the executor may register in".to_owned(),
        ));
    }
    for (index, group) in spec.groups.iter().enumerate() {
        if group.is_empty() || group.len() > 64 || group.chars().any(char::is_control) {
            return Err(invalid(
                "groups",
                format!("groups[{index}]: a group name is 1 to 64 characters"),
            ));
        }
        if store.legacy_group(group).await?.is_some() {
            return Err(invalid(
                "groups",
                format!("group {group:?} is a legacy group of xxl-job executors"),
            ));
        }
    }
    let mut groups = spec.groups.clone();
    groups.sort();
    groups.dedup();
    let token = new_token();
    let id = store
        .add_executor_credential(name, &groups, &token_hash(&token), now_ms)
        .await?;
    Ok(ExecutorTokenIssued {
        id,
        name: name.to_owned(),
        groups,
        token,
        previous_valid_until_ms: None,
    })
}

/// Gives enrolled executor `id` a new token; the one before keeps working
/// for `overlap_ms` (default an hour).
pub async fn rotate(
    store: &Store,
    id: i64,
    overlap_ms: Option<i64>,
    now_ms: i64,
) -> Result<ExecutorTokenIssued, ServiceError> {
    let overlap_ms = overlap_ms.unwrap_or(DEFAULT_OVERLAP_MS);
    if !(0..=MAX_OVERLAP_MS).contains(&overlap_ms) {
        return Err(invalid(
            "overlap_ms",
            format!("overlap_ms must be between 0 and {MAX_OVERLAP_MS} (a week)"),
        ));
    }
    let token = new_token();
    let until = now_ms + overlap_ms;
    let (name, groups) = store
        .rotate_executor_credential(id, &token_hash(&token), until, now_ms)
        .await?
        .ok_or(ServiceError::UnknownExecutorToken(id))?;
    Ok(ExecutorTokenIssued {
        id,
        name,
        groups,
        token,
        previous_valid_until_ms: Some(until),
    })
}

/// Revokes enrolled executor `id`: its token works no more, its
/// registrations end now and this admin sends it nothing more.
pub async fn revoke(services: &Services, id: i64) -> Result<ExecutorTokenRevoked, ServiceError> {
    let ended = services
        .store()
        .revoke_executor_credential(id, services.now_ms())
        .await?
        .ok_or(ServiceError::UnknownExecutorToken(id))?;
    services.firing().forget_executors();
    Ok(ExecutorTokenRevoked {
        id,
        registrations_ended: ended,
    })
}
