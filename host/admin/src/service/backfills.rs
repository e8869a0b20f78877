//! Backfills: a job's schedule run over a past range at a bounded rate,
//! started, listed and cancelled (the runs they wrote go on).

use cronbox_api::{Backfill, BackfillRequest};

use super::context::BackfillError;
use super::{ServiceError, Services};
use crate::model::JobId;
use crate::store::Store;

impl From<BackfillError> for ServiceError {
    fn from(error: BackfillError) -> Self {
        match error {
            BackfillError::Invalid { field, message } => {
                ServiceError::InvalidJob { field, message }
            }
            BackfillError::Quota(over) => ServiceError::QuotaExceeded(over),
            BackfillError::Store(error) => ServiceError::Store(error),
        }
    }
}

/// Starts a backfill of `job` as `by` asks in `request`: its schedule's
/// instants in a past range, run as runs of kind `backfill`.
pub async fn start(
    services: &Services,
    job: &crate::store::JobRow,
    request: &BackfillRequest,
    by: &str,
) -> Result<Backfill, ServiceError> {
    Ok(services.firing().start_backfill(job, request, by).await?)
}

/// The backfills of `tenant` (none: every tenant's), of job `job` when
/// given: the newest 100.
pub async fn list(
    store: &Store,
    tenant: Option<&str>,
    job: Option<JobId>,
) -> Result<Vec<Backfill>, ServiceError> {
    Ok(store.backfills(tenant, job).await?)
}

/// Cancels backfill `id`: no more of its runs are written.
pub async fn cancel(store: &Store, id: i64) -> Result<(), ServiceError> {
    store.cancel_backfill(id).await?;
    Ok(())
}
