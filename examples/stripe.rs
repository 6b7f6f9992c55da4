//! Stripe's API: a sync job updating customers, each update keyed, under
//! Stripe's rate limiter and its objects' locks.
//!
//! ```text
//! cargo run --example stripe
//! ```
//!
//! Stripe admits 25 requests a second in test mode (100 in live mode) and
//! answers `429` past that, with no `Retry-After` and no rate-limit
//! header; an update of an object another request is updating gets `429`
//! with the code `lock_timeout`. Stripe applies a repeated
//! `Idempotency-Key` once, and takes the header's value as it is (not
//! quoted). The policy below sends the key raw and declares the
//! documented rate, so the job runs at 25 a second from its first request,
//! and an update that met a lock is retried with its key, once the lock
//! is likely gone.
//!
//! The API here is an embedded server on 127.0.0.1 that limits as Stripe
//! documents (`tests/support/server/stripe.rs`: a token bucket of 25 a
//! second, locks of 100 ms). Against Stripe, the only change is the base
//! URL (and your secret key). The example prints what the server saw and
//! exits non-zero if it breaks the contract: an update lost, an update
//! applied twice, a key not sent as Stripe reads it, or a run far longer
//! than the rate allows.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{
    IdempotencyKey, IdempotencyKeyForm, Policy, Quota, RetryAfterMiddleware,
};
use reqwest_middleware::ClientBuilder;

/// The test servers (shared with the tests and the benches); this example
/// uses the Stripe-like one.
#[path = "../tests/support/server.rs"]
mod server;
/// The examples' tally of outcomes and contract checks.
#[path = "vendors/verdict.rs"]
mod verdict;

use server::stripe::{StripeAnswer, StripeConfig, StripeServer, customer_path};
use server::vendor_loads::stripe::{IN_FLIGHT, LOCK, RATE, body, customers, follow_ups, ideal};
use verdict::{Tally, Verdict, secs};

/// Updates the job sends: 100 customers in turn, about 7% of them a
/// second update of the customer just updated (they meet its lock).
const UPDATES: usize = 200;
/// How far past its ideal the last update may come before the run counts
/// as broken (the tests assert 1.2×).
const SLACK: f64 = 1.25;

#[tokio::main]
async fn main() -> ExitCode {
    let stripe = StripeServer::start(StripeConfig::test_mode(LOCK)).await;
    // Against Stripe: "https://api.stripe.com".
    let api = stripe.uri.clone();

    // The whole setup: Stripe's raw keys and its documented rate (test
    // mode; 100 a second in live mode), the rest of the policy default.
    // `no_proxy` only because the server is on loopback. (`Policy::stripe()`,
    // being built for issue 29, is this, plus `Stripe-Should-Retry` and a
    // lock timeout held for its object; this example moves to it then.)
    let policy = Policy::default()
        .idempotency_key_form(IdempotencyKeyForm::Raw)
        .quota(&api, Quota::per_second(RATE));
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

    let customers: Vec<String> = customers().into_iter().take(UPDATES).collect();
    println!(
        "Stripe: {UPDATES} keyed updates of {} customers ({} right after one of the same \
         customer), {IN_FLIGHT} in flight; test mode's {RATE} a second declared",
        customers
            .iter()
            .collect::<std::collections::HashSet<_>>()
            .len(),
        follow_ups(&customers),
    );
    let results = futures_util::stream::iter(customers.iter().enumerate())
        .map(|(i, customer)| {
            client
                .post(format!("{api}{}", customer_path(customer)))
                // Your key: .bearer_auth(std::env::var("STRIPE_SECRET_KEY")?)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body(i))
                // One key per logical update, the same on every attempt:
                // Stripe applies it once.
                .with_extension(IdempotencyKey::new(format!("sync-42-update-{i}")))
                .send()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let seen = stripe.finish();

    let mut tally = Tally::default();
    for result in &results {
        tally.add(result);
    }
    let locks = seen.count(StripeAnswer::LockTimeout);
    let limited = seen.count(StripeAnswer::RateLimited);
    let per_second = seen.per_second();
    println!(
        "  the server saw {} requests: {} updated, {locks} lock_timeout 429s, {limited} \
         rate_limit 429s",
        seen.answers.len(),
        seen.count(StripeAnswer::Updated),
    );
    println!("  tasks got back {}", tally.line());
    println!(
        "  per second on the server's clock (limit {RATE}): {}",
        per_second
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Each key's updates, as the server applied them: a key updated twice
    // is a job run twice.
    let mut applied: HashMap<String, usize> = HashMap::new();
    let entries = seen.arrivals.entries();
    for (arrival, answer) in entries.iter().zip(&seen.answers) {
        if *answer == StripeAnswer::Updated {
            let key = arrival.idempotency_key.clone().unwrap_or_default();
            *applied.entry(key).or_default() += 1;
        }
    }
    let twice = applied.values().filter(|&&n| n > 1).count();
    let unkeyed = entries
        .iter()
        .filter(|a| {
            a.idempotency_key
                .as_deref()
                .is_none_or(|k| !k.starts_with("sync-42-update-"))
        })
        .count();
    let best = ideal(UPDATES + locks, RATE);
    let took = seen.last_update().unwrap_or(Duration::MAX);
    println!(
        "  first request to last update: {}; ideal {} (the bucket's {RATE} at once, then {RATE} a \
         second, for the updates and the lock timeouts' retries)",
        secs(took),
        secs(best)
    );

    let mut verdict = Verdict::default();
    verdict.check(
        tally.with(200) == UPDATES,
        format!("{}/{UPDATES} updates got their 200", tally.with(200)),
    );
    verdict.check(
        applied.len() == UPDATES && twice == 0,
        format!(
            "{} keys applied, {twice} of them more than once",
            applied.len()
        ),
    );
    verdict.check(
        unkeyed == 0,
        format!("{unkeyed} requests without their raw Idempotency-Key"),
    );
    verdict.check(
        limited == 0,
        format!("{limited} rate_limit 429s at the documented rate"),
    );
    verdict.within("first request to last update", took, best, SLACK);
    verdict.exit()
}
