//! Where shared state lives: key leases (one running task per idempotency
//! key), each origin's state (gate, quota, pace) and the retry budget.
//!
//! Why a trait? One process keeps its state in memory ([`MemoryStore`], the
//! default). Many worker processes hitting the same API need one view of it,
//! which a shared backend provides behind the same trait. A store is a
//! storage primitive, in the manner of governor's `StateStore`: it hands out
//! leases and applies an update to one origin's state (or to the budget's)
//! atomically. What an update means is decided by the crate's pure core,
//! which passes it in as a closure, so a second backend never copies the
//! decision table.
//!
//! A store of your own implements five methods over [`OriginState`] and
//! [`BudgetState`] values it keeps as they are (or in their text form), and
//! proves itself with the conformance suite (feature `conformance`). A store
//! whose writes cost a round trip can sit behind [`Coalesced`], which
//! applies the updates of one origin queued meanwhile in one write and
//! counts successes and deposits in the process.
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! use reqwest_backpressure::budget::BudgetState;
//! use reqwest_backpressure::origin::OriginState;
//! use reqwest_backpressure::store::{LeaseToken, Now, Store, StoreError};
//! use tokio::time::Instant;
//!
//! #[derive(Clone)]
//! struct MyStore(Arc<Mutex<State>>, Instant);
//!
//! #[derive(Default)]
//! struct State {
//!     leases: HashMap<String, (LeaseToken, Instant)>,
//!     origins: HashMap<String, OriginState>,
//!     budget: Option<BudgetState>,
//! }
//!
//! impl MyStore {
//!     fn now(&self) -> Duration {
//!         self.1.elapsed()
//!     }
//! }
//!
//! impl Store for MyStore {
//!     async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
//!         let mut state = self.0.lock().unwrap();
//!         let now = Instant::now();
//!         if state.leases.get(key).is_some_and(|(_, expires)| *expires > now) {
//!             return Ok(None);
//!         }
//!         let token = LeaseToken::random();
//!         state.leases.insert(key.to_owned(), (token, now + ttl));
//!         Ok(Some(token))
//!     }
//!
//!     async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
//!         let mut state = self.0.lock().unwrap();
//!         if state.leases.get(key).is_some_and(|(held, _)| *held == token) {
//!             state.leases.remove(key);
//!         }
//!         Ok(())
//!     }
//!
//!     async fn read_origin(&self, origin: &str) -> Result<(Option<OriginState>, Duration), StoreError> {
//!         Ok((self.0.lock().unwrap().origins.get(origin).copied(), self.now()))
//!     }
//!
//!     async fn update_origin<T: Send + 'static>(
//!         &self,
//!         origin: &str,
//!         mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
//!     ) -> Result<T, StoreError> {
//!         let now = self.now();
//!         let mut state = self.0.lock().unwrap();
//!         let origin = state.origins.entry(origin.to_owned()).or_insert_with(|| OriginState::new(now));
//!         Ok(f(origin, Now::new(now)))
//!     }
//!
//!     async fn update_budget<T: Send + 'static>(
//!         &self,
//!         mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
//!     ) -> Result<T, StoreError> {
//!         let now = self.now();
//!         let mut state = self.0.lock().unwrap();
//!         Ok(f(state.budget.get_or_insert_with(|| BudgetState::new(now)), Now::new(now)))
//!     }
//! }
//! ```

use std::future::Future;
use std::time::Duration;

mod coalesce;
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod memory;
mod now;
pub(crate) mod steps;

pub use coalesce::Coalesced;
pub use memory::MemoryStore;
pub use now::Now;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use crate::redis_store::{FailMode, RedisStore};

use crate::budget::{BudgetState, RetryBudget};
use crate::http_origin::origin_of;
pub use crate::origin::Outcome;
pub use crate::origin::Reservation;
use crate::origin::{OriginState, OriginStatus, PacingConfig};

/// Proof of holding the lease of a key, returned by [`Store::acquire`] and
/// given back to [`Store::release`]. A release with a stale token (the
/// lease expired and another task took it) changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(pub(crate) u64);

impl LeaseToken {
    /// A new token, random: tokens of different processes sharing a store
    /// do not collide.
    #[must_use]
    pub fn random() -> Self {
        LeaseToken(fastrand::u64(..))
    }
}

/// A store that could not answer; carries no key, URL or credential.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store unavailable: {message}")]
pub struct StoreError {
    message: String,
    /// Every operation fails alike (a misconfiguration, not an outage).
    refused: bool,
}

impl StoreError {
    /// An error with a message that must not contain secrets or URLs.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            refused: false,
        }
    }

    /// An error the store answers every operation with until it is set up
    /// differently (not an outage): a wrapper such as [`Coalesced`] does
    /// not try a write again after it.
    #[must_use]
    pub fn refused(message: impl Into<String>) -> Self {
        StoreError {
            refused: true,
            ..StoreError::new(message)
        }
    }

    /// Whether the store refuses every operation (see
    /// [`refused`](Self::refused)).
    #[must_use]
    pub fn is_refused(&self) -> bool {
        self.refused
    }
}

/// Keyed state shared by the tasks of one middleware (or of many
/// processes): leases, and atomic updates of one origin's state and of the
/// retry budget's.
///
/// # What an implementation promises
///
/// - `acquire` for a key whose lease is held (and not expired) returns
///   `Ok(None)`; a lease frees itself after its TTL; `release` with a stale
///   token changes nothing.
/// - An update applies `f` to the state as it is when it is applied, and
///   nothing else writes that state between `f`'s reading and the store's
///   writing it. A compare-and-set store may call `f` more than once (the
///   state changed under it); only the call whose state was written counts.
///   An absent state is created with [`OriginState::new`] or
///   [`BudgetState::new`] at the store's time.
/// - `f` is given the store's time ([`Now`]): a [`Duration`] since an
///   epoch the store chooses, the same for every state it keeps (process
///   start, or a shared clock every process reads), never going back.
/// - An update future dropped before it answered has applied `f` once or
///   not at all.
///
/// The conformance suite (feature `conformance`) checks them, but for the
/// last, which no caller can see. Nothing needs renewing: a lease is taken
/// for the task's time to its deadline.
pub trait Store: Send + Sync + 'static {
    /// Takes the lease of `key` for at most `ttl` (the task's time to its
    /// deadline, so a lease whose owner vanished frees itself).
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LeaseToken>, StoreError>> + Send;

    /// Gives the lease back, if `token` still holds it. A task's guard
    /// calls it when the task ends in any way, and does not wait for it
    /// longer than one poll: the rest runs as a task of its own.
    fn release(
        &self,
        key: &str,
        token: LeaseToken,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The state of `origin`, if the store has one, and the store's time.
    fn read_origin(
        &self,
        origin: &str,
    ) -> impl Future<Output = Result<(Option<OriginState>, Duration), StoreError>> + Send;

    /// Applies `f` to the state of `origin` atomically, creating it first
    /// if there is none; `f`'s answer.
    fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send;

    /// Applies `f` to the retry budget's state atomically, creating it
    /// first if there is none; `f`'s answer.
    fn update_budget<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send;

    /// How long the gate of `origin` stays closed from now, if it is
    /// closed (or a spent stated quota holds it).
    fn gate(
        &self,
        origin: &str,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send {
        let read = self.read_origin(origin);
        async move {
            let (state, now) = read.await?;
            Ok(state.and_then(|s| s.gate_in(now)))
        }
    }

    /// What the store holds for the origin of `url` (named as the
    /// middleware names a request's origin, `scheme://host:port`), for
    /// display: [`OriginState::status`] at the store's time, or `None` when
    /// the store has no state for it (never used, or forgotten while idle).
    /// Over a shared store, it is what every process sharing it sees.
    ///
    /// The middleware is moved into the client, so keep a clone of the
    /// store to read it (clones of [`MemoryStore`], [`Coalesced`] and
    /// `RedisStore` share their state; clone one once it is set up), or
    /// take [`RetryAfterMiddleware::store`](crate::RetryAfterMiddleware::store)`().clone()`
    /// before the middleware moves.
    ///
    /// ```
    /// use reqwest_backpressure::{MemoryStore, Policy, RetryAfterMiddleware, Store};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = MemoryStore::new();
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(RetryAfterMiddleware::with_store(Policy::default(), store.clone()))
    ///     .build();
    /// # drop(client);
    /// // ... while tasks run:
    /// let url = reqwest::Url::parse("https://api.example.com/items")?;
    /// if let Some(status) = store.origin_status(&url).await? {
    ///     eprintln!("slots {} · pace {}", status.reserved(), status.pace());
    /// }
    /// # Ok(()) }
    /// ```
    fn origin_status(
        &self,
        url: &reqwest::Url,
    ) -> impl Future<Output = Result<Option<OriginStatus>, StoreError>> + Send {
        let origin = origin_of(url);
        async move {
            let (state, now) = self.read_origin(&origin).await?;
            Ok(state.map(|s| s.status(now)))
        }
    }

    /// What the store holds for the limit of one scope of the origin of
    /// `url`, for display, as [`origin_status`](Self::origin_status) does
    /// for the origin's own limit: `None` when the store has no state for
    /// it (the scope was never used, or was forgotten while idle).
    ///
    /// A request falls under its origin's limit and its scope's, and
    /// leaves when both admit it, so a request of this scope waits for
    /// whichever of the two holds it longer. `scope` is named as the
    /// observer's events name it ([`Wait::scope`](crate::observe::Wait::scope)):
    /// a [`Scope`](crate::Scope)'s name as declared (cleaned the same way),
    /// a GitHub resource as `x-ratelimit-resource` names it (`search`), a
    /// Discord bucket with its major parameter (`bucket:channel`), an IETF
    /// partition.
    ///
    /// ```
    /// use reqwest_backpressure::{MemoryStore, Store};
    ///
    /// # async fn run(store: MemoryStore) -> Result<(), Box<dyn std::error::Error>> {
    /// let url = reqwest::Url::parse("https://api.github.com/search/issues?q=x")?;
    /// if let Some(search) = store.scope_status(&url, "search").await? {
    ///     eprintln!("search: {:?} left, held for {:?}", search.quota_left(), search.gate_closed_for());
    /// }
    /// # Ok(()) }
    /// ```
    fn scope_status(
        &self,
        url: &reqwest::Url,
        scope: &str,
    ) -> impl Future<Output = Result<Option<OriginStatus>, StoreError>> + Send {
        let scope = crate::Scope::new(scope);
        let key = crate::scope::key::limit_key(&origin_of(url), Some(scope.as_str()));
        async move {
            let (state, now) = self.read_origin(&key).await?;
            Ok(state.map(|s| s.status(now)))
        }
    }

    /// Records what `origin` answered (with the gate on), atomically: what
    /// [`update_origin`](Self::update_origin) with the core's step does by
    /// default. When this answer closed the origin's gate, how long from
    /// now it stays closed.
    ///
    /// A store may count answers that only add a success
    /// ([`Outcome::Admitted`], [`Outcome::Quota`]) and fold them in later,
    /// as [`Coalesced`] does (a stated quota is then not kept). A store
    /// whose update may wait should apply an answer whose caller went away
    /// all the same: it is news for every task.
    fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> impl Future<Output = Result<Option<Duration>, StoreError>> + Send {
        self.update_origin(origin, move |state, now| {
            observe(state, pacing, outcome, now)
        })
    }

    /// How many operations this store has run on this process's own state
    /// so far, instead of on its shared one (a store failing open while its
    /// backend does not answer, as the Redis store does with
    /// `FailMode::Open`). Never decreases;
    /// 0 for a store that has no other state than its own (the default).
    ///
    /// The middleware reads it around a task's lease, admission and record
    /// of an answer, and tells its observer
    /// ([`Observer::on_local_state`](crate::observe::Observer::on_local_state))
    /// when it rose: nothing runs on local state unsaid. A store that falls
    /// back should count here, and log as well.
    fn local_fallbacks(&self) -> u64 {
        0
    }

    /// Whether every call of this store answers on its first poll, as an
    /// in-memory store's do (default `false`).
    ///
    /// The middleware awaits the calls that reserve (an admission, a retry
    /// token) in place on such a store. On any other it owns each such
    /// call from the moment it is issued (an allocation): a call whose task
    /// is dropped, or whose deadline passes, before it answered then runs
    /// to its end on its own, and what it reserved is given back. Say
    /// `true` only if no call ever waits: one that does would leak what it
    /// reserved when its task is dropped meanwhile.
    fn answers_at_once(&self) -> bool {
        false
    }

    /// A first send deposits its share into the retry budget: what
    /// [`update_budget`](Self::update_budget) with
    /// [`BudgetState::deposit`] does by default. A store may count deposits
    /// and fold them in later, as [`Coalesced`] does.
    fn deposit(&self, budget: &RetryBudget) -> impl Future<Output = Result<(), StoreError>> + Send {
        let budget = *budget;
        self.update_budget(move |state, now| state.deposit(&budget, now.time()))
    }
}

/// What an answer does to its origin's state, the step of
/// [`Store::record`]: its times count from when it was received,
/// `now.late()` before the store's time.
fn observe(
    state: &mut OriginState,
    pacing: PacingConfig,
    outcome: Outcome,
    now: Now,
) -> Option<Duration> {
    state.observe_late(pacing, now.time(), now.late(), outcome)
}
