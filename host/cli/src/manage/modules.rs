//! `cronbox module`: push, list, version, roll back and label modules.

use super::*;

/// Push and manage job modules (named, versioned components).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox module push greeter target/wasm32-wasip2/release/greeter.wasm --label beta
  cronbox module list
  cronbox module versions greeter
  cronbox module rollback greeter 2")]
pub struct ModuleArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: ModuleCommand,
}

#[derive(Debug, Subcommand)]
enum ModuleCommand {
    /// Upload a component as the next version of NAME (jobs following NAME
    /// move to it).
    Push {
        name: String,
        file: PathBuf,
        /// Label for the new version (repeatable). A labelled version is
        /// kept however many are pushed after it.
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Why this version (shown by `module versions`); the latest
        /// version's content pushed with a note is a new version.
        #[arg(long)]
        note: Option<String>,
    },
    /// The latest version of each module.
    List,
    /// Every kept version of a module, newest first, the one its
    /// following jobs run marked `(live)`: the newest 30, and every
    /// labelled or pinned one.
    Versions { name: String },
    /// Make an earlier version current again.
    Rollback { name: String, version: i64 },
}

pub fn module(args: ModuleArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            ModuleCommand::Push {
                name,
                file,
                labels,
                note,
            } => {
                let bytes = std::fs::read(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                eprintln!("uploading {} ({} bytes)…", file.display(), bytes.len());
                let note = note.unwrap_or_default();
                let answer = client
                    .upload_noted(bytes, Some(&name), &labels, &note)
                    .await?;
                show(json, &answer, |answer| {
                    outln!(
                        "{} version {} ({}), {} job(s) moved to it",
                        name,
                        or_dash(answer.version),
                        answer.digest.short(),
                        or_dash(answer.jobs_moved)
                    );
                })
            }
            ModuleCommand::List => print_list(
                json,
                &client.modules().await?,
                &["NAME", "LATEST", "DIGEST", "LABELS", "PUSHED (UTC)"],
                |m| {
                    let latest = &m.latest;
                    vec![
                        latest.name.clone(),
                        latest.version.to_string(),
                        latest.digest.short().to_owned(),
                        labels(&latest.labels),
                        time(Some(latest.created_at_ms)),
                    ]
                },
            ),
            ModuleCommand::Versions { name } => {
                let versions = client.module_versions(&name).await?;
                // The newest is the one the jobs following the module run.
                let live = versions.iter().map(|v| v.version).max();
                print_list(
                json,
                &versions,
                &["VERSION", "DIGEST", "LABELS", "NOTE", "BY", "PUSHED (UTC)"],
                |v| {
                    vec![
                        if Some(v.version) == live {
                            format!("{} (live)", v.version)
                        } else {
                            v.version.to_string()
                        },
                        v.digest.short().to_owned(),
                        labels(&v.labels),
                        if v.note.is_empty() { "-".to_owned() } else { v.note.clone() },
                        if v.pushed_by.is_empty() { "-".to_owned() } else { v.pushed_by.clone() },
                        time(Some(v.created_at_ms)),
                    ]
                },
            )
            }
            ModuleCommand::Rollback { name, version } => {
                let answer = client.rollback(&name, version).await?;
                show(json, &answer, |answer| {
                    outln!(
                        "{name} rolled back to version {version}: now version {} ({}), {} job(s) moved",
                        answer.version.version,
                        answer.version.digest.short(),
                        answer.jobs_moved
                    );
                })
            }
        }
    })
}
