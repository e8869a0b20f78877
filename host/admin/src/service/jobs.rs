//! Job definitions: creating and replacing one (validation, the group, the
//! module, the children), deleting one no other job names, and an
//! operator's edit of a job's durable state.

use std::collections::{HashMap, HashSet};

use super::ServiceError;
use super::Services;
use crate::jobs::{JobSpec, child_cycle, children_of};
use crate::model::Digest;
use crate::model::JobId;
use crate::store::{JobRow, Store, StoreError};
use cronbox_api::{JobBatch, JobsCreated, Quota};

/// Creates a job of `tenant` from `spec` (stopped); returns it as stored.
/// A batch of one, refused as one job is (field `schedule_conf`, not
/// `jobs[0].schedule_conf`).
pub async fn create(
    services: &Services,
    tenant: &str,
    spec: &JobSpec,
) -> Result<JobRow, ServiceError> {
    let batch = JobBatch {
        jobs: vec![spec.clone()],
        start: false,
    };
    let created = create_many(services, tenant, &batch)
        .await
        .map_err(ServiceError::alone)?;
    stored(services.store(), created.ids[0]).await
}

/// Creates the jobs of `batch` for `tenant` in one transaction, all or
/// none, each checked as [`create`] checks one (a refusal names the job's
/// place in the batch: field `jobs[3].schedule_conf`); with `start`, each
/// job that has a next fire is started. Reads made for one job (its group,
/// module, ...) are made once per batch.
pub async fn create_many(
    services: &Services,
    tenant: &str,
    batch: &JobBatch,
) -> Result<JobsCreated, ServiceError> {
    if batch.jobs.len() > JobBatch::MAX {
        return Err(ServiceError::invalid(
            "jobs",
            format!(
                "{} jobs in one batch; send at most {} at a time",
                batch.jobs.len(),
                JobBatch::MAX
            ),
        ));
    }
    let limits = services.limits();
    let store = services.store();
    let now = services.now();
    let quotas = services.quotas();
    // Each group checked once per batch: usable by the tenant, and
    // whether it is a legacy group.
    let mut groups: HashMap<String, bool> = HashMap::new();
    let mut modules: HashMap<(Option<String>, Option<i64>, String), Digest> = HashMap::new();
    let mut checked = Vec::with_capacity(batch.jobs.len());
    let mut xxl_job_ids = HashSet::new();
    for (index, spec) in batch.jobs.iter().enumerate() {
        let at = |error: ServiceError| error.in_batch(index);
        let (mut row, schedule) =
            crate::jobs::validate(spec, tenant, &limits.job_maxima, &limits.alarm_nets)
                .map_err(|invalid| ServiceError::invalid(invalid.field, invalid.message))
                .map_err(at)?;
        let legacy = match groups.get(&row.group_name) {
            Some(legacy) => *legacy,
            None => {
                known_group(store, tenant, &row.group_name)
                    .await
                    .map_err(at)?;
                let legacy = store.legacy_group(&row.group_name).await?.is_some();
                groups.insert(row.group_name.clone(), legacy);
                legacy
            }
        };
        super::tenants::check_within_ceiling(store, tenant, &row.http_allow)
            .await
            .map_err(at)?;
        if !row.secrets.is_empty() {
            super::secrets::check_references(
                store,
                limits.secrets.as_deref(),
                tenant,
                &row.secrets,
            )
            .await
            .map_err(at)?;
        }
        check_calendars(store, tenant, &row.schedule_rules.calendars, &[])
            .await
            .map_err(at)?;
        check_group_kind(&row, legacy).map_err(at)?;
        if let Some(xxl_job_id) = row.xxl_job_id
            && !xxl_job_ids.insert((row.group_name.clone(), xxl_job_id))
        {
            return Err(at(ServiceError::invalid(
                "xxl_job_id",
                format!(
                    "xxl-job id {xxl_job_id} is given twice in group {}",
                    row.group_name
                ),
            )));
        }
        let module_key = (
            row.module_name.clone(),
            row.module_version,
            row.module_digest.to_string(),
        );
        match modules.get(&module_key) {
            Some(digest) => row.module_digest = digest.clone(),
            None => {
                resolve_module(store, &mut row).await.map_err(at)?;
                modules.insert(module_key, row.module_digest.clone());
            }
        }
        checked.push((row, schedule));
    }
    // The batch's xxl-job ids that another job has, read at once.
    let ids: Vec<i64> = xxl_job_ids.iter().map(|(_, id)| *id).collect();
    for (group, xxl_job_id, other) in store.jobs_with_xxl_ids(&ids).await? {
        if let Some(index) = checked.iter().position(|(row, _): &(JobRow, _)| {
            row.group_name == group && row.xxl_job_id == Some(xxl_job_id)
        }) {
            return Err(ServiceError::invalid(
                "xxl_job_id",
                format!("xxl-job id {xxl_job_id} is job {other}'s in group {group}"),
            )
            .in_batch(index));
        }
    }
    quotas
        .check_more(
            store,
            tenant,
            Quota::Jobs,
            checked.len() as u64,
            now.timestamp_millis(),
        )
        .await??;
    for (_, schedule) in &checked {
        quotas
            .check_interval(store, tenant, schedule, now)
            .await??;
    }
    // Children are jobs of the tenant that exist already (nothing names a
    // job of the batch yet, so none can close a cycle).
    let named: Vec<JobId> = checked
        .iter()
        .flat_map(|(row, _)| row.children.iter().copied())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let children = store.jobs_by_id(&named).await?;
    for (index, (row, _)) in checked.iter().enumerate() {
        if let Some(child) = row
            .children
            .iter()
            .find(|child| children.get(child).is_none_or(|job| job.tenant != tenant))
        {
            return Err(ServiceError::invalid(
                "children",
                format!("child job {child} does not exist"),
            )
            .in_batch(index));
        }
    }
    let (rows, schedules): (Vec<JobRow>, Vec<_>) = checked.into_iter().unzip();
    // One transaction, all or none; a started job's first fire comes
    // from its rules, which need its new id (the jitter's seed).
    let mut started = 0;
    let mut inserts = store.job_inserts(services.now_ms()).await?;
    for (row, schedule) in rows.iter().zip(&schedules) {
        let id = inserts.insert(row).await?;
        if !batch.start {
            continue;
        }
        let job = JobRow { id, ..row.clone() };
        let first = services
            .firing()
            .rules_of(&job)
            .first_fire(schedule, now)
            .map(|at| at.timestamp_millis());
        if let Some(first) = first {
            inserts.start(id, first).await?;
            started += 1;
        }
    }
    let ids = inserts.commit().await?;
    let mut prepared = HashSet::new();
    for row in &rows {
        if row.executor_handler.is_none()
            && prepared.insert((row.group_name.clone(), row.module_digest.clone()))
        {
            services.firing().prepare_module(
                vec![row.group_name.clone()],
                row.module_digest.clone(),
                None,
            );
        }
    }
    if started > 0 {
        services.firing().wake();
    }
    Ok(JobsCreated { ids, started })
}

/// Replaces the definition of `current` with `spec`. Children must be jobs
/// of its tenant and must not form a cycle (checked here with a path to
/// show, and again inside the write). A running job's next fire is planned
/// again from now only when its schedule (type, expression or time zone)
/// changed, so that an edit of anything else keeps a FIX_RATE job's phase.
/// Most shared calendars one job names.
pub const MAX_JOB_CALENDARS: usize = 8;

/// Refuses (field `schedule_rules`) more than [`MAX_JOB_CALENDARS`]
/// calendars, or one the tenant does not have (of those not `kept` from
/// the job's current definition: one deleted since does not block edits).
async fn check_calendars(
    store: &Store,
    tenant: &str,
    names: &[String],
    kept: &[String],
) -> Result<(), ServiceError> {
    if names.len() > MAX_JOB_CALENDARS {
        return Err(ServiceError::invalid(
            "schedule_rules",
            format!(
                "{} calendars; a job names at most {MAX_JOB_CALENDARS}",
                names.len()
            ),
        ));
    }
    let added: Vec<&String> = names.iter().filter(|name| !kept.contains(name)).collect();
    if added.is_empty() {
        return Ok(());
    }
    let existing: Vec<String> = store
        .calendars(Some(tenant))
        .await?
        .into_iter()
        .map(|calendar| calendar.name)
        .collect();
    match added.iter().find(|name| !existing.contains(name)) {
        Some(missing) => Err(ServiceError::invalid(
            "schedule_rules",
            format!(
                "no calendar {missing:?} in this tenant (`cronbox calendar set {missing} DATE...` \
                 makes one)"
            ),
        )),
        None => Ok(()),
    }
}

pub async fn update(
    services: &Services,
    current: &JobRow,
    spec: &JobSpec,
) -> Result<JobRow, ServiceError> {
    let limits = services.limits();
    let (mut row, schedule) = crate::jobs::validate(
        spec,
        &current.tenant,
        &limits.job_maxima,
        &limits.alarm_nets,
    )
    .map_err(|invalid| ServiceError::invalid(invalid.field, invalid.message))?;
    let store = services.store();
    known_group(store, &current.tenant, &row.group_name).await?;
    // A replacement without an xxl-job id keeps the job's.
    row.xxl_job_id = row.xxl_job_id.or(current.xxl_job_id);
    check_xxl_job_id(store, &row, Some(current.id)).await?;
    super::tenants::check_within_ceiling(store, &current.tenant, &row.http_allow).await?;
    // Only names the job did not reference before must exist: one deleted
    // with force since does not block other edits of the job.
    let added: Vec<String> = row
        .secrets
        .iter()
        .filter(|name| !current.secrets.contains(name))
        .cloned()
        .collect();
    super::secrets::check_references(store, limits.secrets.as_deref(), &current.tenant, &added)
        .await?;
    check_calendars(
        store,
        &current.tenant,
        &row.schedule_rules.calendars,
        &current.schedule_rules.calendars,
    )
    .await?;
    check_group_kind(&row, store.legacy_group(&row.group_name).await?.is_some())?;
    resolve_module(store, &mut row).await?;
    services
        .quotas()
        .check_interval(store, &current.tenant, &schedule, services.now())
        .await??;
    // The jobs reachable through child links from the new children: all a
    // cycle check needs, read layer by layer (never the whole table).
    let reachable = reachable_jobs(store, &row.children).await?;
    for child in &row.children {
        if !reachable
            .iter()
            .any(|job| job.id == *child && job.tenant == current.tenant)
        {
            return Err(ServiceError::invalid(
                "children",
                format!("child job {child} does not exist"),
            ));
        }
    }
    if let Some(cycle) = child_cycle(current.id, &row.children, &reachable) {
        let path: Vec<String> = cycle.iter().map(JobId::to_string).collect();
        return Err(ServiceError::invalid(
            "children",
            format!("child jobs would form a cycle: {}", path.join(" → ")),
        ));
    }
    let same_schedule = current.schedule_type == row.schedule_type
        && current.schedule_conf == row.schedule_conf
        && current.time_zone == row.time_zone
        && current.schedule_rules == row.schedule_rules;
    let next = if !current.enabled {
        None
    } else if same_schedule {
        current.next_fire_at_ms
    } else {
        // A job paused until later resumes then, on its new schedule.
        let from = current
            .pause
            .as_ref()
            .and_then(|pause| pause.until_ms)
            .and_then(chrono::DateTime::from_timestamp_millis)
            .map_or(services.now(), |until| until.max(services.now()));
        services
            .firing()
            .rules_of(&JobRow {
                id: current.id,
                ..row.clone()
            })
            .first_fire(&schedule, from)
            .map(|at| at.timestamp_millis())
    };
    match store
        .update_job(current.id, &row, next, services.now_ms())
        .await
    {
        Ok(_) => {}
        Err(StoreError::ChildCycle(_)) => {
            return Err(ServiceError::invalid(
                "children",
                "child jobs would form a cycle (with a change saved meanwhile)",
            ));
        }
        Err(error) => return Err(error.into()),
    }
    if row.executor_handler.is_none()
        && (row.module_digest != current.module_digest || row.group_name != current.group_name)
    {
        // Its runs keep the content they had until the executors have
        // compiled the new one.
        let from =
            (row.module_digest != current.module_digest).then(|| current.module_digest.clone());
        services.firing().prepare_module(
            vec![row.group_name.clone()],
            row.module_digest.clone(),
            from,
        );
    }
    services.firing().wake();
    stored(store, current.id).await
}

/// Refuses an xxl-job id that another job of the group has (`job`: the
/// job being replaced, which may keep its own).
async fn check_xxl_job_id(
    store: &Store,
    row: &JobRow,
    job: Option<JobId>,
) -> Result<(), ServiceError> {
    let Some(xxl_job_id) = row.xxl_job_id else {
        return Ok(());
    };
    let taken = store.jobs_with_xxl_ids(&[xxl_job_id]).await?;
    match taken
        .into_iter()
        .find(|(group, _, other)| *group == row.group_name && Some(*other) != job)
    {
        Some((group, _, other)) => Err(ServiceError::invalid(
            "xxl_job_id",
            format!("xxl-job id {xxl_job_id} is job {other}'s in group {group}"),
        )),
        None => Ok(()),
    }
}

/// Deletes `job` (its runs stay as history); refused while another job
/// names it as a child.
pub async fn delete(store: &Store, job: &JobRow) -> Result<(), ServiceError> {
    let parents = store.parents_of(job.id).await?;
    if !parents.is_empty() {
        return Err(ServiceError::JobInUse {
            id: job.id,
            parents,
        });
    }
    store.delete_job(job.id).await?;
    Ok(())
}

/// Keys, values and entries an operator may write into a job's state.
pub const STATE_MAX_KEY_BYTES: usize = 256;

pub const STATE_MAX_VALUE_BYTES: usize = 64 * 1024;

pub const STATE_MAX_ENTRIES: usize = 1024;

/// Keys and values together: the executors' default state limit, so that
/// an edit never makes every later dispatch of the job fail.
pub const STATE_MAX_TOTAL_BYTES: usize = 1 << 20;

/// Job `id`'s durable state: what its next run will see.
pub async fn state(store: &Store, id: JobId) -> Result<HashMap<String, String>, ServiceError> {
    Ok(store.job_state(id).await?.values)
}

/// Replaces job `id`'s durable state with `values` (an operator's edit),
/// refused past the sizes executors accept.
pub async fn replace_state(
    store: &Store,
    id: JobId,
    values: &HashMap<String, String>,
    now_ms: i64,
) -> Result<(), ServiceError> {
    let invalid = |message: String| ServiceError::InvalidState(message);
    if values.len() > STATE_MAX_ENTRIES {
        return Err(invalid(format!(
            "{} entries; at most {STATE_MAX_ENTRIES}",
            values.len()
        )));
    }
    let total: usize = values
        .iter()
        .map(|(key, value)| key.len() + value.len())
        .sum();
    if total > STATE_MAX_TOTAL_BYTES {
        return Err(invalid(format!(
            "{total} bytes of keys and values; at most {STATE_MAX_TOTAL_BYTES}"
        )));
    }
    for (key, value) in values {
        if key.is_empty() || key.len() > STATE_MAX_KEY_BYTES {
            return Err(invalid(format!(
                "key {key:?} must be 1 to {STATE_MAX_KEY_BYTES} bytes"
            )));
        }
        if value.len() > STATE_MAX_VALUE_BYTES {
            return Err(invalid(format!(
                "the value of {key:?} is {} bytes; at most {STATE_MAX_VALUE_BYTES}",
                value.len()
            )));
        }
    }
    store.replace_job_state(id, values, now_ms).await?;
    Ok(())
}

/// Refuses a job naming an executor group nobody configured or registered
/// in (it would fail at every fire), or one `tenant` may not use: the
/// operator grants groups to tenants (`cronbox group grant`),
/// since a group's executors and addresses are the operator's (their
/// network grants, their MANUAL addresses the admin contacts). To a tenant
/// both refusals read the same, as other tenants' objects do.
async fn known_group(store: &Store, tenant: &str, group: &str) -> Result<(), ServiceError> {
    if store.group_exists(group).await? && store.group_granted(group, tenant).await? {
        return Ok(());
    }
    let operator_hint = if tenant == crate::model::DEFAULT_TENANT {
        format!(
            "a group exists once an executor registers in it or the operator configures it \
             (`cronbox group set {group}`)"
        )
    } else {
        format!(
            "the operator grants groups to tenants (`cronbox group grant {group} {tenant}`); \
             `cronbox group list` lists those tenant {tenant:?} may use"
        )
    };
    Err(ServiceError::invalid(
        "group",
        format!("unknown executor group {group:?} for this tenant: {operator_hint}"),
    ))
}

/// Whether the job runs what its group's executors run: a handler in a
/// legacy group (xxl-job executors), a module anywhere else.
fn check_group_kind(row: &JobRow, legacy: bool) -> Result<(), ServiceError> {
    let group = &row.group_name;
    match (&row.executor_handler, legacy) {
        (Some(_), false) => Err(ServiceError::invalid(
            "executor_handler",
            format!(
                "group {group:?} runs modules on cronbox executors: give module (or \
                 module_digest), or put the job in a legacy group of xxl-job executors \
                 (`cronbox group list` shows them)"
            ),
        )),
        (None, true) => Err(ServiceError::invalid(
            "executor_handler",
            format!(
                "group {group:?} is a legacy group of xxl-job executors: name the handler to run \
                 (executor_handler, `--handler`), not a module"
            ),
        )),
        _ => Ok(()),
    }
}

/// Sets the digest of a job that names a module: its pinned version, or
/// the latest; checks that the job's tenant has the module it names.
async fn resolve_module(store: &Store, row: &mut JobRow) -> Result<(), ServiceError> {
    if row.executor_handler.is_some() {
        return Ok(()); // a legacy job: no module
    }
    let Some(name) = &row.module_name else {
        if !store
            .owns_module(&row.tenant, row.module_digest.as_str())
            .await?
        {
            return Err(ServiceError::invalid(
                "module_digest",
                format!("no module {} was uploaded", row.module_digest),
            ));
        }
        return Ok(());
    };
    let versions = store.module_versions(&row.tenant, name).await?;
    let chosen = match row.module_version {
        Some(version) => versions.iter().find(|v| v.version == version),
        None => versions.first(),
    };
    let Some(chosen) = chosen else {
        let what = match row.module_version {
            Some(version) => format!("version {version} of module {name:?}"),
            None => format!("module {name:?}"),
        };
        return Err(ServiceError::invalid(
            "module",
            format!(
                "no {what} was pushed (or it was pruned); `cronbox module push {name} FILE.wasm` \
                 pushes one, `cronbox module versions {name}` lists what is kept"
            ),
        ));
    };
    row.module_digest = chosen.digest.clone();
    Ok(())
}

/// The jobs reachable from `roots` through child links (roots included).
async fn reachable_jobs(store: &Store, roots: &[JobId]) -> Result<Vec<JobRow>, ServiceError> {
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    let mut layer: Vec<JobId> = roots.to_vec();
    while !layer.is_empty() {
        layer.retain(|id| seen.insert(*id));
        let jobs = store.jobs_by_id(&layer).await?;
        layer = jobs.values().flat_map(children_of).collect();
        found.extend(jobs.into_values());
    }
    Ok(found)
}

/// A job just written, read back.
async fn stored(store: &Store, id: JobId) -> Result<JobRow, ServiceError> {
    store
        .job(id)
        .await?
        .ok_or(ServiceError::Store(StoreError::Database(
            sqlx::Error::RowNotFound,
        )))
}
