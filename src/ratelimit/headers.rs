//! Which rate-limit headers a client reads: the IETF fields, vendor presets,
//! and limits declared by hand.

use std::time::SystemTime;

use http::header::HeaderName;
use http::{HeaderMap, StatusCode};

use super::hint::{Fold, RateLimitHint, Unit};
use super::ietf;
use super::reset::ResetFormat;

mod shopify;
pub(crate) use shopify::{LeakyBucket, stated_bucket};

mod spec;
use spec::{LimitSpec, upper_bound};
pub(crate) use spec::{decimal_seconds, single};

const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
const X_RATELIMIT_RESET_AFTER: HeaderName = HeaderName::from_static("x-ratelimit-reset-after");
const RETRY_AFTER_MS: HeaderName = HeaderName::from_static("retry-after-ms");

/// Which vendors' scope rules apply to a client's answers and requests:
/// set by the presets that speak for a vendor, unioned by
/// [`RateLimitHeaders::and`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
// Read by the scope plumbing, which is being written.
pub(crate) struct Scoping {
    /// GitHub's resources (`x-ratelimit-resource`), from
    /// [`RateLimitHeaders::github`].
    pub(crate) github: bool,
    /// Discord's buckets and routes, from [`RateLimitHeaders::discord`].
    pub(crate) discord: bool,
    /// The IETF `RateLimit` partition keys (`pk`), from
    /// [`RateLimitHeaders::ietf`].
    pub(crate) ietf_partitions: bool,
    /// Stripe's objects (a `lock_timeout` holds its object) and
    /// `Stripe-Should-Retry`, from [`RateLimitHeaders::stripe`].
    pub(crate) stripe: bool,
}

impl Scoping {
    /// The rules of both.
    fn union(self, other: Scoping) -> Scoping {
        Scoping {
            github: self.github || other.github,
            discord: self.discord || other.discord,
            ietf_partitions: self.ietf_partitions || other.ietf_partitions,
            stripe: self.stripe || other.stripe,
        }
    }
}

/// Which rate-limit headers are read, beside `Retry-After` (which the
/// [`Hint`](crate::Hint) parser reads).
///
/// Presets combine with [`and`](Self::and); a limit no preset knows is
/// declared with [`reset_header`](Self::reset_header). Reading is pure:
/// [`read`](Self::read) takes the time to measure against.
///
/// Many servers say more than `Retry-After`, often without sending it. `Policy::rate_limit_headers`
/// says which of their headers are read; a value that does not conform is ignored, never guessed at
/// (no panics, 1 KiB per field at most).
///
/// | set | headers | formats | source |
/// |---|---|---|---|
/// | `RateLimitHeaders::ietf()` (default) | `RateLimit` / `RateLimit-Policy` (Structured Fields lists, several policies matched by name, the tightest binds; the policy's `q` and `w` give the quota's size and window, `qu="concurrent-requests"` a cap in flight); the earlier drafts' `RateLimit-Limit`/`-Remaining`/`-Reset` and `RateLimit: limit=…, remaining=…, reset=…`; express-rate-limit's `"50-in-1sec"; r=0; t=1` | `r`, `t`, `q`, `w`: integers; reset and window in seconds | draft-ietf-httpapi-ratelimit-headers-10 and its -06/-07 |
/// | `RateLimitHeaders::github()` | `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset`; a `403` (or `429`) is a pushback with remaining 0 and a valid reset (the primary limit), or with a valid `retry-after` (the secondary limit) | Unix epoch seconds | GitHub REST API docs |
/// | `RateLimitHeaders::openai()` | `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, `retry-after-ms` | Go durations (`6m0s`, `250ms`); milliseconds | OpenAI API docs |
/// | `RateLimitHeaders::anthropic()` | `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}` | RFC 3339 times | Anthropic API docs |
/// | `RateLimitHeaders::discord()` | `x-ratelimit-limit`, `x-ratelimit-remaining`, `x-ratelimit-reset-after` (preferred), `x-ratelimit-reset` | seconds with decimals; epoch seconds with decimals | Discord developer docs |
/// | `RateLimitHeaders::none()` | nothing | | |
///
/// Sets combine with `.and(..)`; your own header is `.reset_header(name, ResetFormat::…, Some(remaining_header))`.
/// A status that is not one of `Policy::statuses` becomes a pushback by a declaration, in one of
/// two ways: `.pushback_status(StatusCode::FORBIDDEN)`, a pushback only when the headers read say a
/// quota is exhausted (a count of 0 with a valid reset); or
/// `.pushback_status_with_retry_after(StatusCode::FORBIDDEN)`, a pushback then, and also when the
/// answer carries a valid `Retry-After` (a zero or a past date too), whatever quota the headers say
/// is left. An invalid `Retry-After` makes no pushback of it: such an answer with quota left is
/// returned as it is (with the quota exhausted, it stops with `invalid_retry_after`).
///
/// Reset formats (`ResetFormat`): `Seconds` (with an optional fraction), `EpochSeconds`
/// (optional fraction), `Millis`, `GoDuration`, `Rfc3339`; `parse_reset` is public. A relative reset
/// (`Seconds`, `Millis`, `GoDuration`, the IETF fields) counts from when the answer arrived. An
/// absolute one (`EpochSeconds` such as `x-ratelimit-reset: 1700000000`, `Rfc3339`) is measured
/// against the answer's `Date` when it has one valid `Date` line, as a `Retry-After` date is, so clock
/// skew does not matter; `Date` has whole-second resolution (a server writes the second it is in), so
/// the retry leaves at the reset or up to 1 s after it (plus the answer's transit and any jitter),
/// never before it. Without a valid `Date` the reset is measured against the local clock when the
/// answer arrived, and the skew between the two clocks counts (a local clock ahead of the server's
/// sends early by as much).
///
/// - `Retry-After`, when present, valid and above zero, always wins; a reset is the server's time
///   too (never clamped, jitter only added, no retry budget spent).
/// - `Retry-After: 0` is not proof that a window is open: truncating servers (Flask-Limiter,
///   tower-governor) say 0 for "under a second". A later reset wins; else a task that meets zero
///   again falls back to local policy, and an origin answering zero twice within a second is held
///   a second at its gate, so the rejected tasks queue there (spending no attempt) and leave at the
///   rate it admitted. Against such a server in the tests, a burst of 80 tasks on a 20-per-window
///   server all succeed with 2 `429`s in total (`tests/all/rate_limited.rs`); before, the default
///   policy spent each task's attempts inside the closed window.
/// - **Proactive gate** (`Policy::proactive_gate`, on): any response (a `200` too) whose headers
///   say the quota is exhausted (`r=0`, remaining 0) and give a reset closes the origin's gate until
///   then (capped at `max_wait`), so the next requests wait instead of collecting `429`s. Shared
///   through the Redis store like the gate. A stated remaining (`r=5`) is spent by the requests
///   admitted meanwhile; once it is spent (by them, or by an answer of the same window), the origin
///   is held the same way: until the stated reset, at most `max_wait`, then one probe, and again
///   while the quota stays spent. `Store::gate`, the observer's `on_gate_closed` and the metrics
///   show the hold; a refusal meanwhile names the server's reset. (A day-long reset used to hold
///   the origin the whole day.)
/// - Never guessed: a field that is not the exact shape (a string `r`, a missing `r`, negative or
///   fractional numbers, non-ASCII, more than 16 policies, two lines of a single-value header) is
///   ignored; a huge number is an enormous reset (→ `wait_budget_exhausted`), never an overflow.
///
/// # Default
///
/// [`RateLimitHeaders::ietf`]: the standard fields, which no vendor
/// reuses for something else.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use http::{HeaderMap, HeaderValue, StatusCode};
/// use reqwest_backpressure::{RateLimitHeaders, ResetFormat};
///
/// let headers = RateLimitHeaders::github()
///     .and(RateLimitHeaders::ietf())
///     .reset_header(http::HeaderName::from_static("x-quota-reset"), ResetFormat::Seconds, None);
/// assert_eq!(
///     headers.pushback_statuses(),
///     &[StatusCode::FORBIDDEN, StatusCode::TOO_MANY_REQUESTS]
/// );
///
/// let mut response = HeaderMap::new();
/// response.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
/// response.insert("x-ratelimit-reset", HeaderValue::from_static("1700000042"));
/// let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// let hint = headers.read(&response, now);
/// assert!(hint.exhausted());
/// assert_eq!(hint.retry_in(), Some(Duration::from_secs(42)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitHeaders {
    ietf: bool,
    limits: Vec<LimitSpec>,
    /// Every declared pushback status, in the order declared.
    statuses: Vec<StatusCode>,
    /// The declared statuses that a valid `Retry-After` alone makes a
    /// pushback (a subset of `statuses`).
    retry_after_statuses: Vec<StatusCode>,
    /// Which vendors' scope rules apply.
    scoping: Scoping,
    /// A leaky bucket the answers state (Shopify's), and its declared
    /// rate.
    bucket: Option<LeakyBucket>,
}

impl Default for RateLimitHeaders {
    fn default() -> Self {
        RateLimitHeaders::ietf()
    }
}

impl RateLimitHeaders {
    /// The IETF fields: draft-10 `RateLimit` (a list of policies with `r`
    /// and `t`; express-rate-limit's draft-8 form is the same shape) with
    /// the quotas of `RateLimit-Policy` (`q`, `w`, `qu`, matched by policy
    /// name), the draft-07 `RateLimit` dictionary (`limit`, `remaining`,
    /// `reset`), and draft-06 `RateLimit-Remaining` with `RateLimit-Reset`
    /// (a delay in seconds) and the quota of `RateLimit-Limit` (an Integer,
    /// optionally with a `w` window). A `qu="concurrent-requests"` policy
    /// gives [`RateLimitHint::concurrency`]; see [`RateLimitHint`] for how
    /// limits in other units fold.
    #[must_use]
    pub fn ietf() -> Self {
        RateLimitHeaders {
            ietf: true,
            scoping: Scoping {
                ietf_partitions: true,
                ..Scoping::default()
            },
            ..RateLimitHeaders::none()
        }
    }

    /// Reads nothing.
    #[must_use]
    pub fn none() -> Self {
        RateLimitHeaders {
            ietf: false,
            limits: Vec::new(),
            statuses: Vec::new(),
            retry_after_statuses: Vec::new(),
            scoping: Scoping::default(),
            bucket: None,
        }
    }

    /// Both sets of headers (and pushback statuses), without duplicates.
    /// A status declared by both sets with different rules takes the
    /// broader one ([`pushback_status_with_retry_after`](Self::pushback_status_with_retry_after)).
    /// Order does not change what is read, but equality compares it:
    /// `a.and(b)` and `b.and(a)` read the same and may not be `==`.
    #[must_use]
    pub fn and(mut self, other: RateLimitHeaders) -> Self {
        self.ietf |= other.ietf;
        self.scoping = self.scoping.union(other.scoping);
        self.bucket = match (self.bucket, other.bucket) {
            (Some(a), Some(b)) => Some(a.slower(b)),
            (a, b) => a.or(b),
        };
        for spec in other.limits {
            self.push(spec);
        }
        for status in other.statuses {
            self = if other.retry_after_statuses.contains(&status) {
                self.pushback_status_with_retry_after(status)
            } else {
                self.pushback_status(status)
            };
        }
        self
    }

    /// Declares a limit of your own: a reset header with its format,
    /// optionally paired with the header that counts what is left. A reset
    /// without a count is read as a bare delay (like `retry-after-ms`); a
    /// vendor header sent on more than one field line is ignored. Such a
    /// limit counts requests and states no quota. Declared for
    /// `retry-after` itself, it is the vendor's format of that header: a
    /// value the strict [`Hint`](crate::Hint) parser refuses and this
    /// format reads is the server's `Retry-After` all the same, not an
    /// `invalid_retry_after` stop (as under [`shopify`](Self::shopify)).
    #[must_use]
    pub fn reset_header(
        mut self,
        name: HeaderName,
        format: ResetFormat,
        remaining: Option<HeaderName>,
    ) -> Self {
        self.push(LimitSpec::new(
            name,
            format,
            remaining,
            None,
            Unit::Requests,
        ));
        self
    }

    /// Declares a status that is a pushback only when these headers say a
    /// quota is used up ([`RateLimitHint::exhausted`]: a count of 0 with a
    /// reset). Any other answer with this status is returned as it is.
    /// This only records the status;
    /// [`Policy::is_pushback_response`](crate::Policy::is_pushback_response)
    /// decides with it.
    #[must_use]
    pub fn pushback_status(mut self, status: StatusCode) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    /// Declares a status (GitHub's `403`) that is a pushback when these
    /// headers say a quota is used up, as with
    /// [`pushback_status`](Self::pushback_status), *or* when the answer
    /// carries a valid `Retry-After` (a zero or a past date included),
    /// whatever the headers say is left. An invalid `Retry-After` does not
    /// make it one: such an answer with quota left is returned as it is,
    /// never guessed into a pushback (with the quota exhausted it is a
    /// pushback, and stops with `invalid_retry_after`). Declaring a status
    /// both ways keeps this, the broader rule.
    ///
    /// ```
    /// use http::{HeaderMap, HeaderValue, StatusCode};
    /// use reqwest_backpressure::{Policy, RateLimitHeaders, ResetFormat};
    ///
    /// let headers = RateLimitHeaders::none()
    ///     .reset_header(
    ///         http::HeaderName::from_static("x-quota-reset"),
    ///         ResetFormat::Seconds,
    ///         Some(http::HeaderName::from_static("x-quota-left")),
    ///     )
    ///     .pushback_status_with_retry_after(StatusCode::FORBIDDEN);
    /// assert_eq!(headers.retry_after_statuses(), &[StatusCode::FORBIDDEN]);
    /// let policy = Policy::default().rate_limit_headers(headers.clone());
    ///
    /// let mut answer = HeaderMap::new();
    /// answer.insert("x-quota-left", HeaderValue::from_static("12"));
    /// let hint = headers.read(&answer, std::time::UNIX_EPOCH);
    /// // Quota left, no `Retry-After`: a plain 403.
    /// assert!(!policy.is_pushback_response(StatusCode::FORBIDDEN, &hint, &answer));
    /// // Quota left, and a `Retry-After`: the server asks for a wait.
    /// answer.insert("retry-after", HeaderValue::from_static("30"));
    /// assert!(policy.is_pushback_response(StatusCode::FORBIDDEN, &hint, &answer));
    /// ```
    #[must_use]
    pub fn pushback_status_with_retry_after(mut self, status: StatusCode) -> Self {
        self = self.pushback_status(status);
        if !self.retry_after_statuses.contains(&status) {
            self.retry_after_statuses.push(status);
        }
        self
    }

    /// Every declared pushback status, with
    /// [`pushback_status`](Self::pushback_status) or
    /// [`pushback_status_with_retry_after`](Self::pushback_status_with_retry_after),
    /// in the order declared.
    #[must_use]
    pub fn pushback_statuses(&self) -> &[StatusCode] {
        &self.statuses
    }

    /// The declared statuses that a valid `Retry-After` alone makes a
    /// pushback (declared with
    /// [`pushback_status_with_retry_after`](Self::pushback_status_with_retry_after)),
    /// in the order declared.
    #[must_use]
    pub fn retry_after_statuses(&self) -> &[StatusCode] {
        &self.retry_after_statuses
    }

    /// Whether no header is read at all (pushback statuses alone read
    /// nothing).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.ietf && self.limits.is_empty() && self.bucket.is_none()
    }

    /// Which vendors' scope rules apply: those of the presets combined
    /// here.
    pub(crate) fn scoping(&self) -> Scoping {
        self.scoping
    }

    /// Reads the rate-limit headers of one response, measuring times from
    /// `server_now` (the response's `Date`, or the local receive time).
    /// Malformed values are skipped, never guessed at; see
    /// [`RateLimitHint`] for how several limits combine. A reset in seconds
    /// written with a fraction is read as its upper bound, one unit of its
    /// last digit later (Discord's `1.25`: 1.26 s): a server that truncated
    /// it resets up to that much after what it wrote. Pure: reads no
    /// clock.
    #[must_use]
    pub fn read(&self, headers: &HeaderMap, server_now: SystemTime) -> RateLimitHint {
        self.read_with(headers, || server_now)
    }

    /// [`read`](Self::read), asking for `server_now` only when a declared
    /// header needs it (the IETF fields are relative): the success path
    /// does not parse a `Date` it does not use.
    pub(crate) fn read_with(
        &self,
        headers: &HeaderMap,
        server_now: impl FnOnce() -> SystemTime,
    ) -> RateLimitHint {
        let mut fold = Fold::default();
        if self.ietf {
            ietf::read(headers, &mut fold);
        }
        if self.bucket.is_some()
            && let Some(limit) = shopify::read(headers)
        {
            fold.push(limit);
        }
        if self.limits.is_empty() {
            return fold.finish();
        }
        let server_now = server_now();
        for spec in &self.limits {
            if let Some(limit) = spec.read(headers, server_now) {
                fold.push(limit);
            }
        }
        fold.finish()
    }

    fn push(&mut self, spec: LimitSpec) {
        if !self.limits.contains(&spec) {
            self.limits.push(spec);
        }
    }
}

mod stripe;
mod vendors;
pub(crate) use stripe::should_retry;

#[cfg(test)]
mod tests;
