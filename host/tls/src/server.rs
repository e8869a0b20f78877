//! TLS for the admin's and the executor's listeners.
//!
//! [`TlsServer`] holds the certificate and key read from two PEM files and
//! serves whichever was read last: [`TlsServer::watch`] reads them again on
//! SIGHUP or when either file changes (checked each second), and a pair
//! that does not load (half-written, a key that does not match) leaves the
//! previous one serving. Connections already open keep their session, so a
//! rotation drops no run.
//!
//! [`TlsListener`] is an axum listener: a task accepts TCP connections and
//! completes each handshake in a task of its own (at most
//! [`MAX_HANDSHAKES`] at once, each within [`HANDSHAKE_TIMEOUT`]), so a
//! slow or silent client never holds up the next one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;

use crate::{TlsError, client::read_certificates, provider};

/// Handshakes in progress at once; more connections wait in the kernel's
/// backlog.
pub const MAX_HANDSHAKES: usize = 256;

/// How long a client has to complete its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often [`TlsServer::watch`] looks at the files.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// Where a listener's certificate chain and private key are kept (PEM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIdentity {
    /// The certificate, then any intermediates.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// A listener's TLS: the current certificate, reloadable.
#[derive(Clone)]
pub struct TlsServer {
    acceptor: TlsAcceptor,
    current: Arc<CurrentCertificate>,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("identity", &self.current.identity)
            .finish_non_exhaustive()
    }
}

/// The certificate served now, and what the files looked like when it was
/// read.
#[derive(Debug)]
struct CurrentCertificate {
    identity: ServerIdentity,
    key: RwLock<Arc<CertifiedKey>>,
    /// The files' modification times and sizes when last tried.
    seen: Mutex<Option<FileStamp>>,
}

type FileStamp = [(SystemTime, u64); 2];

impl ResolvesServerCert for CurrentCertificate {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.key
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

impl TlsServer {
    /// Reads the certificate and key; an error names the file at fault.
    pub fn load(identity: ServerIdentity) -> Result<TlsServer, TlsError> {
        let seen = stamp(&identity);
        let key = load_identity(&identity)?;
        let current = Arc::new(CurrentCertificate {
            identity,
            key: RwLock::new(Arc::new(key)),
            seen: Mutex::new(seen),
        });
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|source| TlsError::Identity {
                cert: current.identity.cert.clone(),
                key: current.identity.key.clone(),
                source,
            })?
            .with_no_client_auth()
            .with_cert_resolver(current.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsServer {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            current,
        })
    }

    /// Reads the files again; on an error the certificate served so far
    /// stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        *self
            .current
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stamp(&self.current.identity);
        let key = load_identity(&self.current.identity)?;
        *self
            .current
            .key
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(key);
        tracing::info!(cert = %self.current.identity.cert.display(), "TLS certificate reloaded");
        Ok(())
    }

    /// Reloads on SIGHUP and when the files change, until `stop`.
    pub async fn watch(self, stop: CancellationToken) {
        let mut hangups =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let hangup = async {
                match hangups.as_mut() {
                    Some(signal) => signal.recv().await,
                    None => std::future::pending().await,
                }
            };
            let forced = tokio::select! {
                () = stop.cancelled() => return,
                _ = hangup => true,
                _ = tick.tick() => false,
            };
            let changed = {
                let seen = self
                    .current
                    .seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *seen != stamp(&self.current.identity)
            };
            if (forced || changed)
                && let Err(error) = self.reload()
            {
                tracing::error!(%error, "TLS certificate not reloaded; the previous one stays");
            }
        }
    }

    /// Serves TLS on `tcp`'s connections.
    pub fn listener(&self, tcp: TcpListener) -> std::io::Result<TlsListener> {
        let local_addr = tcp.local_addr()?;
        let (sender, incoming) = mpsc::channel(64);
        let accepting = tokio::spawn(accept_loop(tcp, self.acceptor.clone(), sender));
        Ok(TlsListener {
            incoming,
            local_addr,
            accepting,
        })
    }
}

/// The files' modification times and sizes (`None` if either is missing).
fn stamp(identity: &ServerIdentity) -> Option<FileStamp> {
    let one = |path: &Path| {
        let metadata = std::fs::metadata(path).ok()?;
        Some((metadata.modified().ok()?, metadata.len()))
    };
    Some([one(&identity.cert)?, one(&identity.key)?])
}

fn load_identity(identity: &ServerIdentity) -> Result<CertifiedKey, TlsError> {
    let chain = read_certificates(&identity.cert)?;
    let key = PrivateKeyDer::from_pem_file(&identity.key).map_err(|error| match error {
        rustls_pki_types::pem::Error::Io(source) => TlsError::Read {
            path: identity.key.clone(),
            source,
        },
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::Empty {
            path: identity.key.clone(),
            what: "private key",
        },
        other => TlsError::Pem {
            path: identity.key.clone(),
            message: other.to_string(),
        },
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source| TlsError::Identity {
        cert: identity.cert.clone(),
        key: identity.key.clone(),
        source,
    })
}

/// Accepts TCP connections and hands each to a handshake task; the
/// handshakes end with this task (their set is dropped with it).
async fn accept_loop(
    mut tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshaken: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let room = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    let mut handshakes = tokio::task::JoinSet::new();
    loop {
        let Ok(permit) = room.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = tokio::select! {
            accepted = axum::serve::Listener::accept(&mut tcp) => accepted,
            () = handshaken.closed() => return,
        };
        // Reap finished handshakes so the set does not grow.
        while handshakes.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let handshaken = handshaken.clone();
        handshakes.spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = handshaken.send((stream, peer)).await;
                }
                Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// An axum listener serving TLS (see the module's doc).
#[derive(Debug)]
pub struct TlsListener {
    incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
    accepting: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(connection) => connection,
            // The accept loop ended (it does not, while this listener
            // lives): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local_addr)
    }
}

/// A listener serving plain HTTP, or TLS when a certificate is configured:
/// one serving path for both.
#[derive(Debug)]
pub enum Listener {
    Plain(TcpListener),
    Tls(TlsListener),
}

impl Listener {
    /// `tcp` as it is, or serving TLS with `tls`'s certificate.
    pub fn new(tcp: TcpListener, tls: Option<&TlsServer>) -> std::io::Result<Listener> {
        Ok(match tls {
            None => Listener::Plain(tcp),
            Some(tls) => Listener::Tls(tls.listener(tcp)?),
        })
    }
}

impl axum::serve::Listener for Listener {
    type Io = Either<TcpStream, TlsStream<TcpStream>>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self {
            Listener::Plain(tcp) => {
                let (stream, peer) = axum::serve::Listener::accept(tcp).await;
                (Either::Left(stream), peer)
            }
            Listener::Tls(tls) => {
                let (stream, peer) = axum::serve::Listener::accept(tls).await;
                (Either::Right(stream), peer)
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        match self {
            Listener::Plain(tcp) => tcp.local_addr(),
            Listener::Tls(tls) => axum::serve::Listener::local_addr(tls),
        }
    }
}
