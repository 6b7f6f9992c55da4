//! A Stripe-like server: `POST /v1/customers/<id>` updates under Stripe's
//! two causes of `429`, as its documentation and SDKs describe them.
//!
//! - **The rate limiter**: Stripe's rate-limits page documents "25
//!   requests per second" in test mode (100 in live mode), and Stripe's
//!   engineering post on its limiters says they are token buckets. So a
//!   bucket of [`StripeConfig::rate`] tokens, refilled continuously at that
//!   many a second and starting full: a burst of 25, then one request
//!   every 40 ms. (A bucket, not a fixed window: a window would admit 50
//!   across a window boundary, which the docs' "per second" does not
//!   promise either way; the bucket is what Stripe says it runs.) A
//!   request with no token left gets `429` with the error `{"type":
//!   "invalid_request_error", "code": "rate_limit"}`, no `Retry-After` and
//!   no rate-limit header: Stripe states neither.
//! - **An object's lock**: Stripe's error code `lock_timeout`, a `429`
//!   too, for a request that met its object busy with another request or
//!   a process of Stripe's own. A request
//!   the rate limiter admitted (its token is spent: the limiter runs
//!   before the API) to an object whose last admitted update arrived less
//!   than [`StripeConfig::lock`] ago gets `429` with `{"type":
//!   "invalid_request_error", "code": "lock_timeout"}` and
//!   `Stripe-Should-Retry: true` (Stripe's SDKs retry a lock timeout, and
//!   not a rate limit). It takes no lock itself.
//!
//! - **Variations** the docs allow, off unless configured: an object
//!   Stripe's own process holds ([`StripeConfig::busy`]: every update of
//!   it in that span meets the lock, as the `lock_timeout` error's text
//!   says: "another API request or Stripe process is currently accessing
//!   it"), and an object whose updates Stripe refuses with
//!   `Stripe-Should-Retry: false` ([`StripeConfig::refused`]). Stripe
//!   documents that header through its SDKs only (they retry on `true`,
//!   never on `false`, before any other rule), not which answers carry
//!   `false`: here a `429` for that one object, the case where the header
//!   changes what a client does.
//!
//! A `200` carries the updated object (`{"id": …, "object": "customer"}`).
//! Every request is recorded (its path and `Idempotency-Key`, on the
//! server's clock) with what it was answered ([`Answered`]).

use std::collections::HashMap;
use std::ops::Deref;
use std::time::{Duration, Instant};

use super::wire::{Answered, Judge, Reply, Seen};

/// The path of an update of the customer `id`.
pub fn customer_path(id: &str) -> String {
    format!("/v1/customers/{id}")
}

/// How a [`StripeState`] limits.
#[derive(Debug, Clone, Copy)]
pub struct StripeConfig {
    /// Requests a second, and the bucket's size (25: test mode).
    pub rate: u32,
    /// How long an admitted update holds its object's lock.
    pub lock: Duration,
    /// An object Stripe's own process holds from the first request on, for
    /// this long: every update of it meanwhile gets `lock_timeout`.
    pub busy: Option<(&'static str, Duration)>,
    /// An object whose every update gets `429` with
    /// `Stripe-Should-Retry: false`.
    pub refused: Option<&'static str>,
}

impl StripeConfig {
    /// Test mode's 25 requests a second, and a lock of `lock`.
    pub fn test_mode(lock: Duration) -> Self {
        StripeConfig {
            rate: 25,
            lock,
            busy: None,
            refused: None,
        }
    }
}

/// What the server answered a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeAnswer {
    /// `200`, the object updated.
    Updated,
    /// `429` `rate_limit`: no token left.
    RateLimited,
    /// `429` `lock_timeout`: its object was busy.
    LockTimeout,
    /// `429` with `Stripe-Should-Retry: false`: its object refused.
    Refused,
}

/// What the server saw and answered. Served with
/// [`JudgedServer`](super::wire::JudgedServer), it answers `POST
/// /v1/customers/<id>` (another request: `404`, not recorded).
#[derive(Debug, Clone)]
pub struct StripeState {
    /// How it limits.
    config: StripeConfig,
    /// Every request and its answer.
    answered: Answered<StripeAnswer>,
    /// Tokens left, as of `refilled`.
    tokens: f64,
    /// When the bucket was last refilled (`None`: no request yet).
    refilled: Option<Instant>,
    /// Per object: when its last admitted update arrived.
    locked: HashMap<String, Instant>,
    /// When the first request arrived.
    first: Option<Instant>,
}

impl StripeState {
    /// A server that saw nothing yet: its bucket full.
    pub fn new(config: StripeConfig) -> Self {
        StripeState {
            config,
            answered: Answered::default(),
            tokens: f64::from(config.rate),
            refilled: None,
            locked: HashMap::new(),
            first: None,
        }
    }

    /// Judges an update of `object` arriving `now`: the bucket first, then
    /// the object's lock.
    fn admit(&mut self, object: &str, now: Instant) -> StripeAnswer {
        let config = self.config;
        let rate = f64::from(config.rate);
        if let Some(then) = self.refilled {
            let refill = now.saturating_duration_since(then).as_secs_f64() * rate;
            self.tokens = (self.tokens + refill).min(rate);
        }
        self.refilled = Some(now);
        self.first.get_or_insert(now);
        if self.tokens < 1.0 {
            return StripeAnswer::RateLimited;
        }
        self.tokens -= 1.0;
        if config.refused == Some(object) {
            return StripeAnswer::Refused;
        }
        let first = *self.first.get_or_insert(now);
        if let Some((held, span)) = config.busy
            && held == object
            && now.saturating_duration_since(first) < span
        {
            return StripeAnswer::LockTimeout;
        }
        let busy = self
            .locked
            .get(object)
            .is_some_and(|&at| now.saturating_duration_since(at) < config.lock);
        if busy {
            return StripeAnswer::LockTimeout;
        }
        self.locked.insert(object.to_owned(), now);
        StripeAnswer::Updated
    }

    /// From the first request to the last `200`, on the server's clock.
    pub fn last_update(&self) -> Option<Duration> {
        self.last(StripeAnswer::Updated)
    }

    /// Requests per whole second of the server's clock, counted from its
    /// first request.
    pub fn per_second(&self) -> Vec<usize> {
        let mut seconds: Vec<usize> = Vec::new();
        for (at, _) in self.log() {
            let s = usize::try_from(at.as_secs()).unwrap_or(usize::MAX);
            if seconds.len() <= s {
                seconds.resize(s + 1, 0);
            }
            seconds[s] += 1;
        }
        seconds
    }
}

/// A `429` with Stripe's error `code` and `message`.
fn error(code: &str, message: &str) -> Reply {
    Reply::new(429).body(format!(
        r#"{{"error":{{"code":"{code}","message":"{message}","type":"invalid_request_error"}}}}"#
    ))
}

impl Deref for StripeState {
    type Target = Answered<StripeAnswer>;

    fn deref(&self) -> &Self::Target {
        &self.answered
    }
}

impl Judge for StripeState {
    /// Records an update arriving at `now` and answers it.
    fn judge(&mut self, request: &Seen<'_>, now: Instant, _wall: Duration) -> Reply {
        let object = match request.path.strip_prefix("/v1/customers/") {
            Some(id) if request.method == "POST" && !id.is_empty() && !id.contains('/') => id,
            _ => return Reply::new(404),
        };
        let answer = self.admit(object, now);
        self.answered.record(request, now, answer);
        match answer {
            StripeAnswer::Updated => {
                Reply::new(200).body(format!(r#"{{"id":"{object}","object":"customer"}}"#))
            }
            StripeAnswer::RateLimited => {
                error("rate_limit", "Too many requests in a second: slow down.")
            }
            StripeAnswer::LockTimeout => error(
                "lock_timeout",
                "Another request is updating this object: retry it shortly.",
            )
            .header("stripe-should-retry", "true"),
            StripeAnswer::Refused => error(
                "request_refused",
                "This object cannot be updated now; do not retry.",
            )
            .header("stripe-should-retry", "false"),
        }
    }
}
