//! Success-path overhead: what the middleware costs when nothing is pushed
//! back.
//!
//! One wiremock server on loopback answers every `GET` with `200` and a
//! small body; three `reqwest-middleware` clients over the same
//! `reqwest::Client` (same connection pool) send one `GET` and read the body
//! per iteration:
//!
//! - `bare`: no middleware;
//! - `reqwest-backpressure`: `RetryAfterMiddleware::new(Policy::default())`;
//! - `reqwest-retry`: `RetryTransientMiddleware` with `ExponentialBackoff`
//!   and 3 retries.
//!
//! A second criterion group, `overhead-cpu`, runs the same three clients
//! against a last middleware that answers at once without I/O: what the
//! middlewares cost in CPU alone, without sockets, wake-ups or timers.
//!
//! After criterion, the line `cpu-only` gives that CPU cost per request
//! from interleaved batches, and the line `overhead backpressure/bare = …`
//! the loopback overhead: the same clients run interleaved one request at a
//! time, each round in a new random order, 21 blocks of 2000 requests per
//! client. Each block gives each client's median latency; the ratio and the
//! extra µs per request printed are the medians over blocks of the
//! per-block figures, with their range. Interleaving puts every client under
//! the same background noise (three separate criterion runs on a small,
//! shared machine can land in different regimes: the loopback round trip is
//! mostly thread wake-ups), and the random order keeps any client from
//! always following the same one (a fixed rotation did: a client's latency
//! depends on which one ran just before it).
//!
//! Then the cost of new origins: three clients whose stores already know
//! 1, 1,000 and 100,000 origins each send GETs to origins they have never
//! seen (`http://o-<n>.test:<port>/`, every name resolved to the loopback
//! server, one new connection each), interleaved one request at a time, and
//! the line `new-origin ratio` divides their median latencies by the
//! 1-origin client's. A crawler or a multi-tenant gateway meets this path
//! on every request.
//!
//! ```text
//! cargo bench --bench overhead
//! ```

use std::time::{Duration, Instant};

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::Criterion;
use http::Extensions;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{Request, Response, ResponseBuilderExt};
use reqwest_backpressure::origin::PacingConfig;
use reqwest_backpressure::store::Outcome;
use reqwest_backpressure::{MemoryStore, Policy, RetryAfterMiddleware, Store};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use tokio::runtime::Runtime;

#[path = "support/loopback.rs"]
mod loopback;
use loopback::{BODY, full_run, median, runtime_and_server};

/// Names of the three clients, in criterion and in the ratio line.
const NAMES: [&str; 3] = ["bare", "reqwest-backpressure", "reqwest-retry"];

/// One `GET`, body read in full.
async fn get(client: &ClientWithMiddleware, url: &str) -> usize {
    let response = client.get(url).send().await.expect("GET failed");
    assert!(response.status().is_success(), "{}", response.status());
    response.bytes().await.expect("body").len()
}

fn clients() -> [ClientWithMiddleware; 3] {
    let http = reqwest::Client::new();
    let bare = ClientBuilder::new(http.clone()).build();
    let ours = ClientBuilder::new(http.clone())
        .with(RetryAfterMiddleware::new(Policy::default()))
        .build();
    let retry = ExponentialBackoff::builder().build_with_max_retries(3);
    let theirs = ClientBuilder::new(http)
        .with(RetryTransientMiddleware::new_with_policy(retry))
        .build();
    [bare, ours, theirs]
}

/// Answers every request at once with `200` and [`BODY`], without I/O:
/// the last middleware of the CPU-only clients, so what they measure is
/// the middleware's own work (and no socket, thread wake-up or timer
/// firing).
struct Canned;

#[async_trait::async_trait]
impl Middleware for Canned {
    async fn handle(
        &self,
        req: Request,
        _: &mut Extensions,
        _: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let response = http::Response::builder()
            .status(200)
            .url(req.url().clone())
            .body(BODY)
            .expect("canned response");
        Ok(Response::from(response))
    }
}

/// The three clients of [`clients`], each ending in [`Canned`].
fn cpu_clients() -> [ClientWithMiddleware; 3] {
    let http = reqwest::Client::new();
    let bare = ClientBuilder::new(http.clone()).with(Canned).build();
    let ours = ClientBuilder::new(http.clone())
        .with(RetryAfterMiddleware::new(Policy::default()))
        .with(Canned)
        .build();
    let retry = ExponentialBackoff::builder().build_with_max_retries(3);
    let theirs = ClientBuilder::new(http)
        .with(RetryTransientMiddleware::new_with_policy(retry))
        .with(Canned)
        .build();
    [bare, ours, theirs]
}

/// CPU-only: `rounds` rounds in which each client, in turn (in a new random
/// order each round), sends `batch` requests to [`Canned`]; the median over
/// rounds of each client's mean time per request, in seconds.
fn cpu_only(
    rt: &Runtime,
    clients: &[ClientWithMiddleware; 3],
    rounds: usize,
    batch: usize,
) -> [f64; 3] {
    const URL: &str = "http://127.0.0.1:9/item";
    rt.block_on(async {
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut order = [0, 1, 2];
        for _ in 0..rounds {
            fastrand::shuffle(&mut order);
            for c in order {
                let start = Instant::now();
                for _ in 0..batch {
                    std::hint::black_box(get(&clients[c], URL).await);
                }
                times[c].push(start.elapsed().as_secs_f64() / batch as f64);
            }
        }
        times.map(|mut t| median(&mut t))
    })
}

/// Resolves every name to the loopback server.
struct Loopback(SocketAddr);

impl Resolve for Loopback {
    fn resolve(&self, _: Name) -> Resolving {
        let addr = self.0;
        Box::pin(async move { Ok(Box::new(std::iter::once(addr)) as Addrs) })
    }
}

/// Known-origin counts of the new-origin rows.
const KNOWN: [usize; 3] = [1, 1_000, 100_000];

/// A client whose store already knows `known` origins, each seen once
/// just now (so none is idle and none can be swept), and which opens a
/// new connection for every request.
async fn client_knowing(known: usize, server: SocketAddr) -> ClientWithMiddleware {
    let store = MemoryStore::new();
    let policy = Policy::default();
    let pacing = PacingConfig::DEFAULT;
    for i in 0..known {
        store
            .record(&format!("http://k-{i}.test:80"), pacing, Outcome::Admitted)
            .await
            .expect("memory store");
    }
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .dns_resolver(Arc::new(Loopback(server)))
        .build()
        .expect("client");
    ClientBuilder::new(http)
        .with(RetryAfterMiddleware::with_store(policy, store))
        .build()
}

/// Interleaved GETs to never-seen origins, one client per entry of
/// [`KNOWN`]; the median latency of each, in seconds.
fn new_origins(rt: &Runtime, server: SocketAddr, requests: usize) -> [f64; 3] {
    rt.block_on(async {
        let mut clients = Vec::new();
        for known in KNOWN {
            clients.push(client_knowing(known, server).await);
        }
        let next = AtomicU64::new(0);
        let mut latencies: [Vec<f64>; 3] = Default::default();
        let mut order = [0, 1, 2];
        for _ in 0..requests {
            fastrand::shuffle(&mut order);
            for c in order {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let url = format!("http://o-{n}.test:{}/item", server.port());
                let start = Instant::now();
                std::hint::black_box(get(&clients[c], &url).await);
                latencies[c].push(start.elapsed().as_secs_f64());
            }
        }
        latencies.map(|mut l| median(&mut l))
    })
}

/// The median and range of some per-block figures.
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Self {
        Spread {
            median: median(&mut v),
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// Sends `blocks` x `per_block` GETs with each client, interleaved one
/// request at a time (each round in a new random order), and returns every
/// request's latency in seconds, `[client][block][request]`.
fn interleaved(
    rt: &Runtime,
    clients: &[ClientWithMiddleware; 3],
    url: &str,
    blocks: usize,
    per_block: usize,
) -> [Vec<Vec<f64>>; 3] {
    rt.block_on(async {
        let mut latencies: [Vec<Vec<f64>>; 3] = Default::default();
        for _ in 0..blocks {
            for l in &mut latencies {
                l.push(Vec::with_capacity(per_block));
            }
            let mut order = [0, 1, 2];
            for _ in 0..per_block {
                fastrand::shuffle(&mut order);
                for c in order {
                    let start = Instant::now();
                    std::hint::black_box(get(&clients[c], url).await);
                    let secs = start.elapsed().as_secs_f64();
                    latencies[c].last_mut().expect("block").push(secs);
                }
            }
        }
        latencies
    })
}

fn main() {
    let full = full_run();
    let (rt, server, url) = runtime_and_server();
    let clients = clients();

    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .sample_size(50)
        .configure_from_args();
    {
        let mut group = criterion.benchmark_group("overhead");
        for (name, client) in NAMES.iter().zip(&clients) {
            group.bench_function(*name, |b| {
                b.to_async(&rt).iter(|| get(client, &url));
            });
        }
        group.finish();
    }
    {
        let cpu = cpu_clients();
        let mut group = criterion.benchmark_group("overhead-cpu");
        for (name, client) in NAMES.iter().zip(&cpu) {
            group.bench_function(*name, |b| {
                b.to_async(&rt)
                    .iter(|| get(client, "http://127.0.0.1:9/item"));
            });
        }
        group.finish();
    }
    criterion.final_summary();

    let (rounds, batch) = if full { (2000, 200) } else { (3, 10) };
    let cpu = cpu_only(&rt, &cpu_clients(), rounds, batch);
    println!(
        "cpu-only (canned answer, no I/O) per request: {} {:.2} us, {} {:.2} us ({:+.2} us), {} {:.2} us ({:+.2} us){}",
        NAMES[0],
        cpu[0] * 1e6,
        NAMES[1],
        cpu[1] * 1e6,
        (cpu[1] - cpu[0]) * 1e6,
        NAMES[2],
        cpu[2] * 1e6,
        (cpu[2] - cpu[0]) * 1e6,
        if full {
            ""
        } else {
            " [test mode: not a measurement]"
        }
    );

    let (blocks, per_block) = if full { (21, 2000) } else { (1, 20) };
    // Warm the pool and every path before measuring.
    interleaved(&rt, &clients, &url, 1, per_block / 10);
    let latencies = interleaved(&rt, &clients, &url, blocks, per_block);
    // Each block's median latency per client, then, for each comparison,
    // the median over blocks of the per-block figure: a block hit by a
    // burst of background load moves one value, not the result.
    let block_medians: Vec<[f64; 3]> = (0..blocks)
        .map(|b| std::array::from_fn(|c| median(&mut latencies[c][b].clone())))
        .collect();
    let over_blocks = |f: &dyn Fn(&[f64; 3]) -> f64| -> Spread {
        Spread::of(block_medians.iter().map(f).collect())
    };
    let ours_ratio = over_blocks(&|m| m[1] / m[0]);
    let ours_us = over_blocks(&|m| (m[1] - m[0]) * 1e6);
    let theirs_ratio = over_blocks(&|m| m[2] / m[0]);
    let theirs_us = over_blocks(&|m| (m[2] - m[0]) * 1e6);
    let between_us = over_blocks(&|m| (m[1] - m[2]) * 1e6);
    let bare_us = over_blocks(&|m| m[0] * 1e6);
    println!(
        "overhead backpressure/bare = {:.3} ({:+.1} us/request), reqwest-retry/bare = {:.3} ({:+.1} us/request), \
         backpressure - reqwest-retry = {:+.1} us{}",
        ours_ratio.median,
        ours_us.median,
        theirs_ratio.median,
        theirs_us.median,
        between_us.median,
        if full {
            ""
        } else {
            " [test mode: not a measurement]"
        }
    );
    println!(
        "  median over {blocks} blocks of {per_block} GETs per client (interleaved one request at a time, random order) \
         of each block's median; bare {:.1} us per GET; per-block range: backpressure {:.3}-{:.3} \
         ({:+.1} to {:+.1} us), reqwest-retry {:.3}-{:.3} ({:+.1} to {:+.1} us), difference {:+.1} to {:+.1} us",
        bare_us.median,
        ours_ratio.min,
        ours_ratio.max,
        ours_us.min,
        ours_us.max,
        theirs_ratio.min,
        theirs_ratio.max,
        theirs_us.min,
        theirs_us.max,
        between_us.min,
        between_us.max,
    );

    let runs = if full { 5 } else { 1 };
    let requests = if full { 1_000 } else { 10 };
    let mut ratios: [Vec<f64>; 2] = Default::default();
    let mut first = [0.0; 3];
    for run in 0..runs {
        let m = new_origins(&rt, *server.address(), requests);
        if run == 0 {
            first = m;
        }
        ratios[0].push(m[1] / m[0]);
        ratios[1].push(m[2] / m[0]);
    }
    let spread = |r: &[f64]| {
        let min = r.iter().copied().fold(f64::INFINITY, f64::min);
        let max = r.iter().copied().fold(0.0, f64::max);
        (min, max)
    };
    let (a_min, a_max) = spread(&ratios[0]);
    let (b_min, b_max) = spread(&ratios[1]);
    println!(
        "new-origin ratio (known 1,000 / known 1) = {:.3}-{:.3}, (known 100,000 / known 1) = {:.3}-{:.3}{}",
        a_min,
        a_max,
        b_min,
        b_max,
        if full {
            ""
        } else {
            " [test mode: not a measurement]"
        }
    );
    println!(
        "  {runs} runs of {requests} GETs per client to never-seen origins, interleaved, one new \
         connection each; first run's medians: {:.1} / {:.1} / {:.1} us",
        first[0] * 1e6,
        first[1] * 1e6,
        first[2] * 1e6,
    );
}
