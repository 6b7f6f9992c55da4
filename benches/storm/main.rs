//! The storm benchmark: N tasks, each wanting one `200`, against a local
//! rate-limited server, side by side for these clients:
//!
//! 1. `no retry`: a bare `reqwest_middleware` client;
//! 2. `reqwest-retry`: `RetryTransientMiddleware` with exponential backoff,
//!    3 retries;
//! 3. `reqwest-backpressure`: `RetryAfterMiddleware::new(Policy::default())`
//!    (with `STORM_DECLARE=1`, `reqwest-backpressure, declared`: the
//!    server's quota declared, see below);
//! 4. with the `redis` feature, `reqwest-backpressure, 4 processes over
//!    Redis`: the same N tasks split over 4 processes (this binary re-run as
//!    workers), each with `RetryAfterMiddleware::with_store(Policy::default(),
//!    RedisStore)` (one key prefix, `FailMode::Closed`) against one
//!    `redis-server` this binary starts (free loopback port, no persistence,
//!    its own temp dir, killed at the end). The rate-limited server is the
//!    parent's, so its counters are comparable with the other rows; the
//!    workers start their tasks at one shared instant and report per-task
//!    results (successes, failures by code, last success since that instant)
//!    on one stdout line (a worker is this binary with `STORM_WORKER=1` and
//!    its settings in `STORM_WORKER_*`). The 429s and last success are
//!    checked against the single-process row (within 10%). Without
//!    `redis-server` on `PATH` only this row is skipped, with a message.
//!
//! Six server shapes (the test server's, `tests/support/server/shapes.rs`),
//! one table each, each row on a fresh server (new port, new origin) and a
//! fresh client:
//!
//! - **fixed window**: admits `CAP` requests per 1 s window (windows start at
//!   the server's first request) and answers the rest `429` with
//!   `Retry-After` = whole seconds to the next window (at least 1);
//! - **token bucket**: capacity `CAP`, refilled `CAP` a second, starting
//!   full; `429` with `Retry-After` = whole seconds until one token (at
//!   least 1);
//! - **sliding log**: at most `CAP` admissions in any 1 s span; `429` with
//!   `Retry-After` = whole seconds until the oldest admission in the span
//!   leaves it, rounded up (at least 1);
//! - **GCRA (governor)**: the `governor` crate's limiter,
//!   `Quota::per_second(CAP)` (a burst of `CAP`, then one every `1/CAP` s),
//!   answering as tower-governor does: `429` with `Retry-After` and
//!   `x-ratelimit-after` = the wait in whole seconds, truncated (so `0`);
//! - **RateLimit headers**: the fixed window, sending the IETF draft fields
//!   on every answer as express-rate-limit 8 does (`RateLimit: "<CAP>-in-1sec";
//!   r=<remaining>; t=<seconds to reset, rounded up, ≥ 1>`, `RateLimit-Policy:
//!   "<CAP>-in-1sec"; q=<CAP>; w=1`), its `429`s without `Retry-After`;
//! - **truncated Retry-After: 0**: `CAP` requests per 1 s window, a window
//!   starting at the first request after the last one ended; `429` with
//!   `Retry-After` = whole seconds left, truncated (so `0`), as
//!   Flask-Limiter does. Premature there: a send into the window that had
//!   already rejected that task.
//!
//! Each table's columns: tasks that got their `200`, requests and `429`s the
//! server saw, *`429`s on retries* (answered to a task's second or later
//! send: a client pacing its retries right has none after the first burst),
//! premature sends, failed tasks, the last success, and the shape's ideal
//! last success ([`Config::ideal`]).
//!
//! Then a steady-load scenario ([`steady`]): 40 workers each looping (send,
//! wait for the answer, send again) for 8 s against a server admitting 50 a
//! second, for the fixed window, RateLimit headers, truncated and
//! express-rate-limit shapes (`tests/support/server/express.rs`: draft-8
//! fields, windows opening at a first hit, `t` rounded up to 1 s):
//! calls, requests, `200`s, `429`s (and those after the first second),
//! premature sends and failed calls, with their shares.
//!
//! **The silent shapes**, behind `STORM_SHAPE=silent` (all of them) or one
//! name each: not in the default run, which they would take well past six
//! minutes on a 2-core machine (the outage rows alone wait 20 s each). Their
//! rejections are a bare status, no `Retry-After` and no rate-limit field
//! (`tests/support/server/silent.rs`):
//!
//! - **leaky bucket (nginx)**, `leaky429` / `leaky503`: `limit_req zone
//!   rate=CAP r/s burst=CAP nodelay` with `limit_req_status` 429 or nginx's
//!   default 503; nginx's accounting (levels in thousandths of a request:
//!   `excess' = max(excess + 1000 − CAP·ms, 0)`, rejected if `> CAP·1000`,
//!   a rejection changing nothing) admits `CAP + 1` at once, then `CAP` a
//!   second;
//! - **counting denied (HAProxy)**, `counting429` / `counting503`:
//!   `sc_http_req_rate(0) gt CAP` over `http_req_rate(1s)`, every request
//!   counted before the rule reads the rate (HAProxy's `freq_ctr`: the
//!   current 1 s period plus the previous one weighted by the share still
//!   to come), so a client that keeps knocking stays denied;
//! - **outage**, `outage`: a bare `503` to everything for
//!   `STORM_OUTAGE_SECS` (20) after the server's first request, then the
//!   leaky bucket of `CAP` at rest (its rejections bare `503`s); its tasks
//!   carry a 60 s `Deadline`. Reported: the retries arriving while it is
//!   down, per second, and the busiest second;
//! - **GitHub-like crawl**, `github` ([`github_crawl`]): 200 GETs, 32 at a
//!   time, primary and secondary limits and plain `403`s.
//!
//! Their tables ([`silent_report`]) count what stands in for premature
//! sends where no time was named: rejections answered to a task's second or
//! later send ("on retries", sends while the origin denies), and the tasks
//! stopped with `retry_budget_exhausted` and `missing_retry_after`. The
//! steady load also runs on the leaky bucket and counting shapes
//! ([`steady_silent`]: `200`s per second against the server's rate, the
//! failed share). The issue's rows: `STORM_N=300 STORM_CAP=50` and
//! `STORM_N=500 STORM_CAP=100`.
//!
//! **The vendors' servers**, behind `STORM_SHAPE=vendors` (all four) or
//! one name each, not in the default run ([`vendors`]): issue 28's
//! scenarios, each with the workload of its figure test
//! (`tests/support/server/vendor_loads.rs`), the `no retry` and
//! `reqwest-retry` rows beside ours, which runs the default policy with
//! the vendor's preset. `github_resources`: 300 core GETs + 30 searches
//! (`RateLimitHeaders::github()`), beside the 300 alone on a second
//! server; `discord`: 200 messages to 5 channels + 10 guild reads under
//! the global 50 a second (`RateLimitHeaders::discord()`); `partitions`:
//! two IETF `pk` partitions of one origin (`ietf()`, the default);
//! `stripe`: 300 keyed updates, 32 in flight, ~7% `lock_timeout`s, with
//! `Policy::quota(origin, Quota::per_second(25))` declared. Columns:
//! successes, requests, rejections by kind, premature sends, failed
//! tasks, each figure's last success (the server's clock), its ideal and
//! the ratio, then the scenario's own counts; our row's targets are the
//! issue's figures.
//!
//! The server counts requests, `429`s and *premature* sends: each task
//! carries an `x-task` header; the server remembers, per task, the instant
//! its last `429` allowed (fixed window: the start of the window the
//! `Retry-After` pointed to; token bucket: the `429`'s arrival plus
//! `Retry-After`; sliding log: when the oldest admission leaves the span;
//! GCRA: governor's `earliest_possible()`), and counts a later request of
//! that task that arrives before it. All times are the server's own arrival
//! times.
//!
//! ```text
//! cargo bench --bench storm
//! cargo bench --features redis --bench storm    # + the 4-process Redis row
//! STORM_N=500 STORM_CAP=100      # defaults
//! STORM_ONLY=backpressure        # only reqwest-backpressure's rows (Redis row included)
//! STORM_SHAPE=window|bucket|sliding|gcra|ratelimit|truncated   # only one server shape
//! STORM_SHAPE=express            # only the steady load's express-rate-limit row
//! STORM_SHAPE=silent             # the silent shapes and the GitHub-like crawl, not in the default run
//! STORM_SHAPE=leaky429|leaky503|counting429|counting503|outage|github   # one of them
//! STORM_SHAPE=vendors            # GitHub resources, Discord, IETF partitions, Stripe; not in the default run
//! STORM_SHAPE=github_resources|discord|partitions|stripe   # one of them
//! STORM_OUTAGE_SECS=20           # the outage's time down
//! STORM_STEADY_WORKERS=40 STORM_STEADY_CAP=50 STORM_STEADY_SECS=8   # steady load
//! STORM_VERBOSE=1                # per-window breakdown of our rows (STORM_VERBOSE=all: every row)
//! STORM_TIMEOUT=30               # seconds per row before partial figures are reported
//! STORM_REDIS=cluster            # the Redis row over a local Redis Cluster (3 primaries, 3 replicas)
//! STORM_DECLARE=1                # our rows declare the server's documented quota (Policy::quota)
//! ```
//!
//! **Declared quotas**, behind `STORM_DECLARE=1` ([`declared`]): our rows
//! (reqwest-backpressure, and the Redis row's workers, told in
//! `STORM_WORKER_QUOTA`) declare the quota the server documents for the
//! row's server origin, as a user who read its documentation would, and
//! are named `…, declared`: `Quota::per_second(CAP)` (a window) for the
//! fixed window, RateLimit headers, truncated `Retry-After: 0`, the sliding
//! log and HAProxy's counting rate; `Quota::per_second(CAP).refilled()` (a
//! bucket, GCRA) for the token bucket, GCRA, nginx's leaky bucket and the
//! outage (the leaky bucket once it is back). The steady load declares its
//! own `STORM_STEADY_CAP` the same way; the GitHub-like crawl its primary
//! quota (60 per 5 s, a window). Their targets are then the issue's for a
//! declared quota, on every shape but the outage: no `429` (or silent
//! rejection) at all, and the last success ≤ ideal + 0.25 s (its figure at
//! `STORM_N=500 STORM_CAP=100`) or ≤ 1.03 × ideal (at `STORM_N=5000
//! STORM_CAP=500`), whichever is later; every task succeeding and nothing
//! premature, as before. The other rows run as without it.
//!
//! Large runs (`STORM_N=5000 STORM_CAP=500`) keep every task in flight at
//! once: a client socket and a server socket each, in this process. The
//! bench raises its soft open-file limit to `2 N + 256` (up to the hard
//! limit) and warns if that is short (then raise it: `ulimit -n`).
//!
//! Run without `--bench` (as `cargo test --benches` does), it makes a quick
//! smoke run of our rows only (N=60, CAP=30) unless `STORM_N`/`STORM_CAP` are
//! set, and a 1 s steady load (8 workers, CAP=10) on the fixed window only.
//!
//! The bench is a folder, one job per file: [`config`] (what to run),
//! [`clients`] (the clients compared), `server` (the rate-limited server, shared with the tests and the demo),
//! [`harness`] (running a row), [`outcome`] (what a row ended with),
//! [`report`], [`silent_report`] and [`breakdown`] (what is printed),
//! [`steady`] and [`steady_silent`] (the steady load), [`github_crawl`],
//! [`vendors`] (the vendors' servers), [`declared`] (`STORM_DECLARE`: the quotas declared and their targets),
//! and `redis_row` (the 4-process row and its worker processes).

use std::process::ExitCode;
use std::time::Instant;

mod breakdown;
mod clients;
mod config;
mod declared;
mod github_crawl;
mod harness;
mod outcome;
mod report;
mod silent_report;
mod steady;
mod steady_silent;
mod summary;
mod vendors;

/// The rate-limited server (shared with the tests and the demo).
#[path = "../../tests/support/server.rs"]
mod server;

/// The `redis-server` the Redis row runs against (shared with the Redis
/// tests, whose stop/restart/signal/connection helpers this binary does not
/// use).
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

/// The local Redis Cluster the Redis row runs against with
/// `STORM_REDIS=cluster` (shared with the cluster tests).
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../../tests/support/redis_cluster.rs"]
mod redis_cluster;

#[cfg(feature = "redis")]
mod redis_row;

use breakdown::details;
use config::{ClientKind, Config, Verbose};
use harness::run_row;
use outcome::Row;
use report::secs;
use server::Shape;
#[cfg(feature = "redis")]
use summary::print_redis_targets;
use summary::{print_failures, print_table, print_targets};

/// Rows that could not run, and why.
pub(crate) type Skipped = Vec<(Shape, ClientKind, String)>;

/// The Redis row's server: `None` if the row is not asked for, `Err(why)` if
/// it could not start.
#[cfg(feature = "redis")]
type Redis = Option<Result<RedisBackend, String>>;

/// What the Redis row's workers share: one `redis-server`, or a local
/// Redis Cluster (`STORM_REDIS=cluster`).
#[cfg(feature = "redis")]
enum RedisBackend {
    Single(redis_server::RedisServer),
    Cluster(redis_cluster::RedisCluster),
}

#[cfg(feature = "redis")]
impl RedisBackend {
    /// What a worker connects to: a URL, or `cluster:` and the seeds.
    fn url(&self) -> String {
        match self {
            RedisBackend::Single(r) => r.url(),
            RedisBackend::Cluster(c) => format!("cluster:{}", c.seeds().join(",")),
        }
    }
}
#[cfg(not(feature = "redis"))]
type Redis = Option<Result<std::convert::Infallible, String>>;

fn main() -> ExitCode {
    // A worker process of the Redis row (this binary re-run by itself).
    #[cfg(feature = "redis")]
    if let Some(worker) = redis_row::Worker::from_env() {
        return match worker {
            Ok(worker) => worker.run(),
            Err(e) => {
                eprintln!("storm worker: {e}");
                ExitCode::from(2)
            }
        };
    }

    let cfg = Config::from_env();
    raise_open_file_limit(&cfg);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "storm: N={} tasks, CAP={} per second, {} s limit per row{}{}",
        cfg.n,
        cfg.cap,
        cfg.timeout.as_secs(),
        if cfg.declare {
            "; our rows declare the server's documented quota (STORM_DECLARE)"
        } else {
            ""
        },
        if cfg.smoke {
            " — smoke run (no --bench): `cargo bench --bench storm` for the full run"
        } else {
            ""
        }
    );
    let whole = Instant::now();
    let redis = start_redis(&cfg);
    let (rows, skipped) = run_rows(&cfg, &runtime, &redis);
    print_table(&cfg, &rows, &skipped);
    print_targets(&cfg, &rows);
    #[cfg(feature = "redis")]
    print_redis_targets(&cfg, &rows, &skipped);
    print_failures(&rows);
    let steady = steady::run_steady_rows(&cfg, &runtime);
    if !steady.is_empty() {
        println!();
        print!("{}", steady::steady_table(&cfg, &steady));
    }
    if cfg.github {
        github_crawl::run_and_print(&cfg, &runtime);
    }
    if !cfg.vendors.is_empty() {
        vendors::run_and_print(&cfg, &runtime);
    }
    for row in &rows {
        let show = match cfg.verbose {
            Verbose::Off => false,
            Verbose::Ours => row.client.is_ours(),
            Verbose::All => true,
        };
        if show {
            print!("{}", details(row));
        }
    }
    println!("\nstorm: total {}", secs(whole.elapsed()));
    ExitCode::SUCCESS
}

/// Raises the soft open-file limit to what `N` tasks in flight at once need
/// (a client socket and the server's socket each, in this process; the
/// Redis row's workers inherit the limit), up to the hard limit; says so if
/// that is not enough (raise the hard limit, e.g. `ulimit -Hn`, as root).
fn raise_open_file_limit(cfg: &Config) {
    let need = 2 * u64::from(cfg.n) + 256;
    match rlimit::increase_nofile_limit(need) {
        Ok(soft) if soft >= need => {}
        Ok(soft) => eprintln!(
            "storm: warning: open-file limit {soft}, below the {need} that N={} tasks in flight \
             may need; rows may fail to connect (raise it: ulimit -n {need})",
            cfg.n
        ),
        Err(e) => eprintln!("storm: warning: cannot read or raise the open-file limit: {e}"),
    }
}

/// Starts the Redis row's `redis-server` if that row is asked for (it
/// runs on the storm's shapes only: not for the crawl or the vendors).
#[cfg(feature = "redis")]
fn start_redis(cfg: &Config) -> Redis {
    let cluster = std::env::var("STORM_REDIS").is_ok_and(|v| v.trim() == "cluster");
    let asked = cfg.clients.contains(&ClientKind::BackpressureRedis) && !cfg.shapes.is_empty();
    let redis = asked.then(|| {
        let started = if cluster {
            println!(
                "storm: the Redis row runs over a local Redis Cluster (3 primaries, 3 replicas)"
            );
            redis_cluster::RedisCluster::try_start(3, 1).map(RedisBackend::Cluster)
        } else {
            redis_server::RedisServer::try_start().map(RedisBackend::Single)
        };
        started.map_err(|e| match e {
            redis_server::StartError::NotFound => "redis-server not found on PATH; install it \
                     (e.g. apt-get install redis-server redis-tools) to run this row"
                .to_owned(),
            redis_server::StartError::Failed(why) => why,
        })
    });
    if let Some(Err(why)) = &redis {
        println!(
            "storm: SKIPPING the row \"{}\": {why}",
            ClientKind::BackpressureRedis.name()
        );
    }
    redis
}

#[cfg(not(feature = "redis"))]
fn start_redis(_: &Config) -> Redis {
    None
}

/// Runs every row asked for, shape by shape; returns them and the rows
/// skipped.
fn run_rows(cfg: &Config, runtime: &tokio::runtime::Runtime, redis: &Redis) -> (Vec<Row>, Skipped) {
    #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
    let mut skipped = Skipped::new();
    #[cfg(not(feature = "redis"))]
    let _ = redis;
    let mut rows = Vec::new();
    for &shape in &cfg.shapes {
        for &kind in &cfg.clients {
            let row = match kind {
                #[cfg(feature = "redis")]
                ClientKind::BackpressureRedis => match redis {
                    Some(Ok(server)) => runtime.block_on(redis_row::run(cfg, shape, &server.url())),
                    Some(Err(why)) => {
                        skipped.push((shape, kind, why.clone()));
                        continue;
                    }
                    None => continue,
                },
                _ => runtime.block_on(run_row(cfg, shape, kind)),
            };
            eprintln!(
                "storm: {} × {} done in {} ({} ok, {} requests)",
                shape.name(),
                kind.name(),
                secs(row.client_side.last_ok.unwrap_or_default()),
                row.client_side.ok,
                row.server.requests
            );
            rows.push(row);
        }
    }
    (rows, skipped)
}
