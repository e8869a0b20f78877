//! `cronbox runs`, `cronbox logs` (with `--follow`) and `cronbox kill`.

use std::process::ExitCode;

use super::job_ref::JobRef;
use super::*;

/// List runs, newest first.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox runs --job 3 --limit 20
  cronbox runs --status failed --json
  cronbox runs --upcoming")]
pub struct RunsArgs {
    #[command(flatten)]
    connection: Connection,
    /// Runs of this job (its id, or its name).
    #[arg(long)]
    job: Option<JobRef>,
    /// pending, dispatched, success, failed or cancelled.
    #[arg(long)]
    status: Option<String>,
    /// How many.
    #[arg(long, default_value_t = 20)]
    limit: u32,
    /// Also the runs written ahead of their time (the next few seconds'
    /// fires), which are otherwise left out.
    #[arg(long)]
    upcoming: bool,
}

/// Print a run's log; with --follow, as it is written until the run ends
/// (exit 1 unless the run succeeded), then how it ended and, when it was
/// traced, its trace (the trace viewer's URL, or the trace id).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox logs 42
  cronbox logs 42 --follow && echo the run succeeded")]
pub struct LogsArgs {
    #[command(flatten)]
    connection: Connection,
    run: RunId,
    /// Keep printing new lines until the run ends, then say how it ended;
    /// exit 1 unless it succeeded.
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
    /// Kill every run of this job instead (its id, or its name).
    #[arg(long)]
    job: Option<JobRef>,
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
        let job = match &args.job {
            Some(job) => Some(job.id(&client).await?),
            None => None,
        };
        let mut query = RunQuery {
            job,
            status,
            limit: Some(args.limit),
            // The runs that were due: not the fires written ahead.
            to_ms: (!args.upcoming).then(|| chrono::Utc::now().timestamp_millis() + 1),
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
                        match &run.job_name {
                            Some(name) => format!("{} {}", run.job_id, name),
                            None => run.job_id.to_string(),
                        },
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

/// How long `logs --follow` waits before it opens a dropped stream again.
const FOLLOW_AGAIN: Duration = Duration::from_millis(200);

/// Prints run `args.run`'s log; with `--follow`, its lines as they are
/// written until it ends, then how it ended — exiting 1 unless it
/// succeeded, so that a script can wait on a run.
pub fn logs(args: LogsArgs) -> anyhow::Result<ExitCode> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        if !args.follow {
            let mut offset = 0;
            loop {
                let page = client.log(args.run, offset).await?;
                print_lines(&page.lines, json)?;
                offset = page.next_offset;
                if page.lines.is_empty() || page.finished {
                    return Ok(ExitCode::SUCCESS);
                }
            }
        }
        ended_with(&client, args.run, json).await
    })
}

/// Follows run `id` to its end, prints how it ended (and its trace) on
/// stderr, and answers the exit code that says it: 0 for a success.
pub(super) async fn ended_with(client: &Client, id: RunId, json: bool) -> anyhow::Result<ExitCode> {
    let run = follow_run(client, id, json).await?;
    eprintln!(
        "run {id} ended: {} ({})",
        or_dash(run.outcome.as_ref()),
        or_dash(run.message.as_ref())
    );
    // Where the run's trace is, when it was traced.
    if let Some(trace) = run.trace_url.as_ref().or(run.trace_id.as_ref()) {
        eprintln!("trace {trace}");
    }
    let succeeded = run.outcome == Some(cronbox_api::RunOutcome::Success);
    Ok(if succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::run::EXIT_RUN_FAILED)
    })
}

/// Prints run `id`'s lines as they are written until it ends (opening its
/// stream again where it was if it is cut short, riding out what a moment
/// may cure); the run as it ended.
pub(crate) async fn follow_run(
    client: &Client,
    id: RunId,
    json: bool,
) -> anyhow::Result<cronbox_api::Run> {
    let mut offset = 0;
    let mut failing_since: Option<std::time::Instant> = None;
    loop {
        let followed = match client.follow(id, offset).await {
            Ok(mut follower) => follow_to_end(&mut follower, &mut offset, json).await,
            Err(error) => Err(error),
        };
        match followed {
            Ok(Some(run)) => return Ok(run),
            // The stream was cut short: open it again where it was.
            Ok(None) => failing_since = None,
            // A follower rides out what a moment may cure: the admin
            // briefly out of reach, or its answer that it is (502-504).
            Err(error)
                if is_transient(&error)
                    && failing_since
                        .get_or_insert_with(std::time::Instant::now)
                        .elapsed()
                        < FOLLOW_PATIENCE => {}
            Err(error) => return Err(error.into()),
        }
        tokio::time::sleep(FOLLOW_AGAIN).await;
    }
}

/// Prints a followed run's lines until its end (`Some(run)`) or until the
/// stream is cut short (`None`); `offset` follows the lines printed.
async fn follow_to_end(
    follower: &mut cronbox_api::RunFollower,
    offset: &mut usize,
    json: bool,
) -> Result<Option<cronbox_api::Run>, cronbox_api::ClientError> {
    let mut said: Option<(cronbox_api::RunStatus, bool)> = None;
    while let Some(event) = follower.next().await? {
        match event {
            cronbox_api::FollowEvent::Log(page) => {
                // Printing to a closed pipe ends the follow as the end would.
                if print_lines(&page.lines, json).is_err() {
                    return Ok(None);
                }
                *offset = page.next_offset;
            }
            cronbox_api::FollowEvent::End(run) => return Ok(Some(*run)),
            // Until its first line, a person is told what the run waits
            // for (on stderr: stdout is the log).
            cronbox_api::FollowEvent::Run(run) if *offset == 0 && !json => {
                let now = (run.status, run.started_at_ms.is_some());
                if said != Some(now) {
                    said = Some(now);
                    if let Some(waiting) = waiting_for(&run) {
                        eprintln!("{waiting}");
                    }
                }
            }
            cronbox_api::FollowEvent::Run(_) => {}
        }
    }
    Ok(None)
}

/// What a run without a line yet waits for, in a line for a person.
fn waiting_for(run: &cronbox_api::Run) -> Option<String> {
    match run.status {
        cronbox_api::RunStatus::Pending => Some(format!(
            "run {} is pending: due {} UTC, waiting to be sent to an executor",
            run.id,
            time(Some(run.scheduled_at_ms))
        )),
        cronbox_api::RunStatus::Dispatched if run.started_at_ms.is_some() => Some(format!(
            "run {} is running on {} since {} UTC; no line yet",
            run.id,
            run.executor.as_deref().unwrap_or("an executor"),
            time(run.started_at_ms)
        )),
        cronbox_api::RunStatus::Dispatched => Some(format!(
            "run {} is with {}: waiting for its first line (the first run of a new module \
             version waits for the executor to compile it)",
            run.id,
            run.executor.as_deref().unwrap_or("an executor")
        )),
        _ => None,
    }
}

/// Prints log lines as `SOURCE LEVEL TEXT`, or as JSON lines.
fn print_lines(lines: &[cronbox_protocol::LogLine], json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for line in lines {
        if json {
            writeln!(out, "{}", serde_json::to_string(line)?)?;
        } else {
            let (source, level) = source_and_level(line.source);
            for text in text_lines(&line.text) {
                writeln!(out, "{source:<6} {level:<5} {text}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// A log line's text as the lines it holds (a Python traceback is one log
/// line of many), each printable, a CRLF's CR and a last empty line left
/// out.
fn text_lines(text: &str) -> Vec<std::borrow::Cow<'_, str>> {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n')
        .map(|part| crate::out::printable(part.strip_suffix('\r').unwrap_or(part), true))
        .collect()
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
        if let Some(job) = &args.job {
            let job = job.id(&client).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(status: &str, executor: Option<&str>) -> cronbox_api::Run {
        serde_json::from_value(serde_json::json!({
            "id": 57, "tenant": "default", "job_id": 4, "kind": "manual",
            "scheduled_at_ms": 1_893_456_000_000_i64, "shard_index": 0, "shard_total": 1,
            "attempt": 0, "param": "", "status": status, "executor": executor,
            "module_digest": "0".repeat(64), "outcome": null, "code": null, "message": null,
            "created_at_ms": 1_893_456_000_000_i64, "dispatched_at_ms": null,
            "started_at_ms": null, "finished_at_ms": null, "alarm_status": "none",
            "alarm_message": null,
        }))
        .unwrap()
    }

    #[test]
    fn a_follower_is_told_what_a_silent_run_waits_for() {
        let pending = waiting_for(&run("pending", None)).unwrap();
        assert!(
            pending.starts_with("run 57 is pending: due 2030-01-01 00:00:00.000 UTC"),
            "{pending}"
        );
        let sent = waiting_for(&run("dispatched", Some("http://127.0.0.1:9090"))).unwrap();
        assert!(
            sent.starts_with("run 57 is with http://127.0.0.1:9090: waiting for its first line")
                && sent.contains("compile"),
            "{sent}"
        );
        let mut started = run("dispatched", Some("http://127.0.0.1:9090"));
        started.started_at_ms = Some(1_893_456_001_000);
        assert_eq!(
            waiting_for(&started).unwrap(),
            "run 57 is running on http://127.0.0.1:9090 since 2030-01-01 00:00:01.000 UTC; no \
             line yet"
        );
        assert_eq!(waiting_for(&run("success", None)), None);
    }

    #[test]
    fn a_traceback_in_one_log_line_prints_as_its_lines() {
        let traceback = "Traceback (most recent call last):\r\n  File \"app.py\", line 3\n\
                         ValueError: \u{1b}[31mbad\n";
        assert_eq!(
            text_lines(traceback),
            [
                "Traceback (most recent call last):",
                "  File \"app.py\", line 3",
                "ValueError: \\u{1b}[31mbad",
            ]
        );
        assert_eq!(text_lines("one\tline"), ["one\tline"]);
    }
}
