//! Redis not answering costs one failed round trip, not one per operation
//! (issue 27, defect 6): once an operation found Redis away, the store
//! works on local state at once (failing open) or refuses at once (failing
//! closed), while a probe in the background finds out when Redis answers
//! again; then Redis is used again.

use super::redis_cluster::RedisCluster;
use super::redis_server::free_port;
use super::support::*;

/// `n` GETs of `url`, one after the other: how long they took, and their
/// outcomes' codes.
async fn one_by_one(client: &ClientWithMiddleware, url: &str, n: usize) -> (Duration, Vec<String>) {
    let start = Instant::now();
    let mut codes = Vec::new();
    for _ in 0..n {
        codes.push(code(&client.get(url).send().await));
    }
    (start.elapsed(), codes)
}

/// 20 GETs with the in-memory store, to compare with.
async fn in_memory(url: &str) -> Duration {
    let memory = client_with(RetryAfterMiddleware::new(policy()));
    let (took, codes) = one_by_one(&memory, url, 20).await;
    assert!(codes.iter().all(|c| c == "ok 200 OK"), "{codes:?}");
    took
}

/// 20 GETs through `store` (Redis away, failing open): all answered 200,
/// each sent once, within a second of what the in-memory store takes, plus
/// `timeouts` round trips waited out to find Redis away.
async fn twenty_gets_as_fast_as_in_memory(store: RedisStore, what: &str, timeouts: u32) {
    let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
    let memory = in_memory(&format!("{}/memory", server.uri())).await;
    let c = client(store.clone(), policy());
    let (took, codes) = one_by_one(&c, &format!("{}/local", server.uri()), 20).await;
    assert!(codes.iter().all(|c| c == "ok 200 OK"), "{what}: {codes:?}");
    assert_eq!(
        arrivals.at("/local").len(),
        20,
        "{what}: each GET sent once"
    );
    assert!(
        Store::local_fallbacks(&store) > 0,
        "{what}: never fell back"
    );
    eprintln!("20 GETs, {what}: {took:?}; in memory {memory:?}");
    assert!(
        took < memory + Duration::from_secs(1) + Duration::from_millis(500) * timeouts,
        "{what}: 20 GETs took {took:?} (in memory {memory:?})"
    );
}

/// Redis stopped after the store connected. Before, every store operation
/// tried Redis again first (the connection manager's reconnect and its
/// backoff): 20 GETs took about 3.9 s against about 10 ms in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_with_redis_stopped_is_as_fast_as_in_memory() {
    bounded(Duration::from_secs(60), async {
        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-fast-stopped:").await;
        redis.stop();
        twenty_gets_as_fast_as_in_memory(s, "Redis stopped", 0).await;
    })
    .await;
}

/// A Redis never reachable (a lazy store on a port nobody listens on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_with_redis_never_reachable_is_as_fast_as_in_memory() {
    bounded(Duration::from_secs(60), async {
        let port = free_port().expect("a free port");
        let s = RedisStore::connect_lazy(&format!("redis://127.0.0.1:{port}/"))
            .await
            .expect("a valid url is enough")
            .prefix("rbp-fast-never:");
        twenty_gets_as_fast_as_in_memory(s, "Redis never reachable", 0).await;
    })
    .await;
}

/// A frozen Redis (`SIGSTOP`: connections open, nothing answers), as one
/// that drops packets: only `op_timeout` (500 ms) ends a round trip. Before,
/// every operation waited it out: 20 GETs took over 20 s. Now the first
/// one does, and the others skip Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_with_redis_frozen_waits_out_one_timeout() {
    bounded(Duration::from_secs(90), async {
        let redis = RedisServer::start();
        let s = store(&redis, "rbp-fast-frozen:").await;
        redis.signal("-STOP");
        twenty_gets_as_fast_as_in_memory(s, "Redis frozen", 1).await;
        redis.signal("-CONT");
    })
    .await;
}

/// A Redis Cluster whose every node is frozen: each slot touched waits out
/// one `op_timeout` (the origin's and the budget's: two), then is skipped
/// until a probe reaches it. Before, every operation waited it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_with_the_cluster_frozen_waits_out_one_timeout_per_slot() {
    bounded(Duration::from_secs(120), async {
        let cluster = RedisCluster::start();
        let seeds = cluster.seeds();
        let s = super::cluster::cluster_store(&seeds, "rbp-fast-cluster:").await;
        let ports: Vec<u16> = cluster.lines(None).iter().map(|l| l.port).collect();
        for &port in &ports {
            cluster.node(port).signal("-STOP");
        }
        twenty_gets_as_fast_as_in_memory(s, "cluster frozen", 2).await;
        for &port in &ports {
            cluster.node(port).signal("-CONT");
        }
    })
    .await;
}

/// Failing closed refuses as fast: `store_unavailable` for each of 20 GETs,
/// none sent, in well under a second (before: about 0.2 s each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_closed_refuses_fast() {
    bounded(Duration::from_secs(60), async {
        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-fast-closed:")
            .await
            .fail_mode(FailMode::Closed);
        redis.stop();
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let (took, codes) = one_by_one(&client(s, policy()), &server.uri(), 20).await;
        assert!(codes.iter().all(|c| c == "store_unavailable"), "{codes:?}");
        assert_eq!(arrivals.len(), 0, "nothing sent while failing closed");
        eprintln!("20 GETs refused failing closed: {took:?}");
        assert!(took < Duration::from_secs(1), "20 refusals took {took:?}");
    })
    .await;
}

/// Redis back: without any traffic, the store's probe finds it within its
/// interval (at most a second, plus the reconnect); from then on every
/// operation goes to Redis again, and a pushback one store records is seen
/// by another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_back_is_used_again_within_the_probe_interval() {
    bounded(Duration::from_secs(60), async {
        let mut redis = RedisServer::start();
        let prefix = "rbp-fast-back:";
        let a = store(&redis, prefix).await;
        redis.stop();
        // Long enough down for the probe interval to reach its ceiling.
        let (warm, _) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let c = client(a.clone(), policy());
        for _ in 0..10 {
            let r = c.get(warm.uri()).send().await;
            assert_eq!(code(&r), "ok 200 OK");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }

        redis.restart();
        let back = Instant::now();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // An operation now goes to Redis, not to local state.
        let fallbacks = Store::local_fallbacks(&a);
        let read = Store::read_origin(&a, "http://probe.invalid").await;
        assert!(read.is_ok());
        assert_eq!(
            Store::local_fallbacks(&a),
            fallbacks,
            "{:?} after Redis came back, the store still falls back",
            back.elapsed()
        );

        // A pushback recorded through `a` is seen by a second store.
        let (server, arrivals) = scripted(|_, _| retry_after(5)).await;
        let r = c
            .get(server.uri())
            .with_extension(Deadline::after(Duration::from_secs(1)))
            .send()
            .await;
        assert_eq!(code(&r), "ok 429 Too Many Requests");
        let b = client(store(&redis, prefix).await, policy());
        let r = b
            .get(server.uri())
            .with_extension(Deadline::after(Duration::from_secs(1)))
            .send()
            .await;
        assert_eq!(arrivals.len(), 1, "the second store sent into the gate");
        assert_eq!(Store::local_fallbacks(&a), fallbacks);
        drop(r);
    })
    .await;
}
