//! Regression tests from a review of the Redis store: released leases the
//! heartbeat put back, counts left unwritten after a failed write, answers
//! lost with their caller, and Redis Cluster.

use super::support::*;

/// Takes `keys` through `store` all at once, each for `ttl`; panics on an
/// error or a refusal.
async fn acquire_all(
    store: &RedisStore,
    keys: &[String],
    ttl: Duration,
) -> Vec<(String, reqwest_backpressure::store::LeaseToken)> {
    let mut tasks = tokio::task::JoinSet::new();
    for key in keys {
        let store = store.clone();
        let key = key.clone();
        tasks.spawn(async move {
            let token = store.acquire(&key, ttl).await;
            (key, token)
        });
    }
    let mut taken = Vec::with_capacity(keys.len());
    while let Some(done) = tasks.join_next().await {
        let (key, token) = done.expect("task ran");
        match token {
            Ok(Some(token)) => taken.push((key, token)),
            other => panic!("acquire {key}: {other:?}"),
        }
    }
    taken
}

/// Thousands of leases taken and released in waves while the heartbeat
/// beats every 50 ms: none of them comes back. Before, the heartbeat took
/// its list of held leases, a lease was released (locally, then in Redis),
/// and the heartbeat's re-assertion, finding the key absent, set it again
/// with the released token: the key was refused everywhere, its holder
/// included, until the old deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_never_comes_back() {
    bounded(Duration::from_secs(120), async {
        let redis = RedisServer::start();
        let prefix = "rbp-back:";
        // The heartbeat beats every grace / 3, at least every 50 ms.
        let a = store(&redis, prefix)
            .await
            .restart_grace(Duration::from_millis(150));
        let ttl = Duration::from_secs(60);
        // Held throughout: the heartbeat never stops.
        let anchors: Vec<String> = (0..3).map(|i| format!("anchor-{i}")).collect();
        let _anchors = acquire_all(&a, &anchors, ttl).await;
        let mut released = Vec::new();
        for wave in 0..6 {
            let names: Vec<String> = (0..1000).map(|i| format!("w{wave}-k{i}")).collect();
            let held = acquire_all(&a, &names, ttl).await;
            // Held over a few beats, then released 50 at a time, so that
            // releases land before, during and after the beats.
            tokio::time::sleep(Duration::from_millis(120)).await;
            for chunk in held.chunks(50) {
                for (key, token) in chunk {
                    a.release(key, *token);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            released.extend(names);
        }
        // Every release's round trip, and many beats, have run.
        tokio::time::sleep(Duration::from_millis(2500)).await;

        let mut conn = redis.conn();
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(
            leases.len(),
            anchors.len(),
            "{} of {} released leases are in Redis again",
            leases.len().saturating_sub(anchors.len()),
            released.len()
        );

        // Free for anyone at once: the holder itself (the first wave) and
        // another process (the rest).
        let b = store(&redis, prefix).await;
        let (own, others) = released.split_at(1000);
        let (own, others) = tokio::join!(
            acquire_all(&a, own, Duration::from_secs(10)),
            acquire_all(&b, others, Duration::from_secs(10))
        );
        assert_eq!(own.len() + others.len(), released.len());
    })
    .await;
}
