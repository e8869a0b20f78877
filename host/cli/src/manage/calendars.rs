//! `cronbox calendar`: a tenant's shared calendars, named sets of dates
//! that the jobs naming them (`schedule_rules.calendars`) do not fire on.

use super::*;

/// List, set and delete your tenant's calendars (dates jobs naming them skip).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox calendar set holidays 2026-12-25 2026-12-26 2027-01-01
  cronbox calendar list
  cronbox calendar delete holidays")]
pub struct CalendarArgs {
    #[command(flatten)]
    connection: Connection,
    #[command(subcommand)]
    command: CalendarCommand,
}

#[derive(Debug, Subcommand)]
enum CalendarCommand {
    /// Every calendar of your tenant.
    List,
    /// Set a calendar's dates (YYYY-MM-DD, in each job's own time zone),
    /// making it if needed; the jobs naming it skip them from now on.
    Set {
        name: String,
        #[arg(required = true, value_name = "DATE")]
        dates: Vec<String>,
    },
    /// Delete a calendar: the jobs naming it fire on its dates again.
    Delete { name: String },
}

pub fn calendar(args: CalendarArgs) -> anyhow::Result<()> {
    let (client, json, runtime) = args.connection.open()?;
    runtime.block_on(async move {
        match args.command {
            CalendarCommand::List => print_list(
                json,
                &client.calendars().await?,
                &["NAME", "DATES", "UPDATED (UTC)"],
                |calendar| {
                    vec![
                        calendar.name.clone(),
                        calendar.dates.join(" "),
                        time(Some(calendar.updated_at_ms)),
                    ]
                },
            ),
            CalendarCommand::Set { name, dates } => {
                let calendar = client.put_calendar(&name, &dates).await?;
                show(json, &calendar, |calendar| {
                    outln!(
                        "calendar {} set: {} date(s)",
                        calendar.name,
                        calendar.dates.len()
                    );
                })
            }
            CalendarCommand::Delete { name } => {
                let calendar = client.delete_calendar(&name).await?;
                show(json, &calendar, |calendar| {
                    outln!("calendar {} deleted", calendar.name);
                })
            }
        }
    })
}
