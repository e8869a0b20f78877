//! TLS on cronbox's own hops, with rustls and the `ring` provider.
//!
//! - [`server`] — a listener for axum that completes TLS handshakes off
//!   the accept loop, and a certificate that reloads on SIGHUP or when its
//!   files change, without dropping a connection;
//! - [`client`] — every HTTP client cronbox makes (admin → executor,
//!   executor → admin, CLI → admin, alarms) is built here: the system's
//!   roots plus an optional private CA file;
//! - [`certs`] — a private CA and the certificates it signs, for a test
//!   cluster (`cronbox cert`, `cronbox up --tls`).
//!
//! One crypto provider for the process: [`install_provider`] makes `ring`
//! the process default (idempotent), which reqwest needs before it builds
//! any client (its TLS is compiled without a provider of its own).

pub mod certs;
pub mod client;
pub mod server;

use std::path::PathBuf;
use std::sync::Arc;

pub use client::{client, client_builder};
pub use server::{Listener, ServerIdentity, TlsListener, TlsServer};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate, key or CA file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file holds no PEM block of the kind expected.
    #[error("{path} holds no {what} in PEM form")]
    Empty { path: PathBuf, what: &'static str },
    /// A PEM file is malformed.
    #[error("{path} is not valid PEM: {message}")]
    Pem { path: PathBuf, message: String },
    /// rustls refused the certificate or key.
    #[error("the certificate {cert} or its key {key} is unusable: {source}")]
    Identity {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
    /// A certificate could not be made.
    #[error("cannot make a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A certificate or key could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The HTTP client could not be built.
    #[error("cannot build an HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// The crypto provider of every TLS connection cronbox makes or accepts.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes `ring` the process's default crypto provider, once; later calls
/// (and a default someone else installed first) are left as they are.
pub fn install_provider() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Lost a race with another installer: theirs stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}
