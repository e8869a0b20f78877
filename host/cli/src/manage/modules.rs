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
        /// Label for the new version (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
    },
    /// The latest version of each module.
    List,
    /// Every kept version of a module, newest first.
    Versions { name: String },
    /// Make an earlier version current again.
    Rollback { name: String, version: i64 },
}

pub fn module(args: ModuleArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            ModuleCommand::Push { name, file, labels } => {
                let bytes = std::fs::read(&file)
                    .with_context(|| format!("cannot read {}", file.display()))?;
                eprintln!("uploading {} ({} bytes)…", file.display(), bytes.len());
                let answer = client.upload(bytes, Some(&name), &labels).await?;
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
            ModuleCommand::Versions { name } => print_list(
                json,
                &client.module_versions(&name).await?,
                &["VERSION", "DIGEST", "LABELS", "NOTE", "BY", "PUSHED (UTC)"],
                |v| {
                    vec![
                        v.version.to_string(),
                        v.digest.short().to_owned(),
                        labels(&v.labels),
                        if v.note.is_empty() { "-".to_owned() } else { v.note.clone() },
                        if v.pushed_by.is_empty() { "-".to_owned() } else { v.pushed_by.clone() },
                        time(Some(v.created_at_ms)),
                    ]
                },
            ),
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
