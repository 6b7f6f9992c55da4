//! `RedisStore` on a real local Redis Cluster (3 primaries, 3 replicas,
//! started by each test): leases and gates shared by stores seeded with
//! different nodes, keys spread over every primary, the heartbeat's
//! re-assertion per slot, and what the cluster store refuses.

use super::redis_cluster::RedisCluster;
use super::support::*;

pub(crate) async fn cluster_store(seeds: &[String], prefix: &str) -> RedisStore {
    RedisStore::connect_cluster(seeds)
        .await
        .expect("connect RedisStore to the cluster")
        .prefix(prefix)
}

/// The keys matching `pattern` on the node on `port`.
pub(crate) fn keys_on(cluster: &RedisCluster, port: u16, pattern: &str) -> Vec<String> {
    keys(&mut cluster.node(port).conn(), pattern)
}

/// The Redis key of the lease of task key `key` (the store's layout:
/// `{prefix}lease:{ab}:{sha1}`).
fn lease_key(prefix: &str, key: &str) -> String {
    let hash = sha1_smol::Sha1::from(key).digest().to_string();
    format!("{prefix}lease:{{{}}}:{hash}", &hash[..2])
}

/// The lease keys under `prefix` on each primary, by port.
fn leases_per_primary(cluster: &RedisCluster, prefix: &str) -> BTreeMap<u16, usize> {
    cluster
        .primaries()
        .iter()
        .map(|p| {
            (
                p.port,
                keys_on(cluster, p.port, &format!("{prefix}lease:*")).len(),
            )
        })
        .collect()
}

/// The case: two stores reaching the cluster through two different
/// nodes. Before, failing open, both held 30 of 30 keys at once (each node
/// answered for itself); failing closed, most acquisitions failed with
/// `MOVED`. Now the second store is refused every key the first holds, the
/// leases lie on all three primaries, and a release frees the key for the
/// other store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stores_seeded_by_different_nodes_share_leases_over_every_primary() {
    bounded(Duration::from_secs(60), async {
        let cluster = RedisCluster::start();
        let seeds = cluster.seeds();
        let prefix = "rbp-cluster-lease:";
        let a = cluster_store(&seeds[..1], prefix)
            .await
            .fail_mode(FailMode::Closed);
        let b = cluster_store(&seeds[4..5], prefix)
            .await
            .fail_mode(FailMode::Closed);
        let ttl = Duration::from_secs(30);
        let mut tokens = Vec::new();
        for i in 0..30 {
            let token = a.acquire(&format!("task-{i}"), ttl).await.expect("acquire");
            tokens.push(token.expect("a free key"));
        }
        for i in 0..30 {
            let taken = b.acquire(&format!("task-{i}"), ttl).await.expect("acquire");
            assert_eq!(taken, None, "task-{i} held twice");
        }
        let spread = leases_per_primary(&cluster, prefix);
        assert_eq!(spread.values().sum::<usize>(), 30, "{spread:?}");
        assert!(
            spread.len() == 3 && spread.values().all(|&n| n > 0),
            "leases on every primary: {spread:?}"
        );
        for (i, token) in tokens.into_iter().enumerate() {
            a.release(&format!("task-{i}"), token)
                .await
                .expect("release");
        }
        // The releases run as tasks of their own.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 0..30 {
            let taken = b.acquire(&format!("task-{i}"), ttl).await.expect("acquire");
            assert!(taken.is_some(), "task-{i} still held after its release");
        }
    })
    .await;
}

/// The heartbeat's re-assertion spans many leases: on a cluster it runs one
/// script per hash tag (no `CROSSSLOT`). After every primary is flushed,
/// each of 60 held leases, over many slots, is back within a few seconds,
/// and another store is refused every key again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_heartbeat_puts_back_leases_of_every_slot() {
    bounded(Duration::from_secs(60), async {
        let cluster = RedisCluster::start();
        let seeds = cluster.seeds();
        let prefix = "rbp-cluster-beat:";
        let a = cluster_store(&seeds, prefix)
            .await
            .restart_grace(Duration::ZERO);
        let b = cluster_store(&seeds, prefix)
            .await
            .fail_mode(FailMode::Closed)
            .restart_grace(Duration::ZERO);
        let ttl = Duration::from_secs(30);
        for i in 0..60 {
            let token = a.acquire(&format!("beat-{i}"), ttl).await.expect("acquire");
            assert!(token.is_some(), "beat-{i} not free");
        }
        let slots: std::collections::BTreeSet<u16> = cluster
            .primaries()
            .iter()
            .flat_map(|p| keys_on(&cluster, p.port, &format!("{prefix}lease:*")))
            .map(|k| cluster.slot(&k))
            .collect();
        assert!(slots.len() >= 30, "60 leases in {} slots", slots.len());
        // Each primary is emptied, checked in the same transaction: a count
        // taken after the last flush would race the heartbeat, which puts
        // leases back on the primaries flushed first.
        for p in cluster.primaries() {
            let ((), left): ((), u64) = redis::pipe()
                .atomic()
                .cmd("FLUSHALL")
                .cmd("DBSIZE")
                .query(&mut cluster.node(p.port).conn())
                .expect("FLUSHALL");
            assert_eq!(left, 0, "primary {} not flushed", p.port);
        }
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let back = leases_per_primary(&cluster, prefix).values().sum::<usize>();
            if back == 60 {
                break;
            }
            assert!(Instant::now() < give_up, "{back} of 60 leases back");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for i in 0..60 {
            let taken = b.acquire(&format!("beat-{i}"), ttl).await.expect("acquire");
            assert_eq!(taken, None, "beat-{i} free after the flush");
        }
    })
    .await;
}

/// A pushback seen through one cluster store holds the origin's gate for a
/// client over another (seeded by another node): its request arrives no
/// earlier than the server's `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pushback_through_one_cluster_store_gates_the_other() {
    bounded(Duration::from_secs(60), async {
        let cluster = RedisCluster::start();
        let seeds = cluster.seeds();
        let prefix = "rbp-cluster-gate:";
        let a = client(cluster_store(&seeds[..1], prefix).await, policy());
        let b_store = cluster_store(&seeds[2..3], prefix).await;
        let b = client(b_store.clone(), policy());
        let (server, arrivals) = scripted(|p, i| match (p, i) {
            ("/a", 0) => retry_after(2),
            _ => ResponseTemplate::new(200),
        })
        .await;
        let first = tokio::spawn(a.get(format!("{}/a", server.uri())).send());
        arrivals.wait_for(1).await;
        // A's answer reaches the shared state a moment after the server
        // sent it: B sees the gate closed before it asks.
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            match Store::gate(&b_store, &origin(&server)).await {
                Ok(Some(_)) => break,
                Ok(None) => {}
                Err(e) => panic!("gate: {e}"),
            }
            assert!(Instant::now() < give_up, "B never saw the gate");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let second = b
            .get(format!("{}/b", server.uri()))
            .with_extension(Deadline::after(Duration::from_secs(10)))
            .send()
            .await;
        assert_eq!(code(&second), "ok 200 OK");
        let pushed = arrivals.at("/a")[0];
        let gated = arrivals.at("/b")[0];
        assert!(
            gated - pushed >= Duration::from_secs(2),
            "sent {:?} after the pushback of 2 s",
            gated - pushed
        );
        let first = first.await.expect("task").expect("first");
        assert_eq!(first.status(), 200);
    })
    .await;
}

/// On a cluster a prefix with a brace would move the store's hash tags (a
/// lease and its release mark in two slots): every operation is refused,
/// in both fail modes, and nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prefix_with_a_brace_is_refused_on_a_cluster() {
    bounded(Duration::from_secs(60), async {
        let cluster = RedisCluster::start();
        let seeds = cluster.seeds();
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        for mode in [FailMode::Open, FailMode::Closed] {
            let s = cluster_store(&seeds, "{billing}:").await.fail_mode(mode);
            let e = s
                .acquire("k", Duration::from_secs(5))
                .await
                .expect_err("a brace in the prefix");
            assert!(e.is_refused(), "{mode:?}: {e}");
            assert!(e.to_string().contains("may not contain"), "{e}");
            let r = client(s, policy()).get(server.uri()).send().await;
            assert_eq!(code(&r), "store_unavailable", "{mode:?}");
        }
        assert_eq!(arrivals.len(), 0, "sent through a refused store");
        // The same prefix on a single Redis is fine.
        let single = RedisServer::start();
        let s = store(&single, "{billing}:").await;
        assert!(s.acquire("k", Duration::from_secs(5)).await.is_ok());
    })
    .await;
}

/// No seed, no seed that answers, or a seed that is no cluster node: typed
/// errors, no address or password in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_no_cluster_fails_without_naming_it() {
    bounded(Duration::from_secs(30), async {
        let none: [&str; 0] = [];
        let e = RedisStore::connect_cluster(none)
            .await
            .expect_err("no seed");
        assert!(e.to_string().contains("no seed"), "{e}");
        let port = super::redis_server::free_port().expect("port");
        let url = format!("redis://:secret-password@127.0.0.1:{port}/");
        let e = RedisStore::connect_cluster([url.as_str()])
            .await
            .expect_err("nobody listens");
        let message = e.to_string();
        for secret in ["secret-password", "127.0.0.1", &port.to_string()] {
            assert!(!message.contains(secret), "{secret:?} in {message:?}");
        }
        // A single Redis is no cluster: refused, typed.
        let single = RedisServer::start();
        let e = RedisStore::connect_cluster([single.url()])
            .await
            .expect_err("a single Redis taken for a cluster");
        assert!(!e.to_string().contains("127.0.0.1"), "{e}");
        // Lazily, the store is made, and fails open until the cluster is
        // there.
        let lazy = RedisStore::connect_cluster_lazy([url.as_str()])
            .await
            .expect("a valid seed is enough");
        assert!(lazy.acquire("k", Duration::from_secs(5)).await.is_ok());
        let closed = lazy.fail_mode(FailMode::Closed);
        assert!(closed.acquire("k2", Duration::from_secs(5)).await.is_err());
    })
    .await;
}

/// Two leases of one bucket (one slot) while that slot migrates to another
/// primary, one of them moved already: both stay exclusive (the other store
/// is refused each, through `ASK`), and their releases free them for the
/// other store before the migration ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_stay_exclusive_and_are_released_while_their_slot_migrates() {
    bounded(Duration::from_secs(60), async {
        let cluster = Arc::new(RedisCluster::start());
        let seeds = cluster.seeds();
        let prefix = "rbp-cluster-migrate:";
        let a = cluster_store(&seeds[..1], prefix)
            .await
            .fail_mode(FailMode::Closed)
            .restart_grace(Duration::ZERO);
        let b = cluster_store(&seeds[1..2], prefix)
            .await
            .fail_mode(FailMode::Closed)
            .restart_grace(Duration::ZERO);
        let ttl = Duration::from_secs(30);
        // Two task keys whose leases share a bucket, hence a slot.
        let mut by_bucket: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in 0..64 {
            let key = format!("m-{i}");
            let hash = sha1_smol::Sha1::from(key.as_str()).digest().to_string();
            by_bucket.entry(hash[..2].to_owned()).or_default().push(key);
        }
        let pair = by_bucket
            .values()
            .find(|ks| ks.len() >= 2)
            .expect("two of 64 keys in one of 256 buckets")
            .clone();
        let mut in_slot = Vec::new();
        for key in &pair[..2] {
            let token = a.acquire(key, ttl).await.expect("acquire").expect("free");
            in_slot.push((key.clone(), token));
        }
        let lease = lease_key(prefix, &pair[0]);
        let slot = cluster.slot(&lease);
        assert_eq!(slot, cluster.slot(&lease_key(prefix, &pair[1])));
        assert_eq!(
            keys_on(&cluster, cluster.primary_of(&lease), &lease),
            vec![lease.clone()]
        );
        let from = cluster.primary_of(&lease);
        let to = cluster
            .primaries()
            .iter()
            .map(|p| p.port)
            .find(|&p| p != from)
            .expect("another primary");
        let (half_tx, half_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let migrating = {
            let cluster = Arc::clone(&cluster);
            tokio::task::spawn_blocking(move || {
                cluster.migrate_slot(slot, from, to, || {
                    half_tx.send(()).expect("test waits");
                    let _ = go_rx.recv_timeout(Duration::from_secs(20));
                });
            })
        };
        tokio::task::spawn_blocking(move || half_rx.recv().expect("migration half-way"))
            .await
            .expect("wait");
        for (key, _) in &in_slot {
            let taken = b.acquire(key, ttl).await.expect("acquire mid-migration");
            assert_eq!(taken, None, "{key} taken mid-migration");
        }
        for (key, token) in &in_slot {
            a.release(key, *token).await.expect("release");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        for (key, _) in &in_slot {
            let taken = b.acquire(key, ttl).await;
            assert!(
                matches!(taken, Ok(Some(_))),
                "{key} after its release mid-migration: {taken:?}"
            );
        }
        go_tx.send(()).expect("migration waits");
        migrating.await.expect("migration");
    })
    .await;
}
