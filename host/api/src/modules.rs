//! Modules: uploads, named versions with labels, and rollback.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Digest;

/// A version of a named module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ModuleVersion {
    pub name: String,
    /// 1, 2, 3, ... per (tenant, name).
    pub version: i64,
    pub digest: Digest,
    /// Labels currently on this version (a label is on one version).
    pub labels: Vec<String>,
    /// Why it was made, when not a plain push (`rollback to version 2`).
    pub note: String,
    /// Who pushed it: the user's name, `operator token` or `tenant token`
    /// (empty for a version pushed before this was recorded).
    #[serde(default)]
    pub pushed_by: String,
    pub created_at_ms: i64,
}

/// A module upload: its digest, and the version made when it was named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Uploaded {
    pub digest: Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Vec<String>>,
    /// Jobs following the module that moved to the new version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_moved: Option<u64>,
    /// Its imports that link but grant nothing (filesystem, sockets):
    /// every use fails inside the job.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied_imports: Vec<String>,
}

/// The latest version of a module, with the tenant it belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantModule {
    pub tenant: String,
    #[serde(flatten)]
    pub latest: ModuleVersion,
}

/// `POST /api/v1/modules/{name}/rollback`: the version to make current.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VersionChoice {
    pub version: i64,
}

/// A rollback: the new version (with an older content) and the jobs moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RolledBack {
    pub version: ModuleVersion,
    pub jobs_moved: u64,
}
