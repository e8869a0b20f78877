//! The on-disk cache of compiled components.
//!
//! Entries are keyed by (sha256 of the module, engine compatibility hash),
//! so an upgraded or reconfigured engine never sees another's artifacts.
//! Each file starts with an HMAC-SHA256 of the artifact that follows, under
//! a key kept outside the cache directory: a file whose tag does not match
//! (torn write, disk damage, or written by anyone without the key) is never
//! deserialized; the module is recompiled and the entry rewritten.
//!
//! What this protects against: damage, and someone who can write the cache
//! directory but not read the key file (a shared or mounted cache volume).
//! It does not protect against someone who can read the key or write the
//! executor's binary or data directory: they own the executor anyway. The
//! directory is created 0700 and the key file 0600.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::errors::RuntimeError;

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
    /// The key entries are signed with.
    key: Vec<u8>,
}

const CHECKSUM_LEN: usize = 32;
pub(crate) const KEY_LEN: usize = 32;

/// The key cache entries are signed with: the one in `key_file` (made,
/// random and 0600, when missing), or one for this process only.
pub(crate) fn signing_key(key_file: Option<&Path>) -> Result<Vec<u8>, RuntimeError> {
    match key_file {
        Some(path) => read_or_create_key(path).map_err(|source| RuntimeError::CacheDir {
            path: path.to_path_buf(),
            source,
        }),
        None => Ok(rand::random::<[u8; KEY_LEN]>().to_vec()),
    }
}

impl ArtifactCache {
    /// The cache in `dir` (none without one), its entries signed with
    /// `key`.
    pub(crate) fn new(
        dir: Option<PathBuf>,
        key: Vec<u8>,
        engine: &Engine,
    ) -> Result<Self, RuntimeError> {
        if let Some(dir) = &dir {
            create_private_dir(dir).map_err(|source| RuntimeError::CacheDir {
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
            key,
        })
    }

    /// The cache file of a module digest (public for tests that damage it).
    pub(crate) fn entry_path(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|dir| dir.join(format!("{digest}-{}.cwasm", self.engine_key)))
    }

    /// Loads the compiled component for `digest`, with `compile` when the
    /// cache has no valid entry. Blocking: call it off the async threads.
    ///
    /// Processes sharing the directory compile a digest once: the entry's
    /// lock file is held from the read to the [`ArtifactCache::store`]
    /// (until the returned [`EntryLock`] is dropped), so another process
    /// loading the same digest meanwhile waits and then reads the entry.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &str,
        compile: impl FnOnce() -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<(Component, CacheStatus, EntryLock)> {
        let Some(path) = self.entry_path(digest) else {
            return Ok((compile()?, CacheStatus::Disabled, EntryLock { _held: None }));
        };
        let lock = EntryLock::take(&path);
        let mut status = CacheStatus::Miss;
        if let Ok(file) = std::fs::read(&path) {
            match verified_artifact(&self.key, &file) {
                // SAFETY: the bytes carry a tag only a holder of this
                // executor's key can make, so they are an artifact it
                // serialized, undamaged; wasmtime additionally checks the
                // engine compatibility header.
                Some(artifact) => match unsafe { Component::deserialize(engine, artifact) } {
                    Ok(component) => {
                        renew(&path);
                        return Ok((component, CacheStatus::Hit, lock));
                    }
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
        Ok((compile()?, status, lock))
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
            .and_then(|artifact| write_atomically(&path, &self.key, &artifact));
        if let Err(error) = result {
            tracing::warn!(path = %path.display(), %error, "cannot write the artifact cache");
        }
    }
}

/// The lock of one cache entry (a `.lock` file beside it, locked
/// exclusively), released when dropped; none when the lock file cannot be
/// made (the cache still works, only without sharing a compile).
pub(crate) struct EntryLock {
    _held: Option<std::fs::File>,
}

impl EntryLock {
    fn take(entry: &Path) -> EntryLock {
        let mut name = entry.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        let file = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(entry.with_file_name(name))
            .and_then(|file| file.lock().map(|()| file));
        match file {
            Ok(file) => EntryLock { _held: Some(file) },
            Err(error) => {
                tracing::debug!(path = %entry.display(), %error, "cannot lock a cache entry");
                EntryLock { _held: None }
            }
        }
    }
}

/// Marks a cache file as used now (its modification time), so that a
/// size bound deleting the oldest files deletes the least recently used.
/// Best effort.
pub fn renew(path: &Path) {
    let renewed = std::fs::File::options()
        .append(true)
        .open(path)
        .and_then(|file| file.set_modified(std::time::SystemTime::now()));
    if let Err(error) = renewed {
        tracing::debug!(path = %path.display(), %error, "cannot renew a cache file's time");
    }
}

/// The tag of `artifact` under `key`, for the entry named `name` (empty
/// for an artifact, whose file name is its digest; a function's lookup key
/// for the function cache, so that an entry cannot be moved to another
/// name).
fn tag(key: &[u8], name: &[u8], artifact: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(name);
    mac.update(artifact);
    mac
}

/// The artifact of a cache file, if its tag is right (compared in
/// constant time).
fn verified_artifact<'a>(key: &[u8], file: &'a [u8]) -> Option<&'a [u8]> {
    verified(key, b"", file)
}

/// The contents of the cache file of entry `name`, if its tag is right.
pub(crate) fn verified<'a>(key: &[u8], name: &[u8], file: &'a [u8]) -> Option<&'a [u8]> {
    if file.len() <= CHECKSUM_LEN {
        return None;
    }
    let (checksum, artifact) = file.split_at(CHECKSUM_LEN);
    tag(key, name, artifact)
        .verify_slice(checksum)
        .ok()
        .map(|()| artifact)
}

fn write_atomically(path: &Path, key: &[u8], artifact: &[u8]) -> std::io::Result<()> {
    write_signed(path, key, b"", artifact)
}

/// Writes the cache file of entry `name` whole (under a temporary name,
/// then renamed), its tag first.
pub(crate) fn write_signed(
    path: &Path,
    key: &[u8],
    name: &[u8],
    artifact: &[u8],
) -> std::io::Result<()> {
    let temp = unique_temp(path);
    let mut contents = Vec::with_capacity(CHECKSUM_LEN + artifact.len());
    contents.extend_from_slice(&tag(key, name, artifact).finalize().into_bytes());
    contents.extend_from_slice(artifact);
    std::fs::write(&temp, &contents)?;
    std::fs::rename(&temp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temp);
    })
}

/// Creates `dir` (and its parents) readable by this user only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// The cache key in `path`, made (random, 0600) when the file is missing.
fn read_or_create_key(path: &Path) -> std::io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Ok(key) if key.len() == KEY_LEN => return Ok(key),
        Ok(_) => {
            return Err(std::io::Error::other(
                "the artifact cache key file is not a 32-byte key",
            ));
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Written whole under a name of its own, then linked into place: two
    // processes sharing a cache (`cronbox run` and `cronbox up` on one
    // machine) both end up with the key that was linked first.
    let key = rand::random::<[u8; KEY_LEN]>();
    let temp = unique_temp(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    use std::io::Write as _;
    options.open(&temp)?.write_all(&key)?;
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(key.to_vec()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let key = std::fs::read(path)?;
            if key.len() == KEY_LEN {
                Ok(key)
            } else {
                Err(std::io::Error::other(
                    "the artifact cache key file is not a 32-byte key",
                ))
            }
        }
        Err(error) => Err(error),
    }
}

/// A temporary name beside `path` no other process or thread uses.
fn unique_temp(path: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let next = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}-{next}", std::process::id()));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_holder_of_the_key_can_make_a_valid_entry() {
        let artifact = b"compiled code".to_vec();
        let key = [7_u8; KEY_LEN];
        let mut file = tag(&key, b"", &artifact).finalize().into_bytes().to_vec();
        file.extend_from_slice(&artifact);
        assert_eq!(verified_artifact(&key, &file), Some(&artifact[..]));
        assert_eq!(
            verified_artifact(&[8_u8; KEY_LEN], &file),
            None,
            "another key"
        );
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verified_artifact(&key, &file), None, "damaged");
        assert_eq!(verified_artifact(&key, b"short"), None);
        // An unkeyed checksum, which anyone can compute, is not enough.
        use sha2::Digest as _;
        let mut forged = Sha256::digest(&artifact).to_vec();
        forged.extend_from_slice(&artifact);
        assert_eq!(verified_artifact(&key, &forged), None, "unkeyed sha256");
    }

    #[cfg(unix)]
    #[test]
    fn the_cache_is_private_and_its_key_kept() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("artifacts");
        create_private_dir(&cache).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&cache), 0o700);
        let key_file = dir.path().join("cache.key");
        let key = read_or_create_key(&key_file).unwrap();
        assert_eq!(mode(&key_file), 0o600);
        assert_eq!(
            read_or_create_key(&key_file).unwrap(),
            key,
            "kept across starts"
        );
    }
}
