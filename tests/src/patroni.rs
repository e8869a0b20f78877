//! [`Patroni`]: PostgreSQL under Patroni on loopback, the topology
//! docs/deploying.md gives for a highly available database: etcd, two
//! nodes (synchronous replication or not), HAProxy in front sending
//! connections to whichever node Patroni's REST API calls primary. For
//! failover tests. Needs Debian's `patroni`, `etcd-server`, `haproxy` and
//! `postgresql-15` (`.ci/run` installs them); as root, Patroni and
//! PostgreSQL run as the `postgres` user.
#![allow(clippy::unwrap_used)] // a test helper: a failed unwrap is a failed test

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the leader key lives: a dead primary's replica is promoted
/// within this (and a loop) of its death.
pub const PATRONI_TTL: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Node {
    api_port: u16,
    data: PathBuf,
    patroni: Option<Child>,
}

/// A Patroni cluster and the HAProxy in front of it; every process is
/// killed and the files removed when dropped.
#[derive(Debug)]
pub struct Patroni {
    dir: PathBuf,
    etcd: Child,
    haproxy: Child,
    nodes: Vec<Node>,
    proxy_port: u16,
    http: reqwest::Client,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

fn log_file(dir: &Path, name: &str) -> Stdio {
    Stdio::from(std::fs::File::create(dir.join(format!("{name}.log"))).expect("a log file"))
}

/// The postgres user's uid and gid, when this process is root.
fn postgres_user() -> Option<(u32, u32)> {
    if !super::postgres::is_root() {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let line = passwd
        .lines()
        .find(|line| line.starts_with("postgres:"))
        .expect("a postgres user (Debian's postgresql package makes it)");
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().unwrap(), fields[3].parse().unwrap()))
}

fn node_config(
    dir: &Path,
    index: usize,
    etcd_port: u16,
    pg_port: u16,
    api_port: u16,
    synchronous: bool,
) -> String {
    let bin = super::postgres::postgres_program("postgres");
    let bin = bin.parent().unwrap().display();
    let dir = dir.display();
    let ttl = PATRONI_TTL.as_secs();
    format!(
        "scope: cronbox
name: node{index}
restapi:
  listen: 127.0.0.1:{api_port}
  connect_address: 127.0.0.1:{api_port}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: {ttl}
    loop_wait: 1
    retry_timeout: 4
    synchronous_mode: {synchronous}
    postgresql:
      parameters:
        max_connections: 300
  initdb:
    - encoding: UTF8
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg_port}
  connect_address: 127.0.0.1:{pg_port}
  data_dir: {dir}/node{index}
  bin_dir: {bin}
  pgpass: {dir}/pgpass{index}
  authentication:
    superuser: {{username: postgres, password: postgres}}
    replication: {{username: replicator, password: replicator}}
  parameters:
    unix_socket_directories: {dir}
"
    )
}

impl Patroni {
    /// etcd, `nodes` nodes and HAProxy, once a primary takes connections
    /// through HAProxy (and, with `synchronous`, a standby is its
    /// synchronous one) and the database `cronbox` exists.
    pub async fn start(nodes: usize, synchronous: bool) -> Patroni {
        let dir = std::env::temp_dir().join(format!(
            "cronbox-patroni-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        let user = postgres_user();
        if user.is_some() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(status.success());
        }
        let (etcd_port, etcd_peer) = (free_port(), free_port());
        let etcd = Command::new("etcd")
            .args(["--name", "e0", "--data-dir"])
            .arg(dir.join("etcd"))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{etcd_port}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{etcd_peer}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}"
            ))
            .arg(format!("--initial-cluster=e0=http://127.0.0.1:{etcd_peer}"))
            .stdout(Stdio::null())
            .stderr(log_file(&dir, "etcd"))
            .spawn()
            .expect("etcd (Debian package etcd-server) runs");
        let mut servers = String::new();
        let mut planned = Vec::new();
        for index in 0..nodes {
            let (pg_port, api_port) = (free_port(), free_port());
            let config = dir.join(format!("node{index}.yml"));
            std::fs::write(
                &config,
                node_config(&dir, index, etcd_port, pg_port, api_port, synchronous),
            )
            .unwrap();
            servers.push_str(&format!(
                "  server node{index} 127.0.0.1:{pg_port} check port {api_port}\n"
            ));
            planned.push((config, api_port, dir.join(format!("node{index}"))));
        }
        let proxy_port = free_port();
        let haproxy_config = dir.join("haproxy.cfg");
        std::fs::write(
            &haproxy_config,
            format!(
                "global\n  maxconn 1000\ndefaults\n  mode tcp\n  timeout connect 2s\n  \
                 timeout client 30m\n  timeout server 30m\n  timeout check 3s\n\
                 listen primary\n  bind 127.0.0.1:{proxy_port}\n  option httpchk GET /primary\n  \
                 http-check expect status 200\n  \
                 default-server inter 500ms fall 3 rise 2 on-marked-down shutdown-sessions\n\
                 {servers}"
            ),
        )
        .unwrap();
        let haproxy = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&haproxy_config)
            .stdout(Stdio::null())
            .stderr(log_file(&dir, "haproxy"))
            .spawn()
            .expect("haproxy (Debian package haproxy) runs");
        let mut cluster = Patroni {
            dir,
            etcd,
            haproxy,
            nodes: Vec::new(),
            proxy_port,
            http: cronbox_tls::client(),
        };
        // The first node bootstraps the cluster; the others copy it.
        for (index, (config, api_port, data)) in planned.into_iter().enumerate() {
            let mut command = Command::new("patroni");
            command
                .arg(&config)
                .stdout(Stdio::null())
                .stderr(log_file(&cluster.dir, &format!("patroni{index}")));
            if let Some((uid, gid)) = user {
                command.uid(uid).gid(gid);
            }
            let patroni = command
                .spawn()
                .expect("patroni (Debian package patroni) runs");
            cluster.nodes.push(Node {
                api_port,
                data,
                patroni: Some(patroni),
            });
            if index == 0 {
                cluster.until_primary().await;
            }
        }
        cluster.until_replicas(nodes - 1, synchronous).await;
        let createdb = super::postgres::postgres_program("createdb");
        let port = cluster.proxy_port.to_string();
        crate::until_within(
            Duration::from_secs(60),
            "the primary answers through HAProxy",
            || {
                let made = Command::new(&createdb)
                    .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "cronbox"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success());
                async move { made.then_some(()) }
            },
        )
        .await;
        cluster
    }

    /// Where admins connect: HAProxy, database `cronbox`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/cronbox", self.proxy_port)
    }

    async fn status(&self, node: usize, check: &str) -> bool {
        let url = format!("http://127.0.0.1:{}/{check}", self.nodes[node].api_port);
        self.http
            .get(url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .is_ok_and(|answer| answer.status() == 200)
    }

    /// The node Patroni calls primary, once one is.
    pub async fn until_primary(&self) -> usize {
        crate::until_within(Duration::from_secs(90), "a Patroni primary", || async {
            for node in 0..self.nodes.len() {
                if self.nodes[node].patroni.is_some() && self.status(node, "primary").await {
                    return Some(node);
                }
            }
            None
        })
        .await
    }

    async fn until_replicas(&self, count: usize, synchronous: bool) {
        let check = if synchronous { "sync" } else { "replica" };
        crate::until_within(
            Duration::from_secs(90),
            "Patroni's replicas stream",
            || async {
                let mut streaming = 0;
                for node in 0..self.nodes.len() {
                    if self.status(node, check).await {
                        streaming += 1;
                    }
                }
                // One synchronous standby, or every replica streaming.
                let needed = if synchronous { count.min(1) } else { count };
                (streaming >= needed).then_some(())
            },
        )
        .await;
    }

    /// SIGKILLs the primary's Patroni and PostgreSQL (a machine lost):
    /// which node it was.
    pub async fn kill_primary(&mut self) -> usize {
        let primary = self.until_primary().await;
        let node = &mut self.nodes[primary];
        if let Some(mut patroni) = node.patroni.take() {
            let _ = patroni.kill();
            let _ = patroni.wait();
        }
        kill_postmaster(&node.data);
        primary
    }

    /// Asks Patroni to hand the primary's role to another node (a planned
    /// switchover: the old primary lives on as a standby): which node was
    /// primary.
    pub async fn switch_over(&self) -> usize {
        let primary = self.until_primary().await;
        let candidate = (0..self.nodes.len()).find(|node| *node != primary).unwrap();
        let answer = self
            .http
            .post(format!(
                "http://127.0.0.1:{}/switchover",
                self.nodes[primary].api_port
            ))
            .json(&serde_json::json!({
                "leader": format!("node{primary}"),
                "candidate": format!("node{candidate}"),
            }))
            .send()
            .await
            .expect("Patroni's API answers");
        assert!(
            answer.status().is_success(),
            "switchover refused: {}",
            answer.text().await.unwrap_or_default()
        );
        primary
    }

    /// Waits until a node other than `dead` is primary: how long since
    /// `since`.
    pub async fn until_promoted(&self, dead: usize, since: Instant) -> Duration {
        crate::until_within(Duration::from_secs(90), "a replica is promoted", || async {
            for node in (0..self.nodes.len()).filter(|node| *node != dead) {
                if self.status(node, "primary").await {
                    return Some(since.elapsed());
                }
            }
            None
        })
        .await
    }
}

/// SIGKILL to the postmaster of the data directory `data`, if it runs.
fn kill_postmaster(data: &Path) {
    let Ok(pid) = std::fs::read_to_string(data.join("postmaster.pid")) else {
        return;
    };
    if let Some(pid) = pid
        .lines()
        .next()
        .and_then(|pid| pid.trim().parse::<i32>().ok())
    {
        let _ = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut patroni) = node.patroni.take() {
                let _ = patroni.kill();
                let _ = patroni.wait();
            }
            kill_postmaster(&node.data);
        }
        for child in [&mut self.haproxy, &mut self.etcd] {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("Patroni's files are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
