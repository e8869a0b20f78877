//! Where a run goes and what it is sent with: the group's live addresses
//! (cached a second), FAILOVER and BUSYOVER probes, broadcast shards, the
//! job's HTTP grants within its tenant's ceiling and its secrets opened,
//! the run command sent to an executor, the dispatch mark, and a run
//! failed that could not be sent.

use super::*;

/// FAILOVER and BUSYOVER checks over HTTP.
pub(super) struct HttpProbe<'a> {
    pub(super) http: &'a reqwest::Client,
    pub(super) token: &'a str,
}

impl Probe for HttpProbe<'_> {
    async fn beat(&self, address: &str) -> bool {
        self.http
            .post(format!("{address}{}", executor_paths::BEAT))
            .bearer_auth(self.token)
            .send()
            .await
            .is_ok_and(|response| response.status().is_success())
    }

    async fn idle(&self, address: &str, job_id: u64) -> bool {
        let response = self
            .http
            .post(format!("{address}{}", executor_paths::IDLE_BEAT))
            .bearer_auth(self.token)
            .json(&IdleBeatRequest { job_id })
            .send()
            .await;
        match response {
            Ok(response) if response.status().is_success() => response
                .json::<IdleBeatResponse>()
                .await
                .is_ok_and(|beat| beat.idle),
            _ => false,
        }
    }
}

/// Whether a SHARDING_BROADCAST run stands for one shard (a retry, or a
/// sibling written by an earlier fan-out) rather than a fresh fire to fan
/// out.
pub(super) fn is_one_shard(run: &RunRow) -> bool {
    run.attempt > 0 || run.shard_total > 1 || run.shard_index > 0
}

/// The executor for one shard of a broadcast: the one at the shard's index
/// among the group's live executors (wrapping around if there are fewer
/// now), so a retry lands on an executor chosen for that shard.
pub(super) fn shard_address(run: &RunRow, addresses: &[String]) -> Option<String> {
    if addresses.is_empty() {
        return None;
    }
    let index = usize::try_from(run.shard_index).unwrap_or(0) % addresses.len();
    Some(addresses[index].clone())
}

impl Scheduler {
    /// The live addresses of `group` now (registered and beating, or the
    /// operator's list for a MANUAL group): where its runs may go.
    pub async fn group_addresses_now(&self, group: &str) -> Result<Vec<String>, StoreError> {
        self.live_addresses(group, self.now_ms()).await
    }

    /// The group's live addresses, from a cache refreshed every second.
    pub(super) async fn live_addresses(
        &self,
        group: &str,
        now: i64,
    ) -> Result<Vec<String>, StoreError> {
        let cached = self
            .addresses
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(group)
            .filter(|(read_at, _)| read_at.elapsed() < ADDRESS_CACHE)
            .map(|(_, addresses)| addresses.clone());
        if let Some(addresses) = cached {
            return Ok(addresses);
        }
        let alive_since = self.alive_since(now).await?;
        let addresses = self.store.group_addresses(group, alive_since).await?;
        self.addresses
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(
                group.to_owned(),
                (std::time::Instant::now(), addresses.clone()),
            );
        Ok(addresses)
    }

    /// SHARDING_BROADCAST: the run becomes shard 0 of n, and n-1 sibling
    /// runs are written for the other executors.
    pub(super) async fn broadcast_runs(
        &self,
        run: &RunRow,
        addresses: Vec<String>,
        now: i64,
    ) -> Result<Vec<(RunRow, String)>, StoreError> {
        let total = addresses.len() as i64;
        let mut targets = Vec::with_capacity(addresses.len());
        for (index, address) in addresses.into_iter().enumerate() {
            let mut shard = run.clone();
            shard.shard_index = index as i64;
            shard.shard_total = total;
            if index == 0 && total > 1 {
                // Persisted, so that its retries stay shard 0 of n.
                self.store.set_shard(run.id, 0, total).await?;
            }
            if index > 0 {
                shard.id = self
                    .store
                    .insert_run(
                        &NewRun {
                            job_id: run.job_id,
                            kind: run.kind,
                            scheduled_at_ms: run.scheduled_at_ms,
                            shard_index: index as i64,
                            shard_total: total,
                            attempt: run.attempt,
                            param: run.param.clone(),
                            module_digest: run.module_digest.clone(),
                        },
                        now,
                    )
                    .await?;
            }
            targets.push((shard, address));
        }
        Ok(targets)
    }

    /// The job's HTTP grants that lie within its tenant's ceiling now: a
    /// ceiling lowered after the job was saved takes effect from the next
    /// dispatch. A job without grants costs no read.
    pub(super) async fn grants_within_ceiling(
        &self,
        job: &JobRow,
    ) -> Result<Vec<String>, StoreError> {
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
    pub(super) async fn secret_values(
        &self,
        job: &JobRow,
    ) -> Result<cronbox_protocol::Secrets, StoreError> {
        let mut values = std::collections::BTreeMap::new();
        if job.secrets.is_empty() {
            return Ok(cronbox_protocol::Secrets(values));
        }
        let Some(keys) = &self.config.secrets else {
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

    pub(super) async fn send(
        self: &Arc<Self>,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
    ) -> Result<(), StoreError> {
        // A stored ceiling that does not decode ends the run naming it:
        // never sent with grants the operator may not have allowed, nor
        // left to be sent again and fail the same way.
        let http_allow = match self.grants_within_ceiling(job).await {
            Ok(grants) => grants,
            Err(error) if error.is_undecodable_row() => {
                let message = format!("the tenant's HTTP ceiling does not decode: {error}");
                return self.fail(run, &message).await;
            }
            Err(error) => return Err(error),
        };
        let command = RunCommand {
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
            start_in_ms: (run.scheduled_at_ms - self.now_ms()).max(0) as u64,
            tenant: job.tenant.clone(),
            tenant_max_instances: Some(
                u32::try_from(
                    self.quotas
                        .limit(
                            &self.store,
                            &job.tenant,
                            cronbox_api::Quota::ExecutorInstances,
                            self.now_ms(),
                        )
                        .await?,
                )
                .unwrap_or(u32::MAX),
            ),
            config: job.config.clone(),
            http_allow,
            secrets: self.secret_values(job).await?,
            http_limits: job.http_limits,
        };
        let body = match serde_json::to_vec(&command) {
            Ok(body) => bytes::Bytes::from(body),
            Err(error) => {
                return self
                    .fail(
                        run,
                        &format!("the run command could not be written: {error}"),
                    )
                    .await;
            }
        };
        let answer = self.send_command(address, body).await;
        let now = self.now_ms();
        match answer {
            Answer::Response(answer) if answer.accepted => {
                self.mark_dispatched(job, run, address, now);
            }
            Answer::Response(answer) => {
                let reason = answer
                    .refused
                    .map(|outcome| outcome.message())
                    .unwrap_or_else(|| "refused".to_owned());
                self.fail(run, &format!("{address} refused the run: {reason}"))
                    .await?;
            }
            Answer::Refused { status: 409, .. } => {
                // The executor already has this run: an earlier dispatch
                // reached it but the admin died before recording it. Its
                // result will come by callback.
                self.mark_dispatched(job, run, address, now);
            }
            Answer::Refused { status, message } => {
                // The executor's answer stays in the operator's log; the
                // run's message (a tenant reads it) gets the status only.
                let status = reqwest::StatusCode::from_u16(status)
                    .map_or_else(|_| status.to_string(), |status| status.to_string());
                tracing::warn!(run = %run.id, %address, %status, message, "executor refused a trigger");
                self.fail(run, &format!("trigger failed: {address} answered {status}"))
                    .await?;
            }
            Answer::Failed(message) => self.fail(run, &message).await?,
        }
        Ok(())
    }

    /// Queues the record that `address` accepted `run` (see
    /// [`ends::write_run_ends`]): it may wait for the run's end unless
    /// the job's overlap policy reads which of its runs are in progress.
    pub(super) fn mark_dispatched(&self, job: &JobRow, run: &RunRow, address: &str, now: i64) {
        self.quotas.sent_unmarked(&job.tenant);
        let queued = ends::QueuedMark {
            mark: DispatchMark {
                run_id: run.id,
                executor: address.to_owned(),
                at_ms: now,
                scheduled_at_ms: Some(run.scheduled_at_ms),
            },
            tenant: job.tenant.clone(),
            may_wait: job.schedule_rules.overlap == cronbox_api::OverlapPolicy::Allow,
        };
        self.recent_dispatches.add(run.id, address, now);
        self.events.send(|| RunEvent::Dispatched {
            run_id: run.id,
            job_id: run.job_id,
            executor: address.to_owned(),
            at_ms: now,
        });
        if self.marks.send(queued).is_err() {
            // The writer stopped (the admin is stopping): the run stays
            // pending; a restarted admin sends it again and hears that
            // the executor has it.
            self.quotas.marks_written(&job.tenant, 1);
        }
    }

    /// Ends a run that could not be dispatched (outcome `rejected`), then
    /// applies the retry policy.
    pub(super) async fn fail(
        self: &Arc<Self>,
        run: &RunRow,
        message: &str,
    ) -> Result<(), StoreError> {
        self.fail_with(run, RunOutcome::Rejected, message).await
    }

    /// [`Scheduler::fail`] with another outcome.
    pub(super) async fn fail_with(
        self: &Arc<Self>,
        run: &RunRow,
        outcome: RunOutcome,
        message: &str,
    ) -> Result<(), StoreError> {
        tracing::warn!(
            run = %run.id,
            job = %run.job_id,
            message,
            "run not dispatched"
        );
        self.metrics.dispatch_failures.inc();
        let ended = self
            .store
            .finish_run(&RunEnd::failed(run.id, outcome, message, self.now_ms()))
            .await?;
        if let Some(ended) = ended {
            self.metrics.run_ended(outcome.as_str());
            self.after_end(&ended, None).await?;
        }
        Ok(())
    }
}
