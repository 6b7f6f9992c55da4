//! Vendor presets: a [`Policy`] for one vendor's API, as the vendor
//! documents it.
//!
//! A preset is [`Policy::default()`] with the vendor's rate-limit headers
//! ([`RateLimitHeaders`]), pushback statuses and scope rules, and whatever
//! else the vendor's documentation fixes (an `Idempotency-Key` form, a
//! documented quota). Every setter still applies after it:
//! `Policy::github().max_attempts(5)`.

use super::Policy;
use crate::extensions::IdempotencyKeyForm;
use crate::quota::Quota;
use crate::ratelimit::RateLimitHeaders;

/// Stripe's documented live-mode rate: 100 requests a second, kept as a
/// bucket refilled at that rate (Stripe's limiters are token buckets).
/// Test mode (a sandbox) allows 25: declare
/// `.quota("*", Quota::per_second(25).refilled())`.
const STRIPE_LIVE_RATE: Quota = Quota::per_second(100).refilled();

impl Policy {
    /// GitHub's REST API: [`RateLimitHeaders::github`] (each resource of
    /// `x-ratelimit-resource` its own scope, `403` and `429` pushbacks).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::github().validate().is_ok());
    /// ```
    #[must_use]
    pub fn github() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::github())
    }

    /// Discord's HTTP API: [`RateLimitHeaders::discord`] (a bucket of
    /// each route, under the global limit of 50 requests a second).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::discord().validate().is_ok());
    /// ```
    #[must_use]
    pub fn discord() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::discord())
    }

    /// OpenAI's API: [`RateLimitHeaders::openai`] (requests and tokens,
    /// `retry-after-ms`).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::openai().validate().is_ok());
    /// ```
    #[must_use]
    pub fn openai() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::openai())
    }

    /// Anthropic's API: [`RateLimitHeaders::anthropic`].
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::anthropic().validate().is_ok());
    /// ```
    #[must_use]
    pub fn anthropic() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::anthropic())
    }

    /// Stripe's API, as Stripe documents it:
    ///
    /// - [`RateLimitHeaders::stripe`]: `Stripe-Should-Retry` honoured
    ///   (`false` stops with `server_said_do_not_retry`; `true` retries,
    ///   whatever the error status), and a `429` `lock_timeout` held for
    ///   the object the request names (its path up to its first id, else
    ///   its idempotency key): the origin's other requests keep their
    ///   pace. A locked object's requests then leave one at a time, at
    ///   most eight a second, the first half a second after the lock (the
    ///   first retry delay of Stripe's SDKs); a pushback on it counts
    ///   against the task's attempts as any other;
    /// - the raw `Idempotency-Key` form ([`IdempotencyKeyForm::Raw`]):
    ///   Stripe takes the header's value as the key, quotes and all;
    /// - the documented live-mode rate, 100 requests a second, declared
    ///   for `*` as a bucket refilled at that rate
    ///   (`Quota::per_second(100).refilled()`: Stripe's limiters are token
    ///   buckets): every origin this policy calls that no
    ///   other declaration covers. A test-mode client (25 a second)
    ///   declares its own rate; a declaration for a URL or host wins over
    ///   `*` for that origin.
    ///
    /// Stripe states no `Retry-After` and no rate-limit header: a `429`
    /// of its rate limiter is a pushback of the origin with no time (the
    /// gate holds, then the declared pace releases the queue). A POST is
    /// retried only with an [`IdempotencyKey`](crate::IdempotencyKey), as
    /// everywhere.
    ///
    /// ```
    /// use reqwest_backpressure::{IdempotencyKeyForm, Policy, Quota};
    ///
    /// assert!(Policy::stripe().validate().is_ok());
    /// // Test mode: 25 requests a second.
    /// let sandbox = Policy::stripe().quota("*", Quota::per_second(25).refilled());
    /// assert!(sandbox.validate().is_ok());
    /// ```
    #[must_use]
    pub fn stripe() -> Policy {
        Policy::default()
            .rate_limit_headers(RateLimitHeaders::stripe())
            .idempotency_key_form(IdempotencyKeyForm::Raw)
            .quota("*", STRIPE_LIVE_RATE)
    }
}
