//! The sha256 digest that names a module's content: how modules are
//! stored and fetched, run commands name what to run, and executors and
//! the runtime cache compiled code. Parsed once (64 hex digits, kept
//! lowercase); carried as the bare text on the wire.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The sha256 of a module's bytes, as 64 lowercase hex digits: how content
/// is stored, shared between tenants' uploads and cached on executors.
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(transparent))]
#[serde(transparent)]
pub struct Digest(String);

/// Text that is not a sha256 in hex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotADigest(pub String);

impl std::fmt::Display for NotADigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a sha256 in hex (64 characters 0-9a-f)",
            self.0
        )
    }
}

impl std::error::Error for NotADigest {}

impl Digest {
    /// A digest of bytes just hashed (trusted to be 32 bytes).
    pub fn from_sha256(bytes: &[u8]) -> Digest {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = String::with_capacity(bytes.len() * 2);
        for byte in bytes {
            text.push(char::from(DIGITS[usize::from(byte >> 4)]));
            text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
        Digest(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 digits, as people show a digest.
    pub fn short(&self) -> &str {
        self.0.get(..12).unwrap_or(&self.0)
    }
}

impl FromStr for Digest {
    type Err = NotADigest;

    /// Accepts 64 hex digits in either case (kept lowercase).
    fn from_str(text: &str) -> Result<Self, NotADigest> {
        if text.len() == 64 && text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
            Ok(Digest(text.to_ascii_lowercase()))
        } else {
            Err(NotADigest(text.to_owned()))
        }
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Digest {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Digest {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for Digest {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl PartialEq<&str> for Digest {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_64_hex_digits_kept_lowercase() {
        let upper = "AB".repeat(32);
        let digest: Digest = upper.parse().unwrap();
        assert_eq!(digest.as_str(), "ab".repeat(32));
        assert_eq!(digest.short(), "abababababab");
        assert_eq!(Digest::from_sha256(&[0xab; 32]), digest);
        for bad in ["", "ab", &"g".repeat(64), &"a".repeat(65)] {
            let error = bad.parse::<Digest>().unwrap_err();
            assert!(error.to_string().contains("not a sha256"), "{error}");
        }
    }
}
