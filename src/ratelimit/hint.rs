//! What one response's rate-limit headers said, several limits folded into
//! one answer.

use std::time::Duration;

mod fold;

pub(crate) use fold::{Fold, Limit, Unit};

/// What a response's rate-limit headers said, all times relative to the
/// `server_now` they were read against.
///
/// A response can carry several limits (a `RateLimit` list of policies,
/// OpenAI's requests and tokens, several vendors' headers at once). They
/// combine so that the tightest limit binds:
///
/// - [`remaining`](Self::remaining): the smallest count given;
/// - [`exhausted`](Self::exhausted): some limit gave a count of 0 and a reset;
/// - [`reset`](Self::reset): when exhausted, the latest reset among the
///   exhausted limits; otherwise the reset of the limit with the smallest
///   count (ties: the latest reset); with no count at all, the latest reset;
/// - [`retry_in`](Self::retry_in): the latest reset among the limits that
///   gave a count of 0 or no count at all (a bare reset such as
///   `retry-after-ms`);
/// - [`limit`](Self::limit) and [`window`](Self::window): the quota per
///   window, and the window, of the *binding* limit, the one with the
///   smallest count (the one [`remaining`](Self::remaining) comes from),
///   when it counts requests and stated its quota;
/// - [`concurrency`](Self::concurrency): the smallest cap on requests in
///   flight.
///
/// Limits that do not count requests in a window fold apart:
///
/// - a concurrency limit (IETF `qu="concurrent-requests"`) only gives
///   [`concurrency`](Self::concurrency): its count is of requests in
///   flight, not what is left of a window;
/// - a limit in another unit (IETF `qu="content-bytes"`, or a unit no
///   draft names) gives no count: a byte count is not a request count. A
///   count of 0 with a reset still makes the hint
///   [`exhausted`](Self::exhausted) and gives its reset to
///   [`reset`](Self::reset) and [`retry_in`](Self::retry_in): a spent quota
///   refuses requests until it comes back, whatever it counts;
/// - a token limit in a window (OpenAI's) folds into the count like a
///   request limit, but never gives [`limit`](Self::limit) or
///   [`window`](Self::window); a bucket of tokens (Anthropic's) does not
///   fold at all: it is a cost quota ([`tokens`](Self::tokens),
///   [`output_tokens`](Self::output_tokens)), whose empty count is a wait
///   for one request's tokens, not for its reset (the time it is full).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use http::{HeaderMap, HeaderValue};
/// use reqwest_backpressure::RateLimitHeaders;
///
/// let mut headers = HeaderMap::new();
/// headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=0;t=30, "daily";r=900;t=86000"#));
/// let hint = RateLimitHeaders::ietf().read(&headers, UNIX_EPOCH);
/// assert_eq!(hint.remaining(), Some(0));
/// assert!(hint.exhausted());
/// assert_eq!(hint.retry_in(), Some(Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimitHint {
    remaining: Option<u64>,
    reset: Option<Duration>,
    exhausted: bool,
    retry_in: Option<Duration>,
    limit: Option<u64>,
    window: Option<Duration>,
    concurrency: Option<u64>,
    tokens: Option<TokenLimit>,
    output_tokens: Option<TokenLimit>,
}

/// The tightest limit in tokens a response stated (OpenAI's
/// `x-ratelimit-*-tokens`, Anthropic's `anthropic-ratelimit-*tokens-*`):
/// what is left, when it resets, and its size when stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenLimit {
    remaining: u64,
    reset: Option<Duration>,
    limit: Option<u64>,
    bucket: bool,
    slack: u64,
    input_only: bool,
}

impl TokenLimit {
    /// Tokens left.
    #[must_use]
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// When the limit resets (for a bucket: until it is full), from the
    /// time the headers were read against.
    #[must_use]
    pub fn reset(&self) -> Option<Duration> {
        self.reset
    }

    /// Its size, when stated.
    #[must_use]
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Whether it is a bucket refilled continuously, whose
    /// [`reset`](Self::reset) is when it is full again (Anthropic's), not
    /// when a window opens.
    #[must_use]
    pub fn is_bucket(&self) -> bool {
        self.bucket
    }

    /// How far [`remaining`](Self::remaining) may be from the true count
    /// either way (Anthropic rounds its token counts to the nearest
    /// thousand: 500); 0 when exact.
    #[must_use]
    pub fn slack(&self) -> u64 {
        self.slack
    }

    /// Whether it counts a message's input tokens only (Anthropic's
    /// input-token limit), so a [`Cost`](crate::Cost) spends its
    /// [`input`](crate::Cost::input) part from it.
    #[must_use]
    pub fn counts_input_only(&self) -> bool {
        self.input_only
    }
}

impl RateLimitHint {
    /// The tightest (smallest) remaining quota among the limits that gave a
    /// count.
    #[must_use]
    pub fn remaining(&self) -> Option<u64> {
        self.remaining
    }

    /// When the binding limit resets: see the combining rules on
    /// [`RateLimitHint`].
    #[must_use]
    pub fn reset(&self) -> Option<Duration> {
        self.reset
    }

    /// Whether some limit said its quota is used up (a count of 0 with a
    /// reset).
    #[must_use]
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// How long these headers tell a pushed-back request to wait: the latest
    /// reset among the limits with a count of 0 or no count. `None` when no
    /// such limit gave a reset (a limit with quota left says nothing about
    /// a pushback).
    #[must_use]
    pub fn retry_in(&self) -> Option<Duration> {
        self.retry_in
    }

    /// The quota per window of the binding limit: the limit with the
    /// smallest count, the one [`remaining`](Self::remaining) comes from.
    /// This is how many requests that limit allows again once it resets.
    ///
    /// `None` when the binding limit stated no quota, or counts something
    /// other than requests (a token quota is not a number of requests), or
    /// when the hint is [`exhausted`](Self::exhausted) by a limit in
    /// another unit while the binding one has quota left (the
    /// [`reset`](Self::reset) is then not the binding limit's).
    /// When several limits share the smallest count, the one with the
    /// smaller quota binds; a limit that stated no quota binds before any
    /// that did, a limit that does not count requests before one that does
    /// with the same quota, and the longer window (or an unstated one)
    /// before the shorter: whenever the tied limits leave the number in
    /// doubt, this is `None`.
    ///
    /// It is the binding limit's own quota: another limit, with more left
    /// now, may still hold fewer than this when the binding one resets.
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use http::{HeaderMap, HeaderValue};
    /// use reqwest_backpressure::RateLimitHeaders;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-ratelimit-limit-requests", HeaderValue::from_static("60"));
    /// headers.insert("x-ratelimit-remaining-requests", HeaderValue::from_static("3"));
    /// headers.insert("x-ratelimit-reset-requests", HeaderValue::from_static("20s"));
    /// headers.insert("x-ratelimit-limit-tokens", HeaderValue::from_static("150000"));
    /// headers.insert("x-ratelimit-remaining-tokens", HeaderValue::from_static("149000"));
    /// headers.insert("x-ratelimit-reset-tokens", HeaderValue::from_static("1s"));
    /// let hint = RateLimitHeaders::openai().read(&headers, UNIX_EPOCH);
    /// assert_eq!(hint.remaining(), Some(3));
    /// assert_eq!(hint.reset(), Some(Duration::from_secs(20)));
    /// // In 20 s, the request limit allows 60 requests again.
    /// assert_eq!(hint.limit(), Some(60));
    /// // OpenAI states no window.
    /// assert_eq!(hint.window(), None);
    ///
    /// // The token limit binds: its quota is not a number of requests.
    /// headers.insert("x-ratelimit-remaining-tokens", HeaderValue::from_static("0"));
    /// let hint = RateLimitHeaders::openai().read(&headers, UNIX_EPOCH);
    /// assert_eq!(hint.remaining(), Some(0));
    /// assert_eq!(hint.limit(), None);
    /// ```
    #[must_use]
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The window of the binding limit's quota ([`limit`](Self::limit)):
    /// how long the quota it renews to lasts. `None` whenever
    /// [`limit`](Self::limit) is, and when the binding limit stated a quota
    /// but no window (GitHub's and OpenAI's headers state none; the reset
    /// says when it comes back).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use http::{HeaderMap, HeaderValue};
    /// use reqwest_backpressure::RateLimitHeaders;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert(
    ///     "ratelimit-policy",
    ///     HeaderValue::from_static(r#""burst";q=100;w=60, "daily";q=1000;w=86400"#),
    /// );
    /// headers.insert("ratelimit", HeaderValue::from_static(r#""burst";r=3;t=20, "daily";r=400;t=5000"#));
    /// let hint = RateLimitHeaders::ietf().read(&headers, UNIX_EPOCH);
    /// assert_eq!(hint.remaining(), Some(3));
    /// assert_eq!(hint.reset(), Some(Duration::from_secs(20)));
    /// // In 20 s, "burst" allows 100 requests again, for 60 s.
    /// assert_eq!(hint.limit(), Some(100));
    /// assert_eq!(hint.window(), Some(Duration::from_secs(60)));
    /// ```
    #[must_use]
    pub fn window(&self) -> Option<Duration> {
        self.window
    }

    /// The smallest cap on requests in flight at once that the headers
    /// stated (an IETF `RateLimit-Policy` with
    /// `qu="concurrent-requests"`, whether or not `RateLimit` reports on
    /// it). Such a limit takes no part in the other answers.
    ///
    /// ```
    /// use std::time::UNIX_EPOCH;
    /// use http::{HeaderMap, HeaderValue};
    /// use reqwest_backpressure::RateLimitHeaders;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert(
    ///     "ratelimit-policy",
    ///     HeaderValue::from_static(r#""minute";q=60;w=60, "inflight";q=4;qu="concurrent-requests""#),
    /// );
    /// headers.insert("ratelimit", HeaderValue::from_static(r#""minute";r=50;t=30, "inflight";r=0"#));
    /// let hint = RateLimitHeaders::ietf().read(&headers, UNIX_EPOCH);
    /// assert_eq!(hint.concurrency(), Some(4));
    /// // Four requests in flight is not a spent window.
    /// assert_eq!(hint.remaining(), Some(50));
    /// ```
    #[must_use]
    pub fn concurrency(&self) -> Option<u64> {
        self.concurrency
    }

    /// The limit in tokens a request's [`Cost`](crate::Cost) is spent
    /// from, if any: a limit of input tokens when one is stated
    /// (Anthropic's), else the tightest (the smallest count left among the
    /// limits that count tokens; ties: the later reset). Token limits in a
    /// window (OpenAI's) count in [`remaining`](Self::remaining) as well;
    /// buckets of tokens (Anthropic's) only here and in
    /// [`output_tokens`](Self::output_tokens).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use http::{HeaderMap, HeaderValue};
    /// use reqwest_backpressure::RateLimitHeaders;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-ratelimit-remaining-tokens", HeaderValue::from_static("30"));
    /// headers.insert("x-ratelimit-reset-tokens", HeaderValue::from_static("2s"));
    /// headers.insert("x-ratelimit-limit-tokens", HeaderValue::from_static("5000"));
    /// let tokens = RateLimitHeaders::openai().read(&headers, UNIX_EPOCH).tokens().unwrap();
    /// assert_eq!(tokens.remaining(), 30);
    /// assert_eq!(tokens.reset(), Some(Duration::from_secs(2)));
    /// assert_eq!(tokens.limit(), Some(5000));
    /// ```
    #[must_use]
    pub fn tokens(&self) -> Option<TokenLimit> {
        self.tokens
    }

    /// The limit of output tokens, when the headers state one apart
    /// (Anthropic's `anthropic-ratelimit-output-tokens-*`): what a
    /// [`Cost`](crate::Cost)'s [`output`](crate::Cost::output) part (its
    /// `max_tokens`) is reserved from.
    #[must_use]
    pub fn output_tokens(&self) -> Option<TokenLimit> {
        self.output_tokens
    }

    /// Whether the headers gave no usable limit at all (a concurrency cap
    /// alone is one).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == RateLimitHint::default()
    }
}

#[cfg(test)]
mod tests;
