//! Tenant scoping: which tenants' objects a caller sees, and the lookups
//! that answer an object outside that scope exactly as one that does not
//! exist (so a tenant cannot learn another's ids). Every read of one
//! object by id goes through here; listings filter by
//! [`Scope::only_tenant`].

use super::ServiceError;
use crate::store::{JobId, JobRow, RunId, RunRow, Store};

/// The tenants whose objects a caller sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every tenant's (the operator).
    Everything,
    /// One tenant's only.
    Tenant(String),
}

impl Scope {
    /// Whether an object of `tenant` is in the scope.
    pub fn sees(&self, tenant: &str) -> bool {
        match self {
            Scope::Everything => true,
            Scope::Tenant(own) => own == tenant,
        }
    }

    /// The tenant to restrict listings to (`None`: every tenant).
    pub fn only_tenant(&self) -> Option<&str> {
        match self {
            Scope::Everything => None,
            Scope::Tenant(own) => Some(own),
        }
    }

    /// Job `id` if it is in the scope; [`ServiceError::UnknownJob`]
    /// whether it does not exist or belongs to another tenant.
    pub async fn job(&self, store: &Store, id: JobId) -> Result<JobRow, ServiceError> {
        match store.job(id).await? {
            Some(job) if self.sees(&job.tenant) => Ok(job),
            _ => Err(ServiceError::UnknownJob(id)),
        }
    }

    /// Run `id` as stored, if it is in the scope ([`ServiceError::UnknownRun`]
    /// otherwise).
    pub async fn run(&self, store: &Store, id: RunId) -> Result<RunRow, ServiceError> {
        match store.run(id).await? {
            Some(run) if self.sees(&run.tenant) => Ok(run),
            _ => Err(ServiceError::UnknownRun(id)),
        }
    }

    /// Workflow run `id` with its nodes, if it is in the scope
    /// ([`ServiceError::UnknownWorkflowRun`] otherwise).
    pub async fn workflow_run(
        &self,
        store: &Store,
        id: i64,
    ) -> Result<crate::store::StoredWorkflowRun, ServiceError> {
        match store.workflow_run(id).await? {
            Some(stored) if self.sees(&stored.run.tenant) => Ok(stored),
            _ => Err(ServiceError::UnknownWorkflowRun(id)),
        }
    }

    /// Backfill `id` if it is in the scope
    /// ([`ServiceError::UnknownBackfill`] otherwise).
    pub async fn backfill(
        &self,
        store: &Store,
        id: i64,
    ) -> Result<cronbox_api::Backfill, ServiceError> {
        match store.backfill(id).await? {
            Some(backfill) if self.sees(&backfill.tenant) => Ok(backfill),
            _ => Err(ServiceError::UnknownBackfill(id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_sees_its_own_objects_and_the_operator_every_tenants() {
        let tenant = Scope::Tenant("acme".to_owned());
        assert!(tenant.sees("acme"));
        assert!(!tenant.sees("globex"));
        assert_eq!(tenant.only_tenant(), Some("acme"));
        assert!(Scope::Everything.sees("globex"));
        assert_eq!(Scope::Everything.only_tenant(), None);
    }
}
