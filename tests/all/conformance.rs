//! The store conformance suite against the crate's own stores: the
//! in-memory one, the same behind write coalescing, and Redis (a real
//! `redis-server`, and a real local Redis Cluster; a fresh key prefix for
//! every check).

use reqwest_backpressure::conformance;
use reqwest_backpressure::store::{Coalesced, MemoryStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_conforms() {
    conformance::run_all(|| async { MemoryStore::new() }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coalesced_memory_store_conforms() {
    conformance::run_all(|| async { Coalesced::new(MemoryStore::new()) }).await;
}

/// Idle scopes are forgotten as idle origins are (on tokio's paused
/// clock: the check sleeps past the five idle minutes). Redis forgets by
/// TTL, read in `redis::scopes`.
#[tokio::test(start_paused = true)]
async fn the_memory_store_forgets_idle_scopes() {
    conformance::idle_scopes_are_forgotten_as_origins_are(MemoryStore::new()).await;
}

#[tokio::test(start_paused = true)]
async fn a_coalesced_memory_store_forgets_idle_scopes() {
    conformance::idle_scopes_are_forgotten_as_origins_are(Coalesced::new(MemoryStore::new())).await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_store_conforms() {
    use reqwest_backpressure::store::RedisStore;
    use std::sync::atomic::{AtomicU32, Ordering};
    let redis = crate::redis::redis_server::RedisServer::start();
    let url = redis.url();
    let runs = AtomicU32::new(0);
    conformance::run_all(|| {
        let prefix = format!("conformance-{}:", runs.fetch_add(1, Ordering::Relaxed));
        let url = url.clone();
        async move {
            RedisStore::connect(&url)
                .await
                .expect("connect RedisStore")
                .prefix(prefix)
        }
    })
    .await;
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_cluster_store_conforms() {
    use reqwest_backpressure::store::RedisStore;
    use std::sync::atomic::{AtomicU32, Ordering};
    let cluster = crate::redis::redis_cluster::RedisCluster::start();
    let seeds = cluster.seeds();
    let runs = AtomicU32::new(0);
    conformance::run_all(|| {
        let run = runs.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("conformance-{run}:");
        // Each check seeded by another node.
        let seed = seeds[run as usize % seeds.len()].clone();
        async move {
            RedisStore::connect_cluster([seed])
                .await
                .expect("connect RedisStore to the cluster")
                .prefix(prefix)
        }
    })
    .await;
}

/// The suite has teeth: a store whose update reads, waits and writes back
/// (no atomicity) loses concurrent updates, and fails.
mod racy {
    use std::time::Duration;

    use reqwest_backpressure::Store;
    use reqwest_backpressure::budget::BudgetState;
    use reqwest_backpressure::conformance;
    use reqwest_backpressure::origin::OriginState;
    use reqwest_backpressure::store::{LeaseToken, MemoryStore, Now, StoreError};

    #[derive(Clone, Default)]
    struct Racy(MemoryStore);

    impl Store for Racy {
        async fn acquire(
            &self,
            key: &str,
            ttl: Duration,
        ) -> Result<Option<LeaseToken>, StoreError> {
            self.0.acquire(key, ttl).await
        }

        async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
            self.0.release(key, token).await
        }

        async fn read_origin(
            &self,
            origin: &str,
        ) -> Result<(Option<OriginState>, Duration), StoreError> {
            self.0.read_origin(origin).await
        }

        async fn update_origin<T: Send + 'static>(
            &self,
            origin: &str,
            mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
        ) -> Result<T, StoreError> {
            let (state, now) = self.0.read_origin(origin).await?;
            let mut state = state.unwrap_or_else(|| OriginState::new(now));
            let out = f(&mut state, Now::new(now));
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.0.update_origin(origin, move |s, _| *s = state).await?;
            Ok(out)
        }

        async fn update_budget<T: Send + 'static>(
            &self,
            mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
        ) -> Result<T, StoreError> {
            let mut state = self.0.update_budget(|s, _| *s).await?;
            let (_, now) = self.0.read_origin("").await?;
            let out = f(&mut state, Now::new(now));
            tokio::time::sleep(Duration::from_millis(1)).await;
            self.0.update_budget(move |s, _| *s = state).await?;
            Ok(out)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "a quota of 5 let")]
    async fn racing_admissions_fail_the_quota_check() {
        conformance::concurrent_admits_spend_a_stated_quota_once(Racy::default()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "withdrawals from a budget of 100 granted")]
    async fn racing_withdrawals_fail_the_budget_check() {
        conformance::budget_accounting_holds_under_concurrency(Racy::default()).await;
    }
}

/// The scope checks have teeth: a store that names a limit by less than
/// its whole key (its origin alone, or the key's letters and digits alone,
/// as a naive sanitiser would) lets one scope hold another, and fails.
mod coarse {
    use std::time::Duration;

    use reqwest_backpressure::Store;
    use reqwest_backpressure::budget::BudgetState;
    use reqwest_backpressure::conformance;
    use reqwest_backpressure::origin::OriginState;
    use reqwest_backpressure::store::{LeaseToken, MemoryStore, Now, StoreError};

    /// A memory store keeping each limit under `name(key)`.
    #[derive(Clone)]
    struct Coarse {
        inner: MemoryStore,
        name: fn(&str) -> String,
    }

    /// The origin alone: the key up to its `#`.
    fn origin_alone(key: &str) -> String {
        key.split('#').next().unwrap_or(key).to_owned()
    }

    /// The key's ASCII letters and digits alone.
    fn letters_and_digits(key: &str) -> String {
        key.chars().filter(char::is_ascii_alphanumeric).collect()
    }

    impl Store for Coarse {
        async fn acquire(
            &self,
            key: &str,
            ttl: Duration,
        ) -> Result<Option<LeaseToken>, StoreError> {
            self.inner.acquire(key, ttl).await
        }

        async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
            self.inner.release(key, token).await
        }

        async fn read_origin(
            &self,
            origin: &str,
        ) -> Result<(Option<OriginState>, Duration), StoreError> {
            self.inner.read_origin(&(self.name)(origin)).await
        }

        async fn update_origin<T: Send + 'static>(
            &self,
            origin: &str,
            f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
        ) -> Result<T, StoreError> {
            self.inner.update_origin(&(self.name)(origin), f).await
        }

        async fn update_budget<T: Send + 'static>(
            &self,
            f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
        ) -> Result<T, StoreError> {
            self.inner.update_budget(f).await
        }
    }

    fn by(name: fn(&str) -> String) -> Coarse {
        Coarse {
            inner: MemoryStore::new(),
            name,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "held by a pushback in")]
    async fn a_store_keyed_by_origin_fails_the_gate_check() {
        conformance::scope_gates_hold_apart(by(origin_alone)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "told it is spent")]
    async fn a_store_keyed_by_origin_fails_the_quota_check() {
        conformance::scope_quotas_are_spent_apart(by(origin_alone)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "paced by the pace of")]
    async fn a_store_keyed_by_origin_fails_the_pace_check() {
        conformance::scope_paces_are_learned_apart(by(origin_alone)).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "not its own")]
    async fn a_store_sanitising_keys_fails_the_hostile_names_check() {
        conformance::hostile_scope_names_make_keys_of_their_own(by(letters_and_digits)).await;
    }
}
