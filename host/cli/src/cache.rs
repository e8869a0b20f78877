//! Where `cronbox run` and `cronbox up` keep compiled components between
//! runs: the user's cache directory, shared by every folder and process of
//! that user, so that a component (a Python or JavaScript one is 12–20 MB
//! and takes tens of seconds to compile) is compiled once per version.
//!
//! Entries are keyed by the component's sha256 and the engine's build and
//! settings, and signed with a key kept beside the directory (see the
//! runtime's artifact cache): a damaged or foreign entry is compiled again.

use std::path::PathBuf;

use clap::Args;
use cronbox_runtime::RuntimeConfig;

/// The artifact cache's flags.
#[derive(Debug, Clone, Args)]
pub struct CacheArgs {
    /// Directory where compiled components are kept between runs (default:
    /// $XDG_CACHE_HOME/cronbox, else ~/.cache/cronbox).
    #[arg(long, env = "CRONBOX_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Use no shared cache (whatever --cache-dir or CRONBOX_CACHE_DIR
    /// say): `run` compiles every time, `up` keeps compiled components in
    /// its data directory.
    #[arg(long)]
    no_cache: bool,
}

impl CacheArgs {
    /// The cache's directory, `None` when disabled or when there is no
    /// home to keep it in.
    pub fn dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir.clone().or_else(default_dir)
    }

    /// Sets `runtime` to keep its artifacts in the cache: `artifacts/` in
    /// the directory, its key file beside it (whoever may write entries
    /// cannot sign them). Returns whether there is a cache.
    pub fn apply(&self, runtime: &mut RuntimeConfig) -> bool {
        let Some(dir) = self.dir() else {
            return false;
        };
        keep_in(&dir, runtime);
        true
    }

    /// Deletes the least recently used artifacts past [`MAX_CACHE_BYTES`],
    /// sparing `digest`'s (the one just run). Best effort: `cronbox up`'s
    /// executor bounds the same directory by its own disk bound.
    pub fn trim(&self, digest: &str) {
        let Some(dir) = self.dir() else { return };
        let bound = cronbox_executor::DiskBound::new(vec![dir.join("artifacts")], MAX_CACHE_BYTES);
        if let Err(error) = bound.trim(&std::iter::once(digest.to_owned()).collect()) {
            tracing::debug!(%error, "cannot trim the artifact cache");
        }
    }
}

/// Sets `runtime` to keep its compiled components in the cache directory
/// `dir`: `artifacts/` in it, its key file beside (whoever may write
/// entries cannot sign them). `cronbox run`, `cronbox up` and executors
/// given the same `dir` share its entries, each compiled once.
pub fn keep_in(dir: &std::path::Path, runtime: &mut RuntimeConfig) {
    runtime.cache_dir = Some(dir.join("artifacts"));
    runtime.cache_key_file = Some(dir.join("artifact-cache.key"));
}

/// The most the artifacts `cronbox run` leaves in the cache take together.
pub const MAX_CACHE_BYTES: u64 = 4 << 30;

/// `$XDG_CACHE_HOME/cronbox`, else `$HOME/.cache/cronbox` (only absolute
/// paths count, as the XDG base directory specification says).
fn default_dir() -> Option<PathBuf> {
    crate::dirs::cache()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cache_dir: Option<&str>, no_cache: bool) -> CacheArgs {
        CacheArgs {
            cache_dir: cache_dir.map(PathBuf::from),
            no_cache,
        }
    }

    #[test]
    fn the_cache_is_the_named_directory_or_none() {
        let mut runtime = RuntimeConfig::default();
        assert!(args(Some("/var/cache/x"), false).apply(&mut runtime));
        assert_eq!(
            runtime.cache_dir,
            Some(PathBuf::from("/var/cache/x/artifacts"))
        );
        assert_eq!(
            runtime.cache_key_file,
            Some(PathBuf::from("/var/cache/x/artifact-cache.key"))
        );
        let mut runtime = RuntimeConfig::default();
        assert!(!args(None, true).apply(&mut runtime));
        assert_eq!(runtime.cache_dir, None);
    }
}
