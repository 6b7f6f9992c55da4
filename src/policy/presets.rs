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
    /// **What it reads.** `x-ratelimit-limit`, `x-ratelimit-remaining`,
    /// `x-ratelimit-reset` (Unix epoch seconds, measured against the
    /// answer's `Date` when it has one), `x-ratelimit-resource`, and
    /// `retry-after`.
    ///
    /// **How it scopes.** A request falls under its origin's limit and its
    /// resource's: the resource its route's last answer named
    /// (`x-ratelimit-resource`), else the one GitHub documents for the path
    /// (`/search/code`: `code_search`, `/search/…`: `search`, `/graphql`:
    /// `graphql`, …, else `core`). Each resource is a quota of its own: a
    /// spent `search` holds searches until its reset while `core` runs on.
    /// An answer speaks for the resource it names; a pushback with
    /// `retry-after` (the secondary limit), a `503`, or an answer naming no
    /// resource holds the whole origin.
    ///
    /// **What happens on a `429` (or `403`).** GitHub answers both of its
    /// limits with `403` as well as `429`, so both are pushbacks here:
    ///
    /// - **Primary limit**: a `403`/`429` with `x-ratelimit-remaining: 0`
    ///   and `x-ratelimit-reset` is retried at that reset (hint source
    ///   `ratelimit`; a `Retry-After` above zero on it wins; a reset further
    ///   than `max_wait` stops with `wait_budget_exhausted`, as any server
    ///   time does; a reset already past gives no time: the gate holds the
    ///   origin for a hold of ours and the task retries through it, hint
    ///   source `gate`). A `200` stating `remaining: 0` already holds the
    ///   resource until its reset (the proactive gate), so the next requests
    ///   wait instead of collecting `403`s.
    /// - **Secondary limit**: a `403` with a valid `retry-after` is retried
    ///   no earlier than it says, whatever `x-ratelimit-remaining` says (hint
    ///   source `retry_after`), and it closes the origin's gate for as long,
    ///   so the other requests wait too. A `retry-after` longer than
    ///   `max_wait` stops with `wait_budget_exhausted`, and
    ///   [`RetryReport::retry_at`](crate::RetryReport::retry_at) says when
    ///   GitHub takes requests again.
    /// - **Any other `403`** (quota left and no valid `retry-after`, or no
    ///   rate-limit header at all) is GitHub refusing the request itself:
    ///   returned as it is, never retried (one attempt, no stop code). GitHub
    ///   asks a client that meets a secondary limit without either header to
    ///   wait at least a minute; by its headers such an answer cannot be told
    ///   from a refusal, so it is returned too.
    ///
    /// GitHub also caps requests in flight at 100: declare it with
    /// [`Policy::max_in_flight`] if you may exceed it. A `POST` is retried
    /// only with an [`IdempotencyKey`](crate::IdempotencyKey).
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, RetryAfterMiddleware};
    ///
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(RetryAfterMiddleware::new(Policy::github().max_in_flight("https://api.github.com", 100)))
    ///     .build();
    /// # drop(client);
    /// ```
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
    /// **What it reads.** `x-ratelimit-limit`, `x-ratelimit-remaining`,
    /// `x-ratelimit-reset-after` (seconds with decimals, preferred; a
    /// truncated fraction is read as its upper bound, so never early) or
    /// `x-ratelimit-reset` (epoch seconds with decimals),
    /// `x-ratelimit-bucket`, `x-ratelimit-global`, `x-ratelimit-scope`, and
    /// `Retry-After`.
    ///
    /// **How it scopes.** A route is the method and path with snowflake ids
    /// collapsed, its major parameter (channel, guild, webhook) kept. It
    /// falls under the bucket (`X-RateLimit-Bucket`) its last answer named,
    /// keyed with the major parameter, as discord.js and twilight key it;
    /// before its first answer the route is a limit of its own, one request
    /// at a time. Discord's documented global limit, 50 requests a second,
    /// holds the origin once it answered as Discord does (its first answer
    /// names a bucket), kept as a bucket refilled at that rate, unless a
    /// quota is declared for the origin (which wins); Discord's interactions
    /// (`/interactions/…/callback`, `/webhooks/{application}/{token}`) are
    /// not held by it, as Discord documents.
    ///
    /// **What happens on a `429`.** It is retried no earlier than its
    /// `Retry-After` (or the bucket's reset). A `429` with
    /// `X-RateLimit-Global: true` or `X-RateLimit-Scope: global`, a `503`,
    /// or an answer naming no bucket holds every route of the origin; scope
    /// `shared` or `user` holds the bucket. A `200` at `remaining: 0` holds
    /// its bucket until the reset, so the next message waits instead of
    /// meeting a `429`. Discord defines no `Idempotency-Key`: a `POST` is
    /// retried only when you authorise it with an
    /// [`IdempotencyKey`](crate::IdempotencyKey) (which sends a header
    /// Discord ignores).
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, RetryAfterMiddleware};
    ///
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(RetryAfterMiddleware::new(Policy::discord()))
    ///     .build();
    /// # drop(client);
    /// ```
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
    /// **What it reads.** `x-ratelimit-{limit,remaining,reset}-requests` and
    /// `-tokens` (resets as Go durations, `6m0s`, `250ms`) and
    /// `retry-after-ms`, beside `Retry-After`. **How it scopes:** no scope,
    /// the origin's two quotas (requests and tokens) bind together, the
    /// tightest first.
    ///
    /// **What happens on a `429`.** It is retried at the server's time
    /// (`retry-after-ms`, `Retry-After`, or the spent quota's reset), and
    /// the other requests to the origin wait too. Before that, each request
    /// spends the stated quotas before it leaves: its
    /// [`Cost`](crate::Cost) (prompt plus `max_tokens`) from the token quota,
    /// or without one the mean cost learned from how the stated remaining
    /// falls, so a batch meets few `429`s. Chat and completion `POST`s are
    /// retried only with an [`IdempotencyKey`](crate::IdempotencyKey).
    ///
    /// ```
    /// use reqwest_backpressure::{Cost, IdempotencyKey, Policy, Quota, RetryAfterMiddleware};
    ///
    /// // The key's documented 500 requests and 90,000 tokens a minute, declared
    /// // so the very first burst is paced; the answers' headers still count.
    /// let policy = Policy::openai()
    ///     .quota("https://api.openai.com", Quota::per_minute(500))
    ///     .quota("https://api.openai.com", Quota::per_minute(90_000).units());
    /// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
    ///     .with(RetryAfterMiddleware::new(policy))
    ///     .build();
    /// # async fn send(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
    /// let (prompt_tokens, max_tokens) = (1_200, 400);
    /// let r = client
    ///     .post("https://api.openai.com/v1/chat/completions")
    ///     .with_extension(IdempotencyKey::new("job-7-item-42"))
    ///     .with_extension(Cost::new(prompt_tokens + max_tokens))
    ///     .body("{}")
    ///     .send()
    ///     .await?;
    /// # drop(r); Ok(()) }
    /// # drop(client);
    /// ```
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
    /// **What it reads.** `anthropic-ratelimit-{requests,tokens,input-tokens,
    /// output-tokens}-{limit,remaining,reset}` (resets as RFC 3339 times,
    /// measured against the answer's `Date`) and `Retry-After`. **How it
    /// scopes:** no scope; the origin's quotas bind together.
    ///
    /// **What happens on a `429`.** It is retried no earlier than its
    /// `Retry-After` (or the spent quota's reset), and the other requests to
    /// the origin wait too. A request's [`Cost`](crate::Cost) is spent from
    /// the origin's quota in tokens before it leaves. Anthropic defines no
    /// `Idempotency-Key`: a `POST` is retried only when you authorise it
    /// with an [`IdempotencyKey`](crate::IdempotencyKey).
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

    /// Shopify's REST Admin API on a standard plan:
    /// [`RateLimitHeaders::shopify`] (the call-limit header as a leaky
    /// bucket of the stated size leaking 2 requests a second, and its
    /// decimal `Retry-After`). For another plan's rate, set the headers
    /// after it: `Policy::shopify().rate_limit_headers(RateLimitHeaders::shopify_leaking(20))`
    /// (Plus).
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, RateLimitHeaders};
    /// assert!(Policy::shopify().validate().is_ok());
    /// let plus = Policy::shopify().rate_limit_headers(RateLimitHeaders::shopify_leaking(20));
    /// assert!(plus.validate().is_ok());
    /// ```
    #[must_use]
    pub fn shopify() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::shopify())
    }
}
