//! The audit log: an entry written for every change the API answers, and
//! its pages read back newest first.

use cronbox_api::AuditEntry;

use super::ServiceError;
use crate::store::{AuditFilter, NewAuditEntry, Store};

/// Writes `entry` to the audit log.
pub async fn record(store: &Store, entry: &NewAuditEntry) -> Result<(), ServiceError> {
    Ok(store.append_audit(entry).await?)
}

/// One page of the log, newest first, as `filter` narrows it.
pub async fn page(store: &Store, filter: &AuditFilter) -> Result<Vec<AuditEntry>, ServiceError> {
    Ok(store.audit_page(filter).await?)
}
