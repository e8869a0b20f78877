//! Where a run goes and what it is sent with: the group's live addresses
//! (cached a second), FAILOVER and BUSYOVER probes, broadcast shards, the
//! run command (built by `command.rs`) sent to an executor and its answer
//! recorded, and a run failed that could not be sent.

use super::*;

use super::transport::{Delivery, Executors, Transport};

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
            .dispatcher
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
        self.dispatcher
            .addresses
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(
                group.to_owned(),
                (std::time::Instant::now(), addresses.clone()),
            );
        Ok(addresses)
    }

    /// What this admin presents to the executor at `address`: the admin
    /// proof of the enrolled credential it registered with (read at most
    /// once a second), else the shared executor token.
    pub(super) async fn executor_bearer(&self, address: &str) -> String {
        let cached = self
            .dispatcher
            .bearers
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(address)
            .filter(|(read_at, _)| read_at.elapsed() < ADDRESS_CACHE)
            .map(|(_, proof)| proof.clone());
        let proof =
            match cached {
                Some(proof) => proof,
                None => {
                    let proof = self.store.admin_proof_of(address).await.unwrap_or_else(|error| {
                    tracing::warn!(%error, %address, "the executor's credential was not read");
                    None
                });
                    self.executor_registered(address, proof.clone());
                    proof
                }
            };
        proof.unwrap_or_else(|| self.config.executor_token.clone())
    }

    /// The executor at `address` registered with this admin presenting
    /// `proof`'s credential (`None`: the shared token): what it is sent
    /// with from now on.
    pub fn executor_registered(&self, address: &str, proof: Option<String>) {
        self.dispatcher
            .bearers
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(address.to_owned(), (std::time::Instant::now(), proof));
    }

    /// Forgets every group's cached live addresses and every executor's
    /// cached credential, so that the next dispatch reads them again: a
    /// revoked executor is sent nothing more by this admin (other admins
    /// of a cluster read again within a second).
    pub fn forget_executors(&self) {
        self.dispatcher
            .addresses
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clear();
        self.dispatcher
            .bearers
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clear();
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

    /// Sends `run` of `job` to `address` (the job's state being `state`)
    /// through `executors` and records the executor's answer: accepted, or
    /// the run failed naming why.
    pub(super) async fn send(
        self: &Arc<Self>,
        executors: &Executors<'_>,
        job: &JobRow,
        run: &RunRow,
        address: &str,
        state: &JobState,
    ) -> Result<(), StoreError> {
        match executors.deliver(job, run, address, state).await? {
            Delivery::Accepted => self.sink.dispatched(job, run, address, self.now_ms()),
            Delivery::Failed(why) => self.fail(run, &why).await?,
        }
        Ok(())
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
            self.metrics
                .run_ended(&ended.tenant, ended.job_id, outcome.as_str());
            self.after_end(&ended, None).await?;
        }
        Ok(())
    }
}
