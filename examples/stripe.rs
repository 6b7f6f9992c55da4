//! Stripe's API with `Policy::stripe()`: a sync job updating customers,
//! each update keyed, under Stripe's rate limiter and its objects' locks.
//!
//! ```text
//! cargo run --example stripe
//! ```
//!
//! Stripe admits 25 requests a second in test mode (100 in live mode) and
//! answers `429` past that, with no `Retry-After` and no rate-limit
//! header; an update of an object another request is updating gets `429`
//! with the code `lock_timeout`. Stripe's SDKs retry an answer saying
//! `Stripe-Should-Retry: true` and never one saying `false`. Stripe
//! applies a repeated `Idempotency-Key` once, and takes the header's value
//! as it is (not quoted). `Policy::stripe()` sends the key raw, honours
//! `Stripe-Should-Retry`, holds a locked object's updates (not the
//! others), and paces the origin to the live-mode rate; the example
//! declares test mode's 25 a second instead, so the job runs at that rate
//! from its first request.
//!
//! The API here is an embedded server on 127.0.0.1 that limits as Stripe
//! documents (`tests/support/server/stripe.rs`: a token bucket of 25 a
//! second, locks of 100 ms), and refuses every update of one closed
//! customer with `Stripe-Should-Retry: false`. Against Stripe, the only
//! change is the base URL (and your secret key). The example prints what
//! the server saw and exits non-zero if it breaks the contract: an update
//! lost, an update applied twice, a refused update sent again, a key not
//! sent as Stripe reads it, or a run far longer than the rate allows.

use std::collections::{HashMap, HashSet};
use std::process::ExitCode;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use reqwest_backpressure::{IdempotencyKey, Policy, Quota, RetryAfterMiddleware, RetryReport};
use reqwest_middleware::ClientBuilder;

/// The test servers (shared with the tests and the benches); this example
/// uses the Stripe-like one.
#[path = "../tests/support/server.rs"]
mod server;
/// The examples' tally of outcomes and contract checks.
#[path = "vendors/verdict.rs"]
mod verdict;

use server::stripe::{StripeAnswer, StripeConfig, StripeState, customer_path};
use server::vendor_loads::stripe::{IN_FLIGHT, LOCK, RATE, body, customers, follow_ups, ideal};
use server::wire::JudgedServer;
use verdict::{Tally, Verdict, secs};

/// Updates the job sends: 100 customers in turn, about 7% of them a
/// second update of the customer just updated (they meet its lock), and
/// every fiftieth an update of [`CLOSED`].
const UPDATES: usize = 200;
/// The customer whose updates Stripe refuses (`Stripe-Should-Retry:
/// false`).
const CLOSED: &str = "cus_closed";
/// The prefix of the job's keys.
const KEY: &str = "sync-42-update-";
/// How far past its ideal the last update may come before the run counts
/// as broken (the tests assert 1.10×).
const SLACK: f64 = 1.25;

#[tokio::main]
async fn main() -> ExitCode {
    let config = StripeConfig {
        refused: Some(CLOSED),
        ..StripeConfig::test_mode(LOCK)
    };
    let stripe = JudgedServer::start(StripeState::new(config)).await;
    // Against Stripe: "https://api.stripe.com".
    let api = stripe.uri.clone();

    // The whole setup: Stripe's preset with test mode's rate (live mode's
    // 100 a second is the preset's own), the rest of the policy default.
    // `no_proxy` only because the server is on loopback.
    let policy = Policy::stripe().quota("*", Quota::per_second(RATE).refilled());
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

    let customers: Vec<String> = customers()
        .into_iter()
        .take(UPDATES)
        .enumerate()
        .map(|(i, c)| if i % 50 == 25 { CLOSED.to_owned() } else { c })
        .collect();
    let closed = customers.iter().filter(|c| *c == CLOSED).count();
    println!(
        "Stripe: {UPDATES} keyed updates of {} customers ({} right after one of the same \
         customer; {closed} of {CLOSED}, refused), {IN_FLIGHT} in flight; Policy::stripe() with \
         test mode's {RATE} a second",
        customers.iter().collect::<HashSet<_>>().len(),
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
                .with_extension(IdempotencyKey::new(format!("{KEY}{i}")))
                .send()
                .map(move |result| (customer, result))
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let seen = stripe.finish();

    // What the tasks got back; for the closed customer's, the stop code
    // and attempts of each.
    let (mut tally, mut refused_ends) = (Tally::default(), Vec::new());
    for (customer, result) in &results {
        tally.add(result);
        if *customer == CLOSED {
            refused_ends.push(result.as_ref().ok().and_then(|r| {
                let report = r.extensions().get::<RetryReport>()?;
                Some((report.stop_reason()?.code(), report.attempts()))
            }));
        }
    }
    let locks = seen.count(StripeAnswer::LockTimeout);
    let limited = seen.count(StripeAnswer::RateLimited);
    let refused = seen.count(StripeAnswer::Refused);
    println!(
        "  the server saw {} requests: {} updated, {locks} lock_timeout 429s, {limited} \
         rate_limit 429s, {refused} refused (Stripe-Should-Retry: false)",
        seen.answers.len(),
        seen.count(StripeAnswer::Updated),
    );
    println!("  tasks got back {}", tally.line());
    let per_second: Vec<String> = seen.per_second().iter().map(usize::to_string).collect();
    println!(
        "  per second on the server's clock (a bucket of {RATE}, refilled at {RATE} a second): {}",
        per_second.join(", ")
    );
    let (applied, twice) = applied(&seen);
    let unkeyed = seen
        .arrivals
        .entries()
        .iter()
        .filter(|a| {
            a.idempotency_key
                .as_deref()
                .is_none_or(|k| !k.starts_with(KEY))
        })
        .count();
    // Every request the bucket admitted counts toward the ideal.
    let best = ideal(seen.answers.len() - limited, RATE);
    let took = seen.last_update().unwrap_or(Duration::MAX);
    println!(
        "  first request to last update: {}; ideal {} (the bucket's {RATE} at once, then {RATE} a \
         second, for every request it admitted)",
        secs(took),
        secs(best)
    );

    let updates = UPDATES - closed;
    let stopped_at_once = refused_ends
        .iter()
        .filter(|e| **e == Some(("server_said_do_not_retry", 1)))
        .count();
    let mut verdict = Verdict::default();
    verdict.check(
        tally.with(200) == updates,
        format!(
            "{}/{updates} updates of open customers got their 200",
            tally.with(200)
        ),
    );
    verdict.check(
        stopped_at_once == closed && refused == closed,
        format!(
            "{stopped_at_once}/{closed} refused updates stopped at once (server_said_do_not_retry, \
             one attempt); the server saw {refused} of them"
        ),
    );
    verdict.check(
        applied == updates && twice == 0,
        format!("{applied} keys applied, {twice} of them more than once"),
    );
    verdict.check(
        unkeyed == 0,
        format!("{unkeyed} requests without their raw Idempotency-Key"),
    );
    verdict.check(
        limited == 0,
        format!("{limited} rate_limit 429s at the declared rate"),
    );
    verdict.within("first request to last update", took, best, SLACK);
    verdict.exit()
}

/// The keys the server applied an update of, and how many of them it
/// applied more than once (a job run twice).
fn applied(seen: &StripeState) -> (usize, usize) {
    let mut applied: HashMap<String, usize> = HashMap::new();
    let entries = seen.arrivals.entries();
    for (arrival, answer) in entries.iter().zip(&seen.answers) {
        if *answer == StripeAnswer::Updated {
            let key = arrival.idempotency_key.clone().unwrap_or_default();
            *applied.entry(key).or_default() += 1;
        }
    }
    let twice = applied.values().filter(|&&n| n > 1).count();
    (applied.len(), twice)
}
