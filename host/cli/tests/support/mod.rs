//! What the process tests share: free loopback ports and child processes
//! that are killed when dropped.
#![allow(dead_code)] // each test file uses its own part of it

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};

/// A loopback address nobody listens on (at the time of asking).
pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
}

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
