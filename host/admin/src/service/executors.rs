//! Executors registering, beating and leaving, and the module bytes they
//! fetch. The API checks the caller's credential, protocol and address
//! form first; this is what the store and the dispatcher then make of it.

use cronbox_protocol::Registration;

use super::{ServiceError, Services};
use crate::store::{Digest, ExecutorLoad, RegisteredWith, Store};

/// Records `registration`'s beat, made with `credential`, and tells the
/// dispatcher how to prove itself to that address. Refused when another
/// credential's live registration holds the address (runs for it would
/// go with the wrong proof, or to whoever claimed it), or when the group
/// is a legacy group of xxl-job executors.
pub async fn register(
    services: &Services,
    registration: &Registration,
    credential: RegisteredWith,
) -> Result<(), ServiceError> {
    let store = services.store();
    let alive_since = services.alive_since_now().await?;
    let claimed = store
        .address_credentials(&registration.address, alive_since)
        .await?;
    if claimed
        .iter()
        .any(|holder| *holder != credential.credential_id)
    {
        return Err(ServiceError::AddressTaken(registration.address.clone()));
    }
    if store.legacy_group(&registration.group).await?.is_some() {
        return Err(ServiceError::LegacyGroupRegistration(
            registration.group.clone(),
        ));
    }
    let load = ExecutorLoad {
        busy: registration.busy.map(i64::from),
        free_slots: registration.free_slots.map(i64::from),
    };
    store
        .registry_beat(
            &registration.group,
            &registration.address,
            load,
            &credential,
            services.now_ms(),
        )
        .await?;
    services
        .firing()
        .executor_registered(&registration.address, credential.admin_proof);
    Ok(())
}

/// Removes the registration of `address` in `group` (an executor leaving).
pub async fn deregister(store: &Store, group: &str, address: &str) -> Result<(), ServiceError> {
    Ok(store.registry_remove(group, address).await?)
}

/// Module `digest`'s bytes for an executor serving `groups` (`None`: the
/// shared executor token, which serves every group): `None` when there is
/// no such module or none of those groups runs it.
pub async fn module_content(
    store: &Store,
    digest: &str,
    groups: Option<&[String]>,
) -> Result<Option<Vec<u8>>, ServiceError> {
    if let Some(groups) = groups {
        let Ok(parsed) = digest.parse::<Digest>() else {
            return Ok(None);
        };
        if !store.module_runs_in_groups(&parsed, groups).await? {
            return Ok(None);
        }
    }
    Ok(store.module(digest).await?)
}

/// The enrolled executor whose credential hashes to `hash`, now (a
/// rotated-out credential counts during its overlap); none: no such live
/// credential.
pub async fn enrolled(
    store: &Store,
    hash: &str,
    now_ms: i64,
) -> Result<Option<crate::store::EnrolledExecutor>, ServiceError> {
    Ok(store.enrolled_executor(hash, now_ms).await?)
}

/// An xxl-job executor at `address` beat in legacy group `group` (xxl-job
/// reports no load).
pub async fn legacy_beat(
    services: &Services,
    group: &str,
    address: &str,
) -> Result<(), ServiceError> {
    Ok(services
        .store()
        .registry_beat(
            group,
            address,
            ExecutorLoad::default(),
            &RegisteredWith::default(),
            services.now_ms(),
        )
        .await?)
}

/// An xxl-job executor at `address` left legacy group `group`.
pub async fn legacy_remove(store: &Store, group: &str, address: &str) -> Result<(), ServiceError> {
    Ok(store.registry_remove(group, address).await?)
}
