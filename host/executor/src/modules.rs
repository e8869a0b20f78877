//! Modules by digest: loaded once, fetched from the admin when unknown,
//! verified against their digest and kept on disk (with their compiled
//! artifacts in the runtime's cache) across restarts.
//!
//! Loads of different digests go on side by side (a lock per digest: one
//! tenant's slow compile does not hold up another's module), and a module
//! that cannot be loaded is remembered as such: later triggers get the same
//! refusal at once instead of loading and compiling it again. What is kept
//! is bounded: the modules loaded in memory (least recently used dropped)
//! and the files on disk (see `disk`).

use cronbox_protocol::Digest;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cronbox_protocol::admin_paths;
use cronbox_runtime::{CacheStatus, JobModule, Runtime};
use sha2::{Digest as _, Sha256};

use crate::admin::AdminClient;
use crate::disk::DiskBound;
use crate::metrics::Metrics;

/// How much the module store keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModuleBounds {
    /// Modules kept loaded in memory.
    pub(crate) max_loaded: usize,
    /// Bytes of module files and compiled artifacts kept on disk.
    pub(crate) disk_bytes: u64,
}

/// Digests remembered as impossible to load.
const REMEMBERED_FAILURES: usize = 1_024;

pub(crate) struct ModuleStore {
    runtime: Runtime,
    dir: PathBuf,
    admins: AdminClient,
    metrics: Arc<Metrics>,
    /// Modules ready to run, least recently used first; at most
    /// `max_loaded` (workers hold their own module, so one dropped here
    /// lives on while a job uses it).
    loaded: Mutex<VecDeque<(String, JobModule)>>,
    max_loaded: usize,
    /// The module and artifact directories' size bound.
    disk: DiskBound,
    /// One lock per digest being fetched or loaded.
    loading: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Why each digest could not be loaded, oldest first.
    failed: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    /// Loads (a compilation on a blocking thread or in a child process)
    /// under way: each runs to its end even when the run waiting for it
    /// is dropped, and shutdown waits for them.
    loads: tokio_util::task::TaskTracker,
}

/// Whether `digest` looks like a sha256 in lowercase hex.
pub(crate) fn is_digest(digest: &str) -> bool {
    digest.len() == 64
        && digest
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl ModuleStore {
    pub(crate) fn new(
        runtime: Runtime,
        dir: PathBuf,
        admins: AdminClient,
        metrics: Arc<Metrics>,
        bounds: ModuleBounds,
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let mut disk_dirs = vec![dir.clone()];
        disk_dirs.extend(runtime.config().cache_dir.clone());
        Ok(ModuleStore {
            runtime,
            dir,
            admins,
            metrics,
            loaded: Mutex::new(VecDeque::new()),
            max_loaded: bounds.max_loaded.max(1),
            disk: DiskBound::new(disk_dirs, bounds.disk_bytes),
            loading: Mutex::new(HashMap::new()),
            failed: Mutex::new((HashMap::new(), VecDeque::new())),
            loads: tokio_util::task::TaskTracker::new(),
        })
    }

    /// Waits for the loads under way to end (at most `bound`), and takes
    /// no new one: nothing of the executor writes its caches after this.
    pub(crate) async fn finish_loads(&self, bound: std::time::Duration) {
        self.loads.close();
        if tokio::time::timeout(bound, self.loads.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                loads = self.loads.len(),
                "module loads still running {bound:?} after the executor began to stop"
            );
        }
    }

    fn known_failure(&self, digest: &str) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .0
            .get(digest)
            .cloned()
    }

    fn remember_failure(&self, digest: &str, error: &str) {
        let mut failed = self
            .failed
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let (reasons, order) = &mut *failed;
        if reasons
            .insert(digest.to_owned(), error.to_owned())
            .is_none()
        {
            order.push_back(digest.to_owned());
        }
        while order.len() > REMEMBERED_FAILURES {
            if let Some(oldest) = order.pop_front() {
                reasons.remove(&oldest);
            }
        }
    }

    /// The lock of `digest`'s load (made on first use, dropped after).
    fn digest_lock(&self, digest: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.loading
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .entry(digest.to_owned())
            .or_default()
            .clone()
    }

    /// A loaded module, now the most recently used.
    fn cached(&self, digest: &str) -> Option<JobModule> {
        let mut loaded = self.lock_loaded();
        let index = loaded.iter().position(|(loaded, _)| loaded == digest)?;
        let entry = loaded.remove(index)?;
        let module = entry.1.clone();
        loaded.push_back(entry);
        Some(module)
    }

    /// Keeps `module` loaded, dropping the least recently used past the
    /// bound; the digests loaded now.
    fn keep_loaded(&self, digest: &str, module: JobModule) -> HashSet<String> {
        let mut loaded = self.lock_loaded();
        loaded.push_back((digest.to_owned(), module));
        while loaded.len() > self.max_loaded {
            loaded.pop_front();
        }
        loaded.iter().map(|(digest, _)| digest.clone()).collect()
    }

    fn lock_loaded(&self) -> std::sync::MutexGuard<'_, VecDeque<(String, JobModule)>> {
        self.loaded
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The module with `digest`, ready to run. The error says why not.
    pub(crate) async fn get(&self, module: &Digest) -> Result<JobModule, String> {
        let digest = module.as_str();
        if let Some(module) = self.cached(digest) {
            return Ok(module);
        }
        if let Some(error) = self.known_failure(digest) {
            return Err(error);
        }
        // One load per digest at a time: concurrent triggers of a new
        // version wait for the first download and compile instead of
        // repeating them; other digests do not wait.
        let lock = self.digest_lock(digest);
        let _loading = lock.lock().await;
        if let Some(module) = self.cached(digest) {
            return Ok(module);
        }
        if let Some(error) = self.known_failure(digest) {
            return Err(error);
        }
        let result = self.fetch_and_load(module).await;
        self.loading
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .remove(digest);
        result
    }

    async fn fetch_and_load(&self, module: &Digest) -> Result<JobModule, String> {
        let digest = module.as_str();
        let path = self.dir.join(format!("{digest}.wasm"));
        let (wasm, fetched) = match tokio::fs::read(&path).await {
            Ok(bytes) if hex::encode(Sha256::digest(&bytes)) == digest => {
                // Used now: the disk bound deletes least recently used first.
                cronbox_runtime::renew_cache_file(&path);
                (bytes, false)
            }
            _ => {
                let bytes = self
                    .admins
                    .get_any(&admin_paths::module_content(module))
                    .await
                    .map_err(|error| format!("cannot fetch module {digest}: {error}"))?;
                let actual = hex::encode(Sha256::digest(&bytes));
                if actual != digest {
                    return Err(format!(
                        "module {digest} from the admin has digest {actual}: refused"
                    ));
                }
                let temp = path.with_extension("part");
                if let Err(error) = tokio::fs::write(&temp, &bytes).await {
                    tracing::warn!(%error, "cannot keep module {digest} on disk");
                } else if let Err(error) = tokio::fs::rename(&temp, &path).await {
                    tracing::warn!(%error, "cannot keep module {digest} on disk");
                }
                (bytes, true)
            }
        };
        let runtime = self.runtime.clone();
        let started = std::time::Instant::now();
        let load = self.loads.spawn(async move { runtime.load(wasm).await });
        let loaded = load.await.unwrap_or_else(|join| {
            Err(cronbox_runtime::LoadError::Invalid(format!(
                "the load of the module failed: {join}"
            )))
        });
        let module = match loaded {
            Ok(module) => module,
            Err(error) => {
                // The same bytes fail the same way: remember it.
                let error = format!("module {digest} cannot be loaded: {error}");
                tracing::warn!(module = %digest, took_ms = started.elapsed().as_millis() as u64, "{error}");
                self.metrics.module_load_failures.inc();
                self.remember_failure(digest, &error);
                return Err(error);
            }
        };
        if module.cache_status() != CacheStatus::Hit {
            // A compilation is the one slow step before a module's first
            // run: the log says when one happened and what it took.
            tracing::info!(
                module = %digest,
                took_ms = started.elapsed().as_millis() as u64,
                cache = ?module.cache_status(),
                "module compiled"
            );
        }
        let in_use = self.keep_loaded(digest, module.clone());
        // A module or artifact written now: keep within bound. One read
        // back added nothing, and walking every file of the caches for it
        // (tens of thousands of compiled functions once Python or
        // JavaScript jobs ran) would cost each load a third of a second.
        if !fetched && module.cache_status() == CacheStatus::Hit {
            return Ok(module);
        }
        let disk = self.disk.clone();
        match tokio::task::spawn_blocking(move || disk.trim(&in_use)).await {
            Ok(Ok(trimmed)) if trimmed.files > 0 => {
                self.metrics.disk_cache_trimmed.inc_by(trimmed.files);
                tracing::info!(
                    files = trimmed.files,
                    bytes = trimmed.bytes,
                    "disk caches trimmed"
                );
            }
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(%error, "cannot trim the disk caches"),
            Err(error) => tracing::warn!(%error, "the disk cache trim panicked"),
        }
        Ok(module)
    }
}
