//! The first contact's cost: what `Policy::first_contact` (others wait for
//! an origin's first answer, 500 ms at most by default) costs a burst to an
//! origin that has no limit at all.
//!
//! One wiremock server on loopback answers every `GET` with `200` and a
//! small body at once. Each measurement is a burst of `N` concurrent first
//! requests (`N` = 1, 16, 100; one tokio task each, body read in full) to
//! an origin the client has never seen: every burst gets a fresh
//! middleware (a new `MemoryStore`), built before its clock starts, over
//! one shared `reqwest::Client` (its connection pool stays warm, so what
//! differs is the middleware). Three clients:
//!
//! - `bare`: no middleware;
//! - `first-contact-off`: `RetryAfterMiddleware::new(Policy::default()
//!   .first_contact(Duration::ZERO))`: the burst leaves at once;
//! - `first-contact-on`: `RetryAfterMiddleware::new(Policy::default())`:
//!   one request leaves, the others wait for its answer.
//!
//! One criterion group per `N` (`first-contact/N`), then, per `N`, the
//! line `first contact N=…`: the three clients' bursts interleaved (each
//! round in a new random order), the median burst of each, and the
//! medians over rounds of the per-round ratios and differences, on/off
//! and on/bare.
//!
//! ```text
//! cargo bench --bench first_contact
//! ```

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use reqwest_backpressure::{Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use tokio::runtime::Runtime;

#[path = "support/loopback.rs"]
mod loopback;
use loopback::{full_run, median, runtime_and_server};

/// Concurrent first requests per burst.
const SIZES: [usize; 3] = [1, 16, 100];

/// The clients, in criterion and in the ratio lines.
const NAMES: [&str; 3] = ["bare", "first-contact-off", "first-contact-on"];
const BARE: usize = 0;
const OFF: usize = 1;
const ON: usize = 2;

/// Client `which` of [`NAMES`] over `http`: a fresh middleware, so every
/// origin is new to it.
fn client(http: &reqwest::Client, which: usize) -> ClientWithMiddleware {
    let builder = ClientBuilder::new(http.clone());
    match which {
        BARE => builder.build(),
        OFF => builder
            .with(RetryAfterMiddleware::new(
                Policy::default().first_contact(Duration::ZERO),
            ))
            .build(),
        _ => builder
            .with(RetryAfterMiddleware::new(Policy::default()))
            .build(),
    }
}

/// `n` concurrent GETs to `url`, one task each, bodies read in full.
async fn burst(client: &ClientWithMiddleware, url: &str, n: usize) {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (client, url) = (client.clone(), url.to_owned());
        set.spawn(async move {
            let response = client.get(url).send().await.expect("GET failed");
            assert!(response.status().is_success(), "{}", response.status());
            response.bytes().await.expect("body").len()
        });
    }
    while let Some(done) = set.join_next().await {
        std::hint::black_box(done.expect("task"));
    }
}

/// One burst of `n` with a fresh client `which`, timed from its first send
/// to its last body (the client built before, dropped after).
async fn timed_burst(http: &reqwest::Client, which: usize, url: &str, n: usize) -> Duration {
    let client = client(http, which);
    let start = Instant::now();
    burst(&client, url, n).await;
    start.elapsed()
}

/// `rounds` rounds, each one burst of `n` per client in a new random
/// order; every burst's time in seconds, `[client][round]`.
fn interleaved(
    rt: &Runtime,
    http: &reqwest::Client,
    url: &str,
    n: usize,
    rounds: usize,
) -> [Vec<f64>; 3] {
    rt.block_on(async {
        let mut times: [Vec<f64>; 3] = Default::default();
        let mut order = [BARE, OFF, ON];
        for _ in 0..rounds {
            fastrand::shuffle(&mut order);
            for c in order {
                let t = timed_burst(http, c, url, n).await;
                times[c].push(t.as_secs_f64());
            }
        }
        times
    })
}

fn main() {
    let full = full_run();
    let (rt, _server, url) = runtime_and_server();
    let http = reqwest::Client::new();
    // Open the pool's connections for the largest burst before measuring.
    rt.block_on(burst(&client(&http, BARE), &url, SIZES[SIZES.len() - 1]));

    // Short: the whole bench stays within about a minute on a small,
    // shared machine (no plots: drawing them took longer than measuring).
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10)
        .without_plots()
        .configure_from_args();
    for n in SIZES {
        let mut group = criterion.benchmark_group(format!("first-contact/{n}"));
        for (which, name) in NAMES.iter().enumerate() {
            group.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.to_async(&rt).iter_custom(|iters| {
                    let (http, url) = (&http, url.as_str());
                    async move {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += timed_burst(http, which, url, n).await;
                        }
                        total
                    }
                });
            });
        }
        group.finish();
    }
    criterion.final_summary();

    let rounds = if full { 201 } else { 3 };
    let note = if full {
        ""
    } else {
        " [test mode: not a measurement]"
    };
    for n in SIZES {
        let mut times = interleaved(&rt, &http, &url, n, rounds);
        let per_round = |f: &dyn Fn(usize) -> f64| -> f64 {
            let mut v: Vec<f64> = (0..rounds).map(f).collect();
            median(&mut v)
        };
        let on_off = per_round(&|r| times[ON][r] / times[OFF][r]);
        let on_off_us = per_round(&|r| (times[ON][r] - times[OFF][r]) * 1e6);
        let on_bare = per_round(&|r| times[ON][r] / times[BARE][r]);
        let on_bare_us = per_round(&|r| (times[ON][r] - times[BARE][r]) * 1e6);
        let off_bare = per_round(&|r| times[OFF][r] / times[BARE][r]);
        let [bare, off, on] = std::array::from_fn(|c| median(&mut times[c]) * 1e6);
        println!(
            "first contact N={n}: on/off = {on_off:.3} ({on_off_us:+.1} us/burst), \
             on/bare = {on_bare:.3} ({on_bare_us:+.1} us/burst), off/bare = {off_bare:.3}; \
             median burst bare {bare:.1} us, off {off:.1} us, on {on:.1} us \
             ({rounds} interleaved rounds, a fresh middleware per burst){note}"
        );
    }
}
