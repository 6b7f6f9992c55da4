//! Key contention: many tasks over few idempotency keys against a
//! rate-limited server that holds each request [`HOLD`], through one client
//! and through four processes sharing a `RedisStore`.
//!
//! Invariants: no two requests of one key in flight at once, no task's
//! lease overlapping another's, no send before the server's time; every task
//! ends with a response or `already_active`; no lease left afterwards.

use std::time::Duration;

use reqwest_backpressure::{MemoryStore, Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

use super::{HOLD, Run, Seen, Tally};
use crate::server::{LimitedServer, Options, Shape};

/// Tasks are patient enough to ride out the queue at the gate.
fn policy() -> Policy {
    Policy::default()
        .max_attempts(10)
        .default_deadline(Duration::from_secs(60))
}

fn client(store: MemoryStore) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::try_with_store(policy(), store).expect("valid policy"))
        .build()
}

async fn server(cap: u32) -> LimitedServer {
    LimitedServer::start_with(
        Shape::Window,
        cap,
        "/jobs",
        Options {
            hold: HOLD,
            keep_log: true,
        },
    )
    .await
}

/// Asserts the invariants and prints one result line.
fn judge(label: &str, tally: &Tally, seen: &Seen, keys: usize, leftover: usize) {
    let stopped: usize = tally.stopped.values().sum();
    println!(
        "contention {label}: {} tasks, {keys} keys, ok={}, already_active={}, stopped={:?}, \
         errors={:?}, panics={}, requests={}, 429s={}, duplicates={}, lease_overlaps={}, \
         premature={}, leftover={leftover}, {:.2} s, {:.0} tasks/s",
        tally.tasks,
        tally.ok,
        tally.already_active,
        tally.stopped,
        tally.errors,
        tally.panics,
        seen.requests,
        seen.rejected,
        seen.duplicates,
        seen.lease_overlaps,
        seen.premature,
        tally.elapsed.as_secs_f64(),
        tally.per_second(),
    );
    assert_eq!(
        tally.failed(),
        0,
        "{label}: a task ended with an error: {tally:?}"
    );
    assert_eq!(
        tally.ok + tally.already_active + stopped,
        tally.tasks,
        "{label}"
    );
    assert!(
        tally.ok > 0 && tally.already_active > 0,
        "{label}: no contention: {tally:?}"
    );
    assert!(seen.rejected > 0, "{label}: the server never pushed back");
    assert_eq!(seen.duplicates, 0, "{label}: concurrent duplicates");
    assert_eq!(seen.lease_overlaps, 0, "{label}: lease overlaps");
    assert_eq!(seen.premature, 0, "{label}: premature sends");
    assert_eq!(leftover, 0, "{label}: leases left over");
}

async fn one_client(tasks: usize, keys: usize, concurrency: usize, spacing: Duration, cap: u32) {
    let server = server(cap).await;
    let store = MemoryStore::new();
    let client = client(store.clone());
    let run = Run {
        first_task: 0,
        tasks,
        keys,
        concurrency,
        spacing,
        seed: 7,
    };
    let tally = run.go(&[client], &server.url).await;
    let leftover = store.active_keys();
    let state = server.finish();
    judge("one-client", &tally, &Seen::of(&state), keys, leftover);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_one_client_short() {
    one_client(1_000, 20, 40, Duration::from_millis(1), 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "full run: 10,000 tasks; see README, Reliability"]
async fn contention_one_client_full() {
    one_client(10_000, 100, 200, Duration::from_micros(500), 500).await;
}

#[cfg(feature = "redis")]
mod processes {

    use std::time::Instant;

    use reqwest_backpressure::store::{FailMode, RedisStore};

    use super::*;
    use crate::redis::redis_server::{RedisServer, Workers};

    const WORKERS: usize = 4;

    async fn four_processes(
        tasks: usize,
        keys: usize,
        concurrency: usize,
        spacing: Duration,
        cap: u32,
    ) {
        let redis = RedisServer::start();
        let redis_up = Instant::now();
        let server = server(cap).await;
        let prefix = format!("rbp-contention-{}:", std::process::id());
        // A Redis this young gives out no lease failing closed (the restart
        // grace, 3 s of uptime): the run measures contention, not that.
        tokio::time::sleep_until((redis_up + Duration::from_secs(4)).into()).await;
        let per_worker = tasks / WORKERS;
        let started = Instant::now();
        let mut workers = Workers(Vec::new());
        let mut outputs = Vec::new();
        for w in 0..WORKERS {
            let (child, out, err) = crate::common::spawn_test_child(
                "reliability::contention::processes::contention_worker",
                &[
                    ("RBP_REL_REDIS_URL", redis.url()),
                    ("RBP_REL_URL", server.url.clone()),
                    ("RBP_REL_PREFIX", prefix.clone()),
                    ("RBP_REL_FIRST", (w * per_worker).to_string()),
                    ("RBP_REL_TASKS", per_worker.to_string()),
                    ("RBP_REL_KEYS", keys.to_string()),
                    ("RBP_REL_CONCURRENCY", (concurrency / WORKERS).to_string()),
                    ("RBP_REL_SEED", (100 + w).to_string()),
                    // Each worker starts its share of the tasks at a quarter
                    // of the rate.
                    (
                        "RBP_REL_SPACING_US",
                        (spacing.as_micros() * WORKERS as u128).to_string(),
                    ),
                ],
            );
            outputs.push((out, err));
            workers.0.push(child);
        }
        let workers = tokio::task::spawn_blocking(move || {
            let mut workers = workers;
            let statuses: Vec<_> = workers
                .0
                .iter_mut()
                .map(|c| c.wait().expect("wait for worker"))
                .collect();
            (workers, statuses)
        });
        let (_workers, statuses) = tokio::time::timeout(Duration::from_secs(120), workers)
            .await
            .expect("workers still running after 120 s")
            .expect("waiting thread");
        let elapsed = started.elapsed();

        let mut tally = Tally::default();
        let mut local_leftover = 0;
        for (w, (out, err)) in outputs.into_iter().enumerate() {
            let out = out.join().expect("stdout reader");
            let err = err.join().expect("stderr reader");
            assert!(statuses[w].success(), "worker {w} failed:\n{out}\n{err}");
            let line = out
                .lines()
                .find_map(|l| l.strip_prefix("TALLY "))
                .unwrap_or_else(|| panic!("worker {w} printed no TALLY line:\n{out}\n{err}"));
            let (t, local) = line.rsplit_once(" local_keys=").expect("local_keys");
            tally.add(&Tally::parse(t).expect("a TALLY line"));
            local_leftover += local.parse::<usize>().expect("local_keys");
        }
        // Throughput over the whole run, process start-up included.
        tally.elapsed = elapsed;
        let mut conn = redis.conn();
        let leases: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}lease:*"))
            .query(&mut conn)
            .expect("KEYS");
        let state = server.finish();
        judge(
            "4-processes-redis",
            &tally,
            &Seen::of(&state),
            keys,
            leases.len() + local_leftover,
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn contention_four_processes_short() {
        four_processes(1_000, 20, 40, Duration::from_millis(1), 100).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "full run: 10,000 tasks in 4 processes; see README, Reliability"]
    async fn contention_four_processes_full() {
        four_processes(10_000, 100, 200, Duration::from_micros(500), 500).await;
    }

    /// One worker process of the runs above; does nothing unless started by
    /// them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a child process of contention_four_processes_*"]
    async fn contention_worker() {
        let Ok(redis_url) = std::env::var("RBP_REL_REDIS_URL") else {
            return;
        };
        let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
        let num = |name: &str| var(name).parse::<u64>().expect(name);
        // Closed: a Redis failure shows up as a failed task, never as a
        // silently unshared run.
        let store = RedisStore::connect(&redis_url)
            .await
            .expect("worker: connect to Redis")
            .prefix(var("RBP_REL_PREFIX"))
            .fail_mode(FailMode::Closed);
        let client = ClientBuilder::new(reqwest::Client::new())
            .with(RetryAfterMiddleware::try_with_store(policy(), store.clone()).expect("policy"))
            .build();
        let run = Run {
            first_task: u32::try_from(num("RBP_REL_FIRST")).expect("task id"),
            tasks: usize::try_from(num("RBP_REL_TASKS")).expect("tasks"),
            keys: usize::try_from(num("RBP_REL_KEYS")).expect("keys"),
            concurrency: usize::try_from(num("RBP_REL_CONCURRENCY")).expect("concurrency"),
            spacing: Duration::from_micros(num("RBP_REL_SPACING_US")),
            seed: num("RBP_REL_SEED"),
        };
        let tally = run.go(&[client], &var("RBP_REL_URL")).await;
        // Releases reach Redis as their own tasks: give them a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        println!(
            "TALLY {} local_keys={}",
            tally.line(),
            store.local().active_keys()
        );
    }
}
