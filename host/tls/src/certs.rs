//! A private CA and the certificates it signs, for a test cluster: what
//! `cronbox cert` and `cronbox up --tls` make. Keys are ECDSA P-256; a CA
//! is valid ten years, a certificate 397 days (the most browsers accept)
//! for the host names and addresses it is issued to, as a server and as a
//! client.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

use crate::TlsError;

/// A certificate and its private key, in PEM.
#[derive(Clone)]
pub struct PemPair {
    pub cert: String,
    pub key: String,
}

impl std::fmt::Debug for PemPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PemPair").finish_non_exhaustive()
    }
}

/// A new CA named `common_name`.
pub fn new_ca(common_name: &str) -> Result<PemPair, TlsError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(3650);
    let cert = params.self_signed(&key)?;
    Ok(PemPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A certificate for `hosts` (DNS names or IP addresses; the first is its
/// common name) signed by `ca`.
pub fn issue(ca: &PemPair, hosts: &[String]) -> Result<PemPair, TlsError> {
    let ca_key = KeyPair::from_pem(&ca.key)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key)?;
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(hosts.to_vec())?;
    if let Some(first) = hosts.first() {
        params.distinguished_name.push(DnType::CommonName, first);
    }
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let now = OffsetDateTime::now_utc();
    params.not_before = now - Duration::hours(1);
    params.not_after = now + Duration::days(397);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(PemPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

impl PemPair {
    /// Reads a pair written by [`PemPair::write`] (or by openssl).
    pub fn read(cert: &Path, key: &Path) -> Result<PemPair, TlsError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| TlsError::Read {
                path: path.to_owned(),
                source,
            })
        };
        Ok(PemPair {
            cert: read(cert)?,
            key: read(key)?,
        })
    }

    /// Writes the certificate, and the key readable by its owner only;
    /// each file is written beside itself and renamed into place, so a
    /// reader never sees half of one.
    pub fn write(&self, cert: &Path, key: &Path) -> Result<(), TlsError> {
        write_atomically(key, self.key.as_bytes(), 0o600)?;
        write_atomically(cert, self.cert.as_bytes(), 0o644)
    }
}

fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> Result<(), TlsError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |source| TlsError::Write {
        path: path.to_owned(),
        source,
    };
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    let _ = std::fs::remove_file(&partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&partial)
        .map_err(failed)?;
    file.write_all(contents).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&partial, path).map_err(failed)
}
