//! Where shared state lives: key leases (one running task per idempotency
//! key), origin gates and pacing, and the retry budget.
//!
//! Why a trait? One process keeps its state in memory ([`MemoryStore`], the
//! default). Many worker processes hitting the same API need one view of it,
//! which a shared backend provides behind the same trait. A store only makes
//! each update atomic; what the update means is decided by the
//! [planner](crate::planner), so a second backend never copies the decision
//! table.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::origin::ORIGIN_IDLE;
use crate::util::{far_future, shrink_after_burst};

use tokio::time::Instant;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use crate::redis_store::{FailMode, RedisStore};

use crate::budget::{BudgetState, RetryBudget};
pub use crate::origin::Outcome;
pub use crate::origin::Reservation;
use crate::origin::{Admission, OriginState, PacingConfig};

/// Proof of holding the lease of a key, returned by [`Store::acquire`] and
/// given back to [`Store::release`]. A release with a stale token (the
/// lease expired and another task took it) changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(pub(crate) u64);

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

    /// A task asks to send to `origin` and accepts to wait at most `latest`.
    /// Applies [`OriginState::admit`] atomically; `first` sends also deposit
    /// into the retry budget.
    fn admit(
        &self,
        origin: &str,
        pacing: PacingConfig,
        budget: &RetryBudget,
        latest: Duration,
        first: bool,
    ) -> impl Future<Output = Result<Admission, StoreError>> + Send;

    /// A task whose reserved slot has come is about to send: applies
    /// [`OriginState::confirm`] atomically. When the gate closed again
    /// meanwhile, how long from now it stays closed (the reservation is
    /// then given back, and the task queues anew).
    fn confirm_slot(
        &self,
        origin: &str,
        reservation: Reservation,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send;

    /// Gives back a reserved slot its task will not use
    /// ([`OriginState::release`]). Called from `Drop` (a task dropped,
    /// stopped or failed while it waited for its slot), so it must not
    /// block for long and cannot fail.
    fn release_slot(&self, origin: &str, reservation: Reservation);

    /// Gives back a retry token [`withdraw_retry`](Self::withdraw_retry)
    /// granted to a retry that was never sent. Called from `Drop`, like
    /// [`release_slot`](Self::release_slot).
    fn refund_retry(&self, budget: &RetryBudget);

    /// How long the gate of `origin` stays closed from now, if it is closed.
    fn gate(
        &self,
        origin: &str,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send;

    /// Records what `origin` answered ([`OriginState::observe`]),
    /// atomically. When this answer closed the origin's gate, how long from
    /// now it stays closed.
    fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send;

    /// Takes one retry from the client-wide budget; `false` when it is empty.
    fn withdraw_retry(
        &self,
        budget: &RetryBudget,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
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
    /// Origins and the retry budget under one lock: a first send updates
    /// both, and takes it once.
    shared: Mutex<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    origins: Origins,
    budget: Option<BudgetState>,
}

impl Default for MemoryInner {
    fn default() -> Self {
        MemoryInner {
            leases: Mutex::default(),
            epoch: Instant::now(),
            shared: Mutex::default(),
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

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (every update under these locks is a single assignment).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
        lock(&self.inner.shared).origins.map.len()
    }

    /// The current pace of `origin` (`scheme://host:port`) in requests per
    /// second, 0 when it is not paced; `None` for an unknown origin.
    #[must_use]
    pub fn origin_rate(&self, origin: &str) -> Option<f64> {
        lock(&self.inner.shared)
            .origins
            .map
            .get(origin)
            .map(OriginState::rate)
    }

    pub(crate) fn admit_now(
        &self,
        origin: &str,
        pacing: PacingConfig,
        budget: &RetryBudget,
        latest: Duration,
        first: bool,
    ) -> Admission {
        let now = self.now();
        let deposit = first && budget.enabled;
        if !deposit && !pacing.gate {
            return Admission::Now;
        }
        let mut shared = lock(&self.inner.shared);
        if deposit {
            BudgetState::slot(&mut shared.budget, budget, now).deposit(budget, now);
        }
        if !pacing.gate {
            return Admission::Now;
        }
        shared
            .origins
            .with(origin, now, |s| s.admit(pacing, now, latest))
    }

    pub(crate) fn confirm_now(&self, origin: &str, reservation: Reservation) -> Option<Duration> {
        let now = self.now();
        lock(&self.inner.shared)
            .origins
            .map
            .get_mut(origin)
            .and_then(|s| s.confirm(now, reservation))
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
        let token = fastrand::u64(..);
        leases.insert(key.to_owned(), Lease { token, expires });
        Some(LeaseToken(token))
    }
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
            shrink_after_burst(&mut leases);
        }
    }

    fn admit(
        &self,
        origin: &str,
        pacing: PacingConfig,
        budget: &RetryBudget,
        latest: Duration,
        first: bool,
    ) -> impl Future<Output = Result<Admission, StoreError>> + Send {
        std::future::ready(Ok(self.admit_now(origin, pacing, budget, latest, first)))
    }

    fn confirm_slot(
        &self,
        origin: &str,
        reservation: Reservation,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send {
        std::future::ready(Ok(self.confirm_now(origin, reservation)))
    }

    fn release_slot(&self, origin: &str, reservation: Reservation) {
        let now = self.now();
        if let Some(state) = lock(&self.inner.shared).origins.map.get_mut(origin) {
            state.release(now, reservation);
        }
    }

    fn refund_retry(&self, budget: &RetryBudget) {
        if budget.enabled {
            let now = self.now();
            BudgetState::slot(&mut lock(&self.inner.shared).budget, budget, now)
                .refund(budget, now);
        }
    }

    fn gate(
        &self,
        origin: &str,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send {
        let now = self.now();
        let gate = lock(&self.inner.shared)
            .origins
            .map
            .get(origin)
            .and_then(|s| s.gate_in(now));
        std::future::ready(Ok(gate))
    }

    fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send {
        let closed = pacing.gate.then(|| {
            let now = self.now();
            lock(&self.inner.shared)
                .origins
                .with(origin, now, |s| s.observe(pacing, now, outcome))
        });
        std::future::ready(Ok(closed.flatten()))
    }

    fn withdraw_retry(
        &self,
        budget: &RetryBudget,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let ok = !budget.enabled || {
            let now = self.now();
            BudgetState::slot(&mut lock(&self.inner.shared).budget, budget, now)
                .withdraw(budget, now)
        };
        std::future::ready(Ok(ok))
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
        store.release("k", LeaseToken(u64::MAX));
        assert_eq!(store.active_keys(), 2);
        store.release("k", a.expect("lease"));
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
