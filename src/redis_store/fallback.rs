//! [`Store`] for [`RedisStore`]: Redis behind this process's write
//! coalescing, refused on a Redis Cluster node, and, when Redis does not
//! answer, the [`FailMode`](super::FailMode): this process's own state, or
//! the error.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::RedisStore;
use crate::budget::{BudgetState, RetryBudget};
use crate::origin::{OriginState, Outcome, PacingConfig};
use crate::store::{LeaseToken, Now, Store, StoreError};
use crate::util::lock;

impl Store for RedisStore {
    async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
        // Leases keep their own fail mode (a local lease first).
        self.redis().acquire_lease(key, ttl).await
    }

    async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
        self.redis().release_lease(key, token);
        Ok(())
    }

    async fn read_origin(
        &self,
        origin: &str,
    ) -> Result<(Option<OriginState>, Duration), StoreError> {
        self.redis().refuse_cluster()?;
        let result = self.updates.read_origin(origin).await;
        self.redis()
            .guarded("read_origin", result, || self.local().read_origin(origin))
            .await
    }

    async fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        self.redis().refuse_cluster()?;
        let (shared, fallback) = twice(f);
        let result = self.updates.update_origin(origin, shared).await;
        self.redis()
            .guarded("update_origin", result, || {
                self.local().update_origin(origin, fallback)
            })
            .await
    }

    async fn update_budget<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        self.redis().refuse_cluster()?;
        let (shared, fallback) = twice(f);
        let result = self.updates.update_budget(shared).await;
        self.redis()
            .guarded("update_budget", result, || {
                self.local().update_budget(fallback)
            })
            .await
    }

    async fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> Result<Option<Duration>, StoreError> {
        self.redis().refuse_cluster()?;
        let result = match self.updates.record(origin, pacing, outcome).await {
            // Counted for Redis (a success is written later) while it does
            // not answer: the local state, which admits meanwhile, learns
            // the answer as the memory store would (or the origin is never
            // seen answering, and each task waits out the first contact).
            Ok(_) if self.redis().failing_open() => Err(StoreError::new(
                "redis: not answering; the answer is counted for it",
            )),
            result => result,
        };
        self.redis()
            .guarded("record", result, || {
                self.local().record(origin, pacing, outcome)
            })
            .await
    }

    async fn deposit(&self, budget: &RetryBudget) -> Result<(), StoreError> {
        self.redis().refuse_cluster()?;
        self.updates.deposit(budget).await?;
        if self.redis().failing_open() {
            // Counted for Redis, and the local budget, which grants the
            // retries meanwhile, is filled as the memory store's would be.
            self.local().deposit(budget).await?;
        }
        Ok(())
    }

    fn local_fallbacks(&self) -> u64 {
        self.redis().shared.fallbacks.load(Ordering::Relaxed)
    }
}

/// An update `f`, for Redis and for the local state it may fall back to
/// (marked [`on_fallback`](Now::on_fallback) there).
#[allow(clippy::type_complexity)]
fn twice<V: 'static, T: 'static>(
    f: impl FnMut(&mut V, Now) -> T + Send + 'static,
) -> (
    impl FnMut(&mut V, Now) -> T + Send + 'static,
    impl FnMut(&mut V, Now) -> T + Send + 'static,
) {
    let f = Arc::new(Mutex::new(f));
    let g = Arc::clone(&f);
    (
        move |state: &mut V, now| (lock(&f))(state, now),
        move |state: &mut V, now: Now| (lock(&g))(state, now.on_fallback()),
    )
}
