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
                    let _ = a.release(key, *token).await;
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

/// A store whose round trips give up after 200 ms, so that a write to a
/// frozen Redis fails quickly.
async fn impatient_store(redis: &RedisServer, prefix: &str) -> RedisStore {
    store(redis, prefix)
        .await
        .op_timeout(Duration::from_millis(200))
}

/// Polls `f` every 20 ms until it returns `Some`, for at most `within`.
async fn eventually<T>(within: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let give_up = Instant::now() + within;
    loop {
        if let Some(t) = f() {
            return Some(t);
        }
        if Instant::now() >= give_up {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Budget deposits whose write failed (Redis frozen) reach Redis once it
/// answers again, though the process withdraws nothing. Before, a write was
/// scheduled only by the deposit that made the count 1: the deposits put
/// back after the failure, and every one counted after them, waited for
/// the process's next withdrawal, and the other processes saw a smaller
/// budget meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposits_left_by_a_failed_write_reach_redis_without_a_withdrawal() {
    use reqwest_backpressure::RetryBudget;
    use reqwest_backpressure::budget::BudgetState;
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let prefix = "rbp-deposits:";
        let a = impatient_store(&redis, prefix).await;
        // One retry per deposit, no refill with time, 100 at most.
        let budget = RetryBudget::new(1.0, 0.0);
        // A first send deposits (counted, written within 100 ms).
        let first_send = || a.deposit(&budget);
        // Empty the shared budget.
        let mut withdrawn = 0;
        while withdraw(&a, budget).await.expect("redis up") {
            withdrawn += 1;
            assert!(withdrawn <= 100, "the budget holds at most 100");
        }
        let mut conn = redis.conn();
        let key = format!("{prefix}budget");
        let mut tokens = move || -> Option<f64> {
            let v: Option<String> = redis::cmd("GET").arg(&key).query(&mut conn).expect("GET");
            Some(BudgetState::decode(&v?).expect("budget state").tokens())
        };
        assert_eq!(tokens(), Some(0.0));

        // Ten deposits whose write fails: written once Redis is back, with
        // nothing else counted.
        redis.signal("-STOP");
        for _ in 0..10 {
            assert_eq!(first_send().await, Ok(()));
        }
        // The write (100 ms later) times out after 200 ms.
        tokio::time::sleep(Duration::from_millis(800)).await;
        redis.signal("-CONT");
        for (deposits, then) in [(10, 5), (15, 0)] {
            let written = eventually(Duration::from_secs(3), || {
                tokens().filter(|&t| (t - f64::from(deposits)).abs() < 1e-9)
            })
            .await;
            assert!(
                written.is_some(),
                "the shared budget holds {:?} retries 3 s after {deposits} deposits",
                tokens()
            );
            // Counted after the put-back: written as well.
            for _ in 0..then {
                assert_eq!(first_send().await, Ok(()));
            }
        }
    })
    .await;
}

/// Like [`deposits_left_by_a_failed_write_reach_redis_without_a_withdrawal`],
/// for 2xx answers counted into an origin's shared state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_left_by_a_failed_write_reach_redis_without_another_write() {
    use reqwest_backpressure::origin::PacingConfig;
    use reqwest_backpressure::store::Outcome;
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let prefix = "rbp-successes:";
        let a = impatient_store(&redis, prefix).await;
        let pacing = PacingConfig::DEFAULT;
        let o = "http://s.test:80";
        redis.signal("-STOP");
        for _ in 0..10 {
            assert_eq!(a.record(o, pacing, Outcome::Admitted).await, Ok(None));
        }
        tokio::time::sleep(Duration::from_millis(800)).await;
        redis.signal("-CONT");
        let mut conn = redis.conn();
        // The origin's state is written only with these successes; its
        // 14th field counts the successes of the current period.
        let mut counted = move || -> Option<u64> {
            let k = keys(&mut conn, &format!("{prefix}origin:*"));
            let v: String = redis::cmd("GET")
                .arg(k.first()?)
                .query(&mut conn)
                .expect("GET");
            v.split(' ').nth(14).and_then(|n| n.parse().ok())
        };
        for (successes, then) in [(10, 5), (15, 0)] {
            let written = eventually(Duration::from_secs(3), || {
                counted().filter(|&n| n == successes)
            })
            .await;
            assert!(
                written.is_some(),
                "the shared origin counts {:?} successes 3 s after {successes}",
                counted()
            );
            for _ in 0..then {
                assert_eq!(a.record(o, pacing, Outcome::Admitted).await, Ok(None));
            }
        }
    })
    .await;
}

/// A store whose round trips wait up to 5 s (the connection's own response
/// timeout included), so that a write waits out a short freeze of Redis.
async fn patient_store(redis: &RedisServer, prefix: &str) -> RedisStore {
    let patience = Duration::from_secs(5);
    let client = redis::Client::open(redis.url()).expect("redis url");
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_connection_timeout(Some(patience))
        .set_response_timeout(Some(patience));
    let conn = redis::aio::ConnectionManager::new_with_config(client, config)
        .await
        .expect("connect");
    RedisStore::with_connection(conn)
        .prefix(prefix)
        .op_timeout(patience)
}

/// A 429 whose caller went away while its record waited for Redis (a slow
/// or frozen Redis, the caller's future cancelled right after the answer)
/// still closes the shared gate: it is an answer the origin gave. Before,
/// the record was left out of its batch with its caller, and the other
/// processes went on sending into the pushback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushback_whose_caller_went_away_still_closes_the_shared_gate() {
    bounded(Duration::from_secs(40), async {
        let redis = RedisServer::start();
        let prefix = "rbp-gone:";
        // Patient: the record waits out the freeze instead of failing.
        let a = patient_store(&redis, prefix).await;
        let b = store(&redis, prefix).await;
        let c = client(a, policy());
        let (server, arrivals) =
            scripted(|_, _| retry_after(5).set_delay(Duration::from_millis(600))).await;
        let task = tokio::spawn(c.get(format!("{}/gone", server.uri())).send());
        // The request is at the server; its answer comes in 600 ms, and
        // its record then waits for the frozen Redis.
        arrivals.wait_for(1).await;
        redis.signal("-STOP");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!task.is_finished(), "the task did not wait for the store");
        task.abort();
        let _ = task.await;
        redis.signal("-CONT");

        let o = origin(&server);
        let mut gate = None;
        let give_up = Instant::now() + Duration::from_secs(3);
        while gate.is_none() && Instant::now() < give_up {
            gate = b.gate(&o).await.expect("redis up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let gate = gate.expect("the other store never saw the gate the 429 closed");
        assert!(gate <= Duration::from_secs(5), "gate {gate:?}");
        assert_eq!(arrivals.len(), 1, "nothing else sent");
    })
    .await;
}

/// An admission whose caller went away while it waited for Redis is still
/// left out: it must not reserve a slot nobody uses. Here the slot is the
/// probe of a reopened gate, which the next caller must get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_whose_caller_went_away_reserves_nothing() {
    use reqwest_backpressure::origin::{Admission, PacingConfig};
    use reqwest_backpressure::store::Outcome;
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let prefix = "rbp-gone-admit:";
        let a = patient_store(&redis, prefix).await;
        let b = store(&redis, prefix).await;
        let pacing = PacingConfig::DEFAULT;
        let o = "http://admit.test:80";
        let back = Outcome::Pushback {
            retry_in: Some(Duration::from_secs(1)),
            hold_at_least: None,
        };
        assert!(a.record(o, pacing, back).await.expect("redis up").is_some());
        // The gate has reopened: the next admission is its probe.
        tokio::time::sleep(Duration::from_millis(1300)).await;
        redis.signal("-STOP");
        let gone = tokio::time::timeout(
            Duration::from_millis(300),
            admit(&a, o, pacing, Duration::from_secs(10)),
        )
        .await;
        assert!(gone.is_err(), "admitted with Redis frozen: {gone:?}");
        redis.signal("-CONT");
        // The writer's batch (with the abandoned admission) is applied.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let next = admit(&b, o, pacing, Duration::from_secs(10)).await;
        assert_eq!(next, Ok(Admission::Reopened));
    })
    .await;
}

/// A single Redis Cluster node (no slots needed: its `INFO cluster` already
/// says `cluster_enabled:1`).
fn cluster_node() -> RedisServer {
    RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ])
}

const NOT_SUPPORTED: &str = "connect with RedisStore::connect_cluster";

/// `error`-level events, by target, seen by the subscriber it is part of.
#[cfg(feature = "tracing")]
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<String>>>);

#[cfg(feature = "tracing")]
impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Errors {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if *event.metadata().level() == tracing::Level::ERROR {
            let target = event.metadata().target().to_owned();
            self.0.lock().unwrap().push(target);
        }
    }
}

/// Connecting to a Redis Cluster node fails with a clear error, not with a
/// store that silently runs on local state (failing open) or fails every
/// call with `MOVED` (failing closed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_a_redis_cluster_node_fails_clearly() {
    bounded(Duration::from_secs(30), async {
        let node = cluster_node();
        let e = RedisStore::connect(&node.url())
            .await
            .expect_err("connected to a Redis Cluster node");
        let message = e.to_string();
        assert!(message.contains(NOT_SUPPORTED), "{message}");
        let port = node.url().rsplit(':').nth(1).map(str::to_owned);
        assert!(
            !message.contains("127.0.0.1") && port.is_some_and(|p| !message.contains(&p)),
            "an address in {message:?}"
        );
        // A single Redis still connects.
        let single = RedisServer::start();
        assert!(RedisStore::connect(&single.url()).await.is_ok());
    })
    .await;
}

/// A cluster node serving every slot: each command on a key succeeds, as
/// on a single Redis.
fn cluster_node_with_all_slots() -> RedisServer {
    let node = cluster_node();
    let mut conn = node.conn();
    let () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(&mut conn)
        .expect("CLUSTER ADDSLOTSRANGE");
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query(&mut conn)
            .expect("CLUSTER INFO");
        if info.contains("cluster_state:ok") {
            return node;
        }
        assert!(Instant::now() < give_up, "cluster never ok: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A store that could not check up front (a lazy connection) finds out on
/// its first answer from the server (an error, on a node without slots, or
/// a reply, on one serving every slot), and from then on refuses every
/// operation with the same error in both fail modes, with an `error`
/// event; nothing is sent, and no lease is left behind.
#[tokio::test(flavor = "current_thread")]
async fn a_lazy_store_on_a_redis_cluster_node_refuses_every_operation() {
    use reqwest_backpressure::RetryBudget;
    use reqwest_backpressure::origin::PacingConfig;
    use reqwest_backpressure::store::Outcome;
    #[cfg(feature = "tracing")]
    let errors = Errors::default();
    #[cfg(feature = "tracing")]
    let _subscriber = {
        use tracing_subscriber::layer::SubscriberExt;
        tracing::subscriber::set_default(tracing_subscriber::registry().with(errors.clone()))
    };
    bounded(Duration::from_secs(30), async {
        let nodes = [cluster_node(), cluster_node_with_all_slots()];
        let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let pacing = PacingConfig::DEFAULT;
        let ungated = PacingConfig {
            gate: false,
            ..pacing
        };
        let budget = RetryBudget::default();
        let refused = |what: &str, e: Option<reqwest_backpressure::store::StoreError>| {
            let e = e.unwrap_or_else(|| panic!("{what} was not refused"));
            assert!(e.to_string().contains(NOT_SUPPORTED), "{what}: {e}");
        };
        for (node, mode) in nodes
            .iter()
            .flat_map(|n| [(n, FailMode::Open), (n, FailMode::Closed)])
        {
            let s = RedisStore::connect_lazy(&node.url())
                .await
                .expect("a valid url is enough")
                .prefix("rbp-cluster:")
                .fail_mode(mode);
            let o = "http://cluster.test:80";
            refused(
                "acquire",
                s.acquire("k", Duration::from_secs(10)).await.err(),
            );
            assert_eq!(s.local().active_keys(), 0, "{mode:?}: a local lease left");
            refused(
                "acquire again",
                s.acquire("k", Duration::from_secs(10)).await.err(),
            );
            refused("admit", admit(&s, o, pacing, Duration::ZERO).await.err());
            refused(
                "an ungated admit",
                admit(&s, o, ungated, Duration::ZERO).await.err(),
            );
            refused("deposit", s.deposit(&budget).await.err());
            refused("gate", s.gate(o).await.err());
            refused("record", s.record(o, pacing, Outcome::Admitted).await.err());
            refused("withdraw_retry", withdraw(&s, budget).await.err());

            let c = client(s, policy());
            let r = post_keyed(&c, format!("{}/c", server.uri()), "k")
                .send()
                .await;
            assert_eq!(code(&r), "store_unavailable", "{mode:?}");
            let r = c.get(format!("{}/c", server.uri())).send().await;
            assert_eq!(code(&r), "store_unavailable", "{mode:?}");
        }
        assert_eq!(arrivals.len(), 0, "sent through a store on a cluster node");
    })
    .await;
    #[cfg(feature = "tracing")]
    {
        let errors = errors.0.lock().unwrap().clone();
        assert_eq!(
            errors,
            vec!["reqwest_backpressure::redis_store".to_owned(); 4],
            "one error event per store"
        );
    }
}

/// Tasks dropped while they wait for a paced slot held in Redis give it
/// back: after 100 callers gave up, a request with 5 s is taken in time by
/// a second store sharing the origin (before, the shared queue stayed
/// booked about 20 s ahead and it was refused with `origin_gate_closed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_dropped_while_they_wait_for_a_shared_slot_give_it_back() {
    bounded(Duration::from_secs(60), async {
        let redis = RedisServer::start();
        let a = store(&redis, "dropped-slots:").await;
        let b = store(&redis, "dropped-slots:").await;
        let (server, seen) = scripted(|_, _| ResponseTemplate::new(200)).await;
        let url = reqwest::Url::parse(&server.uri()).expect("url");
        let origin = format!(
            "http://{}:{}",
            url.host_str().expect("host"),
            url.port().expect("port")
        );
        // Teach the shared origin about five a second: five successes, then
        // a pushback naming one second.
        let pacing = reqwest_backpressure::origin::PacingConfig::DEFAULT;
        for _ in 0..5 {
            a.record(
                &origin,
                pacing,
                reqwest_backpressure::store::Outcome::Admitted,
            )
            .await
            .expect("record");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        a.record(
            &origin,
            pacing,
            reqwest_backpressure::store::Outcome::Pushback {
                retry_in: Some(Duration::from_secs(1)),
                hold_at_least: None,
            },
        )
        .await
        .expect("record");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let queued = client(a.clone(), policy());
        let calls = (0..100).map(|_| {
            let client = queued.clone();
            let uri = server.uri();
            async move {
                let _ =
                    tokio::time::timeout(Duration::from_millis(100), client.get(uri).send()).await;
            }
        });
        futures_util::future::join_all(calls).await;
        assert!(seen.all().len() < 20, "{} sent", seen.all().len());
        // The releases run as tasks of their own: give them a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = Instant::now();
        let result = client(b, policy())
            .get(server.uri())
            .with_extension(Deadline::after(Duration::from_secs(5)))
            .send()
            .await;
        assert_eq!(code(&result), "ok 200 OK");
        assert!(
            started.elapsed() < Duration::from_millis(2500),
            "waited {:?} with nothing queued",
            started.elapsed()
        );
    })
    .await;
}
