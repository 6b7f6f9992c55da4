//! A store whose origin updates take a round trip: a shared store's
//! delays, on the paused clock.

use std::future::Future;
use std::time::Duration;

use reqwest_backpressure::budget::BudgetState;
use reqwest_backpressure::origin::OriginState;
use reqwest_backpressure::store::{LeaseToken, Now, StoreError};
use reqwest_backpressure::{MemoryStore, Store};

/// A memory store whose origin updates take `delay` to reach it and
/// `delay` for their answer to come back (its budget updates
/// `budget_delay`) (a shared store's round trip):
/// an update whose caller is dropped on the way back is applied all the
/// same.
#[derive(Clone)]
pub(super) struct Delayed {
    pub(super) inner: MemoryStore,
    pub(super) delay: Duration,
    /// The same for the retry budget's updates.
    pub(super) budget_delay: Duration,
}

impl Store for Delayed {
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

    async fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        tokio::time::sleep(self.delay).await;
        let out = self.inner.update_origin(origin, f).await;
        tokio::time::sleep(self.delay).await;
        out
    }

    async fn update_budget<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        tokio::time::sleep(self.budget_delay).await;
        let out = self.inner.update_budget(f).await;
        tokio::time::sleep(self.budget_delay).await;
        out
    }
}
