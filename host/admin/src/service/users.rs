//! Users and logins: names and passwords checked, passwords hashed with
//! argon2id (its default cost: 19 MiB, two passes), sessions opened and
//! ended, and the throttle that slows password guessing.
//!
//! User names are one namespace across tenants (a login names only the
//! user): creating a name another tenant has answers 409, which tells a
//! tenant admin the name exists somewhere, not where nor anything of it.

use std::collections::HashMap;
use std::sync::Mutex;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use cronbox_api::{Role, TokenInfo, User, UserSpec};

use super::ServiceError;
use super::tenants::token_hash;
use crate::store::{Store, TokenOwner};

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
    if spec.role == Role::Operator && tenant != crate::model::DEFAULT_TENANT {
        return Err(ServiceError::InvalidUser {
            field: "role",
            message: format!(
                "only users of tenant {:?} may be operators",
                crate::model::DEFAULT_TENANT
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

/// The user `name`, if there is one (of any tenant: the caller's right to
/// see it is the API's to check).
pub async fn find(store: &Store, name: &str) -> Result<Option<User>, ServiceError> {
    Ok(store.user(name).await?.map(|stored| stored.user))
}

/// The users of `tenant` (`None`: every tenant's), by tenant and name.
pub async fn list(store: &Store, tenant: Option<&str>) -> Result<Vec<User>, ServiceError> {
    Ok(store.users(tenant).await?)
}

/// Removes user `name` with its sessions and tokens: how many of each
/// ended.
pub async fn remove(store: &Store, name: &str) -> Result<(i64, i64), ServiceError> {
    store
        .remove_user(name)
        .await?
        .ok_or_else(|| ServiceError::UnknownUser(name.to_owned()))
}

/// Ends the session whose cookie is `cookie`; whether there was one.
pub async fn end_session(store: &Store, cookie: &str) -> Result<bool, ServiceError> {
    Ok(store.end_session(&token_hash(cookie)).await?)
}

/// The tokens of `tenant` (of its user `user` only, when given); never
/// their values.
pub async fn tokens(
    store: &Store,
    tenant: &str,
    user: Option<&str>,
) -> Result<Vec<TokenInfo>, ServiceError> {
    Ok(store.tokens(tenant, user).await?)
}

/// Who token `id` of `tenant` belongs to (its role and its user's), if
/// the tenant has it.
pub async fn token_owner(
    store: &Store,
    tenant: &str,
    id: i64,
) -> Result<Option<TokenOwner>, ServiceError> {
    Ok(store.token_owner(tenant, id).await?)
}

/// Password checks (argon2: its 19 MiB and tens of milliseconds of a
/// core each) the admin runs at once, whoever asks: a flood of logins from
/// any number of addresses holds at most this much memory and CPU.
pub const PASSWORD_CHECKS_AT_ONCE: usize = 4;

/// How long a login for a user that exists waits for a check's turn
/// before it is refused (503 `logins_busy`, retried after a second).
pub const PASSWORD_CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

static PASSWORD_CHECKS: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(PASSWORD_CHECKS_AT_ONCE);

/// Of those, checks of a name no user has (against the decoy hash, so
/// that such a login takes as long as any): one at a time. Past it a
/// login for an invented name waits as long as the last decoy check took
/// and is refused without a check, so that names nobody has, which no
/// per-user allowance bounds, never keep a real user's login waiting.
static DECOY_CHECKS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// How long the last decoy check took, in microseconds.
static DECOY_CHECK_US: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(50_000);

/// The user whose name and password these are; [`ServiceError::LoginsBusy`]
/// when the admin checks as many passwords as it may and this one's turn
/// does not come within [`PASSWORD_CHECK_WAIT`].
pub async fn authenticate(
    store: &Store,
    name: &str,
    password: &str,
) -> Result<Option<User>, ServiceError> {
    use std::sync::atomic::Ordering;
    if password.len() > MAX_PASSWORD_BYTES {
        return Ok(None);
    }
    let password = password.to_owned();
    let Some(stored) = store.user(name).await? else {
        let Ok(_decoy_turn) = DECOY_CHECKS.try_acquire() else {
            let took = DECOY_CHECK_US.load(Ordering::Relaxed);
            tokio::time::sleep(std::time::Duration::from_micros(took)).await;
            return Ok(None);
        };
        // Never closed: the permit is in the `Ok`.
        let _turn = PASSWORD_CHECKS.acquire().await;
        let started = std::time::Instant::now();
        blocking(move || verify_password(&password, decoy_hash())).await;
        let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        DECOY_CHECK_US.store(took, Ordering::Relaxed);
        return Ok(None);
    };
    let turn = tokio::time::timeout(PASSWORD_CHECK_WAIT, PASSWORD_CHECKS.acquire()).await;
    let Ok(Ok(_turn)) = turn else {
        return Err(ServiceError::LoginsBusy(PASSWORD_CHECKS_AT_ONCE));
    };
    let hash = stored.password_hash.clone();
    let matches = blocking(move || verify_password(&password, &hash)).await;
    Ok(matches.then_some(stored.user))
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

/// The allowance of a throttle key (`addr:...`, `user:...`, or
/// `change:...` for the current password of a password change).
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
/// until its window ends. An attempt is reserved before its password is
/// checked and counts against the allowance while it is checked, so a
/// burst of concurrent guesses gets no more checks than one guess after
/// another. Kept in this admin's memory (each admin of a cluster counts
/// its own).
#[derive(Debug, Default)]
pub struct LoginThrottle {
    windows: Mutex<HashMap<String, Window>>,
}

/// One key's count in its window.
#[derive(Debug, Clone, Copy)]
struct Window {
    /// Failed attempts since `start_ms`.
    failed: u32,
    /// Attempts reserved and not yet decided.
    pending: u32,
    start_ms: i64,
}

impl Window {
    fn new(now_ms: i64) -> Window {
        Window {
            failed: 0,
            pending: 0,
            start_ms: now_ms,
        }
    }

    fn ended(&self, now_ms: i64) -> bool {
        now_ms >= self.start_ms + THROTTLE_WINDOW_MS
    }

    /// Starts a new window at `now_ms` once this one has ended; attempts
    /// under way stay counted.
    fn roll(&mut self, now_ms: i64) {
        if self.ended(now_ms) {
            *self = Window {
                pending: self.pending,
                ..Window::new(now_ms)
            };
        }
    }
}

impl LoginThrottle {
    /// Reserves an attempt against each of `keys`, or `Err(seconds to
    /// wait)` when any of them has no allowance left (failed and pending
    /// attempts together). The attempt ends as failed unless told it
    /// succeeded (an attempt abandoned half-way counts as failed).
    pub fn attempt(&self, keys: Vec<String>, now_ms: i64) -> Result<Attempt<'_>, u64> {
        self.reserve(&keys, now_ms)?;
        Ok(Attempt {
            throttle: self,
            keys,
            now_ms,
            decided: false,
        })
    }

    fn reserve(&self, keys: &[String], now_ms: i64) -> Result<(), u64> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let mut wait_ms = None::<i64>;
        for key in keys {
            let Some(window) = windows.get_mut(key) else {
                continue;
            };
            window.roll(now_ms);
            let allowed = allowance(key);
            let wait = if window.failed >= allowed {
                window.start_ms + THROTTLE_WINDOW_MS - now_ms
            } else if window.failed + window.pending >= allowed {
                // Attempts under way may yet fail: ask again in a moment.
                1_000
            } else {
                continue;
            };
            wait_ms = Some(wait_ms.map_or(wait, |other| other.max(wait)));
        }
        if let Some(ms) = wait_ms {
            return Err((ms as u64).div_ceil(1000).max(1));
        }
        Self::make_room(&mut windows, keys.len(), now_ms);
        for key in keys {
            windows
                .entry(key.clone())
                .or_insert_with(|| Window::new(now_ms))
                .pending += 1;
        }
        Ok(())
    }

    /// Past [`MAX_TRACKED`] keys, drops the ended windows with nothing
    /// pending, then the oldest.
    fn make_room(windows: &mut HashMap<String, Window>, adding: usize, now_ms: i64) {
        if windows.len() + adding <= MAX_TRACKED {
            return;
        }
        windows.retain(|_, window| window.pending > 0 || !window.ended(now_ms));
        while windows.len() + adding > MAX_TRACKED {
            let Some(oldest) = windows
                .iter()
                .min_by_key(|(_, window)| window.start_ms)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            windows.remove(&oldest);
        }
    }

    /// Ends a reservation of `keys` as a failed login: counted against
    /// each.
    fn failed(&self, keys: &[String], now_ms: i64) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            let window = windows
                .entry(key.clone())
                .or_insert_with(|| Window::new(now_ms));
            window.pending = window.pending.saturating_sub(1);
            window.roll(now_ms);
            window.failed += 1;
        }
    }

    /// Ends a reservation of `keys` as a successful login: the failures of
    /// the user names among them are forgotten. An address keeps its
    /// count: logging in to one's own account must not reset the guessing
    /// at others'.
    fn succeeded(&self, keys: &[String]) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            if let Some(window) = windows.get_mut(key) {
                window.pending = window.pending.saturating_sub(1);
                if key.starts_with("user:") {
                    window.failed = 0;
                }
            }
        }
    }
}

/// A login attempt reserved with [`LoginThrottle::attempt`].
#[derive(Debug)]
pub struct Attempt<'t> {
    throttle: &'t LoginThrottle,
    keys: Vec<String>,
    now_ms: i64,
    decided: bool,
}

impl Attempt<'_> {
    /// The password matched.
    pub fn succeeded(mut self) {
        self.decided = true;
        self.throttle.succeeded(&self.keys);
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.decided {
            self.throttle.failed(&self.keys, self.now_ms);
        }
    }
}

/// The user of live session `cookie` now and the session's CSRF token;
/// none: no such session, or it ended.
pub async fn session_of(
    store: &Store,
    cookie: &str,
    now_ms: i64,
) -> Result<Option<(User, String)>, ServiceError> {
    Ok(store.session(&token_hash(cookie), now_ms).await?)
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
        let keys = ["user:ada".to_owned(), "addr:127.0.0.9".to_owned()];
        for attempt in 0..FAILED_LOGINS_ALLOWED {
            assert_eq!(throttle.reserve(&keys, 1_000), Ok(()), "attempt {attempt}");
            throttle.failed(&keys, 1_000);
        }
        assert_eq!(throttle.reserve(&keys, 1_000), Err(300));
        // Another user from the same address is not held back yet.
        let bob = ["user:bob".to_owned(), "addr:127.0.0.9".to_owned()];
        assert_eq!(throttle.reserve(&bob, 1_000), Ok(()));
        throttle.succeeded(&bob);
        for _ in FAILED_LOGINS_ALLOWED..FAILED_LOGINS_ALLOWED_PER_ADDRESS {
            throttle.reserve(&keys[1..], 1_000).unwrap();
            throttle.failed(&keys[1..], 1_000);
        }
        assert_eq!(throttle.reserve(&bob, 1_000), Err(300), "the address is");
        assert_eq!(
            throttle.reserve(&keys, 1_000 + THROTTLE_WINDOW_MS),
            Ok(()),
            "the window ended"
        );

        // A success forgives the name's failures, not the address's.
        let throttle = LoginThrottle::default();
        let carol = ["user:carol".to_owned(), "addr:127.0.0.9".to_owned()];
        for _ in 0..3 {
            drop(throttle.attempt(carol.to_vec(), 1_000).unwrap());
        }
        throttle.attempt(carol.to_vec(), 1_000).unwrap().succeeded();
        let windows = throttle.windows.lock().unwrap();
        assert_eq!(windows["user:carol"].failed, 0);
        assert_eq!(
            windows["addr:127.0.0.9"].failed, 3,
            "the address keeps its count"
        );
        assert!(windows.values().all(|window| window.pending == 0));
    }

    #[test]
    fn attempts_under_way_count_against_the_allowance() {
        let throttle = LoginThrottle::default();
        let keys = ["user:ada".to_owned()];
        // A burst: every attempt reserved before any is decided.
        let attempts: Vec<Attempt<'_>> = (0..80)
            .filter_map(|_| throttle.attempt(keys.to_vec(), 1_000).ok())
            .collect();
        assert_eq!(attempts.len(), FAILED_LOGINS_ALLOWED as usize);
        assert_eq!(
            throttle.reserve(&keys, 1_000),
            Err(1),
            "ask again once those are decided"
        );
        drop(attempts); // each failed
        assert_eq!(throttle.reserve(&keys, 1_000), Err(300));
    }

    #[test]
    fn the_throttle_stays_bounded() {
        let throttle = LoginThrottle::default();
        for n in 0..(MAX_TRACKED + 100) {
            let keys = [format!("user:{n}")];
            throttle.reserve(&keys, n as i64).unwrap();
            throttle.failed(&keys, n as i64);
        }
        assert!(throttle.windows.lock().unwrap().len() <= MAX_TRACKED);
    }
}
