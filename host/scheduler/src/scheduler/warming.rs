//! Compile-ahead: when jobs move to a new module version (a push or a
//! rollback), the admin asks every live executor of their groups to fetch
//! and compile it at once (`prepare`), instead of leaving the first run to
//! pay for it. While an executor is still compiling, scheduled fires sent
//! there take the content the jobs ran before, so that a job firing every
//! second keeps firing on time through a long compilation (Python and
//! JavaScript components take seconds); its first run on the new version
//! follows as soon as the executor has it. A run someone asked for
//! (manual, API) and retries and children take the new version at once
//! and wait for it: whoever pushed and triggered expects what they pushed.
//!
//! What is compiling where lives in this admin's memory only: another
//! admin of the cluster sends the new version, whose run then waits for
//! the compilation (late, never wrong). A failed or unreachable prepare
//! ends the fallback too: the run then goes with the new version and
//! fails or waits as it would have.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use cronbox_protocol::{PrepareCommand, PrepareResponse};

use super::*;
use crate::model::Digest;

/// The longest a prepare request may take: a compilation is bounded by
/// the executor's own compile timeout (2 minutes by default).
const PREPARE_TIMEOUT: Duration = Duration::from_secs(600);

/// The versions being compiled ahead: by digest, the executors compiling
/// it and the content to send them meanwhile.
#[derive(Debug, Default)]
pub(super) struct Warming {
    compiling: Mutex<HashMap<Digest, HashMap<String, Digest>>>,
}

impl Warming {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Digest, HashMap<String, Digest>>> {
        self.compiling
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// `digest` is compiling on `addresses`; runs sent there take `from`.
    fn start(&self, digest: &Digest, addresses: &[String], from: &Digest) {
        let mut compiling = self.lock();
        let executors = compiling.entry(digest.clone()).or_default();
        for address in addresses {
            executors.insert(address.clone(), from.clone());
        }
    }

    /// `address` has compiled `digest` (or failed to).
    fn finish(&self, digest: &Digest, address: &str) {
        let mut compiling = self.lock();
        if let Some(executors) = compiling.get_mut(digest) {
            executors.remove(address);
            if executors.is_empty() {
                compiling.remove(digest);
            }
        }
    }

    /// The content to send to `address` for a job whose module is
    /// `digest` now: the earlier content while `digest` compiles there.
    /// (On every scheduled dispatch: one lookup, no allocation.)
    pub(super) fn content_for(&self, address: &str, digest: &Digest) -> Digest {
        self.lock()
            .get(digest)
            .and_then(|executors| executors.get(address))
            .unwrap_or(digest)
            .clone()
    }
}

impl Scheduler {
    /// Asks the live executors of `groups` to compile `digest` now; until
    /// each has, runs sent to it take `from` (the jobs' earlier content),
    /// when given.
    pub fn prepare_module(
        self: &Arc<Self>,
        groups: Vec<String>,
        digest: Digest,
        from: Option<Digest>,
    ) {
        let scheduler = self.clone();
        self.tasks.spawn(async move {
            let now = scheduler.now_ms();
            let mut addresses = Vec::new();
            // Read from the store, not through the dispatch cache: a read
            // here must not hold back an executor registering meanwhile.
            let alive_since = match scheduler.alive_since(now).await {
                Ok(alive_since) => alive_since,
                Err(error) => {
                    tracing::warn!(%error, "cannot list executors to prepare a module");
                    return;
                }
            };
            for group in &groups {
                match scheduler.store.group_addresses(group, alive_since).await {
                    Ok(live) => addresses.extend(live),
                    Err(error) => {
                        tracing::warn!(%group, %error, "cannot list executors to prepare a module")
                    }
                }
            }
            addresses.sort();
            addresses.dedup();
            if let Some(from) = &from {
                scheduler.commands.warming.start(&digest, &addresses, from);
            }
            for address in addresses {
                let each = scheduler.clone();
                let digest = digest.clone();
                scheduler.tasks.spawn(async move {
                    let answer = each.prepare_on(&address, &digest).await;
                    each.commands.warming.finish(&digest, &address);
                    match answer {
                        Ok(answer) if answer.ready => tracing::info!(
                            %address, module = %digest, took_ms = answer.took_ms,
                            "module compiled ahead"
                        ),
                        Ok(answer) => tracing::warn!(
                            %address, module = %digest, error = answer.error.unwrap_or_default(),
                            "an executor could not prepare a module"
                        ),
                        Err(error) => tracing::warn!(
                            %address, module = %digest, %error,
                            "cannot ask an executor to prepare a module"
                        ),
                    }
                });
            }
        });
    }

    async fn prepare_on(&self, address: &str, digest: &Digest) -> Result<PrepareResponse, String> {
        let command = PrepareCommand {
            module_digest: digest.clone(),
        };
        self.post_within(
            address,
            executor_paths::PREPARE,
            &command,
            Some(PREPARE_TIMEOUT),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_compiling_on_an_executor_sends_the_earlier_content_there_only() {
        let warming = Warming::default();
        let (old, new): (Digest, Digest) = (
            "a".repeat(64).parse().unwrap(),
            "b".repeat(64).parse().unwrap(),
        );
        warming.start(&new, &["http://e1".to_owned()], &old);
        assert_eq!(warming.content_for("http://e1", &new), old);
        assert_eq!(
            warming.content_for("http://e2", &new),
            new,
            "another executor has it"
        );
        warming.finish(&new, "http://e1");
        assert_eq!(
            warming.content_for("http://e1", &new),
            new,
            "compiled: the new one"
        );
    }
}
