//! A soak: keyed tasks as fast as the machine sends them, for a while, over
//! a server that closes every fifth second. The client runs in a process of
//! its own (this test binary re-run as [`soak_client`]), so that its
//! resident memory (`VmRSS`) is its own: after a warm-up and at the end it
//! is flat (at most 5% more), the store's entries return to 0, and no send
//! is early or a duplicate.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use reqwest_backpressure::{IdempotencyKey, MemoryStore, Policy, RetryAfterMiddleware};
use reqwest_middleware::ClientBuilder;

use super::{HOLD, Seen, Tally, error_code, vm_rss_kib};
use crate::server::{LimitedServer, Options, Shape};

/// Tasks in flight at once.
const CONCURRENCY: usize = 64;
/// Keys drawn from (so some tasks meet a held key).
const KEYS: usize = 1_000;

/// A `name=value` field of a result line.
fn field<T: std::str::FromStr>(line: &str, name: &str) -> T {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {line}"))
}

async fn soak(duration: Duration, warm_up: Duration) {
    // The cap is out of reach: only the closed spells push back.
    let server = LimitedServer::start_with(
        Shape::Spells,
        1_000_000,
        "/soak",
        Options {
            hold: HOLD,
            keep_log: false,
        },
    )
    .await;
    let (mut child, out, err) = crate::common::spawn_test_child(
        "reliability::soak::soak_client",
        &[
            ("RBP_SOAK_URL", server.url.clone()),
            ("RBP_SOAK_MS", duration.as_millis().to_string()),
            ("RBP_SOAK_WARM_UP_MS", warm_up.as_millis().to_string()),
        ],
    );
    let give_up = Instant::now() + duration + Duration::from_secs(60);
    let status = loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        // Wiremock keeps a copy of each request: give it back.
        server.recycle().await;
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > give_up {
            let _ = child.kill();
            panic!("the soak client did not finish");
        }
    };
    let out = out.join().expect("stdout reader");
    let err = err.join().expect("stderr reader");
    assert!(status.success(), "soak client failed:\n{out}\n{err}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("SOAK "))
        .unwrap_or_else(|| panic!("no SOAK line:\n{out}\n{err}"));
    let tally = Tally::parse(line.split(" rss_").next().expect("tally")).expect("tally");
    let (before, start, max, end): (u64, u64, u64, u64) = (
        field(line, "rss_before"),
        field(line, "rss_start"),
        field(line, "rss_max"),
        field(line, "rss_end"),
    );
    let (entries, origins): (usize, usize) = (field(line, "entries"), field(line, "origins"));
    let seen = Seen::of(&server.finish());
    let growth = (end as f64 - start as f64) / start as f64 * 100.0;
    println!(
        "soak {:.0} s: {} tasks ({:.0}/s), ok={}, already_active={}, stopped={:?}, errors={:?}, \
         panics={}, requests={}, 429s={}, premature={}, duplicates={}, client VmRSS: \
         before={before} KiB, after {:.0} s warm-up={start} KiB, max={max} KiB, end={end} KiB \
         ({growth:+.1}%), store entries={entries}, origins={origins}",
        duration.as_secs_f64(),
        tally.tasks,
        tally.per_second(),
        tally.ok,
        tally.already_active,
        tally.stopped,
        tally.errors,
        tally.panics,
        seen.requests,
        seen.rejected,
        seen.premature,
        seen.duplicates,
        warm_up.as_secs_f64(),
    );
    assert_eq!(tally.panics, 0);
    assert!(tally.errors.is_empty(), "errors: {:?}", tally.errors);
    // 404: a request that arrived while the server was recycled.
    let other: Vec<_> = tally.stopped.keys().filter(|s| *s != "404").collect();
    assert!(other.is_empty(), "tasks stopped: {:?}", tally.stopped);
    assert!(seen.rejected > 0, "the server never pushed back");
    assert_eq!(seen.premature, 0, "premature sends");
    assert_eq!(seen.duplicates, 0, "concurrent duplicates");
    assert_eq!(entries, 0, "store entries left");
    // Flat: no more than 5% above the start (less is no leak).
    assert!(
        growth <= 5.0,
        "VmRSS went from {start} KiB to {end} KiB ({growth:+.1}%)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_short() {
    soak(Duration::from_secs(10), Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full run: 60 s; see README, Reliability"]
async fn soak_full() {
    soak(Duration::from_secs(60), Duration::from_secs(10)).await;
}

/// The client process of the soaks above; does nothing unless started by
/// them. Prints `SOAK <tally> rss_…=… entries=… origins=…`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a child process of soak_short / soak_full"]
async fn soak_client() {
    let Ok(url) = std::env::var("RBP_SOAK_URL") else {
        return;
    };
    let ms = |name: &str| {
        Duration::from_millis(
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name}")),
        )
    };
    let (duration, warm_up) = (ms("RBP_SOAK_MS"), ms("RBP_SOAK_WARM_UP_MS"));
    let store = MemoryStore::new();
    let policy = Policy::default()
        .max_attempts(10)
        .default_deadline(Duration::from_secs(30));
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::try_with_store(policy, store.clone()).expect("policy"))
        .build();

    let rss_before = vm_rss_kib().expect("VmRSS");
    let started = Instant::now();
    let end = started + duration;
    let next_task = Arc::new(AtomicU32::new(0));
    let mut loops = Vec::new();
    for l in 0..CONCURRENCY {
        let client = client.clone();
        let url = url.clone();
        let next_task = Arc::clone(&next_task);
        loops.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(l as u64);
            let mut tally = Tally::default();
            while Instant::now() < end {
                let task = next_task.fetch_add(1, Ordering::Relaxed);
                let r = client
                    .post(&url)
                    .header("x-task", task.to_string())
                    .with_extension(IdempotencyKey::new(format!("k{}", rng.usize(..KEYS))))
                    .body("payload")
                    .send()
                    .await;
                tally.tasks += 1;
                match r {
                    Ok(r) if r.status() == 200 => {
                        tally.ok += 1;
                        // Read the body, as a caller would.
                        let _ = r.bytes().await;
                    }
                    Ok(r) => {
                        let status = r.status().as_u16();
                        *tally.stopped.entry(status.to_string()).or_default() += 1;
                    }
                    Err(e) if error_code(&e) == "already_active" => tally.already_active += 1,
                    Err(e) => *tally.errors.entry(error_code(&e)).or_default() += 1,
                }
            }
            tally
        }));
    }
    tokio::time::sleep(warm_up).await;
    let rss_start = vm_rss_kib().expect("VmRSS");
    let mut rss_max = rss_start;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(500)).await;
        rss_max = rss_max.max(vm_rss_kib().expect("VmRSS"));
    }
    let mut tally = Tally::default();
    for l in loops {
        match l.await {
            Ok(t) => tally.add(&t),
            Err(_) => tally.panics += 1,
        }
    }
    tally.elapsed = started.elapsed();
    let rss_end = vm_rss_kib().expect("VmRSS");
    println!(
        "SOAK {} rss_before={rss_before} rss_start={rss_start} rss_max={rss_max} \
         rss_end={rss_end} entries={} origins={}",
        tally.line(),
        store.active_keys(),
        store.origins(),
    );
}
