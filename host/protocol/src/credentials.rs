//! Enrolled executors' credentials. An enrolled token (`cbe_…`) is what
//! its executor presents to admins; admins keep only its sha256
//! ([`token_hash`]) and present to that executor a proof derived from the
//! hash ([`admin_proof`]), which the executor derives the same way from
//! its token: a stolen executor address cannot be sent runs without it.

use sha2::{Digest as _, Sha256};

/// The prefix of an enrolled executor's token.
pub const ENROLLED_PREFIX: &str = "cbe_";

/// Whether `token` is an enrolled executor's (else the shared token).
pub fn is_enrolled(token: &str) -> bool {
    token.starts_with(ENROLLED_PREFIX)
}

/// A token's sha256, hex: what the admin stores of it.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// What admins present to the executor whose token hashes to `hash`.
pub fn admin_proof(hash: &str) -> String {
    let mut proof = Sha256::new();
    proof.update(b"cronbox admin proof\n");
    proof.update(hash.as_bytes());
    format!("cba_{}", hex::encode(proof.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proof_follows_the_token_and_is_not_it() {
        let hash = token_hash("cbe_one");
        assert_eq!(admin_proof(&hash), admin_proof(&token_hash("cbe_one")));
        assert_ne!(admin_proof(&hash), admin_proof(&token_hash("cbe_two")));
        assert!(!admin_proof(&hash).contains(&hash));
        assert!(is_enrolled("cbe_one") && !is_enrolled("exec-token"));
    }
}
