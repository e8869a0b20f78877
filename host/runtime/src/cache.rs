//! The on-disk cache of compiled components.
//!
//! Entries are keyed by (sha256 of the module, engine compatibility hash),
//! so an upgraded or reconfigured engine never sees another's artifacts.
//! Each file starts with the sha256 of the artifact that follows: a file
//! whose checksum does not match (torn write, disk damage, tampering) is
//! never deserialized; the module is recompiled and the entry rewritten.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::engine::RuntimeError;

/// How a module's compiled code was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheStatus {
    /// Loaded from a valid cache entry: no compilation.
    Hit,
    /// Compiled; the artifact was written to the cache.
    Miss,
    /// The cache entry was damaged: compiled again and rewritten.
    Repaired,
    /// Compiled; there is no disk cache.
    Disabled,
}

pub(crate) struct ArtifactCache {
    dir: Option<PathBuf>,
    engine_key: String,
}

const CHECKSUM_LEN: usize = 32;

impl ArtifactCache {
    pub(crate) fn new(dir: Option<PathBuf>, engine: &Engine) -> Result<Self, RuntimeError> {
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir).map_err(|source| RuntimeError::CacheDir {
                path: dir.clone(),
                source,
            })?;
        }
        // The compatibility hash covers the wasmtime version and every
        // setting that changes generated code.
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(ArtifactCache {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    /// The cache file of a module digest (public for tests that damage it).
    pub(crate) fn entry_path(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{digest}-{}.cwasm", self.engine_key)))
    }

    /// Loads the compiled component for `digest`, compiling `wasm` when the
    /// cache has no valid entry. Blocking: call it off the async threads.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &str,
        wasm: &[u8],
    ) -> wasmtime::Result<(Component, CacheStatus)> {
        let Some(path) = self.entry_path(digest) else {
            return Ok((Component::new(engine, wasm)?, CacheStatus::Disabled));
        };
        let mut status = CacheStatus::Miss;
        if let Ok(file) = std::fs::read(&path) {
            match verified_artifact(&file) {
                // SAFETY: the bytes are an artifact this host serialized (the
                // cache directory is ours) and their checksum matches what we
                // wrote, so they are not damaged; wasmtime additionally checks
                // the engine compatibility header.
                Some(artifact) => match unsafe { Component::deserialize(engine, artifact) } {
                    Ok(component) => return Ok((component, CacheStatus::Hit)),
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "unusable cached artifact; recompiling");
                        status = CacheStatus::Repaired;
                    }
                },
                None => {
                    tracing::warn!(path = %path.display(), "cached artifact fails its checksum; recompiling");
                    status = CacheStatus::Repaired;
                }
            }
        }
        let component = Component::new(engine, wasm)?;
        Ok((component, status))
    }

    /// Writes the artifact of a validated component (best effort: a cache
    /// that cannot be written only costs a compile next time).
    pub(crate) fn store(&self, digest: &str, component: &Component) {
        let Some(path) = self.entry_path(digest) else {
            return;
        };
        let result = component
            .serialize()
            .map_err(|error| std::io::Error::other(format!("{error:#}")))
            .and_then(|artifact| write_atomically(&path, &artifact));
        if let Err(error) = result {
            tracing::warn!(path = %path.display(), %error, "cannot write the artifact cache");
        }
    }
}

fn verified_artifact(file: &[u8]) -> Option<&[u8]> {
    if file.len() <= CHECKSUM_LEN {
        return None;
    }
    let (checksum, artifact) = file.split_at(CHECKSUM_LEN);
    (Sha256::digest(artifact).as_slice() == checksum).then_some(artifact)
}

fn write_atomically(path: &Path, artifact: &[u8]) -> std::io::Result<()> {
    let temp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut contents = Vec::with_capacity(CHECKSUM_LEN + artifact.len());
    contents.extend_from_slice(&Sha256::digest(artifact));
    contents.extend_from_slice(artifact);
    std::fs::write(&temp, &contents)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_guards_the_artifact() {
        let artifact = b"compiled code".to_vec();
        let mut file = Sha256::digest(&artifact).to_vec();
        file.extend_from_slice(&artifact);
        assert_eq!(verified_artifact(&file), Some(&artifact[..]));
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verified_artifact(&file), None);
        assert_eq!(verified_artifact(b"short"), None);
    }
}
