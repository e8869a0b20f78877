//! The response bodies of the API that are not stored rows, typed so that
//! what a handler answers and what the OpenAPI document says are derived
//! from the same definitions.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::model::{JobId, RunId};
use crate::scheduler::JobKill;
use crate::store::{DailyReport, ModuleVersion, RunRow};

/// `GET /readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Ready {
    pub ready: bool,
    /// This admin instance's name, the lease owner of the runs it holds.
    pub instance: String,
}

/// An executor group: `AUTO` (addresses from the registry) or `MANUAL`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Group {
    pub name: String,
    #[schema(example = "AUTO")]
    pub address_type: String,
    /// A `MANUAL` group's addresses, in order.
    pub addresses: Vec<String>,
}

/// A registered executor and its last heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Executor {
    pub group: String,
    pub address: String,
    pub last_beat_ms: i64,
    /// Beat within the admin's dead-after time.
    pub alive: bool,
}

/// A run written by a trigger.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Triggered {
    pub run_id: RunId,
}

/// A deleted job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Deleted {
    pub deleted: JobId,
}

/// A job's durable state.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobStateBody {
    pub job_id: JobId,
    pub state: BTreeMap<String, String>,
}

impl JobStateBody {
    pub fn new(job_id: JobId, state: HashMap<String, String>) -> Self {
        JobStateBody {
            job_id,
            state: state.into_iter().collect(),
        }
    }
}

/// What a kill of a whole job did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobKilled {
    pub job_id: JobId,
    #[serde(flatten)]
    pub outcome: JobKill,
}

/// A kill of one run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunKilled {
    pub run_id: RunId,
    /// Whether an executor stopped it (false: it had ended).
    pub killed: bool,
}

/// A module upload: its digest, and the version made when it was named.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Uploaded {
    pub digest: String,
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
}

/// The latest version of a module, with the tenant it belongs to.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TenantModule {
    pub tenant: String,
    #[serde(flatten)]
    pub latest: ModuleVersion,
}

/// A rollback: the new version (with an older content) and the jobs moved.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RolledBack {
    pub version: ModuleVersion,
    pub jobs_moved: u64,
}

/// A page of runs, newest first; `next_before` is the cursor of the next.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunPage {
    pub runs: Vec<RunRow>,
    pub next_before: Option<RunId>,
}

/// Run counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct RunCounts {
    pub success: i64,
    pub failed: i64,
    pub running: i64,
    pub cancelled: i64,
}

/// Daily run counts over a range of days, and their totals.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Report {
    pub days: Vec<DailyReport>,
    pub totals: RunCounts,
}

/// A tenant and how many API tokens it has.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Tenant {
    pub name: String,
    pub tokens: i64,
}

/// A new tenant with its first token (shown once).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TenantCreated {
    pub name: String,
    pub token_id: i64,
    pub token: String,
}

/// A new token of a tenant (shown once).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenCreated {
    pub tenant: String,
    pub token_id: i64,
    pub token: String,
}

/// A revoked token.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokenRevoked {
    pub tenant: String,
    pub revoked: i64,
}
