//! `cronbox executor-token`: enrolled executors, the operator's — a token
//! per executor (or fleet) that registers only in its groups, rotated with
//! an overlap, revoked at once.

use cronbox_api::{ExecutorTokenIssued, ExecutorTokenSpec};

use super::*;

/// Enroll executors: a token each that registers only in its groups.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox executor-token create --group batch --name batch-host-1
  CRONBOX_TOKEN=cbe_... cronbox executor --group batch --admin http://127.0.0.1:8080
  cronbox executor-token list
  cronbox executor-token rotate 3 --overlap 1h     # the old token works an hour more
  cronbox executor-token revoke 3                  # its registrations end now")]
pub struct ExecutorTokenArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: ExecutorTokenCommand,
}

#[derive(Debug, Subcommand)]
enum ExecutorTokenCommand {
    /// Enroll an executor: prints its token, once.
    Create {
        /// A group it may register in (repeat for more).
        #[arg(long = "group", required = true, value_name = "GROUP")]
        groups: Vec<String>,
        /// Who holds it (default: its first group).
        #[arg(long)]
        name: Option<String>,
    },
    /// The enrolled executors and the addresses registered with each.
    List,
    /// A new token; the one before works for the overlap (default 1h).
    Rotate {
        id: i64,
        #[arg(long, value_parser = humantime::parse_duration)]
        overlap: Option<Duration>,
    },
    /// Revoke: the token works no more, its registrations end now.
    Revoke { id: i64 },
}

/// Prints an issued token and how to use it.
fn print_issued(issued: &ExecutorTokenIssued) {
    outln!(
        "executor {} ({}) may register in {}",
        issued.id,
        issued.name,
        issued.groups.join(", ")
    );
    if let Some(until) = issued.previous_valid_until_ms {
        outln!("the token before works until {} UTC", time(Some(until)));
    }
    outln!("token (shown once): {}", issued.token);
    outln!(
        "start it with: CRONBOX_TOKEN={} cronbox executor --group {} --admin ...",
        issued.token,
        issued.groups[0]
    );
}

pub fn executor_token(args: ExecutorTokenArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            ExecutorTokenCommand::Create { groups, name } => {
                let spec = ExecutorTokenSpec {
                    name: name.unwrap_or_else(|| groups[0].clone()),
                    groups,
                };
                let issued = client.enroll_executor(&spec).await?;
                show(json, &issued, print_issued)
            }
            ExecutorTokenCommand::List => print_list(
                json,
                &client.executor_tokens().await?,
                &[
                    "ID",
                    "NAME",
                    "GROUPS",
                    "CREATED (UTC)",
                    "STATE",
                    "REGISTERED",
                ],
                |credential| {
                    let state = match (credential.revoked_at_ms, credential.previous_valid_until_ms)
                    {
                        (Some(at), _) => format!("revoked {}", time(Some(at))),
                        (None, Some(until)) if until > chrono::Utc::now().timestamp_millis() => {
                            format!("rotating until {}", time(Some(until)))
                        }
                        _ => "active".to_owned(),
                    };
                    vec![
                        credential.id.to_string(),
                        credential.name.clone(),
                        credential.groups.join(","),
                        time(Some(credential.created_at_ms)),
                        state,
                        credential.registered.join(","),
                    ]
                },
            ),
            ExecutorTokenCommand::Rotate { id, overlap } => {
                let overlap_ms = overlap.map(|overlap| overlap.as_millis() as i64);
                let issued = client.rotate_executor_token(id, overlap_ms).await?;
                show(json, &issued, print_issued)
            }
            ExecutorTokenCommand::Revoke { id } => {
                let revoked = client.revoke_executor_token(id).await?;
                show(json, &revoked, |revoked| {
                    outln!(
                        "executor {} revoked; {} registration(s) ended",
                        revoked.id,
                        revoked.registrations_ended
                    );
                })
            }
        }
    })
}
