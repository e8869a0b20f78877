//! `cronbox audit`: the audit log, newest first.

use super::*;
use cronbox_api::AuditQuery;

/// Show the audit log: every change made through the API and every
/// login, newest first (an operator sees every tenant's, a tenant admin
/// its own).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox audit
  cronbox audit --actor ana --since 1day
  cronbox audit --action jobs --tenant acme --json")]
pub struct AuditArgs {
    #[command(flatten)]
    connection: Connection,
    /// One tenant's entries (the operator).
    #[arg(long)]
    tenant: Option<String>,
    /// One actor's: a user's name, `token N` or `operator token`.
    #[arg(long)]
    actor: Option<String>,
    /// Actions containing this text (`jobs`, `DELETE`, `session`).
    #[arg(long)]
    action: Option<String>,
    /// Only entries this recent (`1h`, `7days`).
    #[arg(long, value_parser = humantime::parse_duration)]
    since: Option<Duration>,
    /// How many.
    #[arg(long, default_value_t = 50)]
    limit: u32,
}

pub fn audit(args: AuditArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        let query = AuditQuery {
            tenant: args.tenant,
            actor: args.actor,
            action: args.action,
            from_ms: args
                .since
                .map(|since| chrono::Utc::now().timestamp_millis() - since.as_millis() as i64),
            before: None,
            limit: Some(args.limit),
        };
        let page = client.audit(&query).await?;
        show(json, &page, |page| {
            let rows: Vec<Vec<String>> = page
                .entries
                .iter()
                .map(|entry| {
                    vec![
                        time(Some(entry.at_ms)),
                        entry.tenant.clone(),
                        entry.actor.clone(),
                        entry.action.clone(),
                        entry.target.clone(),
                        format!("{} {}", entry.status, entry.outcome),
                        or_dash(entry.address.as_ref()),
                    ]
                })
                .collect();
            print_table(
                &[
                    "AT (UTC)", "TENANT", "ACTOR", "ACTION", "TARGET", "ANSWER", "FROM",
                ],
                &rows,
            );
        })
    })
}
