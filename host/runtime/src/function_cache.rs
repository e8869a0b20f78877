//! Cranelift's cache of compiled functions, on disk beside the artifacts.
//!
//! An artifact is keyed by its component's digest, so a new version of a
//! job — or another job made by the same toolchain — compiled from nothing
//! though nearly all of its code was compiled before: a Python or
//! JavaScript job carries its whole interpreter (tens of thousands of
//! functions, 15–20 s of two cores), and only its own few functions
//! differ. With wasmtime's incremental compilation, Cranelift looks each
//! function up here, by a hash of its code and the compiler's settings,
//! before compiling it, and stores each one it compiles.
//!
//! Entries are files under `functions/` in the artifact directory, two
//! levels deep by the hash of their lookup key, and signed like artifacts
//! (see `cache`): the tag covers the lookup key and the compiled bytes, so
//! a file that was damaged, forged without the key or moved to another
//! entry's name is not used — Cranelift compiles that function again and
//! the entry is written anew. They count towards the disk bound of the
//! artifacts, which deletes the least recently used first (a hit renews
//! an entry's time).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::cache;

/// The name of the function cache's directory inside the artifact
/// directory.
const FUNCTIONS_DIR: &str = "functions";

/// Compiled functions on disk, looked up and stored by Cranelift.
pub(crate) struct FunctionCache {
    dir: PathBuf,
    /// The key entries are signed with (the artifact cache's).
    key: Vec<u8>,
}

impl std::fmt::Debug for FunctionCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        formatter
            .debug_struct("FunctionCache")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl FunctionCache {
    /// The function cache of the artifact directory `artifacts`, its
    /// entries signed with `key`.
    pub(crate) fn new(artifacts: &Path, key: &[u8]) -> FunctionCache {
        FunctionCache::in_dir(artifacts.join(FUNCTIONS_DIR), key)
    }

    /// The function cache whose entries are in `dir` (a compiler child
    /// is handed its parent's).
    pub(crate) fn in_dir(dir: PathBuf, key: &[u8]) -> FunctionCache {
        FunctionCache {
            dir,
            key: key.to_vec(),
        }
    }

    /// The directory of the entries.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key entries are signed with.
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    fn path(&self, lookup: &[u8]) -> PathBuf {
        let name = hex::encode(Sha256::digest(lookup));
        self.dir.join(&name[..2]).join(name)
    }
}

impl wasmtime::CacheStore for FunctionCache {
    fn get(&self, lookup: &[u8]) -> Option<Cow<'_, [u8]>> {
        let path = self.path(lookup);
        let file = std::fs::read(&path).ok()?;
        let compiled = cache::verified(&self.key, lookup, &file)?;
        cache::renew(&path);
        Some(Cow::Owned(compiled.to_vec()))
    }

    /// Best effort: an entry that cannot be written costs a compile of
    /// that function next time.
    fn insert(&self, lookup: &[u8], compiled: Vec<u8>) -> bool {
        let path = self.path(lookup);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| cache::write_signed(&path, &self.key, lookup, &compiled));
        match written {
            Ok(()) => true,
            Err(error) => {
                tracing::debug!(path = %path.display(), %error, "cannot write a compiled function");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::CacheStore as _;

    #[test]
    fn an_entry_is_found_only_under_its_own_name_with_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FunctionCache::new(dir.path(), &[1; 32]);
        assert!(cache.insert(b"function a", b"code of a".to_vec()));
        assert_eq!(cache.get(b"function a").as_deref(), Some(&b"code of a"[..]));
        assert_eq!(cache.get(b"function b"), None);
        // Moved to another function's name: not that function's code.
        std::fs::create_dir_all(cache.path(b"function b").parent().unwrap()).unwrap();
        std::fs::copy(cache.path(b"function a"), cache.path(b"function b")).unwrap();
        assert_eq!(cache.get(b"function b"), None);
        // Another key, or a damaged file: not trusted.
        let other = FunctionCache::new(dir.path(), &[2; 32]);
        assert_eq!(other.get(b"function a"), None);
        let path = cache.path(b"function a");
        let mut file = std::fs::read(&path).unwrap();
        *file.last_mut().unwrap() ^= 1;
        std::fs::write(&path, file).unwrap();
        assert_eq!(cache.get(b"function a"), None);
    }
}
