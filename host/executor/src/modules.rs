//! Modules by digest: loaded once, fetched from the admin when unknown,
//! verified against their digest and kept on disk (with their compiled
//! artifacts in the runtime's cache) across restarts.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use cronbox_protocol::admin_paths;
use cronbox_runtime::{JobModule, Runtime};
use sha2::{Digest, Sha256};

use crate::admin::AdminClient;

pub(crate) struct ModuleStore {
    runtime: Runtime,
    dir: PathBuf,
    admins: AdminClient,
    loaded: Mutex<HashMap<String, JobModule>>,
    fetching: tokio::sync::Mutex<()>,
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
    ) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        Ok(ModuleStore {
            runtime,
            dir,
            admins,
            loaded: Mutex::new(HashMap::new()),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    fn cached(&self, digest: &str) -> Option<JobModule> {
        self.loaded
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(digest)
            .cloned()
    }

    /// The module with `digest`, ready to run. The error says why not.
    pub(crate) async fn get(&self, digest: &str) -> Result<JobModule, String> {
        if let Some(module) = self.cached(digest) {
            return Ok(module);
        }
        // One fetch at a time: concurrent triggers of a new version wait for
        // the first download instead of repeating it.
        let _fetching = self.fetching.lock().await;
        if let Some(module) = self.cached(digest) {
            return Ok(module);
        }
        let path = self.dir.join(format!("{digest}.wasm"));
        let wasm = match tokio::fs::read(&path).await {
            Ok(bytes) if hex::encode(Sha256::digest(&bytes)) == digest => bytes,
            _ => {
                let bytes = self
                    .admins
                    .get_any(&admin_paths::module_content(digest))
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
                bytes
            }
        };
        let module = self
            .runtime
            .load(wasm)
            .await
            .map_err(|error| format!("module {digest} cannot be loaded: {error}"))?;
        self.loaded
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(digest.to_owned(), module.clone());
        Ok(module)
    }
}
