//! Redis faults in the middle of a storm: two stores (two "processes", each
//! with its own local state) share one Redis and send keyed tasks to one
//! rate-limited server while Redis is frozen (`SIGSTOP`, then `SIGCONT`),
//! killed and restarted empty, or has its connections dropped
//! (`CLIENT KILL`); each with `FailMode::Open` and `FailMode::Closed`.
//!
//! Both modes: no panic, no send before the server's time. Closed mode: no
//! two requests of one key in flight at once, and every task ends with a
//! response, `already_active` or `store_unavailable`. Open mode may lose
//! sharing while Redis is away: the result line says how much (duplicates,
//! lease overlaps and when they happened, from the fault's start), and
//! which errors the tasks ended with.

use std::time::{Duration, Instant};

use reqwest_backpressure::store::{FailMode, RedisStore};
use reqwest_backpressure::{Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

use super::{HOLD, Run, Seen, Storm};
use crate::redis::redis_server::RedisServer;
use crate::server::{LimitedServer, Options, Shape};

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// `SIGSTOP` for this long, then `SIGCONT`.
    Freeze(Duration),
    /// Killed, and started again empty on the same port.
    Restart,
    /// `CLIENT KILL TYPE normal`: every client connection dropped.
    ClientKill,
}

impl Fault {
    fn name(self) -> String {
        match self {
            Fault::Freeze(d) => format!("freeze {:.0} s", d.as_secs_f64()),
            Fault::Restart => "kill+restart empty".to_owned(),
            Fault::ClientKill => "CLIENT KILL".to_owned(),
        }
    }

    /// Applies the fault (blocking); returns when it is over.
    fn apply(self, redis: &mut RedisServer) {
        match self {
            Fault::Freeze(d) => {
                redis.signal("-STOP");
                std::thread::sleep(d);
                redis.signal("-CONT");
            }
            Fault::Restart => redis.restart(),
            Fault::ClientKill => {
                let mut conn = redis.conn();
                let killed: i64 = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .query(&mut conn)
                    .expect("CLIENT KILL");
                assert!(killed > 0, "CLIENT KILL killed no connection");
            }
        }
    }
}

const SHORT: Storm = Storm {
    tasks: 500,
    keys: 20,
    concurrency: 40,
    spacing: Duration::from_millis(4),
    cap: 120,
    fault_at: Duration::from_millis(700),
};

const FULL: Storm = Storm {
    tasks: 3_000,
    keys: 50,
    concurrency: 100,
    spacing: Duration::from_millis(3),
    cap: 100,
    fault_at: Duration::from_secs(3),
};

fn client(store: RedisStore) -> ClientWithMiddleware {
    let policy = Policy::default()
        .max_attempts(10)
        .default_deadline(Duration::from_secs(30));
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy"))
        .build()
}

/// `[first, last]` of `times`, in seconds from `zero` (negative: before).
fn window(times: &[Instant], zero: Instant) -> String {
    let secs = |t: Instant| {
        if t >= zero {
            (t - zero).as_secs_f64()
        } else {
            -(zero - t).as_secs_f64()
        }
    };
    match (times.first(), times.last()) {
        (Some(&a), Some(&b)) => format!("[{:+.2} s, {:+.2} s]", secs(a), secs(b)),
        _ => "-".to_owned(),
    }
}

/// Runs one storm and fault; returns the invariants it broke.
async fn storm_with_fault(storm: &Storm, mode: FailMode, fault: Fault) -> Vec<String> {
    let mut redis = RedisServer::start();
    let redis_up = Instant::now();
    let server = LimitedServer::start_with(
        Shape::Window,
        storm.cap,
        "/jobs",
        Options {
            hold: HOLD,
            keep_log: true,
        },
    )
    .await;
    let prefix = format!("rbp-faults-{}:", std::process::id());
    let mut clients = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect(&redis.url())
            .await
            .expect("connect RedisStore")
            .prefix(&prefix)
            .fail_mode(mode);
        clients.push(client(store));
    }
    if mode == FailMode::Closed {
        // A Redis this young gives out no lease failing closed (the restart
        // grace, 3 s of uptime): the storm measures the fault, not that.
        tokio::time::sleep_until((redis_up + Duration::from_secs(4)).into()).await;
    }
    let run = Run {
        first_task: 0,
        tasks: storm.tasks,
        keys: storm.keys,
        concurrency: storm.concurrency,
        spacing: storm.spacing,
        seed: 11,
    };
    let started = Instant::now();
    let fault_at = started + storm.fault_at;
    let injector = std::thread::spawn(move || {
        std::thread::sleep(fault_at.saturating_duration_since(Instant::now()));
        let begun = Instant::now();
        fault.apply(&mut redis);
        (redis, begun, Instant::now())
    });
    let tally = tokio::time::timeout(Duration::from_secs(120), run.go(&clients, &server.url))
        .await
        .expect("the storm did not end within 120 s");
    let (_redis, begun, ended) = tokio::task::spawn_blocking(move || injector.join())
        .await
        .expect("joining thread")
        .expect("fault injector panicked");
    let state = server.finish();
    let seen = Seen::of(&state);
    let mode_name = match mode {
        FailMode::Open => "open",
        FailMode::Closed => "closed",
    };
    println!(
        "redis fault {} ({} ms), fail {mode_name}: {} tasks, {} keys, ok={}, already_active={}, \
         stopped={:?}, errors={:?}, panics={}, requests={}, 429s={}, premature={}, \
         duplicates={} (keys {}, max {} per key, at {}), lease_overlaps={} (at {}), {:.2} s",
        fault.name(),
        (ended - begun).as_millis(),
        tally.tasks,
        storm.keys,
        tally.ok,
        tally.already_active,
        tally.stopped,
        tally.errors,
        tally.panics,
        seen.requests,
        seen.rejected,
        seen.premature,
        seen.duplicates,
        seen.duplicate_keys,
        seen.max_per_key,
        window(&seen.duplicate_at, begun),
        seen.lease_overlaps,
        window(&seen.overlap_at, begun),
        tally.elapsed.as_secs_f64(),
    );
    let label = format!("{} / fail {mode_name}", fault.name());
    let mut broken = storm.broken(&label, &tally, &seen, started, ended);
    if mode == FailMode::Closed {
        if seen.duplicates > 0 {
            broken.push(format!(
                "{label}: {} concurrent duplicates",
                seen.duplicates
            ));
        }
        // Failing closed refuses with `store_unavailable`, nothing else.
        let other: Vec<_> = tally
            .errors
            .keys()
            .filter(|code| code.as_str() != "store_unavailable")
            .collect();
        if !other.is_empty() {
            broken.push(format!("{label}: errors {:?}", tally.errors));
        }
    }
    broken
}

/// Runs each (fault, mode) in turn, then asserts.
async fn faults(storm: &Storm, runs: &[(Fault, FailMode)]) {
    let mut broken = Vec::new();
    for &(fault, mode) in runs {
        broken.extend(storm_with_fault(storm, mode, fault).await);
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

/// The freeze and `CLIENT KILL`, each fail mode: about 2 s each. The
/// restart is below, one test per mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_faults_short() {
    let freeze = Fault::Freeze(Duration::from_secs(1));
    faults(
        &SHORT,
        &[
            (freeze, FailMode::Open),
            (freeze, FailMode::Closed),
            (Fault::ClientKill, FailMode::Open),
            (Fault::ClientKill, FailMode::Closed),
        ],
    )
    .await;
}

/// The restart, failing open. Some tasks used to stall after it until
/// their deadline (30 s here): the origin's shared state was lost with
/// Redis, its pace restarted from one request a second (slow start), and
/// the queued tasks booked slots up to their deadline at that rate, kept
/// when it rose. Slots are now booked at most a second ahead during slow
/// start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restart_fail_open_short() {
    faults(&SHORT, &[(Fault::Restart, FailMode::Open)]).await;
}

/// The restart, failing closed: see
/// [`restart_empty_fail_closed_keeps_a_held_key`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restart_fail_closed_short() {
    faults(&SHORT, &[(Fault::Restart, FailMode::Closed)]).await;
}

/// Every fault and mode; fails (after printing every line) on the bug of
/// [`restart_empty_fail_closed_keeps_a_held_key`].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full run: 3,000 tasks per fault and mode; see README, Reliability"]
async fn redis_faults_full() {
    let freeze = Fault::Freeze(Duration::from_secs(3));
    let mut runs = Vec::new();
    for fault in [freeze, Fault::Restart, Fault::ClientKill] {
        for mode in [FailMode::Open, FailMode::Closed] {
            runs.push((fault, mode));
        }
    }
    faults(&FULL, &runs).await;
}

/// The duplicates the closed restart storm used to show: a task of one
/// process holds a key (waiting out a `429`) when Redis restarts empty;
/// another process failing closed must not take the same key while the
/// first still runs. The holder re-asserts its lease within a second; the
/// other waits out the restart grace (3 s of Redis uptime) before asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_empty_fail_closed_keeps_a_held_key() {
    use reqwest::StatusCode;
    use wiremock::{Mock, MockServer, ResponseTemplate, matchers::any};
    let mut redis = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let store = RedisStore::connect(&redis.url())
            .await
            .expect("connect")
            .prefix("rbp-restart:")
            .fail_mode(FailMode::Closed);
        clients.push(client(store));
    }
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "6"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let sent = || async { server.received_requests().await.map_or(0, |r| r.len()) };
    let code = |r: &reqwest_middleware::Result<reqwest::Response>| match r {
        Ok(r) => format!("ok {}", r.status().as_u16()),
        Err(e) => super::error_code(e),
    };
    let url = format!("{}/job", server.uri());
    let holder = tokio::spawn(
        clients[0]
            .post(&url)
            .with_extension(reqwest_backpressure::IdempotencyKey::new("job-1"))
            .send(),
    );
    while sent().await == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    redis.restart();
    // The other process, once its store answers again (within the
    // holder's 6 s wait).
    let give_up = Instant::now() + Duration::from_secs(5);
    let other = loop {
        let r = clients[1]
            .post(&url)
            .with_extension(reqwest_backpressure::IdempotencyKey::new("job-1"))
            .send()
            .await;
        if code(&r) != "store_unavailable" || Instant::now() > give_up {
            break code(&r);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let held = holder.await.expect("task");
    let held = held.map(|r| r.status());
    let n = sent().await;
    assert_eq!(
        other, "already_active",
        "the key was given to a second task while the first ran \
         (first ended {held:?}; server saw {n} requests)"
    );
    assert!(matches!(held, Ok(StatusCode::OK)));
}
