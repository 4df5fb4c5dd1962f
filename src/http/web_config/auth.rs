//! Request admission from the web config: `basic_auth_users` (bcrypt) and
//! `rate_limit` (a token bucket), as the exporter-toolkit applies them.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// What a basic-auth check decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A configured user with the right password.
    Allowed,
    /// No, wrong or unknown credentials.
    Denied,
    /// Too many password checks are queued: try again later.
    Busy,
}

/// A bcrypt hash of a password nobody has, checked for unknown users so they
/// take as long to refuse as known ones (the toolkit's own, cost 10).
const UNKNOWN_USER_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

/// Outcomes remembered at most; the memory is cleared when full.
const REMEMBERED: usize = 1024;

/// Password checks waiting for the one bcrypt slot beyond which requests
/// are turned away with 503 rather than held open.
const MAX_QUEUED_CHECKS: usize = 32;

/// Checks `Authorization: Basic` headers against bcrypt hashes. bcrypt is
/// deliberately slow, so checks run one at a time off the async threads, and
/// each outcome is remembered under a keyed hash of user, stored hash and
/// password (never the password itself): repeated scrapes, and repeated
/// wrong guesses, cost one check.
#[derive(Debug)]
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    remembered: Mutex<HashMap<u64, bool>>,
    hasher: RandomState,
    slot: Semaphore,
    queued: AtomicUsize,
}

impl BasicAuth {
    pub(super) fn new(users: BTreeMap<String, String>) -> Self {
        BasicAuth {
            users,
            remembered: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
            slot: Semaphore::new(1),
            queued: AtomicUsize::new(0),
        }
    }

    /// Users configured.
    pub fn users(&self) -> usize {
        self.users.len()
    }

    fn key(&self, user: &str, hash: &str, password: &str) -> u64 {
        self.hasher.hash_one((user, hash, password))
    }

    /// Whether the `Authorization` header value carries a configured user and
    /// its password.
    pub async fn check(&self, header: Option<&str>) -> Admission {
        let Some((user, password)) = header.and_then(decode_basic) else {
            return Admission::Denied;
        };
        let known = self.users.get(&user);
        let hash = known.map_or(UNKNOWN_USER_HASH, String::as_str).to_string();
        let key = self.key(&user, &hash, &password);
        let remembered = self
            .remembered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .copied();
        let ok = match remembered {
            Some(ok) => ok,
            None => {
                if self.queued.fetch_add(1, Ordering::AcqRel) >= MAX_QUEUED_CHECKS {
                    self.queued.fetch_sub(1, Ordering::AcqRel);
                    return Admission::Busy;
                }
                let permit = self.slot.acquire().await;
                self.queued.fetch_sub(1, Ordering::AcqRel);
                let Ok(_permit) = permit else {
                    return Admission::Busy;
                };
                let ok = tokio::task::spawn_blocking(move || {
                    bcrypt::verify(password, &hash).unwrap_or(false)
                })
                .await
                .unwrap_or(false);
                let mut memory = self.remembered.lock().unwrap_or_else(|p| p.into_inner());
                if memory.len() >= REMEMBERED {
                    memory.clear();
                }
                memory.insert(key, ok);
                ok
            }
        };
        if ok && known.is_some() {
            Admission::Allowed
        } else {
            Admission::Denied
        }
    }
}

pub(super) fn decode_basic(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// `rate_limit`: a token bucket refilled with one request per `interval`,
/// holding at most `burst`, shared by every client (as in the toolkit).
#[derive(Debug)]
pub struct RateLimit {
    interval: Duration,
    burst: f64,
    bucket: Mutex<(f64, Instant)>,
}

impl RateLimit {
    pub(super) fn new(interval: Duration, burst: u32) -> Arc<Self> {
        Arc::new(RateLimit {
            interval,
            burst: f64::from(burst),
            bucket: Mutex::new((f64::from(burst), Instant::now())),
        })
    }

    /// Takes a token if one is left.
    pub fn allow(&self) -> bool {
        let now = Instant::now();
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let refill = now.duration_since(b.1).as_secs_f64() / self.interval.as_secs_f64();
        b.0 = (b.0 + refill).min(self.burst);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    #[test]
    fn decodes_basic_headers() {
        assert_eq!(
            decode_basic(&basic("alice:s3cret:with:colons")),
            Some(("alice".into(), "s3cret:with:colons".into()))
        );
        assert_eq!(decode_basic("Bearer abc"), None);
        assert_eq!(decode_basic("Basic !!!"), None);
    }

    #[tokio::test]
    async fn bcrypt_users_and_remembered_outcomes() {
        let hash = bcrypt::hash("pw", 4).unwrap();
        let auth = BasicAuth::new(BTreeMap::from([("u".to_string(), hash)]));
        assert_eq!(auth.check(Some(&basic("u:pw"))).await, Admission::Allowed);
        assert_eq!(auth.check(Some(&basic("u:pw"))).await, Admission::Allowed);
        assert_eq!(auth.check(Some(&basic("u:nope"))).await, Admission::Denied);
        // An unknown user is refused even with the unknown-user hash's password.
        assert_eq!(
            auth.check(Some(&basic("mallory:fakepassword"))).await,
            Admission::Denied
        );
        assert_eq!(auth.check(None).await, Admission::Denied);
        assert_eq!(auth.remembered.lock().unwrap().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limit_refills_one_token_per_interval() {
        let limit = RateLimit::new(Duration::from_secs(1), 2);
        assert!(limit.allow() && limit.allow());
        assert!(!limit.allow());
        tokio::time::advance(Duration::from_millis(1000)).await;
        assert!(limit.allow());
        assert!(!limit.allow());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(
            limit.allow() && limit.allow() && !limit.allow(),
            "burst caps the bucket"
        );
    }
}
