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
//! After criterion, the same clients run interleaved (A/B/C, B/C/A, …) in
//! short rounds and the line `overhead ratio backpressure/bare = …` gives
//! the median of the per-round ratios: interleaving cancels the drift of a
//! small, noisy machine that separate criterion runs would fold into the
//! comparison.
//!
//! ```text
//! cargo bench --bench overhead
//! ```

use std::time::{Duration, Instant};

use criterion::Criterion;
use reqwest_backpressure::{Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use tokio::runtime::Runtime;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The body every answer carries.
const BODY: &str = "ok: a small body of a few dozen bytes\n";

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

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs the clients interleaved: `rounds` rounds, each sending `per_round`
/// requests with each client in a rotated order. Returns per-round mean
/// latencies, `[client][round]`.
fn interleaved(
    rt: &Runtime,
    clients: &[ClientWithMiddleware; 3],
    url: &str,
    rounds: usize,
    per_round: usize,
) -> [Vec<f64>; 3] {
    rt.block_on(async {
        let mut means: [Vec<f64>; 3] = Default::default();
        for round in 0..rounds {
            for i in 0..3 {
                let c = (round + i) % 3;
                let start = Instant::now();
                for _ in 0..per_round {
                    std::hint::black_box(get(&clients[c], url).await);
                }
                let secs = start.elapsed().as_secs_f64();
                means[c].push(secs / per_round as f64);
            }
        }
        means
    })
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then every part runs briefly.
    let full = std::env::args().any(|a| a == "--bench");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let server = rt.block_on(async {
        let server = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string(BODY))
            .mount(&server)
            .await;
        server
    });
    let url = format!("{}/item", server.uri());
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
    criterion.final_summary();

    let (rounds, per_round) = if full { (25, 400) } else { (3, 20) };
    // Warm the pool and every path before measuring.
    interleaved(&rt, &clients, &url, 1, per_round);
    let mut means = interleaved(&rt, &clients, &url, rounds, per_round);
    let ratio = |c: usize| {
        let mut r: Vec<f64> = means[c]
            .iter()
            .zip(&means[0])
            .map(|(x, bare)| x / bare)
            .collect();
        median(&mut r)
    };
    let ours = ratio(1);
    let theirs = ratio(2);
    let micros: Vec<f64> = means.iter_mut().map(|m| median(m) * 1e6).collect();
    println!(
        "overhead ratio backpressure/bare = {ours:.3}, reqwest-retry/bare = {theirs:.3} \
         (median of {rounds} interleaved rounds x {per_round} GETs per client)"
    );
    println!(
        "overhead per GET (median): {} {:.1} us, {} {:.1} us, {} {:.1} us",
        NAMES[0], micros[0], NAMES[1], micros[1], NAMES[2], micros[2]
    );
}
