//! Redis failing: fail open keeps working on local state, fail closed refuses
//! without sending; Redis dying, freezing or starting late.

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_open_keeps_working_on_local_state_and_reconnects() {
    bounded(Duration::from_secs(40), async {
        let mut redis = RedisServer::start();
        let prefix = "rbp-open:";
        let s = store(&redis, prefix).await; // FailMode::Open is the default
        let c = client(s.clone(), policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        redis.stop();

        // Keyed and unkeyed requests go through on local state, promptly,
        // each sent exactly once.
        for i in 0..4 {
            let t = Instant::now();
            let mut req = c.post(format!("{url}/down/{i}"));
            if i % 2 == 0 {
                req = req.with_extension(IdempotencyKey::new(format!("k-{i}")));
            }
            let r = req.send().await;
            assert_eq!(code(&r), "ok 200 OK", "request {i} with Redis down");
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "request {i} took {:?}",
                t.elapsed()
            );
        }
        assert_eq!(arrivals.len(), 4, "each request sent exactly once");

        // Leases still hold within this process.
        let (wait_server, wait_arrivals) = scripted(retry_after_1_then_ok).await;
        let holder = tokio::spawn(
            post_keyed(&c, format!("{}/local", wait_server.uri()), "local-key").send(),
        );
        wait_arrivals.wait_for(1).await;
        let dup = post_keyed(&c, format!("{}/local", wait_server.uri()), "local-key")
            .send()
            .await;
        assert_eq!(code(&dup), "already_active", "local lease while down");
        let holder = holder.await.expect("task").expect("holder");
        assert_eq!(holder.status(), 200);
        assert_eq!(wait_arrivals.at("/local").len(), 2, "sent exactly twice");

        // Redis comes back on the same port: the store reconnects.
        redis.restart();
        let mut conn = redis.conn();
        let give_up = Instant::now() + Duration::from_secs(10);
        let mut probe = 0;
        loop {
            probe += 1;
            let lease = Store::acquire(&s, &format!("probe-{probe}"), Duration::from_secs(2))
                .await
                .expect("fail open never errors");
            assert!(lease.is_some());
            if !keys(&mut conn, &format!("{prefix}lease:*")).is_empty() {
                break;
            }
            assert!(Instant::now() < give_up, "the store never reconnected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // Shared state works again: a waiting task's lease is in Redis and
        // another process's store refuses the key.
        let (back_server, back_arrivals) = scripted(retry_after_1_then_ok).await;
        let before = keys(&mut conn, &format!("{prefix}lease:*")).len();
        let waiting =
            tokio::spawn(post_keyed(&c, format!("{}/back", back_server.uri()), "back-key").send());
        back_arrivals.wait_for(1).await;
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), before + 1, "the waiting task's lease");
        let other = client(store(&redis, prefix).await, policy());
        let dup = post_keyed(&other, format!("{}/back", back_server.uri()), "back-key")
            .send()
            .await;
        assert_eq!(code(&dup), "already_active", "shared lease after restart");
        let waiting = waiting.await.expect("task").expect("waiting task");
        assert_eq!(waiting.status(), 200);
        assert_eq!(back_arrivals.at("/back").len(), 2);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_refuses_without_sending_and_recovers() {
    bounded(Duration::from_secs(30), async {
        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-closed:")
            .await
            .fail_mode(FailMode::Closed);
        let c = client(s, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        redis.stop();
        for keyed in [true, false] {
            let t = Instant::now();
            let mut req = c.post(format!("{url}/x"));
            if keyed {
                req = req.with_extension(IdempotencyKey::new("closed-key"));
            }
            let r = tokio::time::timeout(Duration::from_secs(5), req.send())
                .await
                .expect("a closed store must not hang the request");
            assert_eq!(code(&r), "store_unavailable", "keyed: {keyed}");
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        }
        assert_eq!(arrivals.len(), 0, "nothing sent while failing closed");

        // Back up: requests flow again (after the store reconnects); every
        // refusal before that sent nothing.
        redis.restart();
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            let r = post_keyed(&c, format!("{url}/x"), "closed-key")
                .send()
                .await;
            match code(&r).as_str() {
                "ok 200 OK" => break,
                "store_unavailable" => assert_eq!(arrivals.len(), 0),
                other => panic!("unexpected outcome {other}"),
            }
            assert!(Instant::now() < give_up, "the store never reconnected");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(arrivals.len(), 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_dying_while_a_task_waits() {
    bounded(Duration::from_secs(30), async {
        for mode in [FailMode::Open, FailMode::Closed] {
            let mut redis = RedisServer::start();
            let c = client(store(&redis, "rbp-mid:").await.fail_mode(mode), policy());
            let (server, arrivals) = scripted(retry_after_1_then_ok).await;
            let task =
                tokio::spawn(post_keyed(&c, format!("{}/mid", server.uri()), "mid-key").send());
            arrivals.wait_for(1).await;
            // Let the pushback be recorded, then kill Redis mid-wait.
            tokio::time::sleep(Duration::from_millis(200)).await;
            redis.stop();
            let r = tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .expect("the waiting task must not hang")
                .expect("task");
            let at = arrivals.at("/mid");
            match mode {
                FailMode::Open => {
                    assert_eq!(code(&r), "ok 200 OK");
                    assert_eq!(report(r.as_ref().unwrap()).attempts(), 2);
                    assert_eq!(at.len(), 2, "sent exactly twice");
                    assert!(at[1] - at[0] >= Duration::from_secs(1), "retry early");
                }
                FailMode::Closed => {
                    // Today `store_unavailable`; the 429 itself once the bug
                    // in `fail_closed_after_a_pushback_returns_the_pushback`
                    // is fixed. Either way: nothing more is sent.
                    let c = code(&r);
                    assert!(
                        c == "store_unavailable" || c == "ok 429 Too Many Requests",
                        "{c}"
                    );
                    assert_eq!(at.len(), 1, "nothing more sent");
                }
            }
        }
    })
    .await;
}

/// Sends one keyed request whose first answer (`first`, delayed 500 ms) is
/// still on its way when Redis dies; the retry, if any, gets a 200. Returns
/// the outcome and how many requests the server received.
async fn redis_dies_during_first_answer(
    mode: FailMode,
    first: ResponseTemplate,
) -> (reqwest_middleware::Result<reqwest::Response>, usize) {
    let mut redis = RedisServer::start();
    let policy = policy().missing_retry_after(Fallback::Delay(Duration::from_millis(300)));
    let c = client(store(&redis, "rbp-sent:").await.fail_mode(mode), policy);
    let first = first.set_delay(Duration::from_millis(500));
    let (server, arrivals) = scripted(move |_, i| match i {
        0 => first.clone(),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let task = tokio::spawn(post_keyed(&c, format!("{}/sent", server.uri()), "sent-key").send());
    // The request is at the server, its answer delayed: Redis dies.
    arrivals.wait_for(1).await;
    redis.stop();
    let r = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("no hang")
        .expect("task");
    (r, arrivals.len())
}

/// `store_unavailable` means "nothing was sent": a caller may then safely
/// send again. An answer that arrived must reach the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_still_returns_an_answer_that_arrived() {
    bounded(Duration::from_secs(20), async {
        let (r, sent) =
            redis_dies_during_first_answer(FailMode::Closed, ResponseTemplate::new(200)).await;
        assert_eq!(code(&r), "ok 200 OK", "the server's 200 was lost");
        assert_eq!(sent, 1);
    })
    .await;
}

/// Like [`fail_closed_still_returns_an_answer_that_arrived`], for a 429:
/// the retry cannot be sent (the store fails closed), so the task should
/// stop with the 429 the server sent (DESIGN: "a stopped task is returned
/// as the last real response"), not with `store_unavailable`, whose
/// documentation says nothing was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fail_closed_after_a_pushback_returns_the_pushback() {
    bounded(Duration::from_secs(20), async {
        for (label, first) in [
            ("429 Retry-After: 1", retry_after(1)),
            ("429 without Retry-After", ResponseTemplate::new(429)),
        ] {
            let (r, sent) = redis_dies_during_first_answer(FailMode::Closed, first).await;
            assert_eq!(sent, 1, "{label}: nothing sent after Redis died");
            assert_eq!(
                code(&r),
                "ok 429 Too Many Requests",
                "{label}: the caller got {} although the server received and \
                 answered a request",
                code(&r)
            );
            let stop = r.as_ref().ok().and_then(|r| report(r).stop_reason());
            assert_eq!(stop.map(|s| s.code()), Some("store_unavailable"), "{label}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_redis_times_out_instead_of_hanging() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let open = client(store(&redis, "rbp-frozen:").await, policy());
        let closed = client(
            store(&redis, "rbp-frozen:")
                .await
                .fail_mode(FailMode::Closed),
            policy(),
        );
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        // Connections stay open, nothing answers: only timeouts help.
        redis.signal("-STOP");
        let t = Instant::now();
        let r = post_keyed(&open, format!("{url}/open"), "frozen-1")
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        // Three store operations at most 500 ms each.
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!(arrivals.at("/open").len(), 1);

        let t = Instant::now();
        let r = post_keyed(&closed, format!("{url}/closed"), "frozen-2")
            .send()
            .await;
        assert_eq!(code(&r), "store_unavailable");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert!(arrivals.at("/closed").is_empty());
        redis.signal("-CONT");
    })
    .await;
}

/// A worker that starts while Redis is away works on local state (failing
/// open) and shares its state once Redis is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_store_starts_without_redis_and_joins_it_later() {
    bounded(Duration::from_secs(30), async {
        let mut redis = RedisServer::start();
        redis.stop();
        let store = RedisStore::connect_lazy(&redis.url())
            .await
            .expect("a valid url is enough")
            .prefix("rbp-lazy:");
        let client = client(store, policy());
        let (server, arrivals) = scripted(|p, i| {
            if p == "/wait" && i % 2 == 0 {
                retry_after(1)
            } else {
                ResponseTemplate::new(200)
            }
        })
        .await;
        let t = Instant::now();
        let r = post_keyed(&client, format!("{}/down", server.uri()), "while-down")
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());

        redis.restart();
        // Within a few attempts the manager reconnects; then a waiting keyed
        // task's lease is visible in Redis.
        let mut seen = false;
        for _ in 0..10 {
            let waiting = tokio::spawn({
                let client = client.clone();
                let url = format!("{}/wait", server.uri());
                async move { post_keyed(&client, url, "after-up").send().await }
            });
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut conn = redis.conn();
            seen = !keys(&mut conn, "rbp-lazy:lease:*").is_empty();
            let r = waiting.await.expect("task");
            assert_eq!(code(&r), "ok 200 OK");
            if seen {
                break;
            }
        }
        assert!(seen, "the lazy store never reached Redis");
        assert!(arrivals.at("/down").len() == 1);
    })
    .await;
}

/// A slow store never carries a task past its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_redis_never_outlives_the_deadline() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        // A patient store: only the task's deadline can cut it short.
        let store = store(&redis, "rbp-deadline:")
            .await
            .op_timeout(Duration::from_secs(5));
        let client = client(store, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let warm = post_keyed(&client, format!("{}/warm", server.uri()), "warm")
            .send()
            .await;
        assert_eq!(code(&warm), "ok 200 OK");
        redis.signal("-STOP");
        let t = Instant::now();
        let r = post_keyed(&client, format!("{}/late", server.uri()), "late")
            .with_extension(Deadline::after(Duration::from_millis(300)))
            .send()
            .await;
        let took = t.elapsed();
        redis.signal("-CONT");
        assert_eq!(code(&r), "deadline_exhausted");
        assert!(took < Duration::from_millis(1500), "{took:?}");
        assert_eq!(arrivals.at("/late").len(), 0);
    })
    .await;
}
