//! What an import of xxl-job's tables would do: each job of `xxl_job_info`
//! mapped to a cronbox definition (a legacy job of its executor's group),
//! with what was mapped or dropped, or refused and why; each executor of
//! `xxl_job_group` a legacy group. Pure: the admin's current jobs and
//! groups are given, so that a second import finds what the first created.

use std::collections::{HashMap, HashSet};

use cronbox_api::{Group, JobId, JobSpec, LegacyProtocol, XxlJobFields, XxlJobPlace};
use serde::Serialize;

use super::tables::{Row, Tables};

/// What an import is told beyond the tables.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The zone xxl-job's admin fired in (its JVM's): every job's zone.
    pub zone: String,
    /// The webhook a job's alarm email becomes (none: dropped, said so).
    pub alarm_webhook: Option<String>,
    /// The access token of groups whose export has none (before 3.5).
    pub access_token: Option<String>,
    /// The protocol of groups made (`None`: detected from the export).
    pub protocol: Option<LegacyProtocol>,
    /// The tenant the jobs are for (`None`: the caller's), to which each
    /// group they use is granted.
    pub tenant: Option<String>,
}

/// A job's fate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "action", content = "detail")]
pub enum Action {
    Create,
    /// A job of that name is already in its group: nothing is created.
    Exists(JobId),
    Refused(String),
}

/// One row of `xxl_job_info`, planned.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedJob {
    pub xxl_id: i64,
    pub group: String,
    pub name: String,
    pub action: Action,
    /// The definition to create (absent when refused or existing).
    pub spec: Option<JobSpec>,
    /// Started once created (xxl-job's `trigger_status` 1).
    pub start: bool,
    /// xxl-job ids of its child jobs, linked once every job exists.
    pub children: Vec<i64>,
    /// What was mapped or dropped on the way.
    pub notes: Vec<String>,
}

/// One executor of `xxl_job_group` that a job uses, planned.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedGroup {
    pub name: String,
    /// Already a legacy group of the admin: nothing to do.
    pub exists: bool,
    /// `MANUAL` addresses from the export (empty: AUTO, executors register).
    pub addresses: Vec<String>,
    #[serde(skip)]
    pub access_token: Option<String>,
    /// The tenants it is granted to once imported, when the import grants
    /// it to `--tenant` (`None`: left as it is).
    pub grant: Option<Vec<String>>,
}

#[derive(Debug, Serialize)]
pub struct Plan {
    /// The protocol of the groups the import makes, and why that one.
    pub protocol: LegacyProtocol,
    pub protocol_from: String,
    /// The tenant the jobs are made for (`None`: the caller's).
    pub tenant: Option<String>,
    pub groups: Vec<PlannedGroup>,
    pub jobs: Vec<PlannedJob>,
}

/// The xxl-job line an export comes from, told by its columns: 3.5's
/// `xxl_job_info` has `name` where earlier ones have `job_desc` (both
/// NOT NULL), and its `xxl_job_group` an `access_token`.
pub fn detected_protocol(tables: &Tables) -> (LegacyProtocol, String) {
    if tables.jobs.iter().any(|row| row.contains_key("name")) {
        (
            LegacyProtocol::XxlJob35,
            "detected: xxl_job_info has a name column (xxl-job 3.5)".to_owned(),
        )
    } else if tables
        .groups
        .iter()
        .any(|row| row.contains_key("access_token"))
    {
        (
            LegacyProtocol::XxlJob35,
            "detected: xxl_job_group has an access_token column (xxl-job 3.5)".to_owned(),
        )
    } else {
        (
            LegacyProtocol::XxlJob34,
            "detected: xxl_job_info has job_desc, not name (xxl-job before 3.5)".to_owned(),
        )
    }
}

/// A column's value under any of its names across xxl-job's versions.
fn column<'a>(row: &'a Row, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|name| row.get(*name))
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
}

/// A column's value exactly as exported (`None`: NULL or not exported):
/// what a job carries as data (its parameter, its description).
fn exact<'a>(row: &'a Row, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|name| row.get(*name))
        .map(String::as_str)
}

fn number(row: &Row, names: &[&str]) -> Option<i64> {
    column(row, names).and_then(|value| value.parse().ok())
}

/// Plans the import of `tables` into an admin that has `groups` and the
/// jobs `existing` (by group and name).
pub fn plan(
    tables: &Tables,
    groups: &[Group],
    existing: &HashMap<(String, String), JobId>,
    options: &Options,
) -> Plan {
    let app_of: HashMap<i64, &Row> = tables
        .groups
        .iter()
        .filter_map(|row| Some((number(row, &["id"])?, row)))
        .collect();
    let (protocol, protocol_from) = match options.protocol {
        Some(protocol) => (protocol, "--protocol".to_owned()),
        None => detected_protocol(tables),
    };
    let mut plan = Plan {
        protocol,
        protocol_from,
        tenant: options.tenant.clone(),
        groups: Vec::new(),
        jobs: Vec::new(),
    };
    let mut planned_groups: HashSet<String> = HashSet::new();
    // Names repeated within a group get the xxl-job id, so that every job
    // keeps a name of its own, the same at every import.
    let mut names: HashMap<(String, String), usize> = HashMap::new();
    for row in &tables.jobs {
        if let (Some(group), Some(name)) = (
            number(row, &["job_group"]).and_then(|id| app_of.get(&id)),
            exact(row, &["job_desc", "name"]),
        ) && let Some(app) = column(group, &["app_name", "appname"])
        {
            *names.entry((app.to_owned(), name.to_owned())).or_default() += 1;
        }
    }
    for row in &tables.jobs {
        let xxl_id = number(row, &["id"]).unwrap_or_default();
        let group_row = number(row, &["job_group"]).and_then(|id| app_of.get(&id));
        let app = group_row.and_then(|group| column(group, &["app_name", "appname"]));
        let description = exact(row, &["job_desc", "name"]).unwrap_or_default();
        let uses = app.and_then(|app| {
            names
                .get(&(app.to_owned(), description.to_owned()))
                .copied()
        });
        let (name, renamed) = job_name(description, xxl_id, uses.unwrap_or(1));
        let mut job = PlannedJob {
            xxl_id,
            group: app.unwrap_or("-").to_owned(),
            name,
            action: Action::Create,
            spec: None,
            start: false,
            children: Vec::new(),
            notes: renamed.into_iter().collect(),
        };
        let (Some(app), Some(group_row)) = (app, group_row) else {
            job.action = Action::Refused(format!(
                "its executor (job_group {}) is not in the export's xxl_job_group",
                column(row, &["job_group"]).unwrap_or("-")
            ));
            plan.jobs.push(job);
            continue;
        };
        if let Some(why) = group_refusal(app, group_row, groups, options) {
            job.action = Action::Refused(why);
            plan.jobs.push(job);
            continue;
        }
        if planned_groups.insert(app.to_owned()) {
            let known = groups.iter().find(|g| g.name == app);
            plan.groups.push(PlannedGroup {
                name: app.to_owned(),
                exists: known.is_some(),
                grant: options.tenant.as_ref().and_then(|tenant| {
                    let mut tenants = known.map(|g| g.tenants.clone()).unwrap_or_default();
                    let granted = tenants.iter().any(|t| t == tenant || t == "*");
                    (!granted).then(|| {
                        tenants.push(tenant.clone());
                        tenants
                    })
                }),
                addresses: manual_addresses(group_row),
                access_token: column(group_row, &["access_token"])
                    .map(str::to_owned)
                    .or_else(|| options.access_token.clone()),
            });
        }
        match map_job(row, &job, options) {
            Ok((spec, start, children, notes)) => {
                job.start = start;
                job.children = children;
                job.notes.extend(notes);
                match existing.get(&(job.group.clone(), job.name.clone())) {
                    Some(id) => job.action = Action::Exists(*id),
                    None => job.spec = Some(spec),
                }
            }
            Err(why) => job.action = Action::Refused(why),
        }
        plan.jobs.push(job);
    }
    keep_linkable_children(&mut plan.jobs);
    plan
}

/// Keeps of each job's children those cronbox can link, in order, and
/// notes why each other is not: not in the export, refused, or closing a
/// cycle with the links kept before it (xxl-job runs a cycle of child
/// jobs, each run triggering the next; cronbox refuses one). The same
/// export so always keeps the same links.
fn keep_linkable_children(jobs: &mut [PlannedJob]) {
    let refused: HashMap<i64, bool> = jobs
        .iter()
        .map(|job| (job.xxl_id, matches!(job.action, Action::Refused(_))))
        .collect();
    let mut kept: HashMap<i64, Vec<i64>> = HashMap::new();
    for job in jobs.iter_mut() {
        if matches!(job.action, Action::Refused(_)) {
            continue;
        }
        let mut linkable = Vec::with_capacity(job.children.len());
        for &child in &job.children {
            let why = match refused.get(&child) {
                None => Some("is not in the export"),
                Some(true) => Some("is refused"),
                Some(false) if reaches(&kept, child, job.xxl_id) => {
                    Some("would close a cycle, which cronbox does not run")
                }
                Some(false) => None,
            };
            match why {
                Some(why) => job
                    .notes
                    .push(format!("child job {child} not linked: it {why}")),
                None => {
                    kept.entry(job.xxl_id).or_default().push(child);
                    linkable.push(child);
                }
            }
        }
        job.children = linkable;
    }
}

/// Whether `to` is `from` or one of its descendants along `links`.
fn reaches(links: &HashMap<i64, Vec<i64>>, from: i64, to: i64) -> bool {
    let mut seen = HashSet::new();
    let mut next = vec![from];
    while let Some(at) = next.pop() {
        if at == to {
            return true;
        }
        if seen.insert(at) {
            next.extend(links.get(&at).into_iter().flatten());
        }
    }
    false
}

/// Longest job name cronbox keeps, in bytes.
const NAME_BYTES: usize = 200;

/// A job's name: its description as it is, where cronbox can keep it as
/// its name; else a name made unique with the xxl-job id, and a note that
/// says what changed and why. A description `uses` jobs of its group share,
/// one that is blank, holds control characters or is longer than cronbox
/// keeps is so made: `DESCRIPTION #ID`, the description cut (at a
/// character) to leave room for the id, control characters as spaces.
fn job_name(description: &str, xxl_id: i64, uses: usize) -> (String, Option<String>) {
    let suffix = format!(" #{xxl_id}");
    let why = if description.trim().is_empty() {
        Some("its job_desc is blank".to_owned())
    } else if description.chars().any(char::is_control) {
        Some("its job_desc holds control characters (made spaces)".to_owned())
    } else if description.len() > NAME_BYTES {
        Some(format!(
            "its job_desc is {} bytes, over cronbox's {NAME_BYTES} (cut)",
            description.len()
        ))
    } else if uses > 1 {
        Some(format!("{uses} jobs of its group share its job_desc"))
    } else {
        None
    };
    let Some(why) = why else {
        return (description.to_owned(), None);
    };
    let mut name = String::new();
    if description.trim().is_empty() {
        name.push_str("xxl-job");
    } else {
        for c in description.chars() {
            let c = if c.is_control() { ' ' } else { c };
            if name.len() + c.len_utf8() + suffix.len() > NAME_BYTES {
                break;
            }
            name.push(c);
        }
    }
    name.push_str(&suffix);
    let note = format!("named {name:?}: {why}");
    (name, Some(note))
}

/// Why jobs of executor `app` cannot come in, if they cannot.
fn group_refusal(app: &str, row: &Row, groups: &[Group], options: &Options) -> Option<String> {
    match groups.iter().find(|group| group.name == app) {
        Some(group) if group.legacy.is_none() => Some(format!(
            "group {app:?} exists and runs cronbox executors, not xxl-job's"
        )),
        Some(_) => None,
        None if column(row, &["access_token"]).is_none() && options.access_token.is_none() => {
            Some(format!(
                "group {app:?} is to be made, and the export has no access token for it: \
                 give --access-token"
            ))
        }
        None => None,
    }
}

/// A MANUAL executor's addresses (`address_type` 1).
fn manual_addresses(row: &Row) -> Vec<String> {
    if number(row, &["address_type"]) != Some(1) {
        return Vec::new();
    }
    column(row, &["address_list"])
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|address| !address.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

type Mapped = (JobSpec, bool, Vec<i64>, Vec<String>);

/// The definition of a BEAN job (see [`XxlJobFields::legacy_job`]),
/// whether to start it, its children's xxl-job ids, and notes; or why it
/// is refused.
fn map_job(row: &Row, job: &PlannedJob, options: &Options) -> Result<Mapped, String> {
    let fields = XxlJobFields {
        glue_type: column(row, &["glue_type"]),
        executor_handler: column(row, &["executor_handler"]),
        schedule_type: column(row, &["schedule_type"]),
        schedule_conf: column(row, &["schedule_conf", "job_cron"]),
        misfire_strategy: column(row, &["misfire_strategy"]),
        executor_route_strategy: column(row, &["executor_route_strategy"]),
        executor_block_strategy: column(row, &["executor_block_strategy"]),
        executor_timeout: number(row, &["executor_timeout"]),
        executor_fail_retry_count: number(row, &["executor_fail_retry_count"]),
        executor_param: exact(row, &["executor_param"]),
        alarm_email: column(row, &["alarm_email"]),
    };
    let (mut spec, notes) = fields.legacy_job(XxlJobPlace {
        name: &job.name,
        group: &job.group,
        time_zone: &options.zone,
        alarm_webhook: options.alarm_webhook.as_deref(),
    })?;
    spec.xxl_job_id = (job.xxl_id > 0).then_some(job.xxl_id);
    let children = column(row, &["child_jobid"])
        .map(|list| {
            list.split(',')
                .filter_map(|id| id.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let start = number(row, &["trigger_status"]) == Some(1) && spec.schedule_type != "NONE";
    Ok((spec, start, children, notes))
}

#[cfg(test)]
mod tests;
