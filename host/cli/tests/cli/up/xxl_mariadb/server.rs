//! A MariaDB server of the test's own (Debian's `mariadbd`, on a Unix
//! socket only, no network): SQL run with its client, tables dumped with
//! its `mysqldump`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A MariaDB server of the test's own, on a Unix socket only.
pub(super) struct Mariadb {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    server: Child,
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

impl Mariadb {
    pub(super) fn start() -> Mariadb {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let socket = dir.path().join("mysqld.sock");
        let installed = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg(format!("--datadir={}", data.display()))
            .arg("--auth-root-authentication-method=normal")
            .output()
            .expect("mariadb-install-db (Debian's mariadb-server; .ci/run installs it)");
        assert!(
            installed.status.success(),
            "{}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let server = Command::new("mariadbd")
            .args(["--no-defaults", "--user=root", "--skip-networking"])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("error.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd");
        let mariadb = Mariadb {
            _dir: dir,
            socket,
            server,
        };
        // Ready once it answers on its socket: the client waits for it
        // (`--wait` retries the connection), up to a minute.
        let ready = Command::new("mariadb-admin")
            .arg("--no-defaults")
            .arg(format!("--socket={}", mariadb.socket.display()))
            .args(["-uroot", "--wait=60", "--connect-timeout=1", "ping"])
            .output()
            .is_ok_and(|output| output.status.success());
        assert!(ready, "mariadbd did not answer on its socket");
        mariadb
    }

    /// Runs `sql` with the `mariadb` client; its output (`--batch`:
    /// tab-separated, a header line of column names when `header`).
    pub(super) fn sql(&self, sql: &str, header: bool) -> String {
        let mut client = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-uroot", "--batch", "--default-character-set=utf8mb4"])
            .args((!header).then_some("--skip-column-names"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        client
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        let output = client.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// `mysqldump OPTIONS DATABASE xxl_job_group xxl_job_info`, written
    /// to `path`.
    pub(super) fn dump(&self, database: &str, options: &[&str], path: &Path) {
        let output = Command::new("mysqldump")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .arg("-uroot")
            .args(options)
            .args([database, "xxl_job_group", "xxl_job_info"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "mysqldump {options:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::write(path, output.stdout).unwrap();
    }
}
