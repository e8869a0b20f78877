//! `cronbox workflow`: a tenant's workflows — saved from a `workflow.toml`
//! file, listed, shown, deleted — and their runs: started (and followed
//! to their end with `--wait`), listed, and shown node by node.

use std::path::Path;

use cronbox_api::{NodeStatus, WorkflowRun, WorkflowRunStatus, WorkflowSpec};

use super::*;

/// Save, run and follow your tenant's workflows (jobs in a defined order).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox workflow apply etl/workflow.toml
  cronbox workflow run etl --input '{\"day\": \"2026-11-28\"}' --wait
  cronbox workflow status 12
  cronbox workflow retry 12        # from the nodes that did not succeed
  cronbox workflow cancel 12
  cronbox workflow list

A workflow.toml names the workflow and lists its nodes and edges:

  name = \"etl\"
  [[nodes]]
  name = \"extract\"
  job = \"extract\"
  [[nodes]]
  name = \"load\"
  job = \"load\"
  param = \"{{ nodes.extract.output.rows }}\"
  [[edges]]
  from = \"extract\"
  to = \"load\"        # on = \"success\" (default), \"failure\" or \"always\"
  # when = \"nodes.extract.output.count > 0\"   # and only if this holds
  [schedule]         # optional: started by a schedule, as a job's
  schedule_type = \"CRON\"
  schedule_conf = \"0 0 2 * * ?\"
  time_zone = \"Europe/Berlin\"")]
pub struct WorkflowArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: WorkflowCommand,
}

#[derive(Debug, Subcommand)]
enum WorkflowCommand {
    /// Every workflow of your tenant.
    List,
    /// A workflow's definition.
    Show { name: String },
    /// Save the workflow a TOML file defines (its `name`, or the file's
    /// name without `.toml`): created, or its next version.
    Apply { file: PathBuf },
    /// Delete a workflow (its runs stay).
    Delete { name: String },
    /// Start a run now; with --wait, follow it to its end (exit 1 unless
    /// it succeeded).
    Run {
        name: String,
        /// The workflow's input, JSON text (templates read it as `input`).
        #[arg(long)]
        input: Option<String>,
        #[arg(long)]
        wait: bool,
    },
    /// A workflow's latest runs.
    Runs { name: String },
    /// Run the schedule's instants in a past range, one run each (kind
    /// backfill; an instant backfilled before is not run again).
    Backfill {
        name: String,
        /// Start of the range, exclusive (RFC 3339).
        #[arg(long)]
        from: String,
        /// End of the range, inclusive (RFC 3339; default now).
        #[arg(long)]
        to: Option<String>,
    },
    /// A workflow run, node by node.
    Status { id: i64 },
    /// The elements of a fanned-out node of a workflow run, one by one.
    Items { id: i64, node: String },
    /// Cancel a running workflow run: its running nodes are killed, the
    /// others never start.
    Cancel { id: i64 },
    /// Run a failed or cancelled workflow run again from its nodes that
    /// did not succeed (those that did keep their outputs).
    Retry { id: i64 },
}

/// The workflow a `workflow.toml` defines: its name and definition.
pub(crate) fn read_workflow_file(file: &Path) -> anyhow::Result<(String, WorkflowSpec)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not TOML", file.display()))?;
    let name = match table.remove("name") {
        Some(toml::Value::String(name)) => name,
        Some(_) => bail!("{}: `name` must be text", file.display()),
        None => file
            .file_stem()
            .and_then(|stem| stem.to_str())
            .filter(|stem| *stem != "workflow")
            .map(str::to_owned)
            .with_context(|| format!("{}: add `name = \"...\"`", file.display()))?,
    };
    let spec: WorkflowSpec = toml::Value::Table(table)
        .try_into()
        .with_context(|| format!("{} is not a workflow definition", file.display()))?;
    Ok((name, spec))
}

fn status_name<T: Serialize>(status: T) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn print_run(run: &WorkflowRun) {
    outln!(
        "workflow run {} of {} (version {}): {}",
        run.id,
        run.workflow_name,
        run.version,
        status_name(run.status)
    );
    print_table(
        &[
            "NODE",
            "STATUS",
            "RUN",
            "STARTED (UTC)",
            "ENDED (UTC)",
            "OUTPUT OR MESSAGE",
        ],
        &run.nodes
            .iter()
            .map(|node| {
                vec![
                    node.node.clone(),
                    match node.items {
                        Some(items) => format!(
                            "{} ({}/{} done)",
                            status_name(node.status),
                            items.succeeded + items.failed,
                            items.total
                        ),
                        None => status_name(node.status),
                    },
                    or_dash(node.run_id),
                    time(node.started_at_ms),
                    time(node.ended_at_ms),
                    node.output
                        .clone()
                        .or_else(|| node.message.clone())
                        .unwrap_or_default(),
                ]
            })
            .collect::<Vec<_>>(),
    );
}

pub fn workflow(args: WorkflowArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            WorkflowCommand::List => print_list(
                json,
                &client.workflows().await?,
                &[
                    "NAME",
                    "VERSION",
                    "NODES",
                    "EDGES",
                    "NEXT FIRE (UTC)",
                    "UPDATED (UTC)",
                ],
                |workflow| {
                    vec![
                        workflow.name.clone(),
                        workflow.version.to_string(),
                        workflow.definition.nodes.len().to_string(),
                        workflow.definition.edges.len().to_string(),
                        time(workflow.next_fire_at_ms),
                        time(Some(workflow.updated_at_ms)),
                    ]
                },
            ),
            WorkflowCommand::Show { name } => {
                let workflow = client.workflow(&name).await?;
                show(json, &workflow, |workflow| {
                    outln!("workflow {} (version {})", workflow.name, workflow.version);
                    if let Some(schedule) = &workflow.definition.schedule {
                        outln!(
                            "  schedule {} {:?} in {}, next fire {} UTC",
                            schedule.schedule_type,
                            schedule.schedule_conf,
                            schedule.time_zone,
                            time(workflow.next_fire_at_ms)
                        );
                    }
                    for node in &workflow.definition.nodes {
                        outln!(
                            "  node {}: job {}{}",
                            node.name,
                            node.job,
                            node.param
                                .as_deref()
                                .map(|param| format!(", param {param}"))
                                .unwrap_or_default()
                        );
                    }
                    for edge in &workflow.definition.edges {
                        outln!("  {} → {} on {}", edge.from, edge.to, status_name(edge.on));
                    }
                })
            }
            WorkflowCommand::Apply { file } => {
                let (name, spec) = read_workflow_file(&file)?;
                let workflow = client.put_workflow(&name, &spec).await?;
                show(json, &workflow, |workflow| {
                    outln!(
                        "workflow {} saved: version {}, {} node(s)",
                        workflow.name,
                        workflow.version,
                        workflow.definition.nodes.len()
                    );
                    outln!("Run it: cronbox workflow run {} --wait", workflow.name);
                })
            }
            WorkflowCommand::Delete { name } => {
                let workflow = client.delete_workflow(&name).await?;
                show(json, &workflow, |workflow| {
                    outln!("workflow {} deleted", workflow.name);
                })
            }
            WorkflowCommand::Run { name, input, wait } => {
                let mut run = client.start_workflow_run(&name, input.as_deref()).await?;
                if !json {
                    outln!("workflow run {} started", run.id);
                }
                if wait {
                    while run.status == WorkflowRunStatus::Running {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                        run = client.workflow_run(run.id).await?;
                    }
                    show(json, &run, print_run)?;
                    if run.status != WorkflowRunStatus::Succeeded {
                        bail!("workflow run {} {}", run.id, status_name(run.status));
                    }
                    return Ok(());
                }
                show(json, &run, |run| {
                    outln!("Follow it: cronbox workflow status {}", run.id);
                })
            }
            WorkflowCommand::Runs { name } => print_list(
                json,
                &client.workflow_runs(&name).await?,
                &["ID", "VERSION", "STATUS", "STARTED (UTC)", "ENDED (UTC)"],
                |run| {
                    vec![
                        run.id.to_string(),
                        run.version.to_string(),
                        status_name(run.status),
                        time(Some(run.started_at_ms)),
                        time(run.ended_at_ms),
                    ]
                },
            ),
            WorkflowCommand::Cancel { id } => {
                let run = client.cancel_workflow_run(id).await?;
                show(json, &run, |run| {
                    outln!("workflow run {} cancelled", run.id);
                })
            }
            WorkflowCommand::Retry { id } => {
                let run = client.retry_workflow_run(id).await?;
                show(json, &run, |run| {
                    outln!(
                        "workflow run {} retried from its nodes that did not succeed",
                        run.id
                    );
                    outln!("Follow it: cronbox workflow status {}", run.id);
                })
            }
            WorkflowCommand::Backfill { name, from, to } => {
                let instant = |flag: &str, text: &str| -> anyhow::Result<i64> {
                    Ok(chrono::DateTime::parse_from_rfc3339(text)
                        .with_context(|| format!("--{flag} {text:?} is not an RFC 3339 instant"))?
                        .timestamp_millis())
                };
                let request = cronbox_api::WorkflowBackfillRequest {
                    from_ms: instant("from", &from)?,
                    to_ms: match &to {
                        Some(text) => instant("to", text)?,
                        None => chrono::Utc::now().timestamp_millis(),
                    },
                };
                let backfill = client.backfill_workflow(&name, &request).await?;
                show(json, &backfill, |backfill| {
                    outln!(
                        "{} instant(s): {} run(s) started, {} backfilled before",
                        backfill.planned,
                        backfill.started.len(),
                        backfill.already_run
                    );
                    for run in &backfill.started {
                        outln!("  workflow run {run}");
                    }
                })
            }
            WorkflowCommand::Items { id, node } => {
                let items = client.workflow_node_items(id, &node).await?;
                show(json, &items, |items| {
                    print_table(
                        &["INDEX", "STATUS", "RUN", "INPUT", "OUTPUT OR MESSAGE"],
                        &items
                            .iter()
                            .map(|item| {
                                vec![
                                    item.index.to_string(),
                                    status_name(item.status),
                                    or_dash(item.run_id),
                                    item.input.clone(),
                                    item.output
                                        .clone()
                                        .or_else(|| item.message.clone())
                                        .unwrap_or_default(),
                                ]
                            })
                            .collect::<Vec<_>>(),
                    )
                })
            }
            WorkflowCommand::Status { id } => {
                let run = client.workflow_run(id).await?;
                show(json, &run, print_run)?;
                if run
                    .nodes
                    .iter()
                    .any(|node| node.status == NodeStatus::Failed)
                    && !json
                {
                    outln!("A failed node's log: cronbox logs RUN");
                }
                Ok(())
            }
        }
    })
}
