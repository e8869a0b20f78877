//! `cargo up` and `cargo test-all` (see `.cargo/config.toml`): by the time
//! this runs, this crate's build script has made sure the guest target is
//! installed; it then hands over to cargo with its own arguments (replacing
//! itself, so that signals reach the command that runs).
//!
//! For `cargo test-all`, the tests' temporary files go to memory when it
//! can hold them (see [`memory_temp_dir`]).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Free room a tmpfs must have for the tests' temporary files (the whole
/// suite had 176 MiB there at most).
const TEST_TEMP_ROOM: u64 = 2 << 30;

/// Where the tests keep their temporary files when `TMPDIR` does not say:
/// `/dev/shm/cronbox-tests`, when `/dev/shm` is a tmpfs mounted without
/// `noexec` with [`TEST_TEMP_ROOM`] free. The tests make and delete tens
/// of thousands of files (databases, data directories, caches), and on
/// ext4 finding a free inode among recently deleted ones was a third of
/// the suite's system time.
fn memory_temp_dir() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    // A tmpfs the tests can run programs from (they build projects there).
    let usable = mounts.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        matches!(
            fields.as_slice(),
            [_, "/dev/shm", "tmpfs", options, ..]
                if !options.split(',').any(|option| option == "noexec")
        )
    });
    if !usable || free_bytes(shm)? < TEST_TEMP_ROOM {
        return None;
    }
    let dir = shm.join("cronbox-tests");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Bytes an unprivileged user may still write under `path`.
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain integers, for which all zeroes is valid.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a valid pointer to a local.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return None;
    }
    Some(stats.f_bavail as u64 * stats.f_frsize as u64)
}

fn main() -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command.args(std::env::args_os().skip(1));
    let testing = std::env::args_os().nth(1).is_some_and(|arg| arg == "test");
    if testing
        && std::env::var_os("TMPDIR").is_none()
        && let Some(dir) = memory_temp_dir()
    {
        eprintln!("tests' temporary files in {} (memory)", dir.display());
        command.env("TMPDIR", dir);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let error = command.exec();
        eprintln!("error: cannot run {}: {error}", cargo.to_string_lossy());
        ExitCode::FAILURE
    }
    #[cfg(not(unix))]
    match command.status() {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1)),
        Err(error) => {
            eprintln!("error: cannot run {}: {error}", cargo.to_string_lossy());
            ExitCode::FAILURE
        }
    }
}
