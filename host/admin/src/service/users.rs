//! Users and logins: names and passwords checked, passwords hashed with
//! argon2id (its default cost: 19 MiB, two passes), sessions opened and
//! ended, and the throttle that slows password guessing.

use std::collections::HashMap;
use std::sync::Mutex;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use cronbox_api::{Role, User, UserSpec};

use super::ServiceError;
use super::tenants::token_hash;
use crate::store::Store;

/// Shortest password, bytes.
pub const MIN_PASSWORD_BYTES: usize = 12;
/// Longest password, bytes (argon2 reads all of it).
pub const MAX_PASSWORD_BYTES: usize = 1024;
/// How long a session lasts after its login.
pub const SESSION_MS: i64 = 12 * 3_600_000;

/// Refuses a user name that is not 1 to 63 of `a-z 0-9 . _ -`.
pub fn check_name(name: &str) -> Result<(), ServiceError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b));
    if valid {
        Ok(())
    } else {
        Err(ServiceError::InvalidUser {
            field: "name",
            message: format!(
                "user name {name:?} must be 1 to 63 lowercase letters, digits, '.', '_' or '-'"
            ),
        })
    }
}

/// Refuses a password shorter than [`MIN_PASSWORD_BYTES`] or longer than
/// [`MAX_PASSWORD_BYTES`].
pub fn check_password(password: &str) -> Result<(), ServiceError> {
    let length = password.len();
    if (MIN_PASSWORD_BYTES..=MAX_PASSWORD_BYTES).contains(&length) {
        Ok(())
    } else {
        Err(ServiceError::InvalidUser {
            field: "password",
            message: format!(
                "a password must be {MIN_PASSWORD_BYTES} to {MAX_PASSWORD_BYTES} bytes, this one \
                 is {length}"
            ),
        })
    }
}

/// A password as an argon2id PHC string, with a random salt.
pub fn hash_password(password: &str) -> String {
    let salt =
        SaltString::encode_b64(&rand::random::<[u8; 16]>()).expect("16 bytes are a valid salt");
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .expect("argon2 hashes any password within MAX_PASSWORD_BYTES")
}

/// Whether `password` matches the stored PHC string.
pub fn verify_password(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// A hash no password matches, verified when the user does not exist so
/// that a login takes as long either way.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password(&hex::encode(rand::random::<[u8; 24]>())))
}

/// Creates a user of `tenant` from `spec` (the caller's right to was
/// checked by the API).
pub async fn create(
    store: &Store,
    spec: &UserSpec,
    tenant: &str,
    now_ms: i64,
) -> Result<User, ServiceError> {
    check_name(&spec.name)?;
    check_password(&spec.password)?;
    if spec.role == Role::Operator && tenant != crate::api::DEFAULT_TENANT {
        return Err(ServiceError::InvalidUser {
            field: "role",
            message: format!(
                "only users of tenant {:?} may be operators",
                crate::api::DEFAULT_TENANT
            ),
        });
    }
    let password = spec.password.clone();
    let hash = blocking(move || hash_password(&password)).await;
    let user = User {
        name: spec.name.clone(),
        tenant: tenant.to_owned(),
        role: spec.role,
        created_at_ms: now_ms,
    };
    if !store.create_user(&user, &hash).await? {
        return Err(ServiceError::UserExists(spec.name.clone()));
    }
    Ok(user)
}

/// Replaces a user's password (ending its sessions); the sessions ended.
pub async fn set_password(store: &Store, name: &str, password: &str) -> Result<i64, ServiceError> {
    check_password(password)?;
    let password = password.to_owned();
    let hash = blocking(move || hash_password(&password)).await;
    store
        .set_password(name, &hash)
        .await?
        .ok_or_else(|| ServiceError::UnknownUser(name.to_owned()))
}

/// The user whose name and password these are.
pub async fn authenticate(
    store: &Store,
    name: &str,
    password: &str,
) -> Result<Option<User>, ServiceError> {
    if password.len() > MAX_PASSWORD_BYTES {
        return Ok(None);
    }
    let stored = store.user(name).await?;
    let hash = stored
        .as_ref()
        .map(|stored| stored.password_hash.clone())
        .unwrap_or_else(|| decoy_hash().to_owned());
    let password = password.to_owned();
    let matches = blocking(move || verify_password(&password, &hash)).await;
    Ok(stored.filter(|_| matches).map(|stored| stored.user))
}

/// A new session of `user`: (the cookie's value, the CSRF token).
pub async fn open_session(
    store: &Store,
    user: &str,
    now_ms: i64,
) -> Result<(String, String), ServiceError> {
    let cookie = hex::encode(rand::random::<[u8; 32]>());
    let csrf = hex::encode(rand::random::<[u8; 24]>());
    store
        .open_session(
            &token_hash(&cookie),
            user,
            &csrf,
            now_ms,
            now_ms + SESSION_MS,
        )
        .await?;
    Ok((cookie, csrf))
}

/// Argon2 takes tens of milliseconds of CPU: off the async workers.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(error) => std::panic::resume_unwind(error.into_panic()),
    }
}

/// Failed logins allowed per user name within [`THROTTLE_WINDOW_MS`].
pub const FAILED_LOGINS_ALLOWED: u32 = 5;
/// Failed logins allowed per client address within [`THROTTLE_WINDOW_MS`]:
/// more than per name, since many people may share an address (a proxy,
/// an office) and one of them should not lock the others out for long.
pub const FAILED_LOGINS_ALLOWED_PER_ADDRESS: u32 = 50;

/// The allowance of a throttle key (`addr:...` or `user:...`).
fn allowance(key: &str) -> u32 {
    if key.starts_with("addr:") {
        FAILED_LOGINS_ALLOWED_PER_ADDRESS
    } else {
        FAILED_LOGINS_ALLOWED
    }
}
/// The window over which failed logins are counted.
pub const THROTTLE_WINDOW_MS: i64 = 5 * 60_000;
/// Most keys tracked: past it, expired entries are dropped, and if none
/// has expired the oldest window goes.
const MAX_TRACKED: usize = 10_000;

/// Failed logins by key (`user:NAME`, `addr:IP`), in fixed windows: past
/// its allowance ([`FAILED_LOGINS_ALLOWED`] for a name,
/// [`FAILED_LOGINS_ALLOWED_PER_ADDRESS`] for an address) a key is refused
/// until its window ends. Kept
/// in this admin's memory (each admin of a cluster counts its own).
#[derive(Debug, Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<String, (u32, i64)>>,
}

impl LoginThrottle {
    /// `Err(seconds to wait)` when any of `keys` is over its allowance.
    pub fn check(&self, keys: &[String], now_ms: i64) -> Result<(), u64> {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let wait = keys
            .iter()
            .filter_map(|key| Some((allowance(key), failures.get(key)?)))
            .filter(|(allowed, (count, start))| {
                count >= allowed && now_ms < start + THROTTLE_WINDOW_MS
            })
            .map(|(_, failure)| failure)
            .map(|(_, start)| start + THROTTLE_WINDOW_MS - now_ms)
            .max();
        match wait {
            Some(ms) => Err((ms as u64).div_ceil(1000).max(1)),
            None => Ok(()),
        }
    }

    /// Counts a failed login against each of `keys`.
    pub fn failed(&self, keys: &[String], now_ms: i64) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() + keys.len() > MAX_TRACKED {
            failures.retain(|_, (_, start)| now_ms < *start + THROTTLE_WINDOW_MS);
            while failures.len() + keys.len() > MAX_TRACKED {
                let Some(oldest) = failures
                    .iter()
                    .min_by_key(|(_, (_, start))| *start)
                    .map(|(key, _)| key.clone())
                else {
                    break;
                };
                failures.remove(&oldest);
            }
        }
        for key in keys {
            let entry = failures.entry(key.clone()).or_insert((0, now_ms));
            if now_ms >= entry.1 + THROTTLE_WINDOW_MS {
                *entry = (0, now_ms);
            }
            entry.0 += 1;
        }
    }

    /// Forgets the failures of the user names among `keys` after a
    /// successful login. An address keeps its count: logging in to one's
    /// own account must not reset the guessing at others'.
    pub fn succeeded(&self, keys: &[String]) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys.iter().filter(|key| key.starts_with("user:")) {
            failures.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let hash = hash_password("correct horse battery");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse battery!", &hash));
        assert!(!verify_password("correct horse battery", "not a hash"));
        assert_ne!(hash, hash_password("correct horse battery"), "salted");
    }

    #[test]
    fn names_and_passwords_are_checked() {
        assert!(check_name("ada.l-ovelace_1").is_ok());
        for bad in ["", "Ada", "a b", "é", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_password("short").is_err());
        assert!(check_password(&"p".repeat(MIN_PASSWORD_BYTES)).is_ok());
        assert!(check_password(&"p".repeat(MAX_PASSWORD_BYTES + 1)).is_err());
    }

    #[test]
    fn the_throttle_refuses_after_the_allowance_until_the_window_ends() {
        let throttle = LoginThrottle::default();
        let keys = ["user:ada".to_owned(), "addr:10.0.0.1".to_owned()];
        for attempt in 0..FAILED_LOGINS_ALLOWED {
            assert_eq!(throttle.check(&keys, 1_000), Ok(()), "attempt {attempt}");
            throttle.failed(&keys, 1_000);
        }
        assert_eq!(throttle.check(&keys, 1_000), Err(300));
        // Another user from the same address is not held back yet.
        let bob = ["user:bob".to_owned(), "addr:10.0.0.1".to_owned()];
        assert_eq!(throttle.check(&bob, 1_000), Ok(()));
        for _ in FAILED_LOGINS_ALLOWED..FAILED_LOGINS_ALLOWED_PER_ADDRESS {
            throttle.failed(&["addr:10.0.0.1".to_owned()], 1_000);
        }
        assert_eq!(throttle.check(&bob, 1_000), Err(300), "the address is");
        assert_eq!(
            throttle.check(&keys, 1_000 + THROTTLE_WINDOW_MS),
            Ok(()),
            "the window ended"
        );
        throttle.succeeded(&keys);
        assert_eq!(throttle.check(&keys[..1], 1_000), Ok(()));
        assert_eq!(
            throttle.check(&keys, 1_000),
            Err(300),
            "the address keeps its count"
        );
    }

    #[test]
    fn the_throttle_stays_bounded() {
        let throttle = LoginThrottle::default();
        for n in 0..(MAX_TRACKED + 100) {
            throttle.failed(&[format!("user:{n}")], n as i64);
        }
        assert!(throttle.failures.lock().unwrap().len() <= MAX_TRACKED);
    }
}
