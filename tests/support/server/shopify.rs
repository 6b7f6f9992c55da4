//! A Shopify-like server: the REST Admin API's leaky bucket, as Shopify
//! documents it.
//!
//! - **The bucket**: one per app and store, of [`ShopifyConfig::size`]
//!   requests (40 on the standard plans; Plus stores state a larger one),
//!   leaking continuously at [`ShopifyConfig::leak`] requests a second (2
//!   on the standard plans, 4 on Advanced, 20 on Plus). A request that
//!   fits (the level, leaked to its arrival, plus one is at most the size)
//!   goes in and is answered `200`; one that does not is answered `429`
//!   and adds nothing.
//! - **Every answer** states the bucket as `X-Shopify-Shop-Api-Call-Limit:
//!   used/size`, `used` the level after the request rounded up (`1/40`
//!   after a first request, `40/40` on a `429`).
//! - **A `429`** carries `Retry-After: 2.0` (Shopify's docs show that
//!   value; its own client libraries parse it as a float) and the body
//!   `{"errors":"Exceeded 2 calls per second for api client. Reduce request
//!   rates to resume uninterrupted service."}`. [`ShopifyConfig::retry_after`]
//!   is the value written (scaled-down runs write `0.2`; a variant writes
//!   more decimals).
//!
//! Another client of the same app and store may have filled the bucket
//! before ([`ShopifyConfig::level`]) or add to it all along
//! ([`ShopifyConfig::other`]).
//!
//! The time a `429` names is a throttle: the figures count the requests
//! that arrive inside one ([`ShopifyState::inside_throttles`]). Every
//! request is recorded, on the server's clock, with what it was answered
//! ([`Answered`]).

use std::ops::Deref;
use std::time::{Duration, Instant};

use super::wire::{Answered, Judge, Reply, Seen};

/// How a [`ShopifyState`] limits.
#[derive(Debug, Clone, Copy)]
pub struct ShopifyConfig {
    /// The bucket's size.
    pub size: u32,
    /// Requests that leak out a second.
    pub leak: u32,
    /// The `Retry-After` value of a `429`, as written.
    pub retry_after: &'static str,
    /// The bucket's level when the first request arrives (another client
    /// of the same app and store filled it): 0, an empty bucket.
    pub level: u32,
    /// Requests a second another client of the same app and store adds
    /// to the bucket from the first request on (admitted while there is
    /// room; it spends part of the leak): 0, none.
    pub other: u32,
}

impl ShopifyConfig {
    /// A standard plan, as documented: a bucket of 40 leaking 2 a second,
    /// `Retry-After: 2.0`.
    pub const STANDARD: ShopifyConfig = ShopifyConfig {
        size: 40,
        leak: 2,
        retry_after: "2.0",
        level: 0,
        other: 0,
    };

    /// The standard plan's bucket with its times scaled down `factor`
    /// times: it leaks `2 × factor` a second, and a `429` names `2.0 /
    /// factor` s (one decimal when that is exact, else three).
    pub fn standard_scaled(factor: u32, retry_after: &'static str) -> Self {
        ShopifyConfig {
            leak: 2 * factor,
            retry_after,
            ..ShopifyConfig::STANDARD
        }
    }

    /// The time a `429` names, as a number of seconds (the server's own
    /// reading of its value).
    pub fn throttle(&self) -> Duration {
        Duration::from_secs_f64(self.retry_after.parse::<f64>().unwrap_or(0.0))
    }
}

/// What the server answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShopifyAnswer {
    /// `200`: it fit in the bucket.
    Ok,
    /// `429`: the bucket was full.
    Throttled,
}

/// A store's bucket: what the server saw and answered. Served with
/// [`JudgedServer`](super::wire::JudgedServer), it answers `GET` on any
/// path (another method: `404`, not recorded).
#[derive(Debug, Clone)]
pub struct ShopifyState {
    /// How it limits.
    config: ShopifyConfig,
    /// Every request and its answer.
    answered: Answered<ShopifyAnswer>,
    /// The bucket's level, as of `leaked`.
    level: f64,
    /// When the bucket last leaked (`None`: no request yet).
    leaked: Option<Instant>,
}

impl ShopifyState {
    /// A store that saw nothing yet (its bucket at `config.level`).
    pub fn new(config: ShopifyConfig) -> Self {
        ShopifyState {
            config,
            answered: Answered::default(),
            level: f64::from(config.level),
            leaked: None,
        }
    }

    /// Leaks the bucket to `now`, then lets a request in or not.
    fn admit(&mut self, now: Instant) -> ShopifyAnswer {
        let config = self.config;
        if let Some(then) = self.leaked {
            let elapsed = now.saturating_duration_since(then).as_secs_f64();
            let other = elapsed * f64::from(config.other);
            let leak = elapsed * f64::from(config.leak);
            self.level = (self.level + other - leak).clamp(0.0, f64::from(config.size));
        }
        self.leaked = Some(now);
        if self.level + 1.0 > f64::from(config.size) {
            return ShopifyAnswer::Throttled;
        }
        self.level += 1.0;
        ShopifyAnswer::Ok
    }

    /// From the first request to the last `200`, on the server's clock.
    pub fn last_ok(&self) -> Option<Duration> {
        self.last(ShopifyAnswer::Ok)
    }

    /// The throttles the `429`s named: from each one's arrival, for the
    /// time its `Retry-After` names.
    pub fn throttles(&self) -> Vec<(Duration, Duration)> {
        let span = self.config.throttle();
        self.log()
            .into_iter()
            .filter(|(_, a)| *a == ShopifyAnswer::Throttled)
            .map(|(at, _)| (at, at + span))
            .collect()
    }

    /// The requests that arrived inside a throttle a `429` before them
    /// named (after that `429`'s arrival, before its time), with their
    /// arrival and path (each task its own path).
    pub fn inside_throttles(&self) -> Vec<(Duration, String)> {
        let throttles = self.throttles();
        let paths = self.arrivals.entries().into_iter().map(|a| a.path);
        self.log()
            .into_iter()
            .zip(paths)
            .filter(|((at, _), _)| throttles.iter().any(|(from, to)| from < at && at < to))
            .map(|((at, _), path)| (at, path))
            .collect()
    }
}

impl Deref for ShopifyState {
    type Target = Answered<ShopifyAnswer>;

    fn deref(&self) -> &Self::Target {
        &self.answered
    }
}

impl Judge for ShopifyState {
    /// Records a `GET` arriving at `now` and answers it as the bucket
    /// says.
    fn judge(&mut self, request: &Seen<'_>, now: Instant, _wall: Duration) -> Reply {
        if request.method != "GET" {
            return Reply::new(404);
        }
        let answer = self.admit(now);
        self.answered.record(request, now, answer);
        let size = self.config.size;
        let used = (self.level.ceil() as u32).min(size);
        let reply = |status| {
            Reply::new(status).header("x-shopify-shop-api-call-limit", format!("{used}/{size}"))
        };
        match answer {
            ShopifyAnswer::Ok => reply(200).body(r#"{"products":[]}"#),
            ShopifyAnswer::Throttled => reply(429)
                .header("retry-after", self.config.retry_after)
                .body(r#"{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}"#),
        }
    }
}
