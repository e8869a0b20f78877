//! What xxl-job 3.5's job API does with a legacy group's jobs (the HTTP
//! side, with xxl-job's envelope, is `api/xxl_job_jobs.rs`): the one tenant
//! a group's token acts for, a job named by its xxl-job id or cronbox id,
//! and a job added with the group's next xxl-job id.

use super::{ServiceError, Services};
use crate::jobs::JobSpec;
use crate::model::JobId;
use crate::store::{JobRow, Store};

/// The tenant whose jobs group `group`'s token manages: the one it is
/// granted to (the operator's when granted to none); a group granted to
/// several tenants, or to every one, is refused.
pub async fn tenant_of_group(store: &Store, group: &str) -> Result<String, ServiceError> {
    let tenants = super::groups::tenants_of(store, group).await?;
    match tenants.as_slice() {
        [] => Ok(crate::model::DEFAULT_TENANT.to_owned()),
        [one] if one != super::groups::EVERY_TENANT => Ok(one.clone()),
        _ => Err(ServiceError::InvalidGroup {
            field: "tenants",
            message: format!(
                "group {group} is granted to {}: xxl-job's job API acts for one tenant; \
                 grant the group to the one its jobs belong to (`cronbox group grant`)",
                tenants.join(", ")
            ),
        }),
    }
}

/// The job `id` names among `tenant`'s jobs of `group`: the one with that
/// xxl-job id, else the one with that cronbox id and no xxl-job id
/// ([`ServiceError::UnknownJob`] otherwise).
pub async fn job_named(
    store: &Store,
    group: &str,
    tenant: &str,
    id: i64,
) -> Result<JobRow, ServiceError> {
    let found = match store.job_by_xxl_id(group, id).await? {
        Some(job) => Some(job),
        None => store
            .job(JobId(id))
            .await?
            .filter(|job| job.xxl_job_id.is_none() && job.group_name == group),
    };
    found
        .filter(|job| job.tenant == tenant)
        .ok_or(ServiceError::UnknownJob(JobId(id)))
}

/// Creates `spec` (a legacy job of `spec.group`) for `tenant`, stopped,
/// with the group's next xxl-job id: one past the largest there and past
/// the largest job id, so that it names no other job of the group by its
/// cronbox id either. The job and that id.
pub async fn add(
    services: &Services,
    tenant: &str,
    mut spec: JobSpec,
) -> Result<(JobRow, i64), ServiceError> {
    let xxl_job_id = services.store().next_xxl_job_id(&spec.group).await?;
    spec.xxl_job_id = Some(xxl_job_id);
    let job = super::jobs::create(services, tenant, &spec).await?;
    Ok((job, xxl_job_id))
}
