//! TLS from the command line: the flags of `cronbox admin` and `cronbox
//! executor` ([`ServeTls`]), the certificates `cronbox up --tls` makes for
//! itself ([`up_identity`]), and `cronbox cert`, a private CA and the
//! certificates it signs for a test cluster.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use cronbox_tls::ServerIdentity;
use cronbox_tls::certs::{self, PemPair};

/// TLS on a listener, and the private CA trusted for the other side.
#[derive(Debug, Clone, Default, Args)]
pub struct ServeTls {
    /// Serve TLS with this certificate chain (PEM, with --tls-key);
    /// reloaded on SIGHUP or when the file changes.
    #[arg(
        long,
        env = "CRONBOX_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(
        long,
        env = "CRONBOX_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// A PEM file of the CA the other side's certificates chain to (the
    /// admin's, for an executor; executors', for an admin), trusted
    /// besides the system's roots.
    #[arg(long, env = "CRONBOX_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
}

impl ServeTls {
    /// The listener's certificate, if TLS was asked for.
    pub fn identity(&self) -> Option<ServerIdentity> {
        Some(ServerIdentity {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
        })
    }
}

/// Where `cronbox up --tls` keeps its CA and certificate, under its data
/// directory: a CA made on the first start, and a certificate for
/// 127.0.0.1, ::1 and localhost that it signed (made again when missing
/// or a year old; it is valid 397 days). Answers the listeners' identity
/// and the CA file.
pub fn up_identity(data_dir: &Path) -> anyhow::Result<(ServerIdentity, PathBuf)> {
    let dir = data_dir.join("tls");
    cronbox_admin::create_private_dir(&dir)
        .with_context(|| format!("cannot create {}", dir.display()))?;
    let dir =
        std::path::absolute(&dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
    let ca = ca_in(&dir, "cronbox up CA")?;
    let identity = ServerIdentity {
        cert: dir.join("up.pem"),
        key: dir.join("up-key.pem"),
    };
    let year_old = |path: &Path| {
        std::fs::metadata(path)
            .and_then(|metadata| metadata.modified())
            .map(|written| {
                written.elapsed().unwrap_or_default() > std::time::Duration::from_secs(365 * 86_400)
            })
            .unwrap_or(true)
    };
    if year_old(&identity.cert) || !identity.key.exists() {
        certs::issue(&ca, &up_hosts())?.write(&identity.cert, &identity.key)?;
    }
    Ok((identity, dir.join("ca.pem")))
}

fn up_hosts() -> Vec<String> {
    ["127.0.0.1", "::1", "localhost"]
        .map(str::to_owned)
        .to_vec()
}

/// The CA kept in `dir` (`ca.pem`, `ca-key.pem`), made if there is none.
fn ca_in(dir: &Path, name: &str) -> anyhow::Result<PemPair> {
    let (cert, key) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
    if cert.exists() {
        return Ok(PemPair::read(&cert, &key)?);
    }
    let ca = certs::new_ca(name)?;
    ca.write(&cert, &key)?;
    Ok(ca)
}

/// Make a private CA and certificates for a test cluster.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  cronbox cert ca --dir certs
  cronbox cert issue admin --host admin.cluster.test --host 127.0.0.1 --dir certs
  cronbox admin --tls-cert certs/admin.pem --tls-key certs/admin-key.pem --ca-file certs/ca.pem ...
  cronbox job list --admin https://127.0.0.1:8080 --ca-file certs/ca.pem

A production cluster takes its certificates from the operator's own CA or
ACME; these are for trying TLS out and for tests.")]
pub struct CertArgs {
    #[command(subcommand)]
    command: CertCommand,
}

#[derive(Debug, Subcommand)]
enum CertCommand {
    /// Make a CA: DIR/ca.pem (give it to every client) and DIR/ca-key.pem
    /// (keep it private).
    Ca {
        /// Where the files are written.
        #[arg(long, default_value = "cronbox-certs")]
        dir: PathBuf,
        /// The CA's common name.
        #[arg(long, default_value = "cronbox private CA")]
        name: String,
    },
    /// Issue a certificate signed by DIR's CA: DIR/NAME.pem and
    /// DIR/NAME-key.pem, for a server and as a client.
    Issue {
        /// The files' name (e.g. admin, executor-1).
        name: String,
        /// A DNS name or IP address it is valid for (repeatable).
        #[arg(long = "host", required = true)]
        hosts: Vec<String>,
        /// Where the CA is and the files are written.
        #[arg(long, default_value = "cronbox-certs")]
        dir: PathBuf,
    },
}

pub fn main(args: CertArgs) -> anyhow::Result<()> {
    match args.command {
        CertCommand::Ca { dir, name } => {
            let cert = dir.join("ca.pem");
            if cert.exists() {
                bail!(
                    "{} exists: a CA is made once (remove it to start over)",
                    cert.display()
                );
            }
            cronbox_admin::create_private_dir(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            certs::new_ca(&name)?.write(&cert, &dir.join("ca-key.pem"))?;
            outln!("CA {name:?}: {} (its key beside it, 0600)", cert.display());
        }
        CertCommand::Issue { name, hosts, dir } => {
            let (ca_cert, ca_key) = (dir.join("ca.pem"), dir.join("ca-key.pem"));
            if !ca_cert.exists() {
                bail!(
                    "no CA in {}: make one with `cronbox cert ca --dir {0}`",
                    dir.display()
                );
            }
            let ca = PemPair::read(&ca_cert, &ca_key)?;
            let (cert, key) = (
                dir.join(format!("{name}.pem")),
                dir.join(format!("{name}-key.pem")),
            );
            certs::issue(&ca, &hosts)
                .with_context(|| format!("cannot issue a certificate for {}", hosts.join(", ")))?
                .write(&cert, &key)?;
            outln!(
                "{}: valid 397 days for {} (its key beside it, 0600)",
                cert.display(),
                hosts.join(", ")
            );
        }
    }
    Ok(())
}
