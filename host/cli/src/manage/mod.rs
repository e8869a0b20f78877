//! The management commands: `module`, `job`, `state`, `runs`, `logs`,
//! `kill`, `secret`, `user`, `ceiling`, `quota`, `calendar`, `group`, `executor-token`, `workflow` and `audit`, each a thin layer over
//! the admin's API ([`ApiClient`]); one file per family of commands.
//!
//! Output is a readable table or summary by default and the admin's JSON
//! with `--json`. Errors print one line naming what went wrong and exit 1.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use cronbox_api::{
    Client, Job, JobBatch, JobId, JobQuery, JobSpec, JobsCreated, LogSource, Quota, QuotaSettings,
    Role, RunId, RunQuery, RunStatus, TriggerRequest, TriggerSource, UserSpec,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

mod audit;
mod calendars;
mod executor_tokens;
mod groups;
mod job_definition;
mod job_details;
mod job_ref;
mod jobs;
mod modules;
mod runs;
mod tenant;
mod workflows;
mod xxl_import;

pub use audit::{AuditArgs, audit};
pub use calendars::{CalendarArgs, calendar};
pub use executor_tokens::{ExecutorTokenArgs, executor_token};
pub use groups::{GroupArgs, group};
pub use jobs::{JobArgs, StateArgs, job, state};
pub use modules::{ModuleArgs, module};
pub(crate) use runs::follow_run;
pub use runs::{KillArgs, LogsArgs, RunsArgs, kill, logs, runs};
pub(crate) use tenant::parse_quota_change;
pub use tenant::{CeilingArgs, QuotaArgs, SecretArgs, UserArgs, ceiling, quota, secret, user};
pub(crate) use workflows::read_workflow_file;
pub use workflows::{WorkflowArgs, workflow};
pub use xxl_import::{ImportArgs, import};

/// How to reach the admin, shared by every management command.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// Base URL of the admin API (default: the current context's, else
    /// http://127.0.0.1:8080).
    #[arg(long, global = true, env = "CRONBOX_ADMIN")]
    admin: Option<String>,
    /// API token (default: the context's, else ./cronbox-data/api-token).
    #[arg(long, global = true, env = "CRONBOX_API_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The context to use instead of the current one (`cronbox context`
    /// lists them).
    #[arg(long, global = true, env = "CRONBOX_CONTEXT")]
    context: Option<String>,
    /// A PEM file of the CA the admin's certificate chains to, trusted
    /// besides the system's roots (default: the context's).
    #[arg(long, global = true, env = "CRONBOX_CA_FILE", value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// Print the admin's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

impl Connection {
    /// What every command starts from: a client, whether to print JSON,
    /// and a runtime to drive the requests on.
    pub(crate) fn open(&self) -> anyhow::Result<(Client, bool, tokio::runtime::Runtime)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")?;
        Ok((self.client()?, self.json, runtime))
    }

    /// The admin and token: as given, else the context's (see
    /// `context.rs`), else the token `cronbox up` keeps in this folder.
    fn client(&self) -> anyhow::Result<Client> {
        let contexts = crate::context::Contexts::load()?;
        let mut target = crate::context::resolve(
            self.admin.as_deref(),
            self.token.as_deref(),
            self.context.as_deref(),
            &contexts,
        )?;
        if target.token.is_none() {
            target.token = std::fs::read_to_string("cronbox-data/api-token")
                .ok()
                .map(|token| token.trim().to_owned());
        }
        let token = target.token.ok_or_else(|| {
            anyhow::anyhow!(
                "no API token for {}: pass --token or set CRONBOX_API_TOKEN, or start `cronbox \
                 up` (it records its admin and token as the current context; `cronbox context` \
                 lists them)",
                target.admin
            )
        })?;
        let ca_file = self.ca_file.clone().or(target.ca_file);
        let http = cronbox_tls::client_builder(ca_file.as_deref())?.build()?;
        Ok(Client::with_http(&target.admin, &token, http))
    }
}

/// The text of `file`, or of stdin without one, as it is; `what` names it
/// in an error.
fn read_input(file: Option<&PathBuf>, what: &str) -> anyhow::Result<String> {
    match file {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        }
        None => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .with_context(|| format!("cannot read {what} from stdin"))?;
            Ok(text)
        }
    }
}

/// A password from a file or stdin, without the line end a shell or an
/// editor adds.
fn read_password(file: Option<&PathBuf>) -> anyhow::Result<String> {
    let text = read_input(file, "the password")?;
    Ok(text.trim_end_matches(['\n', '\r']).to_owned())
}

fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints an answer as the admin sent it (`--json`), or as `human` has it.
fn show<T: Serialize>(json: bool, answer: &T, human: impl FnOnce(&T)) -> anyhow::Result<()> {
    if json {
        print_json(answer)
    } else {
        human(answer);
        Ok(())
    }
}

/// Prints rows under a header, columns padded to their widest cell; a
/// cell's control characters are shown escaped ([`crate::out::printable`]).
fn print_table(header: &[&str], rows: &[Vec<String>]) {
    for line in table_lines(header, rows) {
        outln!("{line}");
    }
}

/// The lines of [`print_table`]: columns line up on a terminal by display
/// width (a CJK character takes two cells).
fn table_lines(header: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    use unicode_width::UnicodeWidthStr;
    let rows: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| h.to_string()).collect())
        .chain(rows.iter().map(|row| {
            row.iter()
                .map(|cell| crate::out::printable(cell, false).into_owned())
                .collect()
        }))
        .collect();
    let mut widths: Vec<usize> = vec![0; header.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    rows.iter()
        .map(|cells| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.width())))
                .collect();
            padded.join("  ").trim_end().to_owned()
        })
        .collect()
}

/// Every job the token sees, a page at a time.
async fn every_job(client: &Client) -> anyhow::Result<Vec<cronbox_api::Job>> {
    let mut query = cronbox_api::JobQuery::default();
    let mut jobs = Vec::new();
    loop {
        let page = client.jobs(&query).await?;
        let Some(last) = page.last() else {
            return Ok(jobs);
        };
        query.after = Some(last.job.id);
        jobs.extend(page.into_iter().map(|listed| listed.job));
    }
}

/// Prints a list as the admin sent it (`--json`), or as a table with one
/// `row` per element.
fn print_list<T: Serialize>(
    json: bool,
    items: &[T],
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> anyhow::Result<()> {
    show(json, &items, |items| {
        let rows: Vec<Vec<String>> = items.iter().map(row).collect();
        print_table(header, &rows);
    })
}

/// An optional value as table text.
fn or_dash(value: Option<impl ToString>) -> String {
    value.map_or_else(|| "-".to_owned(), |value| value.to_string())
}

/// Milliseconds since the epoch as a UTC time.
fn time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || "-".to_owned(),
            |at| at.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
        )
}

fn labels(labels: &[String]) -> String {
    if labels.is_empty() {
        "-".to_owned()
    } else {
        labels.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_line_up_by_display_width() {
        let rows = [
            vec!["1".to_owned(), "日报".to_owned(), "CRON".to_owned()],
            vec!["2".to_owned(), "daily".to_owned(), "NONE".to_owned()],
        ];
        let lines = table_lines(&["ID", "NAME", "SCHEDULE"], &rows);
        use unicode_width::UnicodeWidthStr;
        let column = |line: &str, text: &str| line[..line.find(text).unwrap()].width();
        assert_eq!(column(&lines[1], "CRON"), column(&lines[2], "NONE"));
        assert_eq!(column(&lines[0], "SCHEDULE"), column(&lines[2], "NONE"));
    }
}
