//! [`Coalesced`]: write coalescing in front of any store.
//!
//! Why? A store whose write is a round trip (a shared store over the
//! network) pays it for every update, behind every other update of the same
//! key: a burst of a thousand tasks rejected at once turns into a thousand
//! compare-and-sets in a row, and their pushbacks land seconds late. In
//! front of it, this process has one writer per origin, which applies every
//! update queued meanwhile in one update of the store (`queue.rs`), and
//! answers that only add a success, and budget deposits, are counted here
//! and folded into the next update, or written within 100 ms
//! (`counted.rs`): a burst of successes costs a few round trips, not one
//! per request.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::{LeaseToken, Now, Store, StoreError};
use crate::budget::{BudgetState, RetryBudget};
use crate::origin::{OriginState, Outcome, PacingConfig};
use crate::util::lock;

mod counted;
mod queue;
#[cfg(test)]
mod tests;

use counted::{Deposits, Unwritten};
use queue::{IfAbandoned, OriginQueue};

/// Counted successes and deposits are written at least this often.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How long after a failed write of counted successes or deposits it is
/// tried again.
const RETRY_FLUSH: Duration = Duration::from_millis(500);

/// A [`Store`] in front of another, coalescing its writes: one writer per
/// origin in this process applies the updates queued while it writes in
/// one update of the inner store, and successes and budget deposits are
/// counted here and written with the next update of the same state, or
/// within 100 ms.
///
/// What it changes, and does not:
///
/// - Each update is still applied atomically, in the order the updates were
///   queued, at the inner store's time; [`Now::late`] tells each how long it
///   waited in the queue as well.
/// - An update whose caller went away (its future dropped) before it was
///   applied is left out; an answer ([`Store::record`]) is applied all the
///   same: it is news for every task.
/// - Counted successes are applied at the time the last of them was
///   counted; a stated quota ([`Outcome::Quota`]) is then not kept, only
///   its success. This process's first answer of an origin is written at
///   once (tasks elsewhere may wait for it), and so is a stated quota once
///   per window (every process spends and renews the same). Counts whose write failed are put back and written again
///   500 ms later (never after an error that
///   [refuses](StoreError::is_refused) every operation).
/// - Leases and reads go straight to the inner store.
///
/// The inner store is cloned for the writers, which run as tasks of their
/// own (inline only without a runtime): a cheap handle, as stores are.
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::store::{Coalesced, MemoryStore};
/// use reqwest_backpressure::{Policy, RetryAfterMiddleware};
///
/// // A store whose writes cost a round trip would sit here.
/// let store = Coalesced::new(MemoryStore::new()).timeout(Duration::from_secs(2));
/// let middleware = RetryAfterMiddleware::with_store(Policy::default(), store);
/// # drop(middleware);
/// ```
pub struct Coalesced<S> {
    inner: S,
    shared: Arc<Shared>,
    /// How long a caller waits for its update's batch.
    timeout: Option<Duration>,
}

/// What the clones of a [`Coalesced`] share.
struct Shared {
    /// Updates waiting for this process's one writer of their origin.
    queues: Mutex<HashMap<String, OriginQueue>>,
    /// 2xx answers not yet written, by origin.
    successes: Mutex<HashMap<String, Unwritten>>,
    /// Budget deposits not yet written.
    deposits: Mutex<Deposits>,
    /// By origin, until when this process need not write an answer of
    /// it through (see [`Coalesced::write_through`]).
    written: Mutex<HashMap<String, Instant>>,
}

impl<S: Clone> Clone for Coalesced<S> {
    fn clone(&self) -> Self {
        Coalesced {
            inner: self.inner.clone(),
            shared: Arc::clone(&self.shared),
            timeout: self.timeout,
        }
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Coalesced<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalesced")
            .field("inner", &self.inner)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl<S> Coalesced<S> {
    /// Whether a success is written at once rather than counted: this
    /// process's first answer of the origin (tasks elsewhere may be waiting
    /// for it: the first contact), a stated quota once per window (every
    /// process then spends and renews the same quota), and every statement
    /// of a quota in cost units (an LLM API's tokens): its count corrects
    /// what admissions spent on costs they guessed, and its request is no
    /// longer out, so the window's rounds go on (a round trip per answer of
    /// calls that take seconds).
    fn write_through(&self, origin: &str, outcome: Outcome) -> bool {
        if let Outcome::Quota {
            tokens: Some(_), ..
        } = outcome
        {
            return true;
        }
        let now = Instant::now();
        let mut written = lock(&self.shared.written);
        if written.len() > 1024 {
            written.retain(|_, until| *until > now);
        }
        let quota_until = match outcome {
            Outcome::Quota { reset_in, .. } => Some(now + reset_in.min(crate::origin::ORIGIN_IDLE)),
            _ => None,
        };
        match (written.get_mut(origin), quota_until) {
            // The first answer: written; a quota it states is then due.
            (None, until) => {
                written.insert(origin.to_owned(), until.unwrap_or(now));
                true
            }
            // A quota stated after the last one written reset.
            (Some(at), Some(until)) if *at <= now => {
                *at = until;
                true
            }
            _ => false,
        }
    }

    /// Coalesces the writes of `inner`.
    #[must_use]
    pub fn new(inner: S) -> Self {
        Coalesced {
            inner,
            shared: Arc::new(Shared {
                queues: Mutex::default(),
                successes: Mutex::default(),
                deposits: Mutex::new(Deposits::new(Instant::now())),
                written: Mutex::default(),
            }),
            timeout: None,
        }
    }

    /// How long a caller waits for the batch its update is written in
    /// (the one being written, then its own) before it fails with a
    /// [`StoreError`] (an update not applied by then is left out, an answer
    /// is still applied). An update applied already, in a write that has
    /// not answered yet, waits for that write's answer instead: failing
    /// then, a store failing open would apply it a second time. Default: no
    /// limit of its own (the task's deadline bounds every store call).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The store behind.
    #[must_use]
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The store behind, to set it up before use.
    #[cfg(feature = "redis")]
    pub(crate) fn inner_mut(&mut self) -> &mut S {
        &mut self.inner
    }
}

impl<S: Store + Clone> Store for Coalesced<S> {
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LeaseToken>, StoreError>> + Send {
        self.inner.acquire(key, ttl)
    }

    fn release(
        &self,
        key: &str,
        token: LeaseToken,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.release(key, token)
    }

    fn read_origin(
        &self,
        origin: &str,
    ) -> impl Future<Output = Result<(Option<OriginState>, Duration), StoreError>> + Send {
        self.inner.read_origin(origin)
    }

    fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.queued(origin, false, IfAbandoned::Skip, f)
    }

    async fn update_budget<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        self.write_budget(f).await
    }

    async fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> Result<Option<Duration>, StoreError> {
        let through = matches!(outcome, Outcome::Admitted | Outcome::Quota { .. })
            && self.write_through(origin, outcome);
        if through {
            let observe =
                move |state: &mut OriginState, now| super::observe(state, pacing, outcome, now);
            return match self.queued(origin, true, IfAbandoned::Apply, observe).await {
                Ok(closed) => Ok(closed),
                Err(_) => {
                    // Not lost: counted, and written with the next write.
                    self.count_success(origin, pacing);
                    Ok(None)
                }
            };
        }
        if let Outcome::Admitted | Outcome::Quota { .. } = outcome {
            // Counted here; written within `FLUSH_EVERY`, or with this
            // process's next write to the origin. A stated quota in
            // requests is not kept (a write per answer would cost a round
            // trip per success); an exhausted one (`Exhausted`) is written
            // all the same.
            self.count_success(origin, pacing);
            return Ok(None);
        }
        // Its times count from the answer, not from when it is applied.
        let observe =
            move |state: &mut OriginState, now| super::observe(state, pacing, outcome, now);
        self.queued(origin, true, IfAbandoned::Apply, observe).await
    }

    async fn deposit(&self, budget: &RetryBudget) -> Result<(), StoreError> {
        // Written within `FLUSH_EVERY`, or with the next budget update.
        self.count_deposit(budget);
        Ok(())
    }

    fn local_fallbacks(&self) -> u64 {
        self.inner.local_fallbacks()
    }
}
