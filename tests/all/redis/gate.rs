//! The origin gate and pacing shared through Redis.

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gate_learned_through_one_store_holds_the_other() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-gate:";
        let one = store(&redis, prefix).await;
        let two = store(&redis, prefix).await;
        let a = client(one, policy());
        let b = client(two.clone(), policy());
        // The first request anywhere on the origin is told to wait 2 s.
        let seen = Arc::new(Mutex::new(0usize));
        let (server, arrivals) = {
            let seen = Arc::clone(&seen);
            scripted(move |_, _| {
                let mut n = seen.lock().unwrap();
                *n += 1;
                if *n == 1 {
                    retry_after(2)
                } else {
                    ResponseTemplate::new(200)
                }
            })
            .await
        };
        let url = server.uri();

        let first = tokio::spawn(
            a.get(format!("{url}/a"))
                .with_extension(Deadline::after(Duration::from_secs(10)))
                .send(),
        );
        arrivals.wait_for(1).await;
        let told = arrivals.at("/a")[0] + Duration::from_secs(2);

        // The other store sees the gate A's answer closed.
        let give_up = Instant::now() + Duration::from_secs(2);
        loop {
            match Store::gate(&two, &origin(&server)).await {
                Ok(Some(left)) => {
                    assert!(left <= Duration::from_secs(2), "gate {left:?}");
                    break;
                }
                Ok(None) => {}
                Err(e) => panic!("gate: {e}"),
            }
            assert!(Instant::now() < give_up, "store 2 never saw the gate");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        // A deadline shorter than the gate: refused at once, nothing sent.
        let t = Instant::now();
        let short = b
            .get(format!("{url}/b"))
            .with_extension(Deadline::after(Duration::from_secs(1)))
            .send()
            .await;
        assert_eq!(code(&short), "origin_gate_closed");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        if let Err(reqwest_middleware::Error::Middleware(e)) = &short {
            let e = e.downcast_ref::<reqwest_backpressure::Error>().unwrap();
            let at = e.retry_at().expect("gate time in the error");
            let left = at.duration_since(SystemTime::now()).unwrap_or_default();
            assert!(left <= Duration::from_secs(2), "retry_at {left:?} ahead");
        }
        assert!(arrivals.at("/b").is_empty(), "B sent despite the gate");

        // A deadline past the gate: waits for it, then is sent once.
        let waited = b
            .get(format!("{url}/b"))
            .with_extension(Deadline::after(Duration::from_secs(10)))
            .send()
            .await
            .expect("B after the gate");
        assert_eq!(waited.status(), 200);
        assert_eq!(report(&waited).attempts(), 1, "waiting at a gate is free");
        let b_at = arrivals.at("/b");
        assert_eq!(b_at.len(), 1);
        assert!(
            b_at[0] >= told,
            "B arrived {:?} before the gate A learned",
            told - b_at[0]
        );

        let first = first.await.expect("task").expect("A's task");
        assert_eq!(first.status(), 200);
        let a_at = arrivals.at("/a");
        assert_eq!(a_at.len(), 2);
        assert!(a_at[1] >= told, "A's retry before its Retry-After");
    })
    .await;
}

/// 2xx answers counted locally reach Redis within about 100 ms even when
/// the process writes nothing else, so a pace learned in another process
/// includes them, as the in-memory store's would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successes_reach_the_shared_pace_without_another_write() {
    use reqwest_backpressure::origin::{Admission, PacingConfig};
    use reqwest_backpressure::store::Outcome;
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let a = store(&redis, "rbp-learn:").await;
        let b = store(&redis, "rbp-learn:").await;
        let cfg = PacingConfig::DEFAULT;
        let o = "http://example.test:80";
        let m = reqwest_backpressure::MemoryStore::new();
        for _ in 0..50 {
            let ad = admit(&b, o, cfg, Duration::from_secs(10))
                .await
                .expect("redis up");
            assert_eq!(ad, Admission::Now);
            let _ = admit(&m, o, cfg, Duration::from_secs(10)).await;
        }
        for _ in 0..50 {
            b.record(o, cfg, Outcome::Admitted).await.expect("redis up");
            m.record(o, cfg, Outcome::Admitted).await.expect("memory");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let back = Outcome::Pushback {
            retry_in: Some(Duration::from_secs(1)),
            hold_at_least: None,
        };
        a.record(o, cfg, back).await.expect("redis up");
        m.record(o, cfg, back).await.expect("memory");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let _ = admit(&a, o, cfg, Duration::from_secs(10))
            .await
            .expect("redis up");
        let _ = admit(&m, o, cfg, Duration::from_secs(10)).await;
        let mut conn = redis.conn();
        let k = keys(&mut conn, "rbp-learn:origin:*");
        let v: String = redis::cmd("GET")
            .arg(&k[0])
            .query(&mut conn)
            .expect("origin state");
        let shared = reqwest_backpressure::origin::OriginState::decode(&v).expect("decodes");
        let local = m.origin_rate(o).expect("known origin");
        assert!(local > 30.0, "memory store learned {local}");
        assert!(
            (shared.rate() - local).abs() / local < 0.2,
            "shared {} vs memory {local}",
            shared.rate()
        );
    })
    .await;
}

/// Redis commands of `name` (`evalsha`, `eval`) run since the last
/// `CONFIG RESETSTAT`.
fn command_calls(conn: &mut redis::Connection, name: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .expect("INFO");
    let prefix = format!("cmdstat_{name}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a count"))
}

/// A burst of answers from one origin in one process (thousands of tasks
/// rejected at once): the process's one writer of the origin applies them
/// together, not one compare-and-set each behind the others, and each
/// answer's `Retry-After` counts from when it was answered, not from when
/// its write got its turn. Before, 2,000 pushbacks took 4,000 round trips
/// in a row, and the gate closed a full second after the last of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_pushbacks_is_written_together_and_gates_from_the_answer() {
    use reqwest_backpressure::origin::{Outcome, PacingConfig};
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let store = store(&redis, "rbp-burst:").await;
        let origin = "http://burst.test:80";
        let pacing = PacingConfig::DEFAULT;
        let mut conn = redis.conn();
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut conn)
            .expect("CONFIG RESETSTAT");
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..2000 {
            let store = store.clone();
            tasks.spawn(async move {
                let pushback = Outcome::Pushback {
                    retry_in: Some(Duration::from_secs(1)),
                    hold_at_least: None,
                };
                store.record(origin, pacing, pushback).await
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("task ran").expect("recorded");
        }
        let elapsed = started.elapsed();
        let gate = store
            .gate(origin)
            .await
            .expect("gate read")
            .expect("gate closed");
        // Every answer was received at `started` or later, and said 1 s:
        // the gate reopens by the last call's time plus 1 s, so within 1 s
        // of `started` give or take the time spent calling.
        let calls = command_calls(&mut conn, "evalsha") + command_calls(&mut conn, "eval");
        assert!(
            calls < 400,
            "{calls} scripts run for 2,000 pushbacks of one process"
        );
        assert!(
            gate <= Duration::from_secs(1).saturating_sub(elapsed) + Duration::from_millis(100),
            "gate closed for {gate:?} after {elapsed:?} of recording 1 s pushbacks"
        );
    })
    .await;
}
