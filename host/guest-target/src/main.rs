//! `cargo up` and `cargo test-all` (see `.cargo/config.toml`): by the time
//! this runs, this crate's build script has made sure the guest target is
//! installed; it then hands over to cargo with its own arguments (replacing
//! itself, so that signals reach the command that runs).

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command.args(std::env::args_os().skip(1));
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
