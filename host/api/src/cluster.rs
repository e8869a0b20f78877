//! The operator's resources: readiness, executor groups and executors,
//! tenants and their tokens.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::names::Quota;

/// `GET /readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Ready {
    pub ready: bool,
    /// This admin instance's name, the lease owner of the runs it holds.
    pub instance: String,
}

/// `PUT /api/v1/groups/{name}`: how the group finds its executors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// `AUTO` (executors that register) or `MANUAL` (the listed addresses).
    pub address_type: String,
    #[serde(default)]
    pub addresses: Vec<String>,
    /// Makes the group a legacy group: its executors are xxl-job
    /// executors, driven over xxl-job's protocol (see
    /// `docs/migrating-from-xxl-job.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy: Option<LegacySpec>,
}

/// The xxl-job release line a legacy group's executors speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
pub enum LegacyProtocol {
    /// xxl-job up to 3.4: runs sent to `/run`, results as a bare list with
    /// `logDateTim`, one access token.
    #[serde(rename = "xxl-job-3.4")]
    XxlJob34,
    /// xxl-job 3.5: runs sent to `/trigger`, results in `callbackList`, the
    /// group's token with the `XXL-JOB-APPNAME` header.
    #[serde(rename = "xxl-job-3.5")]
    XxlJob35,
}

impl LegacyProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            LegacyProtocol::XxlJob34 => "xxl-job-3.4",
            LegacyProtocol::XxlJob35 => "xxl-job-3.5",
        }
    }
}

impl std::str::FromStr for LegacyProtocol {
    type Err = cronbox_protocol::UnknownName;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "xxl-job-3.4" => Ok(LegacyProtocol::XxlJob34),
            "xxl-job-3.5" => Ok(LegacyProtocol::XxlJob35),
            other => Err(cronbox_protocol::UnknownName::new("legacy protocol", other)),
        }
    }
}

/// What makes a group a legacy group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LegacySpec {
    pub protocol: LegacyProtocol,
    /// The access token its executors are configured with
    /// (`xxl.job.accessToken`): they present it when they register and
    /// report, and the admin sends it with each run (8 to 256 characters;
    /// never answered back).
    #[schema(min_length = 8, max_length = 256)]
    pub access_token: String,
}

/// An executor group: `AUTO` (addresses from the registry) or `MANUAL`.
/// A tenant is shown the groups it may use, without addresses or tenants
/// (the operator's infrastructure); the operator sees everything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Group {
    pub name: String,
    #[schema(example = "AUTO")]
    pub address_type: String,
    /// A `MANUAL` group's addresses, in order (the operator only).
    pub addresses: Vec<String>,
    /// The tenants that may put jobs in the group; `*` is every tenant
    /// (the operator only; its own tenant, `default`, may use every
    /// group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<String>,
    /// A legacy group's protocol (its executors speak xxl-job's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub legacy: Option<LegacyProtocol>,
}

/// `PUT /api/v1/groups/{name}/tenants`: the tenants that may put jobs in
/// the group, replacing those before; `*` is every tenant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupTenants {
    #[schema(example = json!(["acme"]))]
    pub tenants: Vec<String>,
}

/// A registered executor and its last heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Executor {
    pub group: String,
    pub address: String,
    pub last_beat_ms: i64,
    /// Beat within the admin's dead-after time.
    pub alive: bool,
    /// Runs executing on it at its last heartbeat (absent if it did not
    /// say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<i64>,
    /// Free instance slots of its sandbox pool at its last heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_slots: Option<i64>,
}

/// `POST /api/v1/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// 1 to 63 lowercase letters, digits or `-`.
    #[schema(pattern = "^[a-z0-9-]{1,63}$")]
    pub name: String,
}

/// `POST /api/v1/tenants/{name}/tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// What the token is for, as people read it.
    #[serde(default)]
    pub label: String,
}

/// A tenant and how many API tokens it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Tenant {
    pub name: String,
    pub tokens: i64,
}

/// `PUT`/`GET /api/v1/tenants/{name}/http-ceiling`: the origins a
/// tenant's jobs may be granted (`https://*.example.com`, `https://*` for
/// any public host). Empty: none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpCeiling {
    pub origins: Vec<String>,
}

/// `PUT /api/v1/secrets/{name}`: a secret's value (write-only: no route
/// answers it).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    /// At most 16 KiB.
    pub value: String,
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretValue(..)")
    }
}

/// A secret as listed: its name and dates, and the jobs that reference
/// it; never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Secret {
    pub tenant: String,
    pub name: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Ids of the jobs that reference it.
    #[serde(default)]
    pub used_by: Vec<i64>,
}

/// The answer to `DELETE /api/v1/secrets/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SecretDeleted {
    pub name: String,
    /// Jobs that still reference it (a forced delete): their runs read
    /// nothing under its name.
    pub still_referenced_by: Vec<i64>,
}

/// A new tenant with its first token (shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantCreated {
    pub name: String,
    pub token_id: i64,
    pub token: String,
}

/// A new token of a tenant (shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenCreated {
    pub tenant: String,
    pub token_id: i64,
    pub token: String,
}

/// A revoked token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenRevoked {
    pub tenant: String,
    pub revoked: i64,
}

/// `PUT /api/v1/tenants/{name}/quotas`: a tenant's own limits, replacing
/// those set before; a quota left out (or `null`) follows the operator's
/// default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_interval_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_runs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_instances: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_ms_per_day: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_bytes_per_day: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_runs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_items: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill_runs: Option<u64>,
}

impl QuotaSettings {
    fn slot(&mut self, quota: Quota) -> &mut Option<u64> {
        match quota {
            Quota::Jobs => &mut self.jobs,
            Quota::Modules => &mut self.modules,
            Quota::ModuleBytes => &mut self.module_bytes,
            Quota::MinIntervalMs => &mut self.min_interval_ms,
            Quota::RunningRuns => &mut self.running_runs,
            Quota::ExecutorInstances => &mut self.executor_instances,
            Quota::RunMsPerDay => &mut self.run_ms_per_day,
            Quota::StateBytes => &mut self.state_bytes,
            Quota::LogBytesPerDay => &mut self.log_bytes_per_day,
            Quota::WorkflowRuns => &mut self.workflow_runs,
            Quota::WorkflowItems => &mut self.workflow_items,
            Quota::BackfillRuns => &mut self.backfill_runs,
        }
    }

    /// The value set for `quota`, if any.
    pub fn get(&self, quota: Quota) -> Option<u64> {
        *self.clone().slot(quota)
    }

    /// Sets (or with `None` clears) `quota`.
    pub fn set(&mut self, quota: Quota, value: Option<u64>) {
        *self.slot(quota) = value;
    }

    /// The quotas set, in [`Quota::ALL`]'s order.
    pub fn entries(&self) -> impl Iterator<Item = (Quota, u64)> + '_ {
        Quota::ALL
            .iter()
            .filter_map(|quota| Some((*quota, self.get(*quota)?)))
    }
}

/// One quota of a tenant: its limit, whether the tenant has its own, and
/// what the tenant uses of it now (absent where the admin cannot count it:
/// a shortest interval, or instances, which each executor counts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct QuotaUse {
    pub quota: Quota,
    pub limit: u64,
    /// Set for this tenant (else the operator's default).
    pub own: bool,
    pub used: Option<u64>,
}

/// `GET /api/v1/tenants/{name}/quotas`: every quota of a tenant with its
/// usage (today's, UTC, for the per-day ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TenantQuotas {
    pub tenant: String,
    pub quotas: Vec<QuotaUse>,
}
