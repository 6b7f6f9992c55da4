//! Where shared state lives: key leases (one running task per idempotency
//! key).
//!
//! Why a trait? One process keeps its state in memory ([`MemoryStore`], the
//! default). Many worker processes hitting the same API need one view of it,
//! which a shared backend provides behind the same trait. A store only makes
//! each update atomic; what the update means is decided by the
//! [planner](crate::planner), so a second backend never copies the decision
//! table.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

/// Proof of holding the lease of a key, returned by [`Store::acquire`] and
/// given back to [`Store::release`]. A release with a stale token (the
/// lease expired and another task took it) changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(pub u64);

/// A store that could not answer; carries no key, URL or credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store unavailable: {message}")]
pub struct StoreError {
    message: String,
}

impl StoreError {
    /// An error with a message that must not contain secrets or URLs.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
        }
    }
}

/// Keyed state shared by the tasks of one middleware (or of many processes).
///
/// Implementations make each call atomic. `acquire` for a key whose lease is
/// held (and not expired) returns `Ok(None)`.
pub trait Store: Send + Sync + 'static {
    /// Takes the lease of `key` for at most `ttl` (the task's time to its
    /// deadline, so a lease whose owner vanished frees itself).
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LeaseToken>, StoreError>> + Send;

    /// Gives the lease back. Called from `Drop` (a finished, failed or
    /// cancelled task), so it must not block for long and cannot fail.
    fn release(&self, key: &str, token: LeaseToken);
}

#[derive(Debug)]
struct Lease {
    token: u64,
    expires: Instant,
}

/// The default, in-process store. Cheap to clone: clones share state, so a
/// clone kept by the caller observes the middleware's entries.
///
/// ```
/// use reqwest_backpressure::{MemoryStore, Policy, RetryAfterMiddleware};
///
/// let store = MemoryStore::new();
/// let middleware = RetryAfterMiddleware::with_store(Policy::default(), store.clone());
/// assert_eq!(store.len(), 0); // entries exist only while their task runs
/// # drop(middleware);
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<MemoryInner>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    leases: Mutex<HashMap<String, Lease>>,
    next_token: AtomicU64,
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<String, Lease>> {
        // A panic while holding the lock cannot leave a lease half-written
        // (every update is a single insert or remove), so a poisoned map is
        // still consistent.
        self.inner
            .leases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Number of keys whose lease is held (tasks running with a key).
    #[must_use]
    pub fn len(&self) -> usize {
        self.leases().len()
    }

    /// Whether no keyed task is running.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn acquire_now(&self, key: &str, ttl: Duration) -> Option<LeaseToken> {
        let now = Instant::now();
        let expires = now.checked_add(ttl).unwrap_or_else(|| far_future(now));
        let mut leases = self.leases();
        if let Some(held) = leases.get(key) {
            if held.expires > now {
                return None;
            }
        }
        let token = self.inner.next_token.fetch_add(1, Ordering::Relaxed);
        leases.insert(key.to_owned(), Lease { token, expires });
        Some(LeaseToken(token))
    }
}

/// About 30 years ahead: the latest instant we ever compute.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}

impl Store for MemoryStore {
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LeaseToken>, StoreError>> + Send {
        std::future::ready(Ok(self.acquire_now(key, ttl)))
    }

    fn release(&self, key: &str, token: LeaseToken) {
        let mut leases = self.leases();
        if leases.get(key).is_some_and(|l| l.token == token.0) {
            leases.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_lease_per_key_and_release_frees_it() {
        let store = MemoryStore::new();
        let a = store
            .acquire("k", Duration::from_secs(5))
            .await
            .ok()
            .flatten();
        assert!(a.is_some());
        assert_eq!(store.acquire("k", Duration::from_secs(5)).await, Ok(None));
        assert!(
            store
                .acquire("other", Duration::from_secs(5))
                .await
                .ok()
                .flatten()
                .is_some()
        );
        assert_eq!(store.len(), 2);
        // A stale token does not free someone else's lease.
        store.release("k", LeaseToken(u64::MAX));
        assert_eq!(store.len(), 2);
        store.release("k", a.expect("lease"));
        assert_eq!(store.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_lease_can_be_taken_over() {
        let store = MemoryStore::new();
        let first = store.acquire("k", Duration::from_secs(1)).await;
        assert!(first.ok().flatten().is_some());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(
            store
                .acquire("k", Duration::from_secs(1))
                .await
                .ok()
                .flatten()
                .is_some()
        );
        assert_eq!(store.len(), 1);
    }
}
