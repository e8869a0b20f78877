//! What an import of xxl-job's tables would do: each job of `xxl_job_info`
//! mapped to a cronbox definition (a legacy job of its executor's group),
//! with what was mapped or dropped, or refused and why; each executor of
//! `xxl_job_group` a legacy group. Pure: the admin's current jobs and
//! groups are given, so that a second import finds what the first created.

use std::collections::{HashMap, HashSet};

use cronbox_api::{Group, JobId, JobSpec};
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
    /// The definition to create (absent when refused).
    #[serde(skip)]
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
}

#[derive(Debug, Default, Serialize)]
pub struct Plan {
    pub groups: Vec<PlannedGroup>,
    pub jobs: Vec<PlannedJob>,
}

/// A column's value under any of its names across xxl-job's versions.
fn column<'a>(row: &'a Row, names: &[&str]) -> Option<&'a str> {
    names
        .iter()
        .find_map(|name| row.get(*name))
        .map(|value| value.trim())
        .filter(|value| !value.is_empty())
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
    let mut plan = Plan::default();
    let mut planned_groups: HashSet<String> = HashSet::new();
    // Names repeated within a group get the xxl-job id, so that every job
    // keeps a name of its own, the same at every import.
    let mut names: HashMap<(String, String), usize> = HashMap::new();
    for row in &tables.jobs {
        if let (Some(group), Some(name)) = (
            number(row, &["job_group"]).and_then(|id| app_of.get(&id)),
            column(row, &["job_desc", "name"]),
        ) && let Some(app) = column(group, &["app_name", "appname"])
        {
            *names.entry((app.to_owned(), name.to_owned())).or_default() += 1;
        }
    }
    for row in &tables.jobs {
        let xxl_id = number(row, &["id"]).unwrap_or_default();
        let group_row = number(row, &["job_group"]).and_then(|id| app_of.get(&id));
        let app = group_row.and_then(|group| column(group, &["app_name", "appname"]));
        let description = column(row, &["job_desc", "name"]).unwrap_or("job");
        let mut job = PlannedJob {
            xxl_id,
            group: app.unwrap_or("-").to_owned(),
            name: job_name(
                description,
                xxl_id,
                app.and_then(|app| {
                    names
                        .get(&(app.to_owned(), description.to_owned()))
                        .copied()
                }),
            ),
            action: Action::Create,
            spec: None,
            start: false,
            children: Vec::new(),
            notes: Vec::new(),
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
            plan.groups.push(PlannedGroup {
                name: app.to_owned(),
                exists: groups.iter().any(|g| g.name == app),
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
                job.notes = notes;
                match existing.get(&(job.group.clone(), job.name.clone())) {
                    Some(id) => job.action = Action::Exists(*id),
                    None => job.spec = Some(spec),
                }
            }
            Err(why) => job.action = Action::Refused(why),
        }
        plan.jobs.push(job);
    }
    plan
}

/// A job's name: its description (at most 200 characters), with its
/// xxl-job id when the description is not unique in its group.
fn job_name(description: &str, xxl_id: i64, uses: Option<usize>) -> String {
    let short: String = description.chars().take(180).collect();
    if uses.unwrap_or(1) > 1 {
        format!("{short} #{xxl_id}")
    } else {
        short
    }
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

/// Longest timeout given to a job xxl-job ran without one (cronbox's
/// default maximum, 24 h).
const NO_TIMEOUT_MS: i64 = 24 * 3_600_000;

type Mapped = (JobSpec, bool, Vec<i64>, Vec<String>);

/// The definition of a BEAN job, whether to start it, its children's
/// xxl-job ids, and notes; or why it is refused.
fn map_job(row: &Row, job: &PlannedJob, options: &Options) -> Result<Mapped, String> {
    let mut notes = Vec::new();
    let glue = column(row, &["glue_type"]).unwrap_or("BEAN");
    if !glue.eq_ignore_ascii_case("BEAN") {
        return Err(format!(
            "a GLUE job ({glue}): cronbox runs no source stored with a job; \
             write its handler as a module (docs/authoring.md)"
        ));
    }
    let handler =
        column(row, &["executor_handler"]).ok_or_else(|| "no executor_handler".to_owned())?;
    let (schedule_type, schedule_conf) = match (
        column(row, &["schedule_type"]),
        column(row, &["schedule_conf", "job_cron"]),
    ) {
        (None | Some("CRON"), Some(cron)) => ("CRON", cron),
        (Some(kind @ ("FIX_RATE" | "FIX_DELAY")), Some(seconds)) => (kind, seconds),
        (Some("NONE") | None, _) => ("NONE", ""),
        (Some(other), _) => return Err(format!("schedule_type {other:?} has no cronbox match")),
    };
    let mut spec = JobSpec::legacy(job.name.clone(), job.group.clone(), handler);
    spec.schedule_type = schedule_type.to_owned();
    spec.schedule_conf = schedule_conf.to_owned();
    spec.time_zone = options.zone.clone();
    if let Some(misfire) = column(row, &["misfire_strategy"]) {
        spec.misfire = misfire.to_owned();
    }
    if let Some(route) = column(row, &["executor_route_strategy"]) {
        spec.route = route.to_owned();
    }
    if let Some(block) = column(row, &["executor_block_strategy"]) {
        spec.block_strategy = block.to_owned();
    }
    spec.timeout_ms = match number(row, &["executor_timeout"]) {
        Some(seconds) if seconds > 0 && seconds * 1000 <= NO_TIMEOUT_MS => seconds * 1000,
        Some(seconds) if seconds > 0 => {
            notes.push(format!("executor_timeout {seconds} s cut to 24 h"));
            NO_TIMEOUT_MS
        }
        _ => {
            notes.push("no timeout: 24 h".to_owned());
            NO_TIMEOUT_MS
        }
    };
    let retries = number(row, &["executor_fail_retry_count"]).unwrap_or(0);
    spec.retry_count = retries.clamp(0, 100);
    if spec.retry_count != retries {
        notes.push(format!(
            "executor_fail_retry_count {retries} cut to {}",
            spec.retry_count
        ));
    }
    spec.param = column(row, &["executor_param"])
        .unwrap_or_default()
        .to_owned();
    if let Some(email) = column(row, &["alarm_email"]) {
        match &options.alarm_webhook {
            Some(webhook) => {
                spec.alarm_url = webhook.clone();
                notes.push(format!("alarm_email {email} → the webhook"));
            }
            None => notes.push(format!(
                "alarm_email {email} dropped (--alarm-webhook maps it)"
            )),
        }
    }
    let children = column(row, &["child_jobid"])
        .map(|list| {
            list.split(',')
                .filter_map(|id| id.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let start = number(row, &["trigger_status"]) == Some(1) && schedule_type != "NONE";
    Ok((spec, start, children, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pairs: &[(&str, &str)]) -> Row {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn bean_jobs_map_glue_jobs_are_refused_and_existing_ones_are_found() {
        let tables = Tables {
            groups: vec![row(&[("id", "1"), ("app_name", "orders")])],
            jobs: vec![
                row(&[
                    ("id", "10"),
                    ("job_group", "1"),
                    ("job_desc", "report"),
                    ("schedule_type", "CRON"),
                    ("schedule_conf", "0 0 2 * * ?"),
                    ("executor_handler", "reportHandler"),
                    ("executor_timeout", "30"),
                    ("glue_type", "BEAN"),
                    ("trigger_status", "1"),
                    ("child_jobid", "11"),
                    ("alarm_email", "ops@example.com"),
                ]),
                row(&[
                    ("id", "11"),
                    ("job_group", "1"),
                    ("job_desc", "shell"),
                    ("glue_type", "GLUE_SHELL"),
                ]),
                row(&[
                    ("id", "12"),
                    ("job_group", "1"),
                    ("job_desc", "sweep"),
                    ("schedule_type", "FIX_RATE"),
                    ("schedule_conf", "60"),
                    ("executor_handler", "sweep"),
                    ("executor_timeout", "0"),
                ]),
                row(&[("id", "13"), ("job_group", "9"), ("job_desc", "orphan")]),
            ],
        };
        let options = Options {
            zone: "Asia/Shanghai".into(),
            access_token: Some("token-from-flag".into()),
            ..Options::default()
        };
        let existing = HashMap::from([(("orders".to_owned(), "sweep".to_owned()), JobId::from(5))]);
        let plan = plan(&tables, &[], &existing, &options);
        assert_eq!(plan.groups.len(), 1);
        assert_eq!(
            plan.groups[0].access_token.as_deref(),
            Some("token-from-flag")
        );
        let [report, shell, sweep, orphan] = <[_; 4]>::try_from(plan.jobs).unwrap();
        let spec = report.spec.unwrap();
        assert_eq!(report.action, Action::Create);
        assert_eq!(
            (spec.timeout_ms, spec.time_zone.as_str()),
            (30_000, "Asia/Shanghai")
        );
        assert_eq!(spec.executor_handler.as_deref(), Some("reportHandler"));
        assert!(report.start);
        assert_eq!(report.children, [11]);
        assert!(
            report.notes[0].contains("alarm_email"),
            "{:?}",
            report.notes
        );
        assert!(matches!(shell.action, Action::Refused(why) if why.contains("module")));
        assert_eq!(sweep.action, Action::Exists(JobId::from(5)));
        assert!(matches!(orphan.action, Action::Refused(why) if why.contains("job_group 9")));
    }
}
