//! The rules between the HTTP layer and the store: what makes a request
//! acceptable beyond its shape (groups that exist, modules the tenant
//! owns, children of the same tenant without a cycle, a job in use), and
//! the writes that follow, and which tenants' objects a caller sees
//! ([`scope::Scope`]). Handlers authenticate, hand the caller's scope on
//! and translate [`ServiceError`] into an HTTP answer; they hold no rules
//! of their own.

pub mod audit;
pub mod backfills;
pub mod calendars;
mod context;
pub mod executor_tokens;
pub mod executors;
pub mod groups;
pub mod job_lifecycle;
pub mod jobs;
pub mod modules;
pub mod runs;
pub mod scope;
pub mod secrets;
pub mod tenants;
pub mod triggers;
pub mod users;
pub mod workflows;
pub mod xxl_jobs;

pub use context::{ChangeLimits, Firing, Services};

use crate::model::JobId;
use crate::store::{Store, StoreError};

/// This admin's instance name, once its database answers (readiness).
pub async fn ready(store: &Store) -> Result<String, ServiceError> {
    store.ping().await?;
    Ok(store.instance().to_owned())
}

/// Why a request was refused, or failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A job definition refused; `field` names the field at fault.
    #[error("{message}")]
    InvalidJob {
        field: &'static str,
        message: String,
    },
    /// A job of a batch refused: `index` is its place in the batch,
    /// `field` the field at fault.
    #[error("job {index} of the batch: {message}")]
    InvalidJobInBatch {
        index: usize,
        field: &'static str,
        message: String,
    },
    /// The job is named as a child by these jobs (id and name).
    #[error(
        "job {id} is a child of {}; remove it from their children first",
        parents.iter().map(|(id, name)| format!("{id} ({name})")).collect::<Vec<_>>().join(", ")
    )]
    JobInUse {
        id: JobId,
        parents: Vec<(JobId, String)>,
    },
    /// A job with no fire to come (schedule NONE, a one-shot in the past)
    /// cannot be started.
    #[error(
        "a job with schedule NONE (or a one-shot in the past) cannot be started; trigger it instead"
    )]
    CannotStart,
    /// A stored job's schedule no longer reads (the detail).
    #[error("{0}")]
    StoredScheduleInvalid(String),
    /// A trigger's request refused; `field` names the field at fault.
    #[error("{message}")]
    InvalidTrigger {
        field: &'static str,
        message: String,
    },
    /// An executor group definition refused; `field` names the field.
    #[error("{message}")]
    InvalidGroup {
        field: &'static str,
        message: String,
    },
    /// No executor group of that name.
    #[error("no executor group {0:?}")]
    UnknownGroup(String),
    /// An enrolled executor's credential refused; `field` names the field.
    #[error("{message}")]
    InvalidExecutorToken {
        field: &'static str,
        message: String,
    },
    /// No enrolled executor of that id (or a revoked one, for a rotation).
    #[error("no enrolled executor {0} (`cronbox executor-token list` lists them)")]
    UnknownExecutorToken(i64),
    /// An uploaded module refused (not a component, another world, a bad
    /// name or label, ...); `field` names the field when one is at fault.
    #[error("{message}")]
    InvalidModule {
        field: Option<&'static str>,
        message: String,
    },
    /// No module of that name (of the caller's tenant).
    #[error("no module {0:?} (`cronbox module list` lists this tenant's modules)")]
    UnknownModule(String),
    /// The module has no such version; it has `versions`.
    #[error(
        "module {name:?} has no version {version} (it has {})",
        versions.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
    )]
    UnknownVersion {
        name: String,
        version: i64,
        versions: Vec<i64>,
    },
    /// An upload over the module size limit.
    #[error("{0}")]
    ModuleTooLarge(String),
    /// A tenant name refused.
    #[error("tenant name {0:?} must be 1 to 63 lowercase letters, digits or '-'")]
    InvalidTenant(String),
    /// No tenant of that name.
    #[error("no tenant {0:?}")]
    UnknownTenant(String),
    /// The tenant has no token of that id.
    #[error("tenant {tenant:?} has no token {id}")]
    UnknownToken { tenant: String, id: i64 },
    /// A tenant of that name exists.
    #[error("tenant {0:?} already exists")]
    TenantExists(String),
    /// A state edit refused (its sizes).
    #[error("{0}")]
    InvalidState(String),
    /// No secret of that name (of the caller's tenant).
    #[error("no secret {0:?} (`cronbox secret list` lists this tenant's secrets)")]
    UnknownSecret(String),
    /// A secret jobs still reference.
    #[error(
        "secret {name:?} is referenced by job(s) {jobs}; remove it from them, or delete with force"
    )]
    SecretInUse { name: String, jobs: String },
    /// No key to seal secrets under.
    #[error(
        "this admin has no secrets key, so secrets cannot be set or used: start it with \
         --secrets-key-file (cronbox up makes one in its data directory)"
    )]
    SecretsDisabled,
    /// A user refused; `field` names the field at fault.
    #[error("{message}")]
    InvalidUser {
        field: &'static str,
        message: String,
    },
    /// A user of that name exists (in some tenant).
    #[error("user {0:?} already exists")]
    UserExists(String),
    /// A workflow definition or run request refused; `field` names the
    /// node, edge or field at fault (`nodes[2].job`, `edges[4].to`).
    #[error("{message}")]
    InvalidWorkflow { field: String, message: String },
    /// No workflow of that name (of the caller's tenant).
    #[error("no workflow {0:?} (`cronbox workflow list` lists this tenant's workflows)")]
    UnknownWorkflow(String),
    /// A workflow run not in a state the request needs.
    #[error("workflow run {id} {message}")]
    WorkflowRunState { id: i64, message: String },
    /// No workflow run of that id that the caller may see.
    #[error("no workflow run {0}")]
    UnknownWorkflowRun(i64),
    /// No node of that name in a workflow run.
    #[error("workflow run {run} has no node {node:?}")]
    UnknownWorkflowNode { run: i64, node: String },
    /// No job of that id that the caller may see.
    #[error("no job {0}")]
    UnknownJob(JobId),
    /// No run of that id that the caller may see.
    #[error("no run {0}")]
    UnknownRun(crate::model::RunId),
    /// No calendar of that name (of the caller's tenant).
    #[error("no calendar {0:?}")]
    UnknownCalendar(String),
    /// No backfill of that id that the caller may see.
    #[error("no backfill {0}")]
    UnknownBackfill(i64),
    /// No such user that the caller may see.
    #[error("no user {0:?}")]
    UnknownUser(String),
    /// The admin checks as many passwords at once as it may (the number),
    /// and this login's turn did not come in time.
    #[error("the admin is checking {0} passwords at once; try again in a moment")]
    LoginsBusy(usize),
    /// Another executor credential's live registration holds the address.
    #[error("{0} is registered with another executor credential")]
    AddressTaken(String),
    /// A cronbox executor tried to register in a legacy group.
    #[error(
        "group {0:?} is a legacy group of xxl-job executors; a cronbox executor registers in \
         another group"
    )]
    LegacyGroupRegistration(String),
    /// The tenant is past one of its quotas.
    #[error(transparent)]
    QuotaExceeded(#[from] crate::quotas::QuotaExceeded),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ServiceError {
    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> Self {
        ServiceError::InvalidJob {
            field,
            message: message.into(),
        }
    }

    /// The refusal of a batch's only job as the refusal of a job alone
    /// (other errors stay as they are).
    pub(crate) fn alone(self) -> Self {
        match self {
            ServiceError::InvalidJobInBatch { field, message, .. } => {
                ServiceError::InvalidJob { field, message }
            }
            other => other,
        }
    }

    /// This refusal of one job as the refusal of the job at `index` of a
    /// batch (other errors stay as they are).
    pub(crate) fn in_batch(self, index: usize) -> Self {
        match self {
            ServiceError::InvalidJob { field, message } => ServiceError::InvalidJobInBatch {
                index,
                field,
                message,
            },
            other => other,
        }
    }
}
