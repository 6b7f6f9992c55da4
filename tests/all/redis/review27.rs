//! Regression tests for issue 27's defects over a real `redis-server`
//! (each failed before its fix): failing open throttled every origin to
//! the first contact's trickle, and an admission applied after its caller
//! left kept what it reserved.

use super::support::*;

/// `n` GETs of `url`, one after the other: how long they took; each must
/// answer `200`.
async fn one_by_one(client: &ClientWithMiddleware, url: &str, n: usize) -> Duration {
    let start = Instant::now();
    for _ in 0..n {
        let r = client.get(url).send().await.expect("sent");
        assert_eq!(r.status(), 200);
    }
    start.elapsed()
}

/// Redis stopped, `FailMode::Open`: 20 GETs to a healthy server take as
/// long as 20 GETs to another with the first contact off (what is left is
/// each admission's failed call to Redis, before it falls back), and 20
/// GETs with the in-memory store are quicker still. Before, the answers
/// were counted for Redis and never reached the local state, so the origin
/// was never seen answering: each GET waited out the first contact (11.6 s
/// for 20 here, 3.9 s with the first contact off).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_open_learns_from_answers_as_the_memory_store_does() {
    bounded(Duration::from_secs(90), async {
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let (other, _) = scripted(|_, _| ResponseTemplate::new(200)).await;

        let memory = client_with(RetryAfterMiddleware::new(policy()));
        let in_memory = one_by_one(&memory, &format!("{}/memory", server.uri()), 20).await;

        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-27-open:")
            .await
            .fail_mode(FailMode::Open);
        redis.stop();
        let url = format!("{}/local", server.uri());
        let on_local = one_by_one(&client(s.clone(), policy()), &url, 20).await;
        let no_first_contact = client(s.clone(), policy().first_contact(Duration::ZERO));
        let baseline = one_by_one(&no_first_contact, &other.uri(), 20).await;
        assert!(Store::local_fallbacks(&s) > 0, "never fell back");
        assert_eq!(arrivals.len(), 40);

        eprintln!(
            "20 GETs: in memory {in_memory:?}; failing open {on_local:?}, \
             with the first contact off {baseline:?}"
        );
        // The first contact's half second is waited once, not per GET.
        let bound = baseline + baseline / 2 + Duration::from_secs(1);
        assert!(
            on_local <= bound,
            "failing open: {on_local:?} for 20 GETs; with the first contact off {baseline:?}"
        );
    })
    .await;
}
