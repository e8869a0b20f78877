//! A real PostgreSQL server for tests: `initdb` into a temp dir, started
//! with `pg_ctl` on a free loopback port, stoppable and restartable on the
//! same port and data (to test outages), stopped and removed on drop. When
//! the tests run as root the server runs as the `postgres` system user
//! (PostgreSQL refuses root).
//!
//! A test that does not stop the server takes a database of its own on
//! the one server its test process shares ([`PostgresServer::fresh_database`]):
//! starting a server costs a second of the two such a test takes.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A PostgreSQL server owned by a test.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    dir: PathBuf,
}

/// PostgreSQL's program `name` (`pg_dump`, `pg_restore`, ...) from the
/// newest server installed.
pub fn postgres_program(name: &str) -> PathBuf {
    bin_dir().join(name)
}

fn bin_dir() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions
        .pop()
        .filter(|dir| dir.join("initdb").exists())
        .expect("PostgreSQL server binaries (Debian package postgresql-15) are needed: apt-get install postgresql-15")
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

fn command(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

impl PostgresServer {
    /// Initialises and starts a server; blocks until it accepts connections.
    pub fn start() -> PostgresServer {
        let bin = bin_dir();
        let dir = std::env::temp_dir().join(format!(
            "cronbox-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(
                status.success(),
                "cannot give the temp dir to the postgres user"
            );
        }
        let data = dir.join("data");
        let output = command(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "cronbox", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .output()
            .expect("initdb runs");
        assert!(
            output.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let server = PostgresServer { port, dir };
        server.start_again();
        server
    }

    /// Starts the server (again, after [`PostgresServer::stop`]) on the same
    /// port and data; blocks until it accepts connections.
    pub fn start_again(&self) {
        let bin = bin_dir();
        // fsync off (no machine crash to survive), but commits written
        // before they are acknowledged, so that an immediate stop (a
        // crash of the server process) loses no acknowledged commit.
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c synchronous_commit=on \
             -c max_connections=300",
            self.port,
            self.dir.display()
        );
        let status = command(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-o", &options, "-w", "-t", "60", "start"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("pg_ctl runs");
        assert!(status.success(), "PostgreSQL did not start");
        self.wait_ready(&bin);
    }

    /// Stops the server at once, as a crash would (`pg_ctl -m immediate`).
    pub fn stop(&self) {
        let _ = command(&bin_dir().join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    fn wait_ready(&self, bin: &Path) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "cronbox",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "PostgreSQL did not become ready");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The connection URL of the `postgres` database as user `cronbox`.
    pub fn url(&self) -> String {
        format!("postgres://cronbox@127.0.0.1:{}/postgres", self.port)
    }

    /// Creates a fresh database and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        let bin = bin_dir();
        let status = Command::new(bin.join("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "cronbox",
                name,
            ])
            .status()
            .expect("createdb runs");
        assert!(status.success(), "createdb {name} failed");
        format!("postgres://cronbox@127.0.0.1:{}/{name}", self.port)
    }
}

/// A database of its own on the server the test process shares.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
}

impl TestDatabase {
    /// Its connection URL, as user `cronbox`.
    pub fn url(&self) -> String {
        self.url.clone()
    }
}

impl PostgresServer {
    /// A fresh, empty database on the one server this test process shares,
    /// started on first use and stopped (and its files removed) once the
    /// process has exited. For tests that leave the server running.
    pub fn fresh_database() -> TestDatabase {
        static SHARED: OnceLock<PostgresServer> = OnceLock::new();
        static DATABASES: AtomicUsize = AtomicUsize::new(0);
        let server = SHARED.get_or_init(|| {
            let server = PostgresServer::start();
            server.stop_when_this_process_exits();
            server
        });
        let name = format!("test_{}", DATABASES.fetch_add(1, Ordering::Relaxed));
        TestDatabase {
            url: server.create_database(&name),
        }
    }

    /// A process of its own waits for this one to exit (a static is never
    /// dropped), then stops the server and removes its files.
    #[allow(clippy::zombie_processes)] // it outlives this process, unwaited by design
    fn stop_when_this_process_exits(&self) {
        let pg_ctl = bin_dir().join("pg_ctl");
        let as_postgres = if is_root() {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "tail --pid={} -f /dev/null; {as_postgres}'{}' -D '{}' -m immediate -w stop; rm -rf '{}'",
            std::process::id(),
            pg_ctl.display(),
            self.dir.join("data").display(),
            self.dir.display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh runs");
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
