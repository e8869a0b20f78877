//! `cronbox dev`: the inner loop. Deploys a folder's job (as `cronbox
//! deploy` does), runs it once now and prints its log to its end, then
//! waits for a file of the project or its `job.toml` to change and does it
//! all again, until interrupted. A Python job runs its sources in the dev
//! runner instead of being built on every save (`dev_python.rs`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use cronbox_api::{Client, TriggerRequest, TriggerSource};

use crate::deploy::{JobFile, deploy_component, fingerprint, job_files, read_job_file};

/// How often the project's files are looked at for a change.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Deploy a folder's job, run it now and print its log; again on every
/// save, until interrupted.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox new hello && cd hello && cronbox dev
  cronbox dev --param 'a test'")]
pub struct DevArgs {
    #[command(flatten)]
    connection: crate::manage::Connection,
    /// A folder holding `job.toml`, or a job file.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// The parameter of each run (default: the job's).
    #[arg(long)]
    param: Option<String>,
    /// Build a Python job into its component on every save, as `cronbox
    /// deploy` does, rather than run its sources in the dev runner.
    #[arg(long)]
    full_build: bool,
    /// Where componentize-py and componentize-js are installed on first
    /// use (default: cronbox/tools under the user's cache directory).
    #[arg(long, env = "CRONBOX_TOOLS_DIR")]
    tools_dir: Option<PathBuf>,
}

pub fn main(args: DevArgs) -> anyhow::Result<()> {
    let mut files = job_files(&args.path)?;
    if files.len() != 1 {
        bail!(
            "{} holds {} jobs; `cronbox dev` follows one (name its folder)",
            args.path.display(),
            files.len()
        );
    }
    let path = files.remove(0);
    let (client, _json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let shutdown = crate::shutdown_signal();
        tokio::pin!(shutdown);
        let mut seen = String::new();
        // Whether the job was left on the dev runner, which its scheduled
        // runs cannot run without `cronbox dev`.
        let mut on_runner = false;
        let stopped = |on_runner: bool| {
            if on_runner {
                eprintln!(
                    "-- the job runs the Python dev runner: `cronbox deploy` builds and pushes it \
                     for its scheduled runs"
                );
            }
            Ok(())
        };
        loop {
            let file = read_job_file(&path)?;
            let watched = file.source_folder();
            if snapshot(&watched, &path)? != seen {
                let started = Instant::now();
                tokio::select! {
                    turn = once(&client, &file, &args) => match turn {
                        Ok(runner) => on_runner = runner,
                        // A build or a refusal: said, and tried again on
                        // the next save.
                        Err(error) => eprintln!("error: {error:#}"),
                    },
                    () = &mut shutdown => return stopped(on_runner),
                }
                // Taken after the turn (what the build wrote is not a
                // change of the sources), before saying so: a save after
                // the message is always seen.
                seen = snapshot(&watched, &path)?;
                eprintln!(
                    "-- {:.1} s; waiting for a change in {} (Ctrl-C stops)",
                    started.elapsed().as_secs_f64(),
                    watched.display()
                );
            }
            tokio::select! {
                () = tokio::time::sleep(LOOK_EVERY) => {}
                () = &mut shutdown => return stopped(on_runner),
            }
        }
    })
}

/// The project's files and the job file, as one fingerprint.
fn snapshot(folder: &Path, job_file: &Path) -> anyhow::Result<String> {
    let job =
        std::fs::read(job_file).with_context(|| format!("cannot read {}", job_file.display()))?;
    Ok(format!(
        "{}\n{}",
        fingerprint(folder)?,
        String::from_utf8_lossy(&job)
    ))
}

/// One turn: deploy, run now, print the log to the run's end. A Python
/// job whose sources fit a run's parameter is deployed with the dev runner
/// and its sources sent with the run (`dev_python.rs`); whether it was.
async fn once(client: &Client, file: &JobFile, args: &DevArgs) -> anyhow::Result<bool> {
    let mut param = args.param.clone();
    let mut runner = None;
    // Only a Python project deploy would build (not a pinned version nor
    // a built component) moves to the runner.
    let python = file.project_to_build().filter(|project| {
        !args.full_build
            && cronbox_guest_build::Language::of_project(project)
                == Some(cronbox_guest_build::Language::Python)
    });
    if let Some(project) = python {
        let own = param.as_deref().unwrap_or(&file.spec.param);
        match crate::dev_python::dev_parameter(&project, own)? {
            Ok(sources) => {
                let tools_dir = args.tools_dir.clone();
                runner = Some(
                    tokio::task::spawn_blocking(move || {
                        crate::scaffold::python_dev_runner(tools_dir)
                    })
                    .await??,
                );
                param = Some(sources);
            }
            Err(bytes) => eprintln!(
                "-- the sources are {} KiB as sent, more than a run's parameter takes ({} KiB): \
                 building the component",
                bytes >> 10,
                crate::dev_python::MAX_PARAMETER_BYTES >> 10
            ),
        }
    }
    let deployed = deploy_component(
        client,
        file,
        false,
        args.tools_dir.clone(),
        runner.as_deref(),
    )
    .await?;
    let Some(job) = deployed else {
        bail!("job {:?} is not there after its deploy", file.spec.name);
    };
    let request = TriggerRequest {
        param,
        addresses: None,
        kind: TriggerSource::Manual,
    };
    let run = client.trigger(job, &request).await?.run_id;
    eprintln!("-- run {run}");
    let ended = crate::manage::follow_run(client, run, false).await?;
    eprintln!(
        "-- run {run} ended: {} ({})",
        ended
            .outcome
            .map_or_else(|| ended.status.to_string(), |outcome| outcome.to_string()),
        ended.message.unwrap_or_default()
    );
    Ok(runner.is_some())
}
