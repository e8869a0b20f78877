//! `cronbox runs`, `cronbox logs` (with `--follow`) and `cronbox kill`.

use super::*;

/// List runs, newest first.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox runs --job 3 --limit 20
  cronbox runs --status failed --json")]
pub struct RunsArgs {
    #[command(flatten)]
    connection: Connection,
    /// Runs of this job.
    #[arg(long)]
    job: Option<JobId>,
    /// pending, dispatched, success, failed or cancelled.
    #[arg(long)]
    status: Option<String>,
    /// How many.
    #[arg(long, default_value_t = 20)]
    limit: u32,
}

/// Print a run's log; with --follow, until the run ends.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox logs 42
  cronbox logs 42 --follow")]
pub struct LogsArgs {
    #[command(flatten)]
    connection: Connection,
    run: RunId,
    /// Keep printing new lines until the run ends.
    #[arg(long, short)]
    follow: bool,
}

/// Kill a running run, or every run of a job.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox kill 42          the run 42
  cronbox kill --job 3     job 3's running, queued and held runs, and its
                           runs waiting to be dispatched (retries included)")]
pub struct KillArgs {
    #[command(flatten)]
    connection: Connection,
    /// The run to kill.
    #[arg(required_unless_present = "job", conflicts_with = "job")]
    run: Option<RunId>,
    /// Kill every run of this job instead.
    #[arg(long)]
    job: Option<JobId>,
}

/// Pages `cronbox runs` reads to fill its list (each reads at most 50,000
/// runs for a status filter).
const RUNS_PAGES_AT_MOST: usize = 20;

pub fn runs(args: RunsArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let status = args
            .status
            .as_deref()
            .map(str::parse::<RunStatus>)
            .transpose()
            .map_err(|error| {
                anyhow::anyhow!("{error}: use pending, dispatched, success, failed or cancelled")
            })?;
        let mut query = RunQuery {
            job: args.job,
            status,
            limit: Some(args.limit),
            ..RunQuery::default()
        };
        // A page reads a bounded number of runs for its status: go on from
        // its cursor until the newest `limit` are found, a few pages at
        // most (the answer's `next_before` says where the rest begin).
        let mut page = client.runs(&query).await?;
        for _ in 1..RUNS_PAGES_AT_MOST {
            let (Some(before), true) = (page.next_before, page.runs.len() < args.limit as usize)
            else {
                break;
            };
            query.before = Some(before);
            query.limit = Some(args.limit - page.runs.len() as u32);
            let more = client.runs(&query).await?;
            page.runs.extend(more.runs);
            page.next_before = more.next_before;
        }
        show(json, &page, |page| {
            let rows: Vec<Vec<String>> = page
                .runs
                .iter()
                .map(|run| {
                    vec![
                        run.id.to_string(),
                        run.job_id.to_string(),
                        run.kind.to_string(),
                        time(Some(run.scheduled_at_ms)),
                        run.status.to_string(),
                        or_dash(run.outcome.as_ref()),
                        or_dash(run.message.as_ref()).chars().take(60).collect(),
                    ]
                })
                .collect();
            print_table(
                &[
                    "RUN",
                    "JOB",
                    "KIND",
                    "SCHEDULED (UTC)",
                    "STATUS",
                    "OUTCOME",
                    "MESSAGE",
                ],
                &rows,
            );
        })
    })
}

/// How often `logs --follow` asks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

pub fn logs(args: LogsArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let mut offset = 0;
        let mut failing_since: Option<std::time::Instant> = None;
        loop {
            let page = match client.log(args.run, offset).await {
                Ok(page) => {
                    failing_since = None;
                    page
                }
                // A follower rides out what a moment may cure: the admin,
                // or the executor it asks for a running run's live log,
                // briefly out of reach.
                Err(error)
                    if args.follow
                        && is_transient(&error)
                        && failing_since
                            .get_or_insert_with(std::time::Instant::now)
                            .elapsed()
                            < FOLLOW_PATIENCE =>
                {
                    tokio::time::sleep(FOLLOW_EVERY).await;
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            let mut out = std::io::stdout().lock();
            for line in &page.lines {
                if json {
                    writeln!(out, "{}", serde_json::to_string(line)?)?;
                } else {
                    let (source, level) = source_and_level(line.source);
                    let text = crate::out::printable(&line.text, true);
                    writeln!(out, "{source:<6} {level:<5} {text}")?;
                }
            }
            out.flush()?;
            offset = page.next_offset;
            if !args.follow || (page.finished && page.lines.is_empty()) {
                break;
            }
            if page.finished {
                continue; // read what is left
            }
            tokio::time::sleep(FOLLOW_EVERY).await;
        }
        if args.follow {
            let run = client.run(args.run).await?;
            eprintln!(
                "run {} ended: {} ({})",
                args.run,
                or_dash(run.outcome.as_ref()),
                or_dash(run.message.as_ref())
            );
        }
        Ok(())
    })
}

/// How long `logs --follow` keeps asking through transient failures
/// before it gives up with the last one.
const FOLLOW_PATIENCE: Duration = Duration::from_secs(15);

/// Whether a failure may pass by itself: the admin out of reach, or its
/// answer that the run's executor is (502, 503, 504).
fn is_transient(error: &cronbox_api::ClientError) -> bool {
    match error {
        cronbox_api::ClientError::Unreachable { .. } => true,
        cronbox_api::ClientError::Refused { status, .. } => matches!(status, 502..=504),
        cronbox_api::ClientError::UnexpectedAnswer { status, .. } => matches!(status, 502..=504),
    }
}

/// A log line's source and level as the admin's JSON names them.
fn source_and_level(source: LogSource) -> (&'static str, String) {
    match source {
        LogSource::Stdout => ("stdout", "-".to_owned()),
        LogSource::Stderr => ("stderr", "-".to_owned()),
        LogSource::Guest(level) => ("guest", level.to_string().to_ascii_lowercase()),
        LogSource::Host => ("host", "-".to_owned()),
    }
}

pub fn kill(args: KillArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        if let Some(job) = args.job {
            let answer = client.kill_job(job).await?;
            return show(json, &answer, |answer| {
                outln!(
                    "job {job}: {} runs killed, {} waiting runs cancelled",
                    answer.outcome.killed.len(),
                    answer.outcome.cancelled.len()
                );
                for executor in &answer.outcome.unreachable {
                    outln!("  not reached: {executor}");
                }
            });
        }
        let run = args.run.context("name a run, or --job")?;
        let answer = client.kill_run(run).await?;
        if json {
            print_json(&answer)
        } else if answer.killed {
            outln!("run {run} killed");
            Ok(())
        } else {
            bail!("run {run} was not running on its executor any more");
        }
    })
}
