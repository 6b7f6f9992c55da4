//! Vendor presets: a [`Policy`] for one vendor's API, as the vendor
//! documents it.
//!
//! A preset is [`Policy::default()`] with the vendor's rate-limit headers
//! ([`RateLimitHeaders`]), pushback statuses and scope rules, and whatever
//! else the vendor's documentation fixes (an `Idempotency-Key` form, a
//! documented quota). Every setter still applies after it:
//! `Policy::github().max_attempts(5)`.

use super::Policy;
use crate::ratelimit::RateLimitHeaders;

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

    /// Anthropic's API: [`RateLimitHeaders::anthropic`], read as Anthropic
    /// documents its limits: buckets of requests, input tokens and output
    /// tokens, each refilled continuously at its limit per minute, whose
    /// `-reset` is when the bucket is *full* again. Capacity comes back
    /// progressively: a message short of input tokens waits for the share
    /// of the refill it needs (at the slowest rate the answers' counts and
    /// resets allow), never for a window to open.
    ///
    /// # What to declare
    ///
    /// - On each message, [`Cost::tokens(input, max_tokens)`](crate::Cost::tokens):
    ///   its input tokens are spent from the input-token bucket before the
    ///   send, its `max_tokens` reserved from the output-token bucket (as
    ///   Anthropic estimates a message's output when it starts), and each
    ///   answer's stated counts reconcile both, less what is still
    ///   unanswered (Anthropic adjusts the output to what was produced:
    ///   the unused part of `max_tokens` comes back). Without a `Cost`,
    ///   the mean input per message learned from how the stated remaining
    ///   falls (its refill added back) stands in, and the output bucket is
    ///   Anthropic's to enforce (its `429`'s `retry-after` is honoured).
    /// - Optionally, your tier's quotas, scaled to the minute:
    ///   `.quota(origin, Quota::per_minute(rpm).refilled())` and
    ///   `.quota(origin, Quota::per_minute(itpm).units().refilled())`.
    ///   They pace the first burst, before any answer states the buckets;
    ///   from the first answer on, the stated buckets govern.
    ///
    /// ```
    /// use reqwest_backpressure::{Cost, IdempotencyKey, Policy, Quota, RetryAfterMiddleware};
    /// # async fn run() -> reqwest_middleware::Result<()> {
    /// let origin = "https://api.anthropic.com";
    /// let policy = Policy::anthropic()
    ///     .quota(origin, Quota::per_minute(50).refilled())
    ///     .quota(origin, Quota::per_minute(30_000).units().refilled());
    /// assert!(policy.validate().is_ok());
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(RetryAfterMiddleware::new(policy))
    ///     .build();
    /// // A message of 1,200 input tokens and `max_tokens` 256. A POST is
    /// // retried only with a key: Anthropic ignores the header.
    /// let response = client
    ///     .post(format!("{origin}/v1/messages"))
    ///     .with_extension(IdempotencyKey::new("message-42"))
    ///     .with_extension(Cost::tokens(1_200, 256))
    ///     .body(r#"{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[]}"#)
    ///     .send()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn anthropic() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::anthropic())
    }
}
