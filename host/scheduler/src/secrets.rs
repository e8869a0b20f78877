//! Tenants' secrets, sealed at rest.
//!
//! A secret's value is encrypted with XChaCha20-Poly1305 under the key the
//! operator gives the admin (`--secrets-key-file`; `cronbox up` makes one
//! in its data directory), with a fresh random 192-bit nonce per write and
//! the tenant and name as associated data: a database file alone reveals
//! no value, and a sealed value moved to another row or tenant no longer
//! opens. Values are opened only to build the dispatch of a run of a job
//! that references them; the API never answers one.

use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// Longest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 16 << 10;
/// Most secrets a job may reference.
pub const MAX_JOB_SECRETS: usize = 32;

/// Why secrets cannot be used or a sealed value cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read the secrets key {path}: {reason}")]
    KeyUnreadable { path: String, reason: String },
    #[error(
        "the secrets key {path} must hold 64 hexadecimal digits (32 bytes); make one with \
         `openssl rand -hex 32`"
    )]
    KeyMalformed { path: String },
    #[error("cannot write the secrets key {path}: {reason}")]
    KeyUnwritable { path: String, reason: String },
    #[error(
        "the stored value of secret {name:?} does not open under this admin's key (another key, \
         or a damaged row)"
    )]
    Unreadable { name: String },
}

/// The admin's key for sealing secrets.
pub struct SecretBox {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

pub use cronbox_store::Sealed;

impl SecretBox {
    /// A box under the 32-byte `key`.
    pub fn new(key: &[u8; 32]) -> SecretBox {
        SecretBox {
            cipher: XChaCha20Poly1305::new(key.into()),
        }
    }

    /// Reads the key from `path`: 64 hex digits (surrounding whitespace
    /// ignored).
    pub fn from_key_file(path: &Path) -> Result<SecretBox, SecretError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| SecretError::KeyUnreadable {
            path: shown.clone(),
            reason: error.to_string(),
        })?;
        let bytes = hex::decode(text.trim()).map_err(|_| SecretError::KeyMalformed {
            path: shown.clone(),
        })?;
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| SecretError::KeyMalformed { path: shown })?;
        Ok(SecretBox::new(&key))
    }

    /// Reads the key at `path`, first writing a new random one there
    /// (mode 0600) if there is none.
    pub fn generate_key_file(path: &Path) -> Result<SecretBox, SecretError> {
        if !path.exists() {
            let unwritable = |error: std::io::Error| SecretError::KeyUnwritable {
                path: path.display().to_string(),
                reason: error.to_string(),
            };
            let key: [u8; 32] = rand::random();
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(path).map_err(unwritable)?;
            std::io::Write::write_all(&mut file, format!("{}\n", hex::encode(key)).as_bytes())
                .map_err(unwritable)?;
        }
        SecretBox::from_key_file(path)
    }

    /// Seals `value` as secret `name` of `tenant`.
    pub fn seal(&self, tenant: &str, name: &str, value: &str) -> Sealed {
        let nonce_bytes: [u8; 24] = rand::random();
        let nonce = XNonce::from(nonce_bytes);
        let aad = associated_data(tenant, name);
        let ciphertext = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: value.as_bytes(),
                    aad: &aad,
                },
            )
            // Encryption fails only past 256 GiB of plaintext.
            .unwrap_or_default();
        Sealed {
            nonce: hex::encode(nonce_bytes),
            ciphertext: hex::encode(ciphertext),
        }
    }

    /// Opens secret `name` of `tenant`.
    pub fn open(&self, tenant: &str, name: &str, sealed: &Sealed) -> Result<String, SecretError> {
        let unreadable = || SecretError::Unreadable {
            name: name.to_owned(),
        };
        let nonce: [u8; 24] = hex::decode(&sealed.nonce)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .ok_or_else(unreadable)?;
        let ciphertext = hex::decode(&sealed.ciphertext).map_err(|_| unreadable())?;
        let aad = associated_data(tenant, name);
        let plain = self
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: &ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| unreadable())?;
        String::from_utf8(plain).map_err(|_| unreadable())
    }
}

/// Binds a sealed value to its tenant and name (lengths first, so that no
/// two pairs give the same bytes).
fn associated_data(tenant: &str, name: &str) -> Vec<u8> {
    format!(
        "cronbox-secret:{}:{tenant}:{}:{name}",
        tenant.len(),
        name.len()
    )
    .into_bytes()
}

/// Whether `name` may name a secret: 1 to 64 of `A-Z a-z 0-9 _ - .`.
pub fn is_secret_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_as_itself_under_its_key() {
        let keys = SecretBox::new(&[7; 32]);
        let sealed = keys.seal("acme", "TOKEN", "hunter2");
        assert!(!sealed.ciphertext.contains(&hex::encode("hunter2")));
        assert_eq!(keys.open("acme", "TOKEN", &sealed).unwrap(), "hunter2");
        // Another nonce each time.
        assert_ne!(keys.seal("acme", "TOKEN", "hunter2"), sealed);
        // Moved to another tenant or name, or opened under another key.
        assert!(keys.open("other", "TOKEN", &sealed).is_err());
        assert!(keys.open("acme", "TOKEN2", &sealed).is_err());
        assert!(
            SecretBox::new(&[8; 32])
                .open("acme", "TOKEN", &sealed)
                .is_err()
        );
        let mut damaged = sealed.clone();
        let last = damaged.ciphertext.pop().unwrap();
        damaged.ciphertext.push(if last == '0' { '1' } else { '0' });
        assert!(keys.open("acme", "TOKEN", &damaged).is_err());
    }

    #[test]
    fn key_files_are_made_once_and_must_be_well_formed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.key");
        let first = SecretBox::generate_key_file(&path).unwrap();
        let sealed = first.seal("t", "n", "v");
        let again = SecretBox::generate_key_file(&path).unwrap();
        assert_eq!(again.open("t", "n", &sealed).unwrap(), "v");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not hex").unwrap();
        let error = SecretBox::from_key_file(&path).unwrap_err();
        assert!(
            error.to_string().contains("64 hexadecimal digits"),
            "{error}"
        );
    }
}
