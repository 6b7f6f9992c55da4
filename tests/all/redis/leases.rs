//! Key leases shared through Redis: one active task per key across stores, a
//! crashed holder's lease expiring, and a lease freed the moment its task
//! ends, gives up or times out.

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lease_held_through_one_store_refuses_the_key_in_another() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-lease:";
        // Two connections, one prefix: two processes.
        let a = client(store(&redis, prefix).await, policy());
        let b = client(store(&redis, prefix).await, policy());
        let (server, arrivals) = scripted(|p, i| match (p, i) {
            ("/orders/1", 0) => retry_after(1),
            _ => ResponseTemplate::new(200),
        })
        .await;
        let url = server.uri();

        // A's task is pushed back and waits, holding the key.
        let first = tokio::spawn(
            post_keyed(&a, format!("{url}/orders/1"), "order-1")
                .with_extension(Deadline::after(Duration::from_secs(10)))
                .send(),
        );
        arrivals.wait_for(1).await;

        let mut conn = redis.conn();
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), 1, "one lease in Redis: {leases:?}");
        assert!(!leases[0].contains("order-1"), "key text in {leases:?}");
        let ttl = pttl(&mut conn, &leases[0]);
        assert!(
            ttl > 8_000 && ttl <= 10_000,
            "the lease lives until the task's deadline (10 s): {ttl} ms"
        );

        // The same key through the other store: refused, nothing sent.
        let second = post_keyed(&b, format!("{url}/orders/1"), "order-1")
            .send()
            .await;
        assert_eq!(code(&second), "already_active");
        assert_eq!(arrivals.at("/orders/1").len(), 1, "B sent nothing");

        // Another key is fine.
        let other = post_keyed(&b, format!("{url}/orders/2"), "order-2")
            .send()
            .await;
        assert_eq!(code(&other), "ok 200 OK");
        assert_eq!(arrivals.at("/orders/2").len(), 1);

        let first = first.await.expect("task").expect("A's task succeeds");
        assert_eq!(first.status(), 200);
        assert_eq!(report(&first).attempts(), 2);
        let at = arrivals.at("/orders/1");
        assert_eq!(at.len(), 2);
        assert!(at[1] - at[0] >= Duration::from_secs(1), "retry too early");

        // Release runs as a spawned task: give it a moment.
        let give_up = Instant::now() + Duration::from_secs(2);
        while !keys(&mut conn, &format!("{prefix}*lease*")).is_empty() {
            assert!(Instant::now() < give_up, "lease not released in Redis");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // ...and B may now run the key.
        let again = post_keyed(&b, format!("{url}/orders/1"), "order-1")
            .send()
            .await;
        assert_eq!(code(&again), "ok 200 OK");
        assert_eq!(arrivals.at("/orders/1").len(), 3);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_holders_lease_frees_itself() {
    bounded(Duration::from_secs(10), async {
        let redis = RedisServer::start();
        let prefix = "rbp-crash:";
        let one = store(&redis, prefix).await;
        let two = store(&redis, prefix).await;

        // Taken and never released: the holder "crashed".
        let held = Store::acquire(&one, "job-7", Duration::from_millis(300)).await;
        assert!(matches!(held, Ok(Some(_))), "{held:?}");
        let refused = Store::acquire(&two, "job-7", Duration::from_secs(5)).await;
        assert_eq!(refused, Ok(None), "held by the other process");

        let mut conn = redis.conn();
        let leases = keys(&mut conn, &format!("{prefix}lease:*"));
        assert_eq!(leases.len(), 1);
        let ttl = pttl(&mut conn, &leases[0]);
        assert!(ttl > 0 && ttl <= 300, "lease TTL {ttl} ms");

        tokio::time::sleep(Duration::from_millis(500)).await;
        let taken = Store::acquire(&two, "job-7", Duration::from_secs(5)).await;
        assert!(matches!(taken, Ok(Some(_))), "expired lease: {taken:?}");
    })
    .await;
}

/// The same key, sent again the moment its task ended, is free: the
/// lease's release (spawned from `Drop`) may not have reached Redis yet,
/// but the next acquire frees this process's own stale lease first.
#[tokio::test(flavor = "current_thread")]
async fn a_key_is_free_again_the_moment_its_task_ends() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let client = client(store(&redis, "rbp-reuse:").await, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        for i in 0..50 {
            let r = post_keyed(&client, format!("{}/again", server.uri()), "same-key")
                .send()
                .await;
            assert_eq!(code(&r), "ok 200 OK", "send {i}");
        }
        assert_eq!(arrivals.at("/again").len(), 50);
    })
    .await;
}

/// Finished tasks leave nothing behind in the process either: the local
/// copy of each lease goes with it, so a later Redis outage does not refuse
/// keys that nobody runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_keys_leave_no_local_lease_behind() {
    bounded(Duration::from_secs(20), async {
        let mut redis = RedisServer::start();
        let store = store(&redis, "rbp-local:").await;
        let local = store.local().clone();
        let client = client(store, policy());
        let (server, _arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        for i in 0..100 {
            let r = client
                .post(format!("{}/k", server.uri()))
                .with_extension(IdempotencyKey::new(format!("k-{i}")))
                .send()
                .await;
            assert_eq!(code(&r), "ok 200 OK");
        }
        assert_eq!(local.active_keys(), 0, "local leases left behind");
        redis.stop();
        let r = post_keyed(&client, format!("{}/k", server.uri()), "k-7")
            .send()
            .await;
        assert_eq!(
            code(&r),
            "ok 200 OK",
            "a finished key is refused while Redis is down"
        );
    })
    .await;
}

/// A burst of first sends against a healthy Redis, failing closed: none is
/// refused for contention or slowness of this process's own queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_against_a_healthy_redis_is_not_refused() {
    bounded(Duration::from_secs(40), async {
        let redis = RedisServer::start();
        let store = store(&redis, "rbp-burst:")
            .await
            .fail_mode(FailMode::Closed);
        let client = client(store, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let tasks: Vec<_> = (0..1000)
            .map(|_| {
                let client = client.clone();
                let url = format!("{}/burst", server.uri());
                tokio::spawn(async move { code(&client.get(url).send().await) })
            })
            .collect();
        let mut refused = 0;
        for t in tasks {
            if t.await.expect("task") != "ok 200 OK" {
                refused += 1;
            }
        }
        assert_eq!(refused, 0, "of 1000 sends");
        assert_eq!(arrivals.at("/burst").len(), 1000);
    })
    .await;
}

/// A caller that gives up while the lease's round trip to Redis is in
/// flight leaves no lease behind, locally or in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_giving_up_during_the_lease_leaves_no_lease() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let store = store(&redis, "rbp-cancel:").await;
        let local = store.local().clone();
        let client = client(store, policy());
        let (server, _arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = format!("{}/c", server.uri());
        // Warm the connection and the script cache.
        let r = post_keyed(&client, &url, "warm").send().await;
        assert_eq!(code(&r), "ok 200 OK");
        tokio::time::sleep(Duration::from_millis(100)).await;

        redis.signal("-STOP");
        let fut = post_keyed(&client, &url, "cancel-me")
            .with_extension(Deadline::after(Duration::from_secs(30)))
            .send();
        assert!(
            tokio::time::timeout(Duration::from_millis(100), fut)
                .await
                .is_err()
        );
        assert_eq!(
            local.active_keys(),
            0,
            "the local lease outlived its caller"
        );
        redis.signal("-CONT");
        tokio::time::sleep(Duration::from_millis(800)).await;
        let mut conn = redis.conn();
        assert_eq!(keys(&mut conn, "rbp-cancel:lease:*"), Vec::<String>::new());
        let r = post_keyed(&client, &url, "cancel-me").send().await;
        assert_eq!(code(&r), "ok 200 OK");
    })
    .await;
}

/// Failing closed on a lease whose round trip timed out: if Redis applies
/// the lease after all, it is released, so the caller's own retry and
/// other processes are not refused for the lease's whole TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_timed_out_failing_closed_is_released_later() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let a = store(&redis, "rbp-late:")
            .await
            .fail_mode(FailMode::Closed)
            .op_timeout(Duration::from_millis(100));
        let b = store(&redis, "rbp-late:").await;
        for (s, key) in [(&a, "warm-a"), (&b, "warm-b")] {
            let t = s
                .acquire(key, Duration::from_secs(30))
                .await
                .expect("redis up")
                .expect("free");
            s.release(key, t).await.expect("released");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        redis.signal("-STOP");
        let frozen = a.acquire("k", Duration::from_secs(30)).await;
        assert!(frozen.is_err(), "{frozen:?}");
        assert_eq!(a.local().active_keys(), 0);
        redis.signal("-CONT");
        tokio::time::sleep(Duration::from_millis(800)).await;
        let other = b.acquire("k", Duration::from_secs(30)).await;
        assert!(matches!(other, Ok(Some(_))), "{other:?}");
    })
    .await;
}

/// Failing closed, a Redis that has just started (or restarted empty) gives
/// out no lease for the restart grace: a task whose deadline is shorter is
/// refused with `store_unavailable` and sends nothing, one whose deadline
/// allows waits until the grace has passed, then sends. Failing open sends
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_redis_gives_no_lease_within_the_restart_grace_failing_closed() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let started = Instant::now();
        let grace = Duration::from_secs(4);
        let closed = store(&redis, "rbp-grace:")
            .await
            .fail_mode(FailMode::Closed)
            .restart_grace(grace);
        let open = store(&redis, "rbp-grace:").await.restart_grace(grace);
        let closed = client(closed, policy());
        let open = client(open, policy());
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = server.uri();

        let r = post_keyed(&open, format!("{url}/open"), "open-1")
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK", "failing open does not wait");

        let r = post_keyed(&closed, format!("{url}/short"), "short-1")
            .with_extension(Deadline::after(Duration::from_millis(500)))
            .send()
            .await;
        assert_eq!(code(&r), "store_unavailable");
        assert!(arrivals.at("/short").is_empty(), "refused before any send");

        let r = post_keyed(&closed, format!("{url}/long"), "long-1")
            .with_extension(Deadline::after(Duration::from_secs(15)))
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        let sent = arrivals.at("/long");
        assert_eq!(sent.len(), 1);
        // Redis answered its first ping just before `started`; its uptime
        // is counted in whole seconds with one taken off, so the grace may
        // run up to a second longer, never shorter.
        assert!(
            sent[0].duration_since(started) >= grace - Duration::from_millis(100),
            "sent {:?} after Redis started",
            sent[0].duration_since(started)
        );
    })
    .await;
}

/// `warn` events whose message says leases were found held by other tasks.
#[cfg(feature = "tracing")]
#[derive(Clone, Default)]
struct LostWarns(Arc<std::sync::atomic::AtomicUsize>);

#[cfg(feature = "tracing")]
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for LostWarns {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message(bool);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                self.0 |= f.name() == "message" && format!("{v:?}").contains("held by other tasks");
            }
        }
        let mut m = Message(false);
        event.record(&mut m);
        if m.0 {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The heartbeat warns of a held lease that another task holds in Redis,
/// but not of one whose release's mark is there (released after the beat
/// listed it, and taken since: no loss).
#[cfg(feature = "tracing")]
#[tokio::test(flavor = "current_thread")]
async fn the_heartbeat_warns_of_a_lost_lease_not_of_a_released_one() {
    use tracing_subscriber::layer::SubscriberExt;
    let lost = LostWarns::default();
    let _subscriber =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(lost.clone()));
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let prefix = "rbp-lost:";
        let s = store(&redis, prefix).await.restart_grace(Duration::ZERO);
        let _token = s
            .acquire("job-1", Duration::from_secs(20))
            .await
            .expect("acquire")
            .expect("free");
        let mut conn = redis.conn();
        let lease = keys(&mut conn, &format!("{prefix}lease:*"))
            .pop()
            .expect("the lease in Redis");
        let token: String = redis::cmd("GET").arg(&lease).query(&mut conn).expect("GET");
        let mark = format!(
            "{}:{token}",
            lease.replacen(&format!("{prefix}lease:"), &format!("{prefix}freed:"), 1)
        );
        // As if released (its mark) and taken by another task since.
        let () = redis::cmd("SET")
            .arg(&mark)
            .arg("1")
            .arg("PX")
            .arg(10_000)
            .query(&mut conn)
            .expect("SET mark");
        let () = redis::cmd("SET")
            .arg(&lease)
            .arg("another-token")
            .query(&mut conn)
            .expect("SET lease");
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(
            lost.0.load(Ordering::Relaxed),
            0,
            "warned of a released lease"
        );
        // Without the mark, the lease was lost: warned.
        let () = redis::cmd("DEL").arg(&mark).query(&mut conn).expect("DEL");
        let give_up = Instant::now() + Duration::from_secs(5);
        while lost.0.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < give_up, "no warning of a lost lease");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}
