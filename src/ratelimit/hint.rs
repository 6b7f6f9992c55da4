//! What one response's rate-limit headers said, several limits folded into
//! one answer.

use std::cmp::Reverse;
use std::time::Duration;

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Unit {
    /// Requests in a window: the IETF default, and every vendor's request
    /// limit.
    #[default]
    Requests,
    /// Tokens in a window (OpenAI's and Anthropic's token limits).
    Tokens,
    /// A message's input tokens only (Anthropic's input-token limit): a
    /// [`Cost`](crate::Cost) spends its input part from it.
    InputTokens,
    /// A message's output tokens only (Anthropic's output-token limit): a
    /// [`Cost`](crate::Cost) reserves its output part (`max_tokens`) from
    /// it.
    OutputTokens,
    /// Requests in flight at once (IETF `qu="concurrent-requests"`): its
    /// count is not a window's, its quota is a concurrency cap.
    Concurrent,
    /// Any other unit (IETF `qu="content-bytes"`, or a unit no draft
    /// names).
    Other,
}

/// One limit read from the headers: how much quota is left, and when it
/// comes back (at least one of the two is present), with the quota per
/// window and the window when the server stated them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Limit {
    pub(crate) remaining: Option<u64>,
    pub(crate) reset: Option<Duration>,
    /// The quota per window.
    pub(crate) quota: Option<u64>,
    /// The window the quota is for.
    pub(crate) window: Option<Duration>,
    pub(crate) unit: Unit,
    /// A bucket refilled continuously, its reset the time it is full
    /// again (Anthropic's): what is left comes back progressively.
    pub(crate) bucket: bool,
    /// How far the stated count may be from the true one either way (a
    /// count rounded to the nearest thousand: 500).
    pub(crate) slack: u64,
}

impl Limit {
    /// A request limit with no stated quota.
    pub(crate) fn new(remaining: Option<u64>, reset: Option<Duration>) -> Self {
        Limit {
            remaining,
            reset,
            ..Limit::default()
        }
    }
}

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

/// A candidate binding limit: one with a count, in requests or tokens.
#[derive(Debug, Clone, Copy)]
struct Binding {
    count: u64,
    quota: Option<u64>,
    unit: Unit,
    window: Option<Duration>,
}

impl Binding {
    /// Smallest binds: the smaller count, then the smaller quota (none
    /// first), a limit not in requests first, the longer window (none
    /// first). Where tied limits leave the quota in doubt, the one that
    /// says the least wins.
    fn key(&self) -> (u64, Option<u64>, bool, Reverse<Duration>) {
        (
            self.count,
            self.quota,
            self.unit == Unit::Requests,
            // A stated window is whole seconds, never `Duration::MAX`.
            Reverse(self.window.unwrap_or(Duration::MAX)),
        )
    }
}

/// Folds [`Limit`]s into a [`RateLimitHint`] without collecting them.
#[derive(Debug, Default)]
pub(crate) struct Fold {
    /// The smallest count, and the latest reset among limits with it.
    min: Option<(u64, Option<Duration>)>,
    /// The latest reset among exhausted limits.
    exhausted_reset: Option<Duration>,
    /// The latest reset among limits with a count of 0 or none.
    retry_in: Option<Duration>,
    /// The latest reset of any limit.
    latest_reset: Option<Duration>,
    /// The binding limit among those with the smallest count.
    binding: Option<Binding>,
    /// The smallest concurrency cap.
    concurrency: Option<u64>,
    /// The tightest token limit.
    tokens: Option<TokenLimit>,
    /// The tightest limit of output tokens.
    output_tokens: Option<TokenLimit>,
}

impl Fold {
    pub(crate) fn push(&mut self, limit: Limit) {
        let Limit {
            remaining,
            reset,
            quota,
            window,
            unit,
            bucket,
            slack,
        } = limit;
        let input_only = unit == Unit::InputTokens;
        if matches!(unit, Unit::Tokens | Unit::InputTokens)
            && let Some(count) = remaining
        {
            let candidate = TokenLimit {
                remaining: count,
                reset,
                limit: quota,
                bucket,
                slack,
                input_only,
            };
            // The input-token limit, when stated, is the one a cost is
            // spent from (Anthropic's combined count is the tighter of
            // input and output); else the tightest.
            let key = |t: &TokenLimit| (!t.input_only, t.remaining, Reverse(t.reset));
            self.tokens = match self.tokens {
                Some(t) if key(&t) <= key(&candidate) => Some(t),
                _ => Some(candidate),
            };
        }
        if let (Unit::OutputTokens, Some(count)) = (unit, remaining) {
            let candidate = TokenLimit {
                remaining: count,
                reset,
                limit: quota,
                bucket,
                slack,
                input_only: false,
            };
            let key = |t: &TokenLimit| (t.remaining, Reverse(t.reset));
            self.output_tokens = match self.output_tokens {
                Some(t) if key(&t) <= key(&candidate) => Some(t),
                _ => Some(candidate),
            };
        }
        if bucket && unit != Unit::Requests {
            // A bucket of tokens is a cost quota only: a count of 0 there
            // is a wait for the next request's tokens, not the whole
            // refill its reset names.
            return;
        }
        match unit {
            Unit::Requests | Unit::Tokens | Unit::InputTokens | Unit::OutputTokens => {}
            Unit::Concurrent => {
                if let Some(cap) = quota {
                    self.concurrency(cap);
                }
                return;
            }
            Unit::Other => {
                // No count; a spent quota still asks for its wait.
                if remaining == Some(0) && reset.is_some() {
                    self.latest_reset = self.latest_reset.max(reset);
                    self.retry_in = self.retry_in.max(reset);
                    self.exhausted_reset = self.exhausted_reset.max(reset);
                }
                return;
            }
        }
        self.latest_reset = self.latest_reset.max(reset);
        if let Some(count) = remaining {
            self.min = match self.min {
                Some((min, min_reset)) if min < count => Some((min, min_reset)),
                Some((min, min_reset)) if min == count => Some((min, min_reset.max(reset))),
                _ => Some((count, reset)),
            };
            let candidate = Binding {
                count,
                quota,
                unit,
                window,
            };
            if self.binding.is_none_or(|b| candidate.key() < b.key()) {
                self.binding = Some(candidate);
            }
        }
        if matches!(remaining, None | Some(0)) {
            self.retry_in = self.retry_in.max(reset);
        }
        if remaining == Some(0) {
            self.exhausted_reset = self.exhausted_reset.max(reset);
        }
    }

    /// A cap on requests in flight, with no count or reset.
    pub(crate) fn concurrency(&mut self, cap: u64) {
        self.concurrency = Some(self.concurrency.map_or(cap, |c| c.min(cap)));
    }

    pub(crate) fn finish(self) -> RateLimitHint {
        let reset = match (self.exhausted_reset, self.min) {
            (Some(r), _) => Some(r),
            (None, Some((_, r))) => r,
            (None, None) => self.latest_reset,
        };
        // Exhausted, `reset` is an exhausted limit's: a binding limit with
        // quota left (the exhaustion was another unit's) does not renew then.
        let binding = self.binding.filter(|b| {
            b.unit == Unit::Requests
                && b.quota.is_some()
                && (self.exhausted_reset.is_none() || b.count == 0)
        });
        RateLimitHint {
            remaining: self.min.map(|(count, _)| count),
            reset,
            exhausted: self.exhausted_reset.is_some(),
            retry_in: self.retry_in,
            limit: binding.and_then(|b| b.quota),
            window: binding.and_then(|b| b.window),
            concurrency: self.concurrency,
            tokens: self.tokens,
            output_tokens: self.output_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(limits: &[(Option<u64>, Option<u64>)]) -> RateLimitHint {
        let mut f = Fold::default();
        for &(remaining, reset) in limits {
            f.push(Limit::new(remaining, reset.map(Duration::from_secs)));
        }
        f.finish()
    }

    /// A limit with a count, a reset, a quota, a window (seconds) and a
    /// unit.
    fn quota(
        remaining: u64,
        reset: u64,
        quota: Option<u64>,
        window: Option<u64>,
        unit: Unit,
    ) -> Limit {
        Limit {
            remaining: Some(remaining),
            reset: Some(Duration::from_secs(reset)),
            quota,
            window: window.map(Duration::from_secs),
            unit,
            ..Limit::default()
        }
    }

    fn fold_all(limits: &[Limit]) -> RateLimitHint {
        let mut f = Fold::default();
        limits.iter().for_each(|&l| f.push(l));
        let forward = f.finish();
        // The fold does not depend on the order.
        let mut f = Fold::default();
        limits.iter().rev().for_each(|&l| f.push(l));
        assert_eq!(f.finish(), forward);
        forward
    }

    #[test]
    fn tightest_count_binds() {
        let h = fold(&[(Some(50), Some(30)), (Some(10), Some(80000))]);
        assert_eq!(h.remaining(), Some(10));
        assert_eq!(h.reset(), Some(Duration::from_secs(80000)));
        assert!(!h.exhausted());
        assert_eq!(h.retry_in(), None);
    }

    #[test]
    fn latest_exhausted_reset_binds() {
        let h = fold(&[
            (Some(0), Some(30)),
            (Some(0), Some(60)),
            (Some(5), Some(900)),
        ]);
        assert!(h.exhausted());
        assert_eq!(h.reset(), Some(Duration::from_secs(60)));
        assert_eq!(h.retry_in(), Some(Duration::from_secs(60)));
    }

    #[test]
    fn bare_reset_is_a_retry_in() {
        let h = fold(&[(None, Some(2)), (Some(7), Some(60))]);
        assert_eq!(h.retry_in(), Some(Duration::from_secs(2)));
        assert_eq!(h.reset(), Some(Duration::from_secs(60)));
        assert!(!h.exhausted());
        let h = fold(&[(None, Some(2))]);
        assert_eq!(h.reset(), Some(Duration::from_secs(2)));
        assert_eq!(h.remaining(), None);
    }

    #[test]
    fn zero_without_reset_is_not_exhausted() {
        let h = fold(&[(Some(0), None)]);
        assert!(!h.exhausted());
        assert_eq!(h.remaining(), Some(0));
        assert_eq!(h.retry_in(), None);
        assert!(!h.is_empty());
        assert!(fold(&[]).is_empty());
    }

    #[test]
    fn the_binding_limit_gives_its_quota() {
        use Unit::{Requests, Tokens};
        let burst = quota(5, 30, Some(100), Some(60), Requests);
        let daily = quota(900, 80_000, Some(1000), Some(86_400), Requests);
        let h = fold_all(&[burst, daily]);
        assert_eq!(h.limit(), Some(100));
        assert_eq!(h.window(), Some(Duration::from_secs(60)));
        // A token limit binding: no request quota.
        let tokens = quota(2, 60, Some(150_000), None, Tokens);
        let h = fold_all(&[burst, tokens]);
        assert_eq!(h.remaining(), Some(2));
        assert_eq!((h.limit(), h.window()), (None, None));
        // No quota stated: none.
        let h = fold_all(&[quota(5, 30, None, Some(60), Requests)]);
        assert_eq!((h.limit(), h.window()), (None, None));
        // A quota without a window.
        let h = fold_all(&[quota(5, 30, Some(60), None, Requests)]);
        assert_eq!((h.limit(), h.window()), (Some(60), None));
    }

    #[test]
    fn ties_go_to_the_limit_that_says_least() {
        use Unit::{Requests, Tokens};
        let small = quota(0, 30, Some(10), Some(1), Requests);
        let big = quota(0, 80_000, Some(1000), Some(86_400), Requests);
        let h = fold_all(&[small, big]);
        assert_eq!(h.limit(), Some(10));
        assert_eq!(h.window(), Some(Duration::from_secs(1)));
        // The reset stays the latest exhausted one.
        assert_eq!(h.reset(), Some(Duration::from_secs(80_000)));
        // An unstated quota could be the smaller.
        let unknown = quota(0, 5, None, None, Requests);
        assert_eq!(fold_all(&[small, unknown]).limit(), None);
        // A smaller token quota binds: none; a larger one does not.
        let few_tokens = quota(0, 5, Some(5), None, Tokens);
        assert_eq!(fold_all(&[small, few_tokens]).limit(), None);
        let many_tokens = quota(0, 5, Some(150_000), None, Tokens);
        assert_eq!(fold_all(&[small, many_tokens]).limit(), Some(10));
        // The same quota in tokens: none.
        let same_tokens = quota(0, 5, Some(10), Some(1), Tokens);
        assert_eq!(fold_all(&[small, same_tokens]).limit(), None);
        // The same quota, two windows: the longer, an unstated one first.
        let longer = quota(0, 5, Some(10), Some(60), Requests);
        let h = fold_all(&[small, longer]);
        assert_eq!(
            (h.limit(), h.window()),
            (Some(10), Some(Duration::from_secs(60)))
        );
        let unstated = quota(0, 5, Some(10), None, Requests);
        let h = fold_all(&[small, longer, unstated]);
        assert_eq!((h.limit(), h.window()), (Some(10), None));
    }

    #[test]
    fn concurrency_folds_apart() {
        let inflight = |r, q| quota(r, 5, Some(q), None, Unit::Concurrent);
        let minute = quota(50, 30, Some(60), Some(60), Unit::Requests);
        let h = fold_all(&[inflight(0, 8), minute, inflight(1, 4)]);
        assert_eq!(h.concurrency(), Some(4));
        assert_eq!(h.remaining(), Some(50));
        assert_eq!(h.reset(), Some(Duration::from_secs(30)));
        assert!(!h.exhausted());
        assert_eq!(h.retry_in(), None);
        assert_eq!(h.limit(), Some(60));
        // A cap alone is a usable hint.
        let mut f = Fold::default();
        f.concurrency(3);
        let h = f.finish();
        assert_eq!(h.concurrency(), Some(3));
        assert_eq!(h.remaining(), None);
        assert!(!h.is_empty());
    }

    #[test]
    fn other_units_give_no_count_but_their_wait() {
        let bytes = |r, t| quota(r, t, Some(65_536), Some(60), Unit::Other);
        let minute = quota(50, 30, Some(60), Some(60), Unit::Requests);
        let h = fold_all(&[bytes(10, 40), minute]);
        assert_eq!(h.remaining(), Some(50));
        assert_eq!(h.reset(), Some(Duration::from_secs(30)));
        assert_eq!(h.limit(), Some(60));
        assert!(fold_all(&[bytes(10, 40)]).is_empty());
        // Spent: a wait, and no count.
        let h = fold_all(&[bytes(0, 40), minute]);
        assert!(h.exhausted());
        assert_eq!(h.remaining(), Some(50));
        assert_eq!(h.reset(), Some(Duration::from_secs(40)));
        assert_eq!(h.retry_in(), Some(Duration::from_secs(40)));
        // The reset is the bytes': the request quota does not renew then.
        assert_eq!((h.limit(), h.window()), (None, None));
        // A spent request limit beside it still gives its quota.
        let spent = quota(0, 30, Some(60), Some(60), Unit::Requests);
        let h = fold_all(&[bytes(0, 40), spent]);
        assert_eq!(h.reset(), Some(Duration::from_secs(40)));
        assert_eq!(h.limit(), Some(60));
        let h = fold_all(&[bytes(0, 40)]);
        assert_eq!(h.remaining(), None);
        assert!(h.exhausted());
        assert_eq!(h.retry_in(), Some(Duration::from_secs(40)));
    }
}
