//! A store written outside the crate, with its public API only: state in a
//! `Mutex<HashMap>`, every call 1 ms late (as a store across a network
//! would be). It passes the conformance suite, and serves a client.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use reqwest_backpressure::budget::BudgetState;
use reqwest_backpressure::origin::OriginState;
use reqwest_backpressure::store::{LeaseToken, Now, StoreError};
use reqwest_backpressure::{Policy, RetryAfterMiddleware, Store, conformance};
use tokio::time::{Instant, sleep};

/// Every call waits this long before it touches the state.
const LATENCY: Duration = Duration::from_millis(1);

/// Cheap to clone: clones share the state.
#[derive(Clone, Default)]
struct MapStore(Arc<Mutex<Maps>>);

struct Maps {
    epoch: Instant,
    leases: HashMap<String, (LeaseToken, Instant)>,
    origins: HashMap<String, OriginState>,
    budget: Option<BudgetState>,
}

impl Default for Maps {
    fn default() -> Self {
        Maps {
            epoch: Instant::now(),
            leases: HashMap::new(),
            origins: HashMap::new(),
            budget: None,
        }
    }
}

impl MapStore {
    /// The state after the call's latency, and the store's time then.
    async fn state(&self) -> (MutexGuard<'_, Maps>, Duration) {
        sleep(LATENCY).await;
        let maps = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = maps.epoch.elapsed();
        (maps, now)
    }
}

impl Store for MapStore {
    async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
        let (mut maps, _) = self.state().await;
        let now = Instant::now();
        if maps.leases.get(key).is_some_and(|(_, until)| *until > now) {
            return Ok(None);
        }
        let token = LeaseToken::random();
        maps.leases.insert(key.to_owned(), (token, now + ttl));
        Ok(Some(token))
    }

    async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
        let (mut maps, _) = self.state().await;
        if maps.leases.get(key).is_some_and(|(held, _)| *held == token) {
            maps.leases.remove(key);
        }
        Ok(())
    }

    async fn read_origin(
        &self,
        origin: &str,
    ) -> Result<(Option<OriginState>, Duration), StoreError> {
        let (maps, now) = self.state().await;
        Ok((maps.origins.get(origin).copied(), now))
    }

    async fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let (mut maps, now) = self.state().await;
        let state = maps
            .origins
            .entry(origin.to_owned())
            .or_insert_with(|| OriginState::new(now));
        // Read after the latency: the answer's times count from the call.
        Ok(f(state, Now::new(now).late_by(LATENCY)))
    }

    async fn update_budget<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let (mut maps, now) = self.state().await;
        let state = maps.budget.get_or_insert_with(|| BudgetState::new(now));
        Ok(f(state, Now::new(now).late_by(LATENCY)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_outside_the_crate_conforms() {
    conformance::run_all(|| async { MapStore::default() }).await;
}

/// And serves the middleware: a 429 closes the gate every task reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_written_outside_the_crate_serves_a_client() {
    let store = MapStore::default();
    let (server, arrivals) = crate::common::scripted(|_, i| match i {
        0 => crate::common::too_many("1"),
        _ => crate::common::ok(),
    })
    .await;
    let policy = Policy::default().jitter(Duration::ZERO);
    let client = crate::common::client_with(RetryAfterMiddleware::with_store(policy, store));
    let r = client.get(server.uri()).send().await.expect("answered");
    assert_eq!(r.status(), 200);
    assert_eq!(crate::common::report(&r).attempts(), 2);
    assert_eq!(arrivals.len(), 2);
}

/// It never forgets an origin: the idle check, which the suite keeps
/// apart from `run_all`, finds that out.
#[tokio::test(start_paused = true)]
#[should_panic(expected = "kept after the idle time")]
async fn a_store_that_never_forgets_fails_the_idle_check() {
    conformance::idle_scopes_are_forgotten_as_origins_are(MapStore::default()).await;
}
