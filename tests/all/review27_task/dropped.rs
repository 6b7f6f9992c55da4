//! A task dropped while its admission's answer is in flight gives back
//! what the admission reserved: the store applied it, nobody is left to
//! send, and the next task finds the quota whole.

use std::future::Future;
use std::time::Duration;

use reqwest_backpressure::budget::BudgetState;
use reqwest_backpressure::origin::OriginState;
use reqwest_backpressure::store::{LeaseToken, Now, StoreError};
use reqwest_backpressure::{Cost, Deadline, MemoryStore, Quota, RetryAfterMiddleware, Store};

use super::offline::{URL, offline};
use crate::common::{exact, stop_code};

/// A memory store whose origin updates take `delay` to reach it and
/// `delay` for their answer to come back (a shared store's round trip):
/// an update whose caller is dropped on the way back is applied all the
/// same.
#[derive(Clone)]
struct Delayed {
    inner: MemoryStore,
    delay: Duration,
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

    fn update_budget<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.inner.update_budget(f)
    }
}

/// The reviewer's case without Redis: a declared 100 units a minute, task
/// A (cost 60) dropped 400 ms in, after the store applied its admission
/// (at 250 ms) and before the answer came back (at 500 ms). Task B (cost
/// 60), a little later, is sent. Before, A's 60 units stayed spent for the
/// minute, and B stopped without sending.
#[tokio::test(start_paused = true)]
async fn an_admission_answered_after_its_task_was_dropped_is_given_back() {
    let store = Delayed {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(250),
    };
    let policy = exact().quota(URL, Quota::per_minute(100).units());
    let middleware = RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy");
    let (client, arrivals) = offline(middleware, |_| 200);
    let send = |client: &reqwest_middleware::ClientWithMiddleware| {
        client
            .get(URL)
            .with_extension(Cost::new(60))
            .with_extension(Deadline::after(Duration::from_secs(10)))
            .send()
    };

    let a = tokio::spawn(send(&client));
    tokio::time::sleep(Duration::from_millis(400)).await;
    a.abort();
    assert!(a.await.is_err_and(|e| e.is_cancelled()), "A ended first");
    assert!(arrivals.is_empty(), "A was sent");

    // Long enough for a give-back (an update: 0.5 s), far short of the
    // minute.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = send(&client).await.expect("B answered");
    assert_eq!(
        (b.status().as_u16(), stop_code(&b), arrivals.len()),
        (200, None, 1),
        "B was not sent: A's units were kept"
    );
}
