//! Every HTTP client cronbox makes is built here, so each trusts the same
//! roots: the system's, plus the private CA an operator names
//! (`--ca-file`/`CRONBOX_CA_FILE`) when its cluster's certificates are its
//! own. A certificate that chains to neither is refused.

use std::path::Path;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::{TlsError, install_provider};

/// A client builder trusting the system's roots and, with `ca_file`, the
/// certificates in that PEM file too.
pub fn client_builder(ca_file: Option<&Path>) -> Result<reqwest::ClientBuilder, TlsError> {
    let builder = builder();
    Ok(match ca_file {
        Some(path) => builder.tls_certs_merge(ca_certificates(path)?),
        None => builder,
    })
}

/// A client builder trusting the system's roots.
pub fn builder() -> reqwest::ClientBuilder {
    install_provider();
    reqwest::Client::builder()
}

/// A client with reqwest's defaults, trusting the system's roots.
pub fn client() -> reqwest::Client {
    install_provider();
    reqwest::Client::new()
}

/// The certificates of a PEM file (a CA, or a bundle of them).
pub fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, TlsError> {
    read_certificates(path)?
        .iter()
        .map(|der| reqwest::Certificate::from_der(der).map_err(TlsError::Client))
        .collect()
}

/// The certificates of a PEM file, in order; an error naming the file if
/// it cannot be read or holds none.
pub(crate) fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let certificates = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Pem {
            path: path.to_owned(),
            message: error.to_string(),
        })?;
    if certificates.is_empty() {
        return Err(TlsError::Empty {
            path: path.to_owned(),
            what: "certificate",
        });
    }
    Ok(certificates)
}
