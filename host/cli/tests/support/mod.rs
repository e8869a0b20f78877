//! What the process tests share: child processes that are killed when
//! dropped, and starting one on port 0 to read back where it listens.
#![allow(dead_code)] // each test file uses its own part of it

use std::process::{Child, Command, Stdio};

/// A child process, SIGKILLed and reaped when dropped.
#[derive(Debug)]
pub struct Process(pub Child);

impl Process {
    /// Runs the `cronbox` binary with `args`, output discarded.
    pub fn cronbox<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Process {
        Process(
            Command::new(env!("CARGO_BIN_EXE_cronbox"))
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("cronbox starts"),
        )
    }

    /// SIGKILL now, and wait for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs the `cronbox` binary with `args` (which bind port 0) and waits for
/// the line on its stderr that says where it listens: returns the process
/// and the `http://…` address after `marker` (for example `"listening on
/// "`). Its later stderr is discarded.
pub fn cronbox_listening<S: AsRef<std::ffi::OsStr>>(args: &[S], marker: &str) -> (Process, String) {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cronbox starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut lines = std::io::BufReader::new(stderr).lines();
    let process = Process(child);
    let address = loop {
        let line = lines
            .next()
            .expect("cronbox exited before saying where it listens")
            .expect("stderr is readable");
        if let Some(rest) = line.split(marker).nth(1) {
            let address = rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .trim_end_matches([')', ',']);
            break if address.starts_with("http") {
                address.to_owned()
            } else {
                format!("http://{address}")
            };
        }
    };
    // Keep draining stderr so the process never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (process, address)
}
