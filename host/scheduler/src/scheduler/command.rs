//! The run-command builder: what a run is sent with, read at the moment it
//! is sent — the module content (the earlier one while a new version
//! compiles on that executor), limits, state, the job's HTTP grants
//! within its tenant's ceiling now, its secrets opened now, the tenant's
//! instance quota, and the receipt a result must carry back (an HMAC of
//! the run id and the executor address under a key every admin of the
//! database shares).

use bytes::Bytes;
use cronbox_protocol::{RunCommand, RunResult, Trigger, TriggerKind, WireLimits};

use super::warming::Warming;
use crate::metrics::Metrics;
use crate::quotas::Quotas;
use crate::secrets::SecretBox;
use crate::store::{JobRow, JobState, RunRow, Store, StoreError};

/// Builds run commands; holds the receipt key and what compiles ahead.
#[derive(Debug)]
pub(super) struct RunCommands {
    store: Store,
    quotas: std::sync::Arc<Quotas>,
    secrets: Option<std::sync::Arc<SecretBox>>,
    receipt_key: Vec<u8>,
    /// Which jobs the operator marked for metrics of their own.
    metrics: std::sync::Arc<Metrics>,
    /// Module versions being compiled ahead on executors.
    pub(super) warming: Warming,
}

/// A run command ready to send, or why the run cannot be sent (the run
/// fails with that message, naming what is at fault).
pub(super) type Built = Result<Bytes, String>;

impl RunCommands {
    pub(super) fn new(
        store: Store,
        quotas: std::sync::Arc<Quotas>,
        secrets: Option<std::sync::Arc<SecretBox>>,
        receipt_key: Vec<u8>,
        metrics: std::sync::Arc<Metrics>,
    ) -> Self {
        RunCommands {
            store,
            quotas,
            secrets,
            receipt_key,
            metrics,
            warming: Warming::default(),
        }
    }

    /// The command that sends `run` of `job` to `address` at `now_ms`, the
    /// job's state being `state`.
    pub(super) async fn build(
        &self,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
        now_ms: i64,
    ) -> Result<Built, StoreError> {
        // A trigger sending code was checked against its caller's role
        // (and its retry is that run again); a workflow's or a parent's
        // parameter has no caller to check.
        if matches!(run.kind, TriggerKind::Workflow | TriggerKind::Parent)
            && crate::jobs::sends_code_to_secrets(job, &run.param)
        {
            return Ok(Err(
                "its parameter carries `cronbox dev` sources, which a workflow or a parent job \
                 may not send to a job that reads secrets"
                    .to_owned(),
            ));
        }
        // A stored ceiling that does not decode ends the run naming it:
        // never sent with grants the operator may not have allowed, nor
        // left to be sent again and fail the same way.
        let http_allow = match self.grants_within_ceiling(job).await {
            Ok(grants) => grants,
            Err(error) if error.is_undecodable_row() => {
                return Ok(Err(format!(
                    "the tenant's HTTP ceiling does not decode: {error}"
                )));
            }
            Err(error) => return Err(error),
        };
        let tenant_max_instances = self
            .quotas
            .limit(
                &self.store,
                &job.tenant,
                cronbox_api::Quota::ExecutorInstances,
                now_ms,
            )
            .await?;
        let span = fire_span(job, run, address, now_ms);
        let command = RunCommand {
            traceparent: cronbox_protocol::trace_context::traceparent(&span),
            trigger: Trigger {
                job_id: job.id.wire(),
                run_id: run.id.wire(),
                param: run.param.clone(),
                shard_index: run.shard_index as u32,
                shard_total: run.shard_total as u32,
                kind: run.kind,
                scheduled_at_ms: run.scheduled_at_ms,
                attempt: run.attempt as u32,
            },
            // The job's module now: a version pushed or rolled back since the
            // fire was written runs from this trigger on (the result records
            // what ran); a scheduled fire takes it once the executor has
            // compiled it (`warming`).
            module_digest: match run.kind {
                TriggerKind::Schedule | TriggerKind::Misfire => {
                    self.warming.content_for(address, &job.module_digest)
                }
                _ => job.module_digest.clone(),
            },
            block_strategy: job.block_strategy,
            max_concurrency: job.max_concurrency as u32,
            limits: WireLimits {
                timeout_ms: job.timeout_ms as u64,
                fuel: job.fuel.map(|fuel| fuel as u64),
                memory_bytes: job.memory_bytes as u64,
                ..WireLimits::default()
            },
            state: state.values.clone(),
            state_revisions: state.revisions.clone(),
            receipt: self.receipt(run.id.wire(), address),
            fresh_instance: job.fresh_instance,
            start_in_ms: (run.scheduled_at_ms - now_ms).max(0) as u64,
            tenant: job.tenant.clone(),
            tenant_max_instances: Some(u32::try_from(tenant_max_instances).unwrap_or(u32::MAX)),
            config: job.config.clone(),
            http_allow,
            secrets: self.secret_values(job).await?,
            http_limits: job.http_limits,
            metrics_job: self.metrics.marked_job(job.id),
        };
        Ok(serde_json::to_vec(&command)
            .map(Bytes::from)
            .map_err(|error| format!("the run command could not be written: {error}")))
    }

    /// The job's HTTP grants that lie within its tenant's ceiling now: a
    /// ceiling lowered after the job was saved takes effect from the next
    /// dispatch. A job without grants costs no read.
    async fn grants_within_ceiling(&self, job: &JobRow) -> Result<Vec<String>, StoreError> {
        if job.http_allow.is_empty() {
            return Ok(Vec::new());
        }
        let ceiling = self.store.http_ceiling_patterns(&job.tenant).await?;
        Ok(job
            .http_allow
            .iter()
            .filter(|grant| {
                grant
                    .parse::<cronbox_net_policy::OriginPattern>()
                    .is_ok_and(|grant| ceiling.iter().any(|top| grant.is_within(top)))
            })
            .cloned()
            .collect())
    }

    /// The values of the secrets the job references, opened now (so that
    /// a rotation takes effect from the next dispatch). A secret deleted
    /// meanwhile is left out; one that does not open under this admin's
    /// key is left out and reported to the operator's log, never to the
    /// tenant.
    async fn secret_values(&self, job: &JobRow) -> Result<cronbox_protocol::Secrets, StoreError> {
        let mut values = std::collections::BTreeMap::new();
        if job.secrets.is_empty() {
            return Ok(cronbox_protocol::Secrets(values));
        }
        let Some(keys) = &self.secrets else {
            tracing::warn!(job = %job.id, "the job references secrets but the admin has no secrets key");
            return Ok(cronbox_protocol::Secrets(values));
        };
        for (name, sealed) in self.store.sealed_secrets(&job.tenant, &job.secrets).await? {
            match keys.open(&job.tenant, &name, &sealed) {
                Ok(value) => {
                    values.insert(name, value);
                }
                Err(error) => {
                    tracing::warn!(job = %job.id, %error, "a secret was left out of a run")
                }
            }
        }
        Ok(cronbox_protocol::Secrets(values))
    }

    /// The receipt of `run_id` sent to `address`: the executor returns it
    /// with the result, and a result without the right one is refused.
    pub(super) fn receipt(&self, run_id: u64, address: &str) -> String {
        use hmac::Mac;
        hex::encode(
            run_receipt(&self.receipt_key, run_id, address)
                .finalize()
                .into_bytes(),
        )
    }

    /// Whether `result` carries the receipt of its run's dispatch to the
    /// executor it names (compared in constant time).
    pub(super) fn receipt_holds(&self, result: &RunResult) -> bool {
        use hmac::Mac;
        let Ok(presented) = hex::decode(&result.receipt) else {
            return false;
        };
        run_receipt(&self.receipt_key, result.run_id, &result.executor)
            .verify_slice(&presented)
            .is_ok()
    }
}

/// A run receipt: HMAC-SHA256 under `key` of the run id and the executor
/// address it was sent to.
fn run_receipt(key: &[u8], run_id: u64, address: &str) -> hmac::Hmac<sha2::Sha256> {
    use hmac::Mac;
    let mut mac = <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(run_id.to_string().as_bytes());
    mac.update(b"\n");
    mac.update(address.as_bytes());
    mac
}

/// The span of a run's dispatch, the root of the run's trace (disabled,
/// and free, unless traces are exported): its job, tenant, kind, attempt,
/// when it was planned for and claimed (its row written), and how late it
/// is sent.
fn fire_span(job: &JobRow, run: &RunRow, address: &str, now_ms: i64) -> tracing::Span {
    let trigger = match run.kind {
        TriggerKind::Schedule | TriggerKind::Misfire | TriggerKind::Backfill => "timer",
        TriggerKind::Api | TriggerKind::Manual => "http",
        _ => "other",
    };
    tracing::info_span!(
        target: cronbox_protocol::trace_context::TARGET,
        "cronbox.fire",
        otel.kind = "producer",
        faas.trigger = trigger,
        faas.cron = job.schedule_conf.as_str(),
        faas.invocation_id = run.id.wire(),
        cronbox.tenant = job.tenant.as_str(),
        cronbox.job_id = job.id.wire(),
        cronbox.job = job.name.as_str(),
        cronbox.run_id = run.id.wire(),
        cronbox.kind = %run.kind,
        cronbox.attempt = run.attempt,
        cronbox.scheduled_at_ms = run.scheduled_at_ms,
        cronbox.claimed_at_ms = run.created_at_ms,
        cronbox.lateness_ms = now_ms - run.scheduled_at_ms,
        cronbox.executor = address,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{MisfirePolicy, RunId};
    use crate::store::{NewRun, RunEnd};

    /// With traces off (the process's subscriber logging warnings, no
    /// OpenTelemetry layer), a run's fire span and its end's spans are
    /// disabled and allocate nothing.
    #[test]
    fn untraced_fire_and_end_spans_allocate_nothing() {
        use cronbox_tests::allocations::{counted, counting};
        assert!(counting(), "this test binary counts allocations");
        let job = crate::test_support::every_second_job(MisfirePolicy::DoNothing);
        let fire = NewRun {
            job_id: job.id,
            kind: TriggerKind::Schedule,
            scheduled_at_ms: 1_000,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            param: String::new(),
            module_digest: job.module_digest.clone(),
        };
        let run = super::super::planner::written_run(RunId(7), "default", &fire, 0);
        let ends = vec![RunEnd::default(); 3];
        let off = cronbox_telemetry::without_traces(cronbox_telemetry::LogFormat::Json);
        tracing::subscriber::with_default(off, || {
            let (traceparent, allocations) = counted(|| {
                let span = fire_span(&job, &run, "http://127.0.0.1:1", 1_005);
                let traceparent = cronbox_protocol::trace_context::traceparent(&span);
                let spans = super::super::results::EndSpans::begin(&ends).written();
                drop(spans.of(0, &run));
                traceparent
            });
            assert_eq!(traceparent, None);
            assert_eq!(allocations, 0, "allocations for spans that are off");
        });
    }
}
