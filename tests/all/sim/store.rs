//! A store that delays or fails drawn operations: a `MemoryStore` behind a
//! round trip. Each operation waits before it is applied (the request's
//! way) and after (the answer's way); a failure comes before it is
//! applied. Dropped on the way there, it was not applied; on the way back,
//! it was (both are what the `Store` trait allows).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_backpressure::MemoryStore;
use reqwest_backpressure::budget::BudgetState;
use reqwest_backpressure::origin::OriginState;
use reqwest_backpressure::store::{LeaseToken, Now, Store, StoreError};

use super::draw::StorePlan;

/// The faulty store; clones share the memory store and the draws.
#[derive(Clone)]
pub(crate) struct FaultyStore {
    pub(crate) memory: MemoryStore,
    plan: StorePlan,
    rng: Arc<Mutex<fastrand::Rng>>,
    /// How many operations failed.
    pub(crate) failed: Arc<Mutex<u64>>,
}

impl FaultyStore {
    pub(crate) fn new(plan: StorePlan, seed: u64) -> Self {
        FaultyStore {
            memory: MemoryStore::new(),
            plan,
            rng: Arc::new(Mutex::new(fastrand::Rng::with_seed(seed ^ 0x0057_0e5e))),
            failed: Arc::new(Mutex::new(0)),
        }
    }

    /// One leg of the round trip, and whether the operation fails.
    fn draw(&self) -> (Duration, Duration, bool) {
        let mut rng = self.rng.lock().unwrap();
        let max = self.plan.latency.as_nanos() as u64;
        let there = Duration::from_nanos(rng.u64(..=max));
        let back = Duration::from_nanos(rng.u64(..=max));
        let fails = rng.u16(..1000) < self.plan.failures;
        (there, back, fails)
    }

    /// `apply` is given how long after the call it is applied.
    async fn trip<T>(&self, apply: impl FnOnce(Duration) -> T) -> Result<T, StoreError> {
        let (there, back, fails) = self.draw();
        if !there.is_zero() {
            tokio::time::sleep(there).await;
        }
        if fails {
            *self.failed.lock().unwrap() += 1;
            return Err(StoreError::new("simulated store failure"));
        }
        let out = apply(there);
        if !back.is_zero() {
            tokio::time::sleep(back).await;
        }
        Ok(out)
    }
}

/// Unwraps what the memory store answered at once.
fn now_or_never<T>(fut: impl std::future::Future<Output = T>) -> T {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("the memory store answers at once"),
    }
}

impl Store for FaultyStore {
    async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
        self.trip(|_| now_or_never(self.memory.acquire(key, ttl)))
            .await?
    }

    async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
        self.trip(|_| now_or_never(self.memory.release(key, token)))
            .await?
    }

    async fn read_origin(
        &self,
        origin: &str,
    ) -> Result<(Option<OriginState>, Duration), StoreError> {
        self.trip(|_| now_or_never(self.memory.read_origin(origin)))
            .await?
    }

    async fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        // Its clock is read `there` after the call (see `Now::late_by`).
        self.trip(|there| {
            now_or_never(
                self.memory
                    .update_origin(origin, move |state, now| f(state, now.late_by(there))),
            )
        })
        .await?
    }

    async fn update_budget<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        self.trip(|there| {
            now_or_never(
                self.memory
                    .update_budget(move |state, now| f(state, now.late_by(there))),
            )
        })
        .await?
    }
}
