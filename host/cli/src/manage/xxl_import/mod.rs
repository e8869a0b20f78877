//! `cronbox import xxl-job`: an xxl-job installation's executors and jobs
//! brought in as legacy groups and legacy jobs (see
//! `docs/migrating-from-xxl-job.md`). A dry run by default: a table of what
//! would be created, what exists already, what was mapped or dropped and
//! what is refused and why; `--apply` creates it. Idempotent: a job whose
//! name is already in its group is left as it is, so a second import
//! creates nothing.

mod outfile;
mod plan;
mod tables;

use std::collections::HashMap;

use cronbox_api::{GroupSpec, JobBatch, JobId, LegacyProtocol, LegacySpec};

use super::*;
use plan::{Action, Options, Plan};
use tables::Tables;

/// Bring jobs in from another scheduler.
#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: ImportCommand,
}

#[derive(Debug, Subcommand)]
enum ImportCommand {
    /// xxl-job's executors and jobs, from its tables `xxl_job_group` and
    /// `xxl_job_info`: a mysqldump file, or CSV/JSON exports named after
    /// the tables. A dry run unless --apply.
    #[command(
        name = "xxl-job",
        after_help = "Examples:
  mysqldump xxl_job xxl_job_group xxl_job_info > xxl.sql
  cronbox import xxl-job xxl.sql --zone Asia/Shanghai --access-token \"$XXL_TOKEN\"
  cronbox import xxl-job xxl.sql --zone Asia/Shanghai --access-token \"$XXL_TOKEN\" --apply
  cronbox import xxl-job xxl_job_group.csv xxl_job_info.csv --apply"
    )]
    XxlJob {
        /// The exports (.sql, or .csv/.json named after their table).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Create what the dry run shows.
        #[arg(long)]
        apply: bool,
        /// The zone xxl-job's admin fired in (its JVM's): every job's zone.
        #[arg(long, default_value = "UTC")]
        zone: String,
        /// The protocol of groups made by the import (default: told by
        /// the export's columns, xxl-job-3.5 where it has 3.5's).
        #[arg(long)]
        protocol: Option<LegacyProtocol>,
        /// The access token of groups made by the import when the export
        /// has none (xxl-job before 3.5 has one token for all).
        #[arg(long, env = "CRONBOX_XXL_JOB_TOKEN", hide_env_values = true)]
        access_token: Option<String>,
        /// The webhook jobs' alarm emails become (none: they are dropped).
        #[arg(long, value_name = "URL")]
        alarm_webhook: Option<String>,
        /// The tenant the jobs belong to (default: the caller's): each
        /// group they use is granted to it, and they are made as it (with a
        /// token of the tenant made for the import and revoked after).
        #[arg(long, value_name = "TENANT")]
        tenant: Option<String>,
        /// The escape character of header-less exports (`SELECT * ... INTO
        /// OUTFILE`'s `ESCAPED BY`): a backslash, MySQL's default, or '' for none.
        #[arg(long, value_name = "CHAR", default_value = "\\")]
        escaped_by: String,
    },
}

pub fn import(args: ImportArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    let ImportCommand::XxlJob {
        files,
        apply,
        zone,
        protocol,
        access_token,
        alarm_webhook,
        tenant,
        escaped_by,
    } = args.command;
    let escaped = match escaped_by.as_str() {
        "\\" => true,
        "" => false,
        other => bail!("--escaped-by {other:?}: a backslash (MySQL's default) or '' only"),
    };
    let mut tables = Tables::default();
    for file in &files {
        tables.read(file, escaped)?;
    }
    if tables.jobs.is_empty() {
        bail!(
            "no row of xxl_job_info in the files given (a dump of it, or xxl_job_info.csv or .json)"
        );
    }
    let options = Options {
        zone,
        alarm_webhook,
        access_token,
        protocol,
        tenant,
    };
    runtime.block_on(async move {
        if let Some(tenant) = &options.tenant {
            let tenants = client
                .tenants()
                .await
                .context("--tenant needs the operator's token (it lists tenants)")?;
            if !tenants.iter().any(|known| &known.name == tenant) {
                bail!("--tenant {tenant}: no such tenant (`cronbox tenant list` lists them)");
            }
        }
        // The webhook is the import's, not the export's: checked before
        // anything is planned, as the admin will check every job's.
        if let Some(webhook) = &options.alarm_webhook {
            let checked = client.alarm_check(webhook).await.with_context(|| {
                format!("--alarm-webhook {webhook}: the admin would refuse every job with it")
            })?;
            if checked.checked_when_called && !json {
                outln!(
                    "--alarm-webhook {webhook}: its host is resolved when an alarm is sent, and \
                     checked against the admin's allowed networks then"
                );
            }
        }
        let groups = client.groups().await?;
        let existing: HashMap<(String, String), JobId> = every_job(&client)
            .await?
            .into_iter()
            .map(|job| ((job.group_name, job.name), job.id))
            .collect();
        let mut plan = plan::plan(&tables, &groups, &existing, &options);
        let failed = match apply {
            true => create(&client, &mut plan).await?,
            false => 0,
        };
        show(json, &plan, |plan| print_plan(plan, apply))?;
        if failed > 0 {
            bail!(
                "{failed} jobs were refused by the admin or not linked to their children (the \
                 table says why); the others are in cronbox, and an import again does the rest"
            );
        }
        Ok(())
    })
}

/// Creates the planned groups and jobs, then links children; each job
/// created becomes `Exists` with its id, each the admin refuses `Refused`
/// with its reason (the others are made still). Returns how many jobs the
/// admin refused or could not link the children of.
async fn create(client: &Client, plan: &mut Plan) -> anyhow::Result<usize> {
    let protocol = plan.protocol;
    for group in plan.groups.iter().filter(|group| !group.exists) {
        let spec = GroupSpec {
            address_type: if group.addresses.is_empty() {
                "AUTO"
            } else {
                "MANUAL"
            }
            .to_owned(),
            addresses: group.addresses.clone(),
            legacy: Some(LegacySpec {
                protocol,
                access_token: group.access_token.clone().unwrap_or_default(),
            }),
        };
        client
            .put_group(&group.name, &spec)
            .await
            .with_context(|| format!("cannot make group {}", group.name))?;
    }
    for group in &plan.groups {
        if let Some(tenants) = &group.grant {
            client
                .grant_group(&group.name, tenants)
                .await
                .with_context(|| format!("cannot grant group {}", group.name))?;
        }
    }
    // Made as the tenant the jobs are for: with a token of its own, made
    // for the import and revoked once it is done, however it ends.
    let Some(tenant) = plan.tenant.clone() else {
        return create_jobs(client, plan).await;
    };
    let made = client
        .create_token(&tenant, "cronbox import xxl-job")
        .await
        .with_context(|| format!("cannot make a token of tenant {tenant} for the import"))?;
    let created = create_jobs(&client.with_token(&made.token), plan).await;
    client
        .revoke_token(&tenant, made.token_id)
        .await
        .with_context(|| format!("cannot revoke token {} of tenant {tenant}", made.token_id))?;
    created
}

/// Creates the planned jobs (see [`create`]).
async fn create_jobs(client: &Client, plan: &mut Plan) -> anyhow::Result<usize> {
    let mut refused = 0;
    // Those started and those not, a batch of each at a time.
    for start in [true, false] {
        let to_create: Vec<usize> = (0..plan.jobs.len())
            .filter(|&i| plan.jobs[i].action == Action::Create && plan.jobs[i].start == start)
            .collect();
        for chunk in to_create.chunks(JobBatch::MAX) {
            match client.create_jobs(&batch_of(plan, chunk, start)).await {
                Ok(created) => {
                    for (&i, id) in chunk.iter().zip(created.ids) {
                        plan.jobs[i].action = Action::Exists(id);
                    }
                }
                // The batch is all or none: each job alone, so that the
                // one the admin refuses is named and the others are made.
                Err(_) => {
                    for &i in chunk {
                        let created = client.create_jobs(&batch_of(plan, &[i], start)).await;
                        plan.jobs[i].action =
                            match created.map(|created| created.ids.first().copied()) {
                                Ok(Some(id)) => Action::Exists(id),
                                Ok(None) => {
                                    refused += 1;
                                    Action::Refused("the admin created nothing".to_owned())
                                }
                                Err(error) => {
                                    refused += 1;
                                    Action::Refused(format!("the admin refused it: {error:#}"))
                                }
                            };
                    }
                }
            }
        }
    }
    Ok(refused + link_children(client, plan).await?)
}

/// The jobs at `indices` of `plan` as one batch, started or not.
fn batch_of(plan: &Plan, indices: &[usize], start: bool) -> JobBatch {
    JobBatch {
        jobs: indices
            .iter()
            .filter_map(|&i| plan.jobs[i].spec.clone())
            .collect(),
        start,
    }
}

/// Gives each imported job its children (by xxl-job id), once all exist:
/// those the plan kept. A job whose children cannot be linked is noted and
/// the others linked still; the number of such jobs is returned (a rerun
/// links what is left).
async fn link_children(client: &Client, plan: &mut Plan) -> anyhow::Result<usize> {
    let ids: HashMap<i64, JobId> = plan
        .jobs
        .iter()
        .filter_map(|job| match job.action {
            Action::Exists(id) => Some((job.xxl_id, id)),
            _ => None,
        })
        .collect();
    let mut failed = 0;
    for job in &mut plan.jobs {
        let Action::Exists(id) = job.action else {
            continue;
        };
        if job.children.is_empty() {
            // Nothing to link: the job is not read (a rerun of thousands
            // of jobs reads only those with children).
            continue;
        }
        let children: Vec<JobId> = job
            .children
            .iter()
            .filter_map(|child| ids.get(child).copied())
            .collect();
        let mut spec = JobSpec::from(client.job(id).await?);
        if spec.children == children {
            continue;
        }
        spec.children = children;
        if let Err(error) = client.update_job(id, &spec).await {
            failed += 1;
            job.notes
                .push(format!("its children were not linked: {error:#}"));
        }
    }
    Ok(failed)
}

fn print_plan(plan: &Plan, applied: bool) {
    let rows: Vec<Vec<String>> = plan
        .jobs
        .iter()
        .map(|job| {
            let (action, why) = match &job.action {
                Action::Create => ("create".to_owned(), String::new()),
                Action::Exists(id) => (format!("job {id}"), String::new()),
                Action::Refused(why) => ("refused".to_owned(), why.clone()),
            };
            let mut notes = job.notes.clone();
            if !why.is_empty() {
                notes.insert(0, why);
            }
            vec![
                job.xxl_id.to_string(),
                job.group.clone(),
                job.name.clone(),
                action,
                notes.join("; "),
            ]
        })
        .collect();
    print_table(&["XXL_ID", "GROUP", "NAME", "CRONBOX", "NOTES"], &rows);
    let made: Vec<&str> = plan
        .groups
        .iter()
        .filter(|group| !group.exists)
        .map(|group| group.name.as_str())
        .collect();
    if !made.is_empty() {
        outln!(
            "groups made ({}) speak {} ({})",
            made.join(", "),
            plan.protocol.as_str(),
            plan.protocol_from
        );
    }
    let granted: Vec<&str> = plan
        .groups
        .iter()
        .filter(|group| group.grant.is_some())
        .map(|group| group.name.as_str())
        .collect();
    match &plan.tenant {
        Some(tenant) if !granted.is_empty() => outln!(
            "groups granted to tenant {tenant}: {}; the jobs are tenant {tenant}'s",
            granted.join(", ")
        ),
        Some(tenant) => outln!("the jobs are tenant {tenant}'s"),
        None if !made.is_empty() => outln!(
            "the jobs are the caller's tenant's; no other tenant may use the groups made until \
             granted (--tenant TENANT, or cronbox group grant GROUP TENANT)"
        ),
        None => {}
    }
    let count = |f: fn(&Action) -> bool| plan.jobs.iter().filter(|job| f(&job.action)).count();
    let refused = count(|action| matches!(action, Action::Refused(_)));
    let groups = plan.groups.iter().filter(|group| !group.exists).count();
    if applied {
        outln!(
            "{} jobs are in cronbox; {refused} refused; {groups} groups made",
            count(|action| matches!(action, Action::Exists(_)))
        );
    } else {
        outln!(
            "dry run: {} jobs and {groups} groups to create, {} exist already, {refused} refused \
             (--apply creates them)",
            count(|action| *action == Action::Create),
            count(|action| matches!(action, Action::Exists(_)))
        );
    }
}
