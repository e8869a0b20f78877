//! Results that must reach an admin: a spool on disk, one file per run,
//! delivered in batches by a background sender and deleted only once an
//! admin acknowledged them.
//!
//! A result is written before anyone is told the run ended, so a crash (even
//! SIGKILL) loses nothing: a restarted executor finds the files and sends
//! them. Files are named by run id, so a run has one result, and the admin
//! treats a second callback for a run as a no-op (idempotent by run id).
//! Files are not fsynced: they survive process crashes, not a machine
//! crash; the admin's lost-run monitor covers the latter.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cronbox_protocol::{CallbackBatch, RunResult, admin_paths};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::admin::AdminClient;
use crate::metrics::Metrics;

#[derive(Debug)]
pub(crate) struct Spool {
    dir: PathBuf,
    wake: Notify,
}

const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Spool {
    pub(crate) fn open(dir: PathBuf) -> std::io::Result<Arc<Self>> {
        std::fs::create_dir_all(&dir)?;
        Ok(Arc::new(Spool {
            dir,
            wake: Notify::new(),
        }))
    }

    fn file(&self, run_id: u64) -> PathBuf {
        self.dir.join(format!("{run_id:020}.json"))
    }

    /// Records a result durably and wakes the sender.
    pub(crate) fn submit(&self, result: &RunResult) {
        let path = self.file(result.run_id);
        let temp = path.with_extension("tmp");
        let written = serde_json::to_vec(result)
            .map_err(std::io::Error::other)
            .and_then(|json| std::fs::write(&temp, json))
            .and_then(|()| std::fs::rename(&temp, &path));
        if let Err(error) = written {
            tracing::error!(run_id = result.run_id, %error, "cannot spool a run result");
        }
        self.wake.notify_one();
    }

    /// Results waiting to be acknowledged.
    pub(crate) fn pending(&self) -> usize {
        pending_files(&self.dir).len()
    }

    /// Delivers spooled results until `stop` is cancelled and the spool is
    /// empty (or `stop` is cancelled and a delivery fails).
    pub(crate) async fn run_sender(
        self: Arc<Self>,
        admins: AdminClient,
        batch_size: usize,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let files = pending_files(&self.dir);
            if files.is_empty() {
                if stop.is_cancelled() {
                    return;
                }
                tokio::select! {
                    _ = self.wake.notified() => {}
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                // Let a burst of results gather into one batch.
                tokio::time::sleep(Duration::from_millis(2)).await;
                continue;
            }
            let batch: Vec<(PathBuf, RunResult)> = files
                .into_iter()
                .take(batch_size)
                .filter_map(|path| read_result(&path).map(|result| (path, result)))
                .collect();
            let body = CallbackBatch {
                results: batch.iter().map(|(_, result)| result.clone()).collect(),
            };
            match admins.post_any(admin_paths::CALLBACK, &body).await {
                Ok(()) => {
                    metrics.callbacks_delivered.inc_by(batch.len() as u64);
                    for (path, _) in &batch {
                        let _ = std::fs::remove_file(path);
                    }
                    backoff = FIRST_BACKOFF;
                }
                Err(error) => {
                    metrics.callback_failures.inc();
                    tracing::warn!(%error, pending = batch.len(), "callback failed; results stay spooled");
                    if stop.is_cancelled() {
                        return;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.cancelled() => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

fn pending_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn read_result(path: &Path) -> Option<RunResult> {
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(result) => Some(result),
        Err(error) => {
            tracing::error!(path = %path.display(), %error, "unreadable spooled result; set aside");
            let _ = std::fs::rename(path, path.with_extension("bad"));
            None
        }
    }
}
