//! Shopify's REST Admin API with `Policy::shopify()`: a product export
//! reading a store's products, all at once.
//!
//! ```text
//! cargo run --example shopify
//! ```
//!
//! Shopify limits each app on each store with a leaky bucket: 40 requests
//! on the standard plans, leaking 2 a second (Plus: 20 a second). Every
//! answer states the bucket's level as `X-Shopify-Shop-Api-Call-Limit:
//! 32/40`; a request that does not fit gets `429` with `Retry-After: 2.0`,
//! a decimal, which Shopify's docs show and its client libraries parse as
//! a float. The preset reads the call-limit header as that bucket (its
//! size as stated, its leak rate the plan's), sends what the bucket has
//! free at once and the rest as it leaks, and reads Shopify's decimal
//! `Retry-After` as the time the server named (the strict parser stays
//! strict for every other policy).
//!
//! The API here is an embedded store on 127.0.0.1 whose bucket behaves as
//! Shopify documents (`tests/support/server/shopify.rs`), with its times
//! scaled down ten times: 40 requests, leaking 20 a second, a `429`
//! naming `Retry-After: 0.2`. The policy names the scaled leak rate as a
//! client of a Plus store names its 20 a second. Against Shopify, the only
//! change is the base URL (and your access token). The example prints
//! what the store saw and exits non-zero if it breaks the contract: a
//! request inside a throttle a `429` named, a read that did not get its
//! `200`, or a run far longer than the bucket allows.

use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{Policy, RateLimitHeaders, RetryAfterMiddleware};
use reqwest_middleware::ClientBuilder;

/// The test servers (shared with the tests and the benches); this example
/// uses the Shopify-like one.
#[path = "../tests/support/server.rs"]
mod server;
/// The examples' tally of outcomes and contract checks.
#[path = "vendors/verdict.rs"]
mod verdict;

use server::shopify::{ShopifyAnswer, ShopifyConfig, ShopifyState};
use server::wire::JudgedServer;
use verdict::{Tally, Verdict, secs};

/// Products read: the bucket's 40 at once, then five seconds of its leak.
const READS: usize = 140;
/// Requests in flight at once: all of them. The middleware holds what the
/// bucket cannot take; this only bounds the sockets.
const IN_FLIGHT: usize = READS;
/// How far past its ideal the last read may come before the run counts as
/// broken (the tests assert 1.05×).
const SLACK: f64 = 1.25;

#[tokio::main]
async fn main() -> ExitCode {
    // The standard plan, scaled ten times: leaks 20 a second, `Retry-After: 0.2`.
    let config = ShopifyConfig::standard_scaled(10, "0.2");
    let store = JudgedServer::start(ShopifyState::new(config)).await;
    // Against Shopify: "https://{shop}.myshopify.com".
    let api = store.uri.clone();

    // The whole setup: Shopify's preset (a standard plan's 2 a second),
    // its leak rate set to the store's; the rest of the policy default.
    // `no_proxy` only because the server is on loopback.
    let policy =
        Policy::shopify().rate_limit_headers(RateLimitHeaders::shopify_leaking(config.leak));
    let http = match reqwest::Client::builder().no_proxy().build() {
        Ok(http) => http,
        Err(e) => {
            eprintln!("cannot build the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(policy))
        .build();

    println!(
        "Shopify: {READS} product reads at once against a bucket of {} leaking {} a second \
         (a 429 names Retry-After: {}), Policy::shopify() leaking {}",
        config.size, config.leak, config.retry_after, config.leak
    );
    let results = futures_util::stream::iter(0..READS)
        .map(|i| {
            client
                .get(format!("{api}/admin/api/2024-01/products/{i}.json"))
                // Your token: .header("x-shopify-access-token", token)
                .send()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let seen = store.finish();

    let mut tally = Tally::default();
    for result in &results {
        tally.add(result);
    }
    let throttled = seen.count(ShopifyAnswer::Throttled);
    let inside = seen.inside_throttles().len();
    println!(
        "  the store saw {} requests: {} 200s, {throttled} 429s, {inside} arriving inside a \
         throttle a 429 named",
        seen.answers.len(),
        seen.count(ShopifyAnswer::Ok),
    );
    println!("  tasks got back {}", tally.line());
    println!(
        "  per second on the store's clock: {}",
        per_second(&seen).join(", ")
    );
    let best = ideal(config, READS);
    let took = seen.last_ok().unwrap_or(Duration::MAX);
    println!(
        "  first request to last 200: {}; ideal {} (the bucket's {} at once, then {} a second)",
        secs(took),
        secs(best),
        config.size,
        config.leak
    );

    let mut verdict = Verdict::default();
    verdict.check(
        tally.with(200) == READS,
        format!("{}/{READS} reads got their 200", tally.with(200)),
    );
    verdict.check(
        inside == 0,
        format!("{inside} requests inside a throttle the store named"),
    );
    verdict.within("first request to last 200", took, best, SLACK);
    verdict.exit()
}

/// When the documented bucket admits the last of `reads` sent at once:
/// its size at once, then one per leak.
fn ideal(config: ShopifyConfig, reads: usize) -> Duration {
    let after = reads.saturating_sub(config.size as usize) as f64;
    Duration::from_secs_f64(after / f64::from(config.leak.max(1)))
}

/// Requests the store saw in each second from its first.
fn per_second(seen: &ShopifyState) -> Vec<String> {
    let mut counts: Vec<usize> = Vec::new();
    for (at, _) in seen.log() {
        let k = usize::try_from(at.as_secs()).unwrap_or(usize::MAX);
        if counts.len() <= k {
            counts.resize(k + 1, 0);
        }
        counts[k] += 1;
    }
    counts.iter().map(usize::to_string).collect()
}
