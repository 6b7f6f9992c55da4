//! A GitHub crawl with both limits in reach, under
//! `RateLimitHeaders::github()` and reqwest-retry stacked inside ours for
//! the `502`s: once the secondary limit has answered, the primary quota is
//! spent in bursts it admits, so it never answers again and the crawl ends
//! near the ideal of both limits plus the one penalty no client that does
//! not know the secondary limit's figures avoids (GitHub publishes none a
//! client could plan with, and states nothing of it in its headers).
//!
//! The secondary limit varied as GitHub documents its kinds: points per
//! span (its points per minute, scaled), and concurrent requests (seen by
//! a client whose requests all take the same time: no more than so many
//! arriving within that time).

use std::time::Duration;

use futures_util::StreamExt as _;
use reqwest_backpressure::{BackpressureStrategy, Policy, RateLimitHeaders, RetryAfterMiddleware};
use reqwest_middleware::ClientBuilder;
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

use super::{Returned, ratio, within_limit};
use crate::common::http_client;
use crate::server::github::Answer;
use crate::server::github_resources::{Config, Resource, ResourcesState, Secondary, ideal};
use crate::server::tap::Tap;
use crate::server::wire::JudgedServer;

/// Repositories read, one `GET` each.
const GETS: u32 = 200;
/// Requests the crawl keeps in flight.
const AT_ONCE: usize = 32;
/// Primary: 50 per 2 s.
const CORE: Resource = Resource {
    name: "core",
    quota: 50,
    window: Duration::from_secs(2),
};
/// Secondary, by rate: above 30 arrivals in a second, `retry-after: 3`.
const BY_RATE: Secondary = Secondary {
    points: 30,
    span: Duration::from_secs(1),
    retry_after: 3,
};
/// Each answer takes this long (the concurrency case).
const ANSWER_TAKES: Duration = Duration::from_millis(100);
/// Secondary, by concurrency: above 20 requests in flight (arrivals within
/// one answer's time), `retry-after: 3`.
const BY_CONCURRENCY: Secondary = Secondary {
    points: 20,
    span: ANSWER_TAKES,
    retry_after: 3,
};
/// Every this many-th arrival gets a `502` (4%).
const BAD_GATEWAY_EVERY: u32 = 25;
/// Every this many-th repository is refused with a plain `403`.
const REFUSED_EVERY: u32 = 10;

/// The path of repository `i`.
fn repository(i: u32) -> String {
    format!("/repos/o/r{i}")
}

#[tokio::test]
async fn a_crawl_spends_the_primary_quota_at_a_rate_the_secondary_limit_allows() {
    // The server: ≤ 10 secondary-limit answers in all (the first
    // wave's overflow, 2; its follow-ups wait for its answers).
    crawl("by rate", BY_RATE, Duration::ZERO, 1.3, 10).await;
}

/// Open: 1.3–1.4× the best after the first penalty. Each window's quota is
/// spread in sub-batches of what the first burst got through (17 of 50),
/// so the last window's requests leave over it, where the best client
/// (knowing the limit is on concurrency, which a client cannot tell from
/// a rate) sends them all at its start.
#[tokio::test]
async fn a_crawl_spends_the_primary_quota_within_the_secondary_concurrency_limit() {
    // The wave of 31 meets a cap of 20: 11 rejections no client that does
    // not know the cap avoids, and no more after them.
    crawl("by concurrency", BY_CONCURRENCY, ANSWER_TAKES, 1.5, 14).await;
}

/// The crawl against a server whose secondary limit is `secondary` and
/// whose answers take `answer_takes`; asserts the figures, the time within
/// `bound` × the best after the first penalty, and at most `most`
/// secondary-limit answers in all.
async fn crawl(name: &str, secondary: Secondary, answer_takes: Duration, bound: f64, most: usize) {
    let mut config = Config::new(vec![CORE]);
    config.secondary = Some(secondary);
    config.statuses = vec![403, 429];
    config.bad_gateway_every = BAD_GATEWAY_EVERY;
    if !answer_takes.is_zero() {
        config.slow = vec![(CORE.name, answer_takes)];
    }
    config.refused = (0..GETS)
        .filter(|i| i % REFUSED_EVERY == REFUSED_EVERY - 1)
        .map(repository)
        .collect();
    let refused = config.refused.len();
    let server = JudgedServer::start(ResourcesState::new(config)).await;
    // Ours, then reqwest-retry for the 502s (short backoffs), then the tap.
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    let backoff = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(100), Duration::from_millis(800))
        .build_with_max_retries(3);
    let tap = Tap::default();
    let client = ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(policy.clone()))
        .with(RetryTransientMiddleware::new_with_policy_and_strategy(
            backoff,
            BackpressureStrategy::new(&policy),
        ))
        .with(tap.clone())
        .build();
    let uri = server.uri.clone();
    let crawl = futures_util::stream::iter(0..GETS)
        .map(|i| {
            let url = format!("{uri}{}/issues", repository(i));
            let client = &client;
            async move { client.get(url).header("x-task", i).send().await }
        })
        .buffer_unordered(AT_ONCE)
        .fold(Returned::default(), |mut r, result| async move {
            r.add(&result);
            r
        });
    let back = within_limit(crawl).await;
    let seen = server.finish();
    let took = seen.finished("core").unwrap_or(Duration::MAX);
    let first_window = seen.first_window("core").unwrap_or_default();
    // A plain 403 that took a window's last unit says remaining 0: the
    // best client cannot tell it from the primary limit either, and sends
    // it again at the reset, spending a unit more.
    let best = ideal(
        &CORE,
        Some(&secondary),
        first_window,
        GETS + seen.refused_at_zero as u32,
    );
    // The first burst meets the secondary limit (nothing tells its figures
    // before): its penalty holds the origin. The best a client that honours
    // it does: what the first burst got through, then after the penalty the
    // ideal of the rest (from a window opened then: the server's second).
    let penalty = Duration::from_secs(secondary.retry_after);
    let through = seen
        .arrivals
        .iter()
        .filter(|a| a.at - seen.arrivals[0].at < penalty)
        .filter(|a| matches!(a.answer, Some(Answer::Ok | Answer::Refused)))
        .count() as u32;
    let second_window = seen.windows("core").get(1).map_or(CORE.window, |w| w.1);
    let rest = (GETS + seen.refused_at_zero as u32).saturating_sub(through);
    let learned = penalty + ideal(&CORE, Some(&secondary), second_window, rest);
    // Secondary-limit answers after the first burst's (its answers all
    // come within one retry-after of the first request).
    let later = seen.secondary_after(penalty);
    eprintln!(
        "github crawl ({name}): last answer {took:.2?}, ideal {best:.2?} (first window \
         {first_window:.2?}), {:.2}× ideal, {:.2}× the best after the first penalty ({learned:.2?}); requests {}, \
         secondary-limit answers {} ({later} after the first burst; {} 403, {} 429 of rate-limit \
         answers), primary-limit answers {}, 502s {}, plain 403s {} ({} at remaining 0), premature {}; \
         returned {back:?}",
        ratio(took, best),
        ratio(took, learned),
        seen.arrivals.len(),
        seen.secondary(),
        seen.limited_with(403),
        seen.limited_with(429),
        seen.count("core", Answer::Primary),
        seen.bad_gateways(),
        seen.count("core", Answer::Refused),
        seen.refused_at_zero,
        seen.premature(),
    );
    eprintln!(
        "github crawl ({name}): core windows (opened, length) {:.2?}",
        seen.windows("core")
    );
    let back = back.expect("the crawl ends");
    assert_eq!(
        (back.with(200), back.with(403)),
        (GETS as usize - refused, refused),
        "{back:?}"
    );
    assert!(
        took.as_secs_f64() <= bound * learned.as_secs_f64(),
        "the crawl took {took:?}, ideal {best:?}, the best after the first penalty {learned:?}"
    );
    assert!(
        later <= 10,
        "{later} secondary-limit answers after the first burst"
    );
    assert!(
        seen.secondary() <= most,
        "{} secondary-limit answers, at most {most} wanted",
        seen.secondary()
    );
    assert_eq!(seen.premature(), 0);
}
