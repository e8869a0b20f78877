//! A job's runs on request: one triggered now (manual or API, its
//! parameter and its executors chosen), all of them killed, a page of them.

use cronbox_api::JobKill;
use cronbox_protocol::TriggerKind;

use super::{ServiceError, Services};
use crate::model::{JobId, RunId};
use crate::store::{JobRow, RunRow, Store};

/// Triggers `job` now as `kind`: `param` replaces its parameter, and the
/// run goes to one of `addresses` when given (each a live executor of the
/// job's group). The run's id.
pub async fn trigger(
    services: &Services,
    job: JobRow,
    kind: TriggerKind,
    param: Option<String>,
    addresses: Option<Vec<String>>,
) -> Result<RunId, ServiceError> {
    let invalid = |field, message: String| ServiceError::InvalidTrigger { field, message };
    if param
        .as_ref()
        .is_some_and(|param| param.len() > crate::jobs::MAX_PARAM_BYTES)
    {
        return Err(invalid("param", "param is too long".to_owned()));
    }
    if let Some(addresses) = &addresses {
        if addresses.is_empty() {
            return Err(invalid(
                "addresses",
                "addresses, when given, must name at least one executor".to_owned(),
            ));
        }
        let allowed = services
            .firing()
            .group_addresses_now(&job.group_name)
            .await?;
        if let Some(outside) = addresses.iter().find(|a| !allowed.contains(a)) {
            return Err(invalid(
                "addresses",
                format!(
                    "address {outside:?} is not a live executor of group {:?}; a run may only \
                     go to its job's group (live now: {})",
                    job.group_name,
                    if allowed.is_empty() {
                        "none".to_owned()
                    } else {
                        allowed.join(", ")
                    }
                ),
            ));
        }
    }
    Ok(services
        .firing()
        .trigger(job, kind, param, addresses)
        .await?)
}

/// Kills a whole job: its running, queued and held runs on executors, and
/// its runs waiting to be dispatched (pending retries included), which end
/// as cancelled.
pub async fn kill_job(services: &Services, job: &JobRow) -> Result<JobKill, ServiceError> {
    Ok(services.firing().kill_job(job).await?)
}

/// A page of job `id`'s runs, oldest first, after run `after`.
pub async fn runs_of_job(
    store: &Store,
    id: JobId,
    after: Option<RunId>,
    limit: i64,
) -> Result<Vec<RunRow>, ServiceError> {
    Ok(store.runs_of_job_page(id, after, limit).await?)
}
