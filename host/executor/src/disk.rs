//! The executor's disk caches — module bytes (`modules/`), compiled
//! artifacts (`artifacts/`) and compiled functions
//! (`artifacts/functions/`) — kept under a size bound.
//!
//! After a module is fetched or compiled, if the files of both directories
//! together exceed the bound, the least recently used (a file's
//! modification time, renewed when it is read back: `renew_cache_file`)
//! are deleted until they fit again, except those of modules loaded in
//! memory now (their files are what a restart would load). The bound is
//! checked when the caches grow, so a bound lowered by a restart holds
//! from the next module written. A deleted entry only costs a
//! download and a compile the next time its module runs. (The empty lock
//! file each artifact is compiled under goes the same way.)

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Directories whose files together stay under `max_bytes` (also how
/// `cronbox run` bounds the user's artifact cache).
#[derive(Debug, Clone)]
pub struct DiskBound {
    dirs: Vec<PathBuf>,
    max_bytes: u64,
}

/// What a trim removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Trimmed {
    pub files: u64,
    pub bytes: u64,
}

impl DiskBound {
    pub fn new(dirs: Vec<PathBuf>, max_bytes: u64) -> Self {
        DiskBound { dirs, max_bytes }
    }

    /// Deletes the oldest files until the rest fit, sparing the files of
    /// the digests in `in_use` (a file is a digest's when its name starts
    /// with it). Blocking.
    pub fn trim(&self, in_use: &HashSet<String>) -> std::io::Result<Trimmed> {
        let mut files = Vec::new();
        let mut total = 0_u64;
        // The directories' own files and those of their subdirectories
        // (the compiled functions under `artifacts/functions/`).
        let mut dirs = self.dirs.clone();
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue; // not created yet, or removed meanwhile
            };
            for entry in entries {
                let entry = entry?;
                let meta = entry.metadata()?;
                if meta.is_dir() {
                    dirs.push(entry.path());
                    continue;
                }
                if !meta.is_file() {
                    continue;
                }
                total += meta.len();
                let written = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                files.push((written, meta.len(), entry.path()));
            }
        }
        let mut trimmed = Trimmed::default();
        if total <= self.max_bytes {
            return Ok(trimmed);
        }
        files.sort();
        for (_, size, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if digest_of(&path).is_some_and(|digest| in_use.contains(digest)) {
                continue;
            }
            // An artifact's empty lock file goes uncounted.
            let lock = path
                .extension()
                .is_some_and(|extension| extension == "lock");
            match std::fs::remove_file(&path) {
                Ok(()) if lock => {}
                Ok(()) => {
                    total -= size;
                    trimmed.files += 1;
                    trimmed.bytes += size;
                }
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        Ok(trimmed)
    }
}

/// The digest a cache file belongs to: the first 64 characters of its name.
fn digest_of(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()?.get(..64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_files_go_first_and_files_in_use_stay() {
        let root = tempfile::tempdir().unwrap();
        let (modules, artifacts) = (root.path().join("m"), root.path().join("a"));
        std::fs::create_dir_all(&modules).unwrap();
        std::fs::create_dir_all(&artifacts).unwrap();
        let digest = |c: char| c.to_string().repeat(64);
        let write = |dir: &Path, name: String, age_s: u64| {
            let path = dir.join(name);
            std::fs::write(&path, [0_u8; 100]).unwrap();
            let written = SystemTime::now() - std::time::Duration::from_secs(age_s);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(written)
                .unwrap();
        };
        write(&modules, format!("{}.wasm", digest('a')), 300);
        write(&artifacts, format!("{}-x.cwasm", digest('a')), 300);
        write(&modules, format!("{}.wasm", digest('b')), 200);
        write(&artifacts, format!("{}-x.cwasm", digest('b')), 200);
        write(&modules, format!("{}.wasm", digest('c')), 100);
        let bound = DiskBound::new(vec![modules.clone(), artifacts.clone()], 300);
        let in_use = HashSet::from([digest('a')]);
        let trimmed = bound.trim(&in_use).unwrap();
        assert_eq!(
            trimmed,
            Trimmed {
                files: 2,
                bytes: 200
            },
            "b's two files"
        );
        assert!(
            modules.join(format!("{}.wasm", digest('a'))).exists(),
            "in use"
        );
        assert!(!modules.join(format!("{}.wasm", digest('b'))).exists());
        assert!(
            modules.join(format!("{}.wasm", digest('c'))).exists(),
            "newest"
        );
        assert_eq!(bound.trim(&in_use).unwrap(), Trimmed::default(), "fits");
        // Smaller than what is in use: everything else goes, that stays.
        let tight = DiskBound::new(vec![modules.clone(), artifacts], 150);
        assert_eq!(
            tight.trim(&in_use).unwrap(),
            Trimmed {
                files: 1,
                bytes: 100
            }
        );
        assert!(modules.join(format!("{}.wasm", digest('a'))).exists());
    }

    /// The compiled functions under `artifacts/functions/` count towards
    /// the bound and go oldest first, like every other file.
    #[test]
    fn files_in_subdirectories_count_and_go_oldest_first() {
        let root = tempfile::tempdir().unwrap();
        let artifacts = root.path().join("a");
        let functions = artifacts.join("functions").join("dd");
        std::fs::create_dir_all(&functions).unwrap();
        let old = functions.join("d".repeat(64));
        std::fs::write(&old, [0_u8; 100]).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&old)
            .unwrap()
            .set_modified(SystemTime::now() - std::time::Duration::from_secs(400))
            .unwrap();
        let newer = artifacts.join(format!("{}-x.cwasm", "e".repeat(64)));
        std::fs::write(&newer, [0_u8; 100]).unwrap();
        let bound = DiskBound::new(vec![artifacts], 150);
        assert_eq!(
            bound.trim(&HashSet::new()).unwrap(),
            Trimmed {
                files: 1,
                bytes: 100
            }
        );
        assert!(!old.exists(), "the oldest file, in a subdirectory");
        assert!(newer.exists());
    }
}
