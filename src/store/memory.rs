//! [`MemoryStore`]: the default, in-process store. Each update runs under
//! a lock, on this process's monotonic clock.

use std::collections::HashMap;
use std::future::{Future, ready};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::{LeaseToken, Now, Store, StoreError};
use crate::budget::BudgetState;
use crate::origin::{ORIGIN_IDLE, OriginState};
use crate::util::{far_future, lock, shrink_after_burst};

#[derive(Debug)]
struct Lease {
    token: LeaseToken,
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
/// assert_eq!(store.active_keys(), 0); // entries exist only while their task runs
/// # drop(middleware);
/// ```
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<MemoryInner>,
}

#[derive(Debug)]
struct MemoryInner {
    leases: Mutex<HashMap<String, Lease>>,
    epoch: Instant,
    origins: Mutex<Origins>,
    budget: Mutex<Option<BudgetState>>,
}

impl Default for MemoryInner {
    fn default() -> Self {
        MemoryInner {
            leases: Mutex::default(),
            epoch: Instant::now(),
            origins: Mutex::default(),
            budget: Mutex::default(),
        }
    }
}

/// Origins kept before idle ones are first swept.
const ORIGINS_SWEEP_AT: usize = 1024;

/// The known origins, and the size at which idle ones are next swept.
///
/// A sweep visits every entry, so it is run only once the map has doubled
/// since the last one (and never below [`ORIGINS_SWEEP_AT`]): each new
/// origin pays O(1) amortised, whatever the number of known origins, and
/// the memory of swept entries is given back.
#[derive(Debug, Default)]
struct Origins {
    map: HashMap<String, OriginState>,
    sweep_at: usize,
    /// Sweeps run so far (for tests of the amortised bound).
    sweeps: u64,
}

impl Origins {
    /// Applies `f` to the state of `origin`, created at `now` if it is new.
    fn with<T>(&mut self, origin: &str, now: Duration, f: impl FnOnce(&mut OriginState) -> T) -> T {
        if let Some(state) = self.map.get_mut(origin) {
            return f(state);
        }
        if self.map.len() >= self.sweep_at.max(ORIGINS_SWEEP_AT) {
            self.map.retain(|_, s| !s.is_idle(now, ORIGIN_IDLE));
            shrink_after_burst(&mut self.map);
            self.sweeps += 1;
            self.sweep_at = self.map.len().saturating_mul(2);
        }
        let mut state = OriginState::new(now);
        let out = f(&mut state);
        self.map.insert(origin.to_owned(), state);
        out
    }
}

impl std::fmt::Debug for MemoryStore {
    /// Counts only: lease keys hold idempotency keys, which may be secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("leases", &self.active_keys())
            .field("origins", &self.origins())
            .finish()
    }
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<String, Lease>> {
        lock(&self.inner.leases)
    }

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.inner.epoch)
    }

    /// Number of origins with gate or pacing state.
    #[must_use]
    pub fn origins(&self) -> usize {
        lock(&self.inner.origins).map.len()
    }

    /// The current pace of `origin` (`scheme://host:port`) in requests per
    /// second, 0 when it is not paced; `None` for an unknown origin.
    #[must_use]
    pub fn origin_rate(&self, origin: &str) -> Option<f64> {
        lock(&self.inner.origins)
            .map
            .get(origin)
            .map(OriginState::rate)
    }

    /// Number of idempotency keys whose lease is held (tasks running with a
    /// key). Origins and the budget are not counted (see
    /// [`origins`](Self::origins)).
    #[must_use]
    pub fn active_keys(&self) -> usize {
        self.leases().len()
    }

    /// Whether no keyed task is running.
    #[must_use]
    pub fn no_active_keys(&self) -> bool {
        self.active_keys() == 0
    }

    /// When the lease of `key` expires, if it is held.
    #[cfg(feature = "redis")]
    pub(crate) fn lease_expiry(&self, key: &str) -> Option<Instant> {
        self.leases().get(key).map(|l| l.expires)
    }

    /// Takes the lease of `key` for `ttl`, if it is free.
    pub(crate) fn acquire_now(&self, key: &str, ttl: Duration) -> Option<LeaseToken> {
        let now = Instant::now();
        let expires = now.checked_add(ttl).unwrap_or_else(|| far_future(now));
        let mut leases = self.leases();
        if let Some(held) = leases.get(key)
            && held.expires > now
        {
            return None;
        }
        // Random, not a counter: a shared store may use the same token for
        // its copy of the lease, and tokens of different processes must
        // not collide.
        let token = LeaseToken::random();
        leases.insert(key.to_owned(), Lease { token, expires });
        Some(token)
    }

    /// Gives the lease of `key` back, if `token` holds it.
    pub(crate) fn release_now(&self, key: &str, token: LeaseToken) {
        let mut leases = self.leases();
        if leases.get(key).is_some_and(|l| l.token == token) {
            leases.remove(key);
            shrink_after_burst(&mut leases);
        }
    }
}

/// Every call is applied when it is made, and answers at once.
impl Store for MemoryStore {
    fn answers_at_once(&self) -> bool {
        true
    }

    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LeaseToken>, StoreError>> + Send {
        ready(Ok(self.acquire_now(key, ttl)))
    }

    fn release(
        &self,
        key: &str,
        token: LeaseToken,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.release_now(key, token);
        ready(Ok(()))
    }

    fn read_origin(
        &self,
        origin: &str,
    ) -> impl Future<Output = Result<(Option<OriginState>, Duration), StoreError>> + Send {
        let now = self.now();
        let state = lock(&self.inner.origins).map.get(origin).copied();
        ready(Ok((state, now)))
    }

    fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        let now = self.now();
        let out = lock(&self.inner.origins).with(origin, now, |s| f(s, Now::new(now)));
        ready(Ok(out))
    }

    fn update_budget<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        let now = self.now();
        let mut budget = lock(&self.inner.budget);
        let state = budget.get_or_insert_with(|| BudgetState::new(now));
        ready(Ok(f(state, Now::new(now))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lease on `key` for `ttl`, if `store` grants one.
    async fn lease(store: &MemoryStore, key: &str, ttl: Duration) -> Option<LeaseToken> {
        store.acquire(key, ttl).await.ok().flatten()
    }

    #[tokio::test]
    async fn one_lease_per_key_and_release_frees_it() {
        let store = MemoryStore::new();
        let a = lease(&store, "k", Duration::from_secs(5)).await;
        assert!(a.is_some());
        assert_eq!(store.acquire("k", Duration::from_secs(5)).await, Ok(None));
        assert!(
            lease(&store, "other", Duration::from_secs(5))
                .await
                .is_some()
        );
        assert_eq!(store.active_keys(), 2);
        // A stale token does not free someone else's lease.
        store.release_now("k", LeaseToken(u64::MAX));
        assert_eq!(store.active_keys(), 2);
        store.release_now("k", a.expect("lease"));
        assert_eq!(store.active_keys(), 1);
    }

    #[test]
    fn a_new_origin_costs_the_same_however_many_are_known() {
        let mut origins = Origins::default();
        let now = Duration::from_secs(1);
        for i in 0..40_000 {
            origins.with(&format!("http://h{i}:80"), now, |_| ());
        }
        let before = origins.sweeps;
        assert!(before <= 6, "{before} sweeps for 40,000 origins");
        // A thousand new origins among 40,000 busy ones: at most one sweep
        // (the map has to double first), not one per origin.
        for i in 0..1_000 {
            origins.with(&format!("http://n{i}:80"), now, |_| ());
        }
        assert!(origins.sweeps - before <= 1, "{}", origins.sweeps - before);
        assert_eq!(origins.map.len(), 41_000);
    }

    #[tokio::test(start_paused = true)]
    async fn expired_lease_can_be_taken_over() {
        let store = MemoryStore::new();
        let first = store.acquire("k", Duration::from_secs(1)).await;
        assert!(first.ok().flatten().is_some());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(lease(&store, "k", Duration::from_secs(1)).await.is_some());
        assert_eq!(store.active_keys(), 1);
    }
}
