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
