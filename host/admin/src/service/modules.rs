//! Module uploads: checked (the component, its name and labels) before
//! anything is stored, then stored by digest, owned by the tenant, and
//! added as the next version of a named module (moving the jobs that
//! follow it).

use sha2::{Digest, Sha256};

use super::ServiceError;
use super::Services;
use crate::store::{ModuleVersion, Moved, Store, VersionPush};
use cronbox_api::{RolledBack, Uploaded};
use cronbox_component_check::ComponentError;

/// What an upload asks for besides its bytes.
#[derive(Debug, Clone, Default)]
pub struct Upload {
    /// The module name to add a version to (none: stored by digest only).
    pub name: Option<String>,
    /// Labels for the new version, comma-separated.
    pub labels: Option<String>,
    /// Why this version (empty: none).
    pub note: String,
    /// Who pushes it (recorded on the version).
    pub pushed_by: String,
}

/// Longest note a version carries.
const MAX_NOTE_BYTES: usize = 500;

/// Labels: the characters of module names.
pub fn parse_labels(text: Option<&str>) -> Result<Vec<String>, ServiceError> {
    let labels: Vec<String> = text
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|label| !label.is_empty())
        .map(str::to_owned)
        .collect();
    for label in &labels {
        crate::jobs::check_module_name(label).map_err(|invalid| ServiceError::InvalidModule {
            field: Some("labels"),
            message: invalid.message.replace("module name", "label"),
        })?;
    }
    Ok(labels)
}

/// Checks and stores `bytes` for `tenant` (see the module doc); at most
/// `max_bytes`, keeping `keep_versions` versions per name.
pub async fn upload(
    services: &Services,
    tenant: &str,
    bytes: &[u8],
    upload: &Upload,
    max_bytes: usize,
    keep_versions: usize,
) -> Result<Uploaded, ServiceError> {
    let labels = parse_labels(upload.labels.as_deref())?;
    if upload.note.len() > MAX_NOTE_BYTES || upload.note.chars().any(char::is_control) {
        return Err(ServiceError::InvalidModule {
            field: Some("note"),
            message: format!(
                "a note is at most {MAX_NOTE_BYTES} bytes, without control characters"
            ),
        });
    }
    if upload.name.is_none() && !upload.note.is_empty() {
        return Err(ServiceError::InvalidModule {
            field: Some("note"),
            message: "a note belongs to a named version: give a name too".to_owned(),
        });
    }
    if let Some(name) = &upload.name {
        crate::jobs::check_module_name(name).map_err(|invalid| ServiceError::InvalidModule {
            field: Some("name"),
            message: invalid.message,
        })?;
    } else if !labels.is_empty() {
        return Err(ServiceError::InvalidModule {
            field: Some("labels"),
            message: "labels belong to a named version: give a name too".to_owned(),
        });
    }
    let checked =
        cronbox_component_check::check_component(bytes, max_bytes).map_err(
            |error| match error {
                ComponentError::TooLarge { .. } => ServiceError::ModuleTooLarge(error.to_string()),
                _ => ServiceError::InvalidModule {
                    field: None,
                    message: error.to_string(),
                },
            },
        )?;
    let digest = crate::model::Digest::from_sha256(&Sha256::digest(bytes));
    let store = services.store();
    let now = services.now_ms();
    check_quotas(
        services,
        tenant,
        &digest,
        bytes.len(),
        upload.name.as_deref(),
    )
    .await?;
    store.put_module(digest.as_str(), bytes, now).await?;
    store.own_module(tenant, digest.as_str()).await?;
    let mut answer = Uploaded {
        digest: digest.clone(),
        size: bytes.len() as u64,
        name: None,
        version: None,
        labels: None,
        jobs_moved: None,
        denied_imports: checked.denied_imports,
    };
    if let Some(name) = &upload.name {
        let (version, moved) = store
            .add_module_version(
                &VersionPush {
                    tenant,
                    name,
                    digest: &digest,
                    labels: &labels,
                    note: &upload.note,
                    pushed_by: &upload.pushed_by,
                },
                keep_versions,
                now,
            )
            .await?;
        answer.name = Some(name.clone());
        answer.version = Some(version.version);
        answer.labels = Some(version.labels);
        answer.jobs_moved = Some(moved.jobs);
        prepare_moved(services, &digest, moved);
        services.firing().wake();
    }
    Ok(answer)
}

/// Refuses an upload past `tenant`'s quotas: a new module name past its
/// modules, new bytes (content it does not own yet) past its module bytes.
async fn check_quotas(
    services: &Services,
    tenant: &str,
    digest: &crate::model::Digest,
    size: usize,
    name: Option<&str>,
) -> Result<(), ServiceError> {
    let store = services.store();
    let quotas = services.quotas();
    let now = services.now_ms();
    if let Some(name) = name
        && !store.has_module_name(tenant, name).await?
    {
        quotas
            .check_one_more(store, tenant, cronbox_api::Quota::Modules, now)
            .await??;
    }
    if !store.owns_module(tenant, digest.as_str()).await? {
        quotas
            .check_module_bytes(store, tenant, size as u64, now)
            .await??;
    }
    Ok(())
}

/// The current version of every module of `tenant` (none: every
/// tenant's), with its tenant.
pub async fn latest(
    store: &Store,
    tenant: Option<&str>,
) -> Result<Vec<cronbox_api::TenantModule>, ServiceError> {
    Ok(store
        .latest_modules(tenant)
        .await?
        .into_iter()
        .map(|(tenant, latest)| cronbox_api::TenantModule { tenant, latest })
        .collect())
}

/// The jobs of `tenant` that follow module `name`'s newest version and
/// read secrets: a new version runs with their secrets.
pub async fn secret_readers_following(
    store: &Store,
    tenant: &str,
    name: &str,
) -> Result<Vec<i64>, ServiceError> {
    Ok(store.secret_jobs_following(tenant, name).await?)
}

/// The versions of `tenant`'s module `name`, newest first; a name it has
/// no module of is refused.
pub async fn versions(
    store: &Store,
    tenant: &str,
    name: &str,
) -> Result<Vec<ModuleVersion>, ServiceError> {
    let versions = store.module_versions(tenant, name).await?;
    if versions.is_empty() {
        return Err(ServiceError::UnknownModule(name.to_owned()));
    }
    Ok(versions)
}

/// Makes an earlier version current again: a new version with its
/// content, so history keeps both; the jobs that follow the module move to
/// it.
pub async fn rollback(
    services: &Services,
    tenant: &str,
    name: &str,
    version: i64,
    keep_versions: usize,
    pushed_by: &str,
) -> Result<RolledBack, ServiceError> {
    let store = services.store();
    let versions = versions(store, tenant, name).await?;
    let Some(target) = versions.iter().find(|v| v.version == version) else {
        return Err(unknown_version(name, version, &versions));
    };
    let (version, moved) = store
        .add_module_version(
            &VersionPush {
                tenant,
                name,
                digest: &target.digest,
                labels: &[],
                note: &format!("rollback to version {}", target.version),
                pushed_by,
            },
            keep_versions,
            services.now_ms(),
        )
        .await?;
    let jobs_moved = moved.jobs;
    prepare_moved(services, &target.digest, moved);
    services.firing().wake();
    Ok(RolledBack {
        version,
        jobs_moved,
    })
}

/// Has the executors of the moved jobs compile their new version ahead
/// of its runs.
fn prepare_moved(services: &Services, digest: &crate::model::Digest, moved: Moved) {
    if moved.jobs > 0 {
        services
            .firing()
            .prepare_module(moved.groups, digest.clone(), moved.from);
    }
}

/// Puts `label` on one version of a module (taking it off any other);
/// returns the module's versions after.
pub async fn label(
    store: &Store,
    tenant: &str,
    name: &str,
    label: &str,
    version: i64,
) -> Result<Vec<ModuleVersion>, ServiceError> {
    // One label, checked whole (not split at commas nor trimmed).
    crate::jobs::check_module_name(label).map_err(|invalid| ServiceError::InvalidModule {
        field: Some("label"),
        message: invalid.message.replace("module name", "label"),
    })?;
    let before = versions(store, tenant, name).await?;
    if !store.set_module_label(tenant, name, version, label).await? {
        return Err(unknown_version(name, version, &before));
    }
    versions(store, tenant, name).await
}

fn unknown_version(name: &str, version: i64, versions: &[ModuleVersion]) -> ServiceError {
    ServiceError::UnknownVersion {
        name: name.to_owned(),
        version,
        versions: versions.iter().map(|v| v.version).collect(),
    }
}
