//! Key contention: many tasks over few idempotency keys against a
//! rate-limited server that holds each request [`HOLD`], through one client
//! and through four processes sharing a `RedisStore` (on one Redis, and on
//! a local Redis Cluster).
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

    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use reqwest_backpressure::store::{FailMode, RedisStore};

    use super::*;
    use crate::redis::redis_cluster::RedisCluster;
    use crate::redis::redis_server::{RedisServer, Workers};

    const WORKERS: usize = 4;

    /// What the workers share: one `redis-server`, or a local cluster.
    enum Backend {
        Single(RedisServer),
        Cluster(RedisCluster),
    }

    impl Backend {
        /// The worker's environment naming it.
        fn env(&self) -> (&'static str, String) {
            match self {
                Backend::Single(r) => ("RBP_REL_REDIS_URL", r.url()),
                Backend::Cluster(c) => ("RBP_REL_REDIS_CLUSTER", c.seeds().join(",")),
            }
        }

        /// The keys matching `pattern`, on every primary.
        fn keys(&self, pattern: &str) -> Vec<String> {
            let query = |conn: &mut redis::Connection| -> Vec<String> {
                redis::cmd("KEYS").arg(pattern).query(conn).expect("KEYS")
            };
            match self {
                Backend::Single(r) => query(&mut r.conn()),
                Backend::Cluster(c) => c
                    .primaries()
                    .iter()
                    .flat_map(|p| query(&mut c.node(p.port).conn()))
                    .collect(),
            }
        }
    }

    /// A run's size: tasks in all, keys, tasks at once in all, and how far
    /// apart each worker starts its tasks.
    struct Size {
        tasks: usize,
        keys: usize,
        concurrency: usize,
        worker_spacing: Duration,
        cap: u32,
        limit: Duration,
    }

    /// On a cluster: which primaries held leases during the run, and in how
    /// many slots, sampled every 50 ms from the parent.
    fn sample_spread(
        cluster: &RedisCluster,
        prefix: &str,
        done: &AtomicBool,
        seen: &Mutex<(BTreeSet<u16>, BTreeSet<u16>)>,
    ) {
        let pattern = format!("{prefix}lease:*");
        while !done.load(Ordering::Relaxed) {
            for p in cluster.primaries() {
                let Ok(mut conn) = cluster.node(p.port).try_conn() else {
                    continue;
                };
                let keys: Vec<String> = redis::cmd("KEYS")
                    .arg(&pattern)
                    .query(&mut conn)
                    .unwrap_or_default();
                if keys.is_empty() {
                    continue;
                }
                let slots: Vec<u16> = keys
                    .iter()
                    .filter_map(|k| {
                        redis::cmd("CLUSTER")
                            .arg("KEYSLOT")
                            .arg(k)
                            .query(&mut conn)
                            .ok()
                    })
                    .collect();
                let mut seen = seen.lock().unwrap();
                seen.0.insert(p.port);
                seen.1.extend(slots);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    async fn four_processes(backend: Backend, size: Size) {
        let label = match backend {
            Backend::Single(_) => "4-processes-redis",
            Backend::Cluster(_) => "4-processes-cluster",
        };
        let redis_up = Instant::now();
        let server = server(size.cap).await;
        let prefix = format!("rbp-contention-{}:", std::process::id());
        // A Redis this young gives out no lease failing closed (the restart
        // grace, 3 s of uptime): the run measures contention, not that.
        tokio::time::sleep_until((redis_up + Duration::from_secs(4)).into()).await;
        let backend = Arc::new(backend);
        let done = Arc::new(AtomicBool::new(false));
        let spread = Arc::new(Mutex::new((BTreeSet::new(), BTreeSet::new())));
        let sampler = match &*backend {
            Backend::Single(_) => None,
            Backend::Cluster(_) => {
                let (backend, done, spread, prefix) = (
                    Arc::clone(&backend),
                    Arc::clone(&done),
                    Arc::clone(&spread),
                    prefix.clone(),
                );
                Some(std::thread::spawn(move || {
                    if let Backend::Cluster(c) = &*backend {
                        sample_spread(c, &prefix, &done, &spread);
                    }
                }))
            }
        };
        let per_worker = size.tasks / WORKERS;
        let started = Instant::now();
        let mut workers = Workers(Vec::new());
        let mut outputs = Vec::new();
        for w in 0..WORKERS {
            let (child, out, err) = crate::common::spawn_test_child(
                "reliability::contention::processes::contention_worker",
                &[
                    backend.env(),
                    ("RBP_REL_URL", server.url.clone()),
                    ("RBP_REL_PREFIX", prefix.clone()),
                    ("RBP_REL_FIRST", (w * per_worker).to_string()),
                    ("RBP_REL_TASKS", per_worker.to_string()),
                    ("RBP_REL_KEYS", size.keys.to_string()),
                    (
                        "RBP_REL_CONCURRENCY",
                        (size.concurrency / WORKERS).to_string(),
                    ),
                    ("RBP_REL_SEED", (100 + w).to_string()),
                    (
                        "RBP_REL_SPACING_US",
                        size.worker_spacing.as_micros().to_string(),
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
        let (_workers, statuses) = tokio::time::timeout(size.limit, workers)
            .await
            .unwrap_or_else(|_| panic!("workers still running after {:?}", size.limit))
            .expect("waiting thread");
        let elapsed = started.elapsed();
        done.store(true, Ordering::Relaxed);
        if let Some(sampler) = sampler {
            sampler.join().expect("sampler");
        }

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
        let leases = backend.keys(&format!("{prefix}lease:*"));
        let state = server.finish();
        if let Backend::Cluster(_) = &*backend {
            let (primaries, slots) = &*spread.lock().unwrap();
            println!(
                "contention {label}: leases seen on {} primaries, in {} slots",
                primaries.len(),
                slots.len()
            );
            assert_eq!(primaries.len(), 3, "{label}: leases not on every primary");
        }
        judge(
            label,
            &tally,
            &Seen::of(&state),
            size.keys,
            leases.len() + local_leftover,
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn contention_four_processes_short() {
        let size = Size {
            tasks: 1_000,
            keys: 20,
            concurrency: 40,
            // Each worker starts its share at a quarter of the rate.
            worker_spacing: Duration::from_millis(4),
            cap: 100,
            limit: Duration::from_secs(120),
        };
        four_processes(Backend::Single(RedisServer::start()), size).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "full run: 10,000 tasks in 4 processes; see README, Reliability"]
    async fn contention_four_processes_full() {
        let size = Size {
            tasks: 10_000,
            keys: 100,
            concurrency: 200,
            worker_spacing: Duration::from_millis(2),
            cap: 500,
            limit: Duration::from_secs(120),
        };
        four_processes(Backend::Single(RedisServer::start()), size).await;
    }

    /// The short run over a local Redis Cluster (3 primaries, 3 replicas).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn contention_four_processes_cluster_short() {
        let size = Size {
            tasks: 1_000,
            keys: 20,
            concurrency: 40,
            worker_spacing: Duration::from_millis(4),
            cap: 100,
            limit: Duration::from_secs(120),
        };
        four_processes(Backend::Cluster(RedisCluster::start()), size).await;
    }

    /// Goal 3 of the cluster issue: 4 processes × 10,000 tasks on 100 keys,
    /// each worker starting one every 0.5 ms (≤ 200 at once each), over a
    /// local Redis Cluster.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "full run: 4 processes × 10,000 tasks over a Redis Cluster; see README, Reliability"]
    async fn contention_four_processes_cluster_full() {
        let size = Size {
            tasks: 40_000,
            keys: 100,
            concurrency: 800,
            worker_spacing: Duration::from_micros(500),
            cap: 500,
            limit: Duration::from_secs(300),
        };
        four_processes(Backend::Cluster(RedisCluster::start()), size).await;
    }

    /// One worker process of the runs above; does nothing unless started by
    /// them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "a child process of contention_four_processes_*"]
    async fn contention_worker() {
        let single = std::env::var("RBP_REL_REDIS_URL").ok();
        let cluster = std::env::var("RBP_REL_REDIS_CLUSTER").ok();
        if single.is_none() && cluster.is_none() {
            return;
        }
        let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"));
        let num = |name: &str| var(name).parse::<u64>().expect(name);
        let store = match (single, cluster) {
            (Some(url), _) => RedisStore::connect(&url).await,
            (None, Some(seeds)) => RedisStore::connect_cluster(seeds.split(',')).await,
            (None, None) => unreachable!("checked above"),
        };
        // Closed: a Redis failure shows up as a failed task, never as a
        // silently unshared run.
        let store = store
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
