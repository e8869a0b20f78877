//! Runs of legacy jobs, sent to xxl-job executors over xxl-job's protocol
//! (`crate::legacy::wire`): the run itself (`/run`, or `/trigger` in 3.5),
//! FAILOVER and BUSYOVER probes (`/beat`, `/idleBeat`), kills (`/kill`,
//! which stops the whole job on that executor, as xxl-job's does) and log
//! reads (`/log`, paged by line). Each request carries the group's access
//! token (and the appname in 3.5), never anything a WebAssembly run would
//! not (no secrets, configuration or state). Results come back through
//! `api/xxl_job.rs` into [`Scheduler::accept_legacy_results`].

use super::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use cronbox_api::LegacyProtocol;
use cronbox_protocol::{LogLine, LogResponse, LogSource};

use crate::legacy::wire::{
    self, APPNAME_HEADER, CallbackItem, Envelope, JobRef, LogPage, LogRequest, TOKEN_HEADER,
    Trigger, executor_url,
};
use crate::store::{LegacyGroup, RunCharge};

use super::transport::{Delivery, Transport};

/// What the scheduler keeps of legacy groups.
#[derive(Debug, Default)]
pub(super) struct Legacy {
    /// Each group as read in the last second (like the groups' addresses):
    /// routing, sending and results read it once, not per run.
    groups: Mutex<HashMap<String, (Instant, Option<LegacyGroup>)>>,
}

impl Legacy {
    fn groups(&self) -> MutexGuard<'_, HashMap<String, (Instant, Option<LegacyGroup>)>> {
        self.groups
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

/// A request to a legacy executor, with the group's token (and appname).
fn request(
    http: &reqwest::Client,
    group_name: &str,
    group: &LegacyGroup,
    address: &str,
    path: &str,
) -> reqwest::RequestBuilder {
    let mut request = http
        .post(executor_url(address, path))
        .header(TOKEN_HEADER, &group.token);
    if group.protocol == LegacyProtocol::XxlJob35 {
        request = request.header(APPNAME_HEADER, group_name);
    }
    request
}

/// What a legacy executor answered: its envelope if code 200, else why not.
async fn answer(
    request: reqwest::RequestBuilder,
    address: &str,
) -> Result<Option<serde_json::Value>, String> {
    let response = request
        .send()
        .await
        .map_err(|error| format!("{address}: {error}"))?;
    if !response.status().is_success() {
        return Err(format!("{address} answered {}", response.status()));
    }
    let envelope: Envelope = response
        .json()
        .await
        .map_err(|error| format!("{address} answered badly: {error}"))?;
    if envelope.code != 200 {
        return Err(format!(
            "{address} refused: {}",
            envelope.msg.as_deref().unwrap_or("no reason given")
        ));
    }
    Ok(envelope.payload())
}

/// How soon after its deadline a failure reported for a run counts as its
/// timeout.
const DEADLINE_SLACK_MS: i64 = 10_000;

/// Whether a run started at `started_ms`, reported failed at `now_ms`,
/// ended at its deadline (`timeout_ms` after its start, or up to
/// [`DEADLINE_SLACK_MS`] after): an executor that enforces the timeout
/// but reports it as an ordinary failure (code 500, as pyxxl does) so
/// ends `timeout`, while a failure long after (a result held back while no
/// admin answered) stays `failed`.
fn ended_at_deadline(timeout_ms: i64, started_ms: i64, now_ms: i64) -> bool {
    let ran = now_ms - started_ms;
    timeout_ms > 0 && ran >= timeout_ms && ran < timeout_ms + DEADLINE_SLACK_MS
}

/// xxl-job executors of one legacy group, with its token (and, in 3.5,
/// its appname).
pub(super) struct XxlJobExecutors<'a> {
    pub(super) http: &'a reqwest::Client,
    pub(super) clock: &'a dyn Clock,
    pub(super) group_name: String,
    pub(super) group: LegacyGroup,
}

impl XxlJobExecutors<'_> {
    /// A request to `path` of the executor at `address`.
    fn request(&self, address: &str, path: &str) -> reqwest::RequestBuilder {
        request(self.http, &self.group_name, &self.group, address, path)
    }
}

impl Probe for XxlJobExecutors<'_> {
    async fn beat(&self, address: &str) -> bool {
        let beat = self.request(address, "beat").json(&serde_json::json!({}));
        answer(beat, address).await.is_ok()
    }

    async fn idle(&self, address: &str, job_id: u64) -> bool {
        let idle = self.request(address, "idleBeat").json(&JobRef { job_id });
        answer(idle, address).await.is_ok()
    }
}

impl Transport for XxlJobExecutors<'_> {
    async fn deliver(
        &self,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        _state: &JobState,
    ) -> Result<Delivery, StoreError> {
        let handler = job.executor_handler.as_deref().unwrap_or_default();
        // Runs go out ahead of their instant for a cronbox executor to hold
        // (`dispatch_ahead`); an xxl-job executor runs what it is sent at
        // once, so the admin holds a legacy run until its instant.
        if run.scheduled_at_ms > self.clock.now_ms() {
            self.clock.sleep_until(run.scheduled_at_ms).await;
        }
        let trigger = Trigger {
            job_id: job.id.wire(),
            executor_handler: handler,
            executor_params: &run.param,
            executor_block_strategy: job.block_strategy.as_str(),
            executor_timeout: (job.timeout_ms + 999) / 1000,
            log_id: run.id.wire(),
            log_date_time: run.scheduled_at_ms,
            glue_type: "BEAN",
            glue_source: "",
            glue_updatetime: 0,
            broadcast_index: run.shard_index,
            broadcast_total: run.shard_total,
        };
        let sent = self
            .request(address, wire::trigger_path(self.group.protocol))
            .json(&trigger);
        Ok(match answer(sent, address).await {
            Ok(_) => Delivery::Accepted,
            Err(why) => Delivery::Failed(format!("trigger failed: {why}")),
        })
    }

    fn results_name_kills(&self) -> bool {
        false
    }

    /// xxl-job's kill stops the job's thread on that executor, queued
    /// runs with it.
    async fn kill_run(&self, run: &RunRow, address: &str) -> Result<bool, String> {
        let kill = self.request(address, "kill").json(&JobRef {
            job_id: run.job_id.wire(),
        });
        answer(kill, address).await.map(|_| true)
    }

    /// Killed there: the running run and those queued behind it (xxl-job
    /// does not say which).
    async fn kill_job(&self, job: &JobRow, address: &str) -> Result<Vec<u64>, String> {
        let kill = self.request(address, "kill").json(&JobRef {
            job_id: job.id.wire(),
        });
        answer(kill, address).await.map(|_| Vec::new())
    }

    /// The executor keeps a run's log (results carry none) and pages it
    /// by line; the timeout is the client's.
    async fn live_log(
        &self,
        run: &RunRow,
        address: &str,
        offset: usize,
        limit: usize,
        _timeout: Option<Duration>,
    ) -> Result<LogResponse, String> {
        let read = self.request(address, "log").json(&LogRequest {
            log_id: run.id.wire(),
            log_date_tim: run.scheduled_at_ms,
            log_date_time: run.scheduled_at_ms,
            from_line_num: offset as i64 + 1,
        });
        let page: LogPage = match answer(read, address).await? {
            Some(payload) => serde_json::from_value(payload)
                .map_err(|error| format!("{address} answered a log badly: {error}"))?,
            None => LogPage::default(),
        };
        let at_ms = self.clock.now_ms();
        let lines: Vec<LogLine> = page
            .log_content
            .unwrap_or_default()
            .lines()
            .take(limit)
            .map(|text| LogLine {
                at_ms,
                source: LogSource::Stdout,
                text: text.to_owned(),
            })
            .collect();
        Ok(LogResponse {
            run_id: run.id.wire(),
            next_offset: offset + lines.len(),
            finished: page.is_end && run.status != RunStatus::Dispatched,
            lines,
            started_at_ms: None,
        })
    }

    /// xxl-job's executors do not say when a run started until its result.
    async fn started_at(&self, _run: &RunRow, _address: &str) -> Option<i64> {
        None
    }
}

impl Scheduler {
    /// The legacy group `name` (its protocol and token), if it is one, as
    /// read in the last second: a changed token holds within a second.
    pub async fn legacy_group(&self, name: &str) -> Result<Option<LegacyGroup>, StoreError> {
        if let Some((read_at, group)) = self.legacy.groups().get(name)
            && read_at.elapsed() < ADDRESS_CACHE
        {
            return Ok(group.clone());
        }
        let group = self.store.legacy_group(name).await?.map(|mut group| {
            let secrets = self.config.secrets.as_deref();
            group.token =
                crate::legacy::opened_token(secrets, name, &group.token).unwrap_or_else(|error| {
                    // An empty token matches nothing: the group's executors
                    // are refused until the admin has the key again.
                    tracing::error!(%error, "a legacy group's token cannot be opened");
                    String::new()
                });
            group
        });
        self.legacy
            .groups()
            .insert(name.to_owned(), (Instant::now(), group.clone()));
        Ok(group)
    }

    /// Results reported by the executors of a legacy group (the caller
    /// presented `token`, and named its group when `group_name` is given):
    /// each ends its run once (idempotent by run id), then retries,
    /// children, alarms and workflows follow as for any run. The token is
    /// checked first, against the legacy groups, before anything an item
    /// names is read; then the items' runs are read in one query. Only a
    /// run that was sent (not one written ahead of its instant) of a
    /// legacy job of a group with that token takes a result; the others
    /// are ignored and counted.
    pub async fn accept_legacy_results(
        self: &Arc<Self>,
        group_name: Option<&str>,
        token: &str,
        items: Vec<CallbackItem>,
    ) -> Result<(), StoreError> {
        let now = self.now_ms();
        let groups = self.legacy_groups_of(group_name, token).await?;
        if groups.is_empty() {
            self.metrics.results_refused.inc_by(items.len() as u64);
            tracing::warn!(
                items = items.len(),
                group = group_name.unwrap_or_default(),
                "legacy results refused: no legacy group has the caller's token"
            );
            return Ok(());
        }
        let ids: Vec<RunId> = items.iter().map(|item| RunId::from(item.log_id)).collect();
        let mut found = self.store.runs_by_id(&ids).await?;
        let mut runs = Vec::with_capacity(items.len());
        let mut refused = 0;
        for item in items {
            match found.remove(&RunId::from(item.log_id)) {
                // Its dispatch mark may still wait in the sink.
                Some(run) => runs.push((self.sink.as_known(run), item)),
                None => refused += 1,
            }
        }
        let mut job_ids: Vec<JobId> = runs.iter().map(|(run, _)| run.job_id).collect();
        job_ids.sort_unstable();
        job_ids.dedup();
        let jobs = self.store.jobs_by_id(&job_ids).await?;
        let failed: Vec<RunId> = runs
            .iter()
            .filter(|(_, item)| item.code() != 200)
            .map(|(run, _)| run.id)
            .collect();
        let killing = self.store.legacy_kills(&failed).await?;
        let mut ends = Vec::with_capacity(runs.len());
        for (run, item) in runs {
            // Sent, or being sent: a run written ahead of its instant is
            // sent at the instant, and a result for it before would end it
            // unrun. (One due may be on its way, its mark not yet written.)
            let sent = run.status == RunStatus::Dispatched
                || (run.status == RunStatus::Pending && run.scheduled_at_ms <= now);
            let belongs = sent
                && jobs.get(&run.job_id).is_some_and(|job| {
                    job.executor_handler.is_some() && groups.contains(&job.group_name)
                });
            if !belongs {
                refused += 1;
                continue;
            }
            let started_at_ms = item.log_date_time.filter(|at| *at >= run.scheduled_at_ms);
            let at_deadline = jobs.get(&run.job_id).is_some_and(|job| {
                ended_at_deadline(
                    job.timeout_ms,
                    started_at_ms.unwrap_or(run.scheduled_at_ms),
                    now,
                )
            });
            let outcome = match item.code() {
                200 => RunOutcome::Success,
                _ if killing.contains(&run.id) => RunOutcome::Killed,
                502 => RunOutcome::Timeout,
                _ if at_deadline => RunOutcome::Timeout,
                _ => RunOutcome::Failed,
            };
            ends.push(RunEnd {
                run_id: run.id,
                success: outcome == RunOutcome::Success,
                outcome,
                code: item.code(),
                message: crate::legacy::bounded_message(&item.message()),
                executor: run.executor.clone(),
                started_at_ms,
                finished_at_ms: now,
                scheduled_at_ms: Some(run.scheduled_at_ms),
                charge: Some(RunCharge {
                    run_ms: started_at_ms.map_or(0, |started| (now - started).max(0)),
                    log_bytes: 0,
                }),
                ..RunEnd::default()
            });
        }
        if refused > 0 {
            self.metrics.results_refused.inc_by(refused);
            tracing::warn!(
                refused,
                "legacy results refused: not runs sent to the caller's group"
            );
        }
        self.end_runs(ends, &jobs).await
    }

    /// The legacy groups whose token is `token` (only `group_name`'s, when
    /// the caller named its group), each read at most once per cache
    /// period.
    async fn legacy_groups_of(
        &self,
        group_name: Option<&str>,
        token: &str,
    ) -> Result<HashSet<String>, StoreError> {
        let names = match group_name {
            Some(name) => vec![name.to_owned()],
            None => self.store.legacy_group_names().await?,
        };
        let mut groups = HashSet::new();
        for name in names {
            if self
                .legacy_group(&name)
                .await?
                .is_some_and(|group| crate::legacy::tokens_match(&group.token, token))
            {
                groups.insert(name);
            }
        }
        Ok(groups)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_counts_as_a_timeout_only_when_it_ends_at_the_deadline() {
        let start = 1_000_000;
        assert!(!ended_at_deadline(1_000, start, start + 999));
        assert!(ended_at_deadline(1_000, start, start + 1_000));
        assert!(ended_at_deadline(
            1_000,
            start,
            start + 1_000 + DEADLINE_SLACK_MS - 1
        ));
        assert!(!ended_at_deadline(
            1_000,
            start,
            start + 1_000 + DEADLINE_SLACK_MS
        ));
        assert!(!ended_at_deadline(0, start, start + 5_000), "no timeout");
    }
}
