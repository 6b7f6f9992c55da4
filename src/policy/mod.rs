//! The policy: limits and switches, plain data, validated once.
//!
//! Why limits on by default? A client that waits as long as any server says,
//! or retries as often as it is pushed back, turns one overloaded server into
//! many stalled callers. Every bound here is finite out of the box, and each
//! default is the number the design's source articles settled on.

use std::time::Duration;

use http::StatusCode;

use crate::budget::RetryBudget;
use crate::extensions::IdempotencyKeyForm;
use crate::ratelimit::RateLimitHeaders;

/// What to do with a pushed-back response (a `429`, a `503`, or a declared
/// status) that gives no time: no `Retry-After` and no rate-limit reset.
///
/// This is a local policy, not a server promise. With `Delay`, the
/// pushback is retried: with the origin gate on (the default), through the
/// gate, which the pushback closed for a hold of its own (a second; while
/// the probe after it is rejected too, 0.25 s growing to at most 2 s and
/// `max_wait`),
/// with no delay of the task's own and no retry budget spent; with the gate
/// off (or when a redirect led to the origin that answered), after this
/// delay, spending the retry budget. With `Stop`, the task stops with
/// `missing_retry_after`, gate or not.
///
/// An invalid `Retry-After` is no missing one: its task stops with
/// `invalid_retry_after` whatever the fallback (its time is never
/// guessed). Its pushback still closes the origin's gate for the same hold
/// of our own, or, when longer, for what the value still reads as a plain
/// decimal number of seconds, as its upper bound (Shopify's `2.0`: 2.1 s;
/// at most `max_wait`), so that the other tasks do not send into the time
/// the server named. Holding them longer is never early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// Wait this long (plus jitter), within all the other budgets.
    Delay(Duration),
    /// Do not retry; the task stops with `missing_retry_after`.
    Stop,
}

/// Limits and switches of [`RetryAfterMiddleware`](crate::RetryAfterMiddleware).
///
/// Built with consuming setters from [`Policy::default()`] and validated once
/// with [`Policy::validate`] (which
/// [`RetryAfterMiddleware::try_new`](crate::RetryAfterMiddleware::try_new) calls).
///
/// # Defaults, and why
///
/// | setting | default | why |
/// |---|---|---|
/// | `max_attempts` | 3 (counts the first send) | enough to ride out a window boundary, few enough that the task ends while its caller still cares |
/// | `max_wait` | 60 s per server delay | rate-limit windows are rarely longer; a longer delay is a server asking to be left alone |
/// | `max_total_wait` | 120 s | two full `max_wait`s |
/// | `default_deadline` | 120 s | a bound for requests without a `Deadline` |
/// | `missing_retry_after` | `Fallback::Delay(2 s)` | a pushback with no time is retried: through the origin's gate (its hold, then the pace; no delay of the task's own, no budget spent), or, with the gate off, after one short jittered pause spending the retry budget. `Fallback::Stop` stops instead (`missing_retry_after`) |
/// | `jitter` | up to 250 ms, added | tasks told the same second do not return in the same millisecond; never counted toward `max_total_wait`, and added only within what is left of it, so it never turns a wait the budgets allow into a stop |
/// | `send_reserve` | 100 ms | a retry that could leave only at the deadline could not finish |
/// | `statuses` | `429`, `503` | RFC 6585 §4 and RFC 9110 §15.6.4 |
/// | `origin_gate` | on | a `Retry-After` speaks for the origin: requests not yet rejected would only add to the burst |
/// | `pacing` | on | the queue behind a reopened gate leaves in batches of what the origin admitted per period, one batch a period, not all at once (works through the gate: with `origin_gate(false)` it has no effect) |
/// | `retry_budget` | 20% of first sends + 10/s | reqwest's and Finagle's figures; spent only by retries at a delay of our own that no origin gate holds |
/// | `rate_limit_headers` | `RateLimitHeaders::ietf()` | the standard fields, in their unambiguous forms; vendor presets are opt-in because their names collide (`x-ratelimit-reset` is epoch seconds at GitHub, something else elsewhere) |
/// | `proactive_gate` | on | a server that says its quota is 0 is answered with waiting, not with `429`s |
/// | `quota` | none declared | an origin's quota is read from its rate-limit headers; a declared one (`Policy::quota(origin, Quota::per_second(10))`, `.refilled()` for a bucket, `.units()` for tokens) paces the very first burst, where nothing is stated yet |
/// | `max_in_flight` | none declared | most APIs cap a rate, not concurrency; GitHub's 100 concurrent requests is a declaration away, and a cap the server states (`qu="concurrent-requests"`) holds anyway |
/// | `first_contact` | 500 ms | the other requests to a new origin wait (never past their deadline) for its first answer, which may state the quota: a burst that left beside it meets a whole wave of `429`s. A round trip is rarely longer; an answer slower than that is the server's work, and the burst goes. The requests that waited leave together, and no other leaves until their answers are in (as long again at most): a limit no header states (GitHub's secondary one) then holds the follow-ups. `Duration::ZERO` turns it off |
/// | `max_scopes` | 256 per origin ([`DEFAULT_MAX_SCOPES`]) | a server naming a new bucket in every answer costs a bounded map; a request past the bound falls under its origin's limit alone; unused scopes make room after five minutes; `0` turns scopes off |
/// | `idempotency_key_form` | `IdempotencyKeyForm::SfString`: `Idempotency-Key: "order-42"` | the IETF httpapi draft's form; `IdempotencyKeyForm::Raw` sends `order-42` for servers that take the raw value as the key (Stripe's), which would read the quoted one as `"order-42"`, quotes included |
///
/// A fallback delay longer than `max_wait` is capped at `max_wait` (it is local policy, not a
/// server's time). Invalid combinations (0 attempts, zero budgets, `max_wait` > `max_total_wait`,
/// `send_reserve` ≥ `default_deadline`, pacing without the gate, a retry budget ratio outside
/// 0–1, a non-error status, a declared quota of 0, or over a span under 1 ms or over 366 days)
/// are a typed `InvalidPolicy` (`origin_gate(false)` with pacing on is valid: there is simply no
/// queue to pace) from `Policy::validate()` / `RetryAfterMiddleware::try_new`;
/// `RetryAfterMiddleware::new` never panics: with an invalid policy it refuses every request with
/// `invalid_policy` and sends nothing.
///
/// Vendor presets ([`Policy::github`], [`Policy::discord`],
/// [`Policy::openai`], [`Policy::anthropic`], …) are this default with what
/// each vendor documents.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::{Fallback, Policy};
///
/// let policy = Policy::default()
///     .max_attempts(4)
///     .max_wait(Duration::from_secs(30))
///     .missing_retry_after(Fallback::Stop);
/// assert!(policy.validate().is_ok());
/// assert!(Policy::default().max_attempts(0).validate().is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub(crate) max_attempts: u32,
    pub(crate) max_wait: Duration,
    pub(crate) max_total_wait: Duration,
    pub(crate) default_deadline: Duration,
    pub(crate) missing_retry_after: Fallback,
    pub(crate) jitter: Duration,
    pub(crate) send_reserve: Duration,
    pub(crate) statuses: Vec<StatusCode>,
    pub(crate) origin_gate: bool,
    pub(crate) pacing: bool,
    pub(crate) retry_budget: RetryBudget,
    pub(crate) rate_limit_headers: RateLimitHeaders,
    pub(crate) proactive_gate: bool,
    pub(crate) idempotency_key_form: IdempotencyKeyForm,
    pub(crate) quotas: Vec<(Target, Quota)>,
    pub(crate) in_flight: Vec<(Target, u32)>,
    pub(crate) first_contact: Duration,
    pub(crate) scopes: DeclaredScopes,
}

impl Default for Policy {
    /// - `max_attempts`: 3 (the first send and two retries): enough to ride
    ///   out a window boundary, few enough that a task gives up while its
    ///   caller still cares.
    /// - `max_wait`: 60 s per server delay: a rate-limit window is rarely
    ///   longer; a longer delay is a server asking to be left alone, and the
    ///   task stops (`wait_budget_exhausted`) rather than waits less.
    /// - `max_total_wait`: 120 s: two full `max_wait`s.
    /// - `default_deadline`: 120 s for requests without a [`Deadline`](crate::Deadline).
    /// - `missing_retry_after`: `Fallback::Delay(2 s)`: a pushback without
    ///   a time is retried, through the origin's gate (or, with the gate
    ///   off, after one short, jittered pause), within every other budget.
    /// - `jitter`: up to 250 ms added (never subtracted) to each wait, so
    ///   tasks told the same second do not return in the same millisecond.
    /// - `send_reserve`: 100 ms: a retry planned to leave later than
    ///   `deadline - send_reserve` could not finish, so it is not planned.
    /// - `statuses`: `429` and `503`.
    /// - `origin_gate`: on. A server's `Retry-After` applies to its whole
    ///   origin: requests not yet rejected would only join the burst.
    /// - `pacing`: on. The queue behind a reopened gate leaves at the rate
    ///   the origin was seen to admit, not all at once.
    /// - `retry_budget`: [`RetryBudget::default()`] (20% of first sends plus
    ///   10 a second), spent only by retries at a delay of our own that no
    ///   origin gate holds.
    /// - `rate_limit_headers`: [`RateLimitHeaders::ietf()`]: the IETF
    ///   `RateLimit` fields, in their unambiguous forms only.
    /// - `proactive_gate`: on. A response whose rate-limit headers say the
    ///   quota is exhausted holds the origin until the reset.
    /// - `idempotency_key_form`: [`IdempotencyKeyForm::SfString`]: the IETF
    ///   httpapi draft's `Idempotency-Key: "order-42"`.
    /// - `quota`: none declared: an origin's quota is learned from its
    ///   rate-limit headers, or from its pushbacks.
    /// - `max_in_flight`: none declared: requests in flight are capped only
    ///   where a server states a cap (`qu="concurrent-requests"`).
    /// - `first_contact`: 500 ms. While an origin's first answer is
    ///   outstanding, the other requests to it wait for that answer (up to
    ///   this long, never past their deadline), so a quota its headers
    ///   state is known before a burst leaves. A round trip is rarely
    ///   longer; an answer slower than that is the server's work, not the
    ///   network's, and the burst goes. The requests that waited then
    ///   leave together (the first wave), and the others wait for their
    ///   answers (as long again at most), so that a limit no header states
    ///   (GitHub's secondary one, a cap on concurrency) holds them before
    ///   they meet it.
    fn default() -> Self {
        Policy {
            max_attempts: 3,
            max_wait: Duration::from_secs(60),
            max_total_wait: Duration::from_secs(120),
            default_deadline: Duration::from_secs(120),
            missing_retry_after: Fallback::Delay(Duration::from_secs(2)),
            jitter: Duration::from_millis(250),
            send_reserve: Duration::from_millis(100),
            statuses: vec![
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::SERVICE_UNAVAILABLE,
            ],
            origin_gate: true,
            pacing: true,
            retry_budget: RetryBudget::default(),
            rate_limit_headers: RateLimitHeaders::ietf(),
            proactive_gate: true,
            idempotency_key_form: IdempotencyKeyForm::SfString,
            quotas: Vec::new(),
            in_flight: Vec::new(),
            first_contact: Duration::from_millis(500),
            scopes: DeclaredScopes::default(),
        }
    }
}

impl Policy {
    /// Most sends for one task, counting the first (≥ 1; 1 turns retries off).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// The longest single server delay the task accepts. A longer one stops
    /// the task with `wait_budget_exhausted`; it is never clamped down. A
    /// slot of a declared [`quota`](Self::quota) is no server delay: the
    /// task's deadline alone bounds the wait for it.
    #[must_use]
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.max_wait = d;
        self
    }

    /// The most time one task may spend waiting, over all its retries: the
    /// server's (or the fallback's) delays and time at the origin's gate.
    /// A wait for a declared [`quota`](Self::quota)'s slot is bounded by the
    /// deadline alone (it still counts toward this budget for later retries).
    /// Jitter is not counted: it is added only within what is left of this
    /// budget, and never turns a wait the budgets allow into a stop.
    #[must_use]
    pub fn max_total_wait(mut self, d: Duration) -> Self {
        self.max_total_wait = d;
        self
    }

    /// The deadline of a task whose request carries no
    /// [`Deadline`](crate::Deadline), counted from when the middleware sees it.
    #[must_use]
    pub fn default_deadline(mut self, d: Duration) -> Self {
        self.default_deadline = d;
        self
    }

    /// What to do with a pushback that gives no time (see [`Fallback`]). A
    /// fallback delay is local policy, not a server's time, so it is capped
    /// at `max_wait`.
    #[must_use]
    pub fn missing_retry_after(mut self, fallback: Fallback) -> Self {
        self.missing_retry_after = fallback;
        self
    }

    /// Upper bound of the random delay added to each wait; `Duration::ZERO`
    /// turns jitter off. Jitter is only ever added: no retry leaves before
    /// the server's time.
    #[must_use]
    pub fn jitter(mut self, d: Duration) -> Self {
        self.jitter = d;
        self
    }

    /// Time kept free before the deadline for the retry itself: a retry
    /// ready later than `deadline - send_reserve` is not planned.
    #[must_use]
    pub fn send_reserve(mut self, d: Duration) -> Self {
        self.send_reserve = d;
        self
    }

    /// The response statuses that are push-back (default `429`, `503`).
    /// Each must be a 4xx or 5xx status.
    #[must_use]
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.statuses = statuses.into_iter().collect();
        self.statuses.sort_unstable();
        self.statuses.dedup();
        self
    }

    /// Whether a valid `Retry-After` holds every request to the same origin
    /// (scheme, host, port) until the server's time. Waiting at the gate
    /// spends no attempt; a task whose deadline or `max_wait` cannot cover
    /// the gate fails at once without sending
    /// ([`Error::OriginGateClosed`](crate::Error::OriginGateClosed)).
    #[must_use]
    pub fn origin_gate(mut self, on: bool) -> Self {
        self.origin_gate = on;
        self
    }

    /// Whether requests queued behind a reopened gate are released no faster
    /// than the origin was seen to admit. Pacing works through the gate: with
    /// `origin_gate(false)` there is no queue to pace, and this setting has
    /// no effect (it is not an error, so `Policy::default().origin_gate(false)`
    /// is a valid policy).
    #[must_use]
    pub fn pacing(mut self, on: bool) -> Self {
        self.pacing = on;
        self
    }

    /// The client-wide budget for retries the server gave no time for; see
    /// [`RetryBudget`]. An empty budget stops a task with
    /// `retry_budget_exhausted`.
    #[must_use]
    pub fn retry_budget(mut self, budget: RetryBudget) -> Self {
        self.retry_budget = budget;
        self
    }

    /// Which rate-limit headers are read beside `Retry-After` (default
    /// [`RateLimitHeaders::ietf()`]). A pushback without a valid
    /// `Retry-After` (or with a zero one) waits for a reset time these
    /// headers give, as the server's time; a status these headers declare
    /// is a pushback only when they say the quota is exhausted, or, if it
    /// was declared with
    /// [`pushback_status_with_retry_after`](RateLimitHeaders::pushback_status_with_retry_after)
    /// (GitHub's `403` under [`RateLimitHeaders::github()`]), when the
    /// answer carries a valid `Retry-After` (see
    /// [`is_pushback_response`](Self::is_pushback_response)).
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, RateLimitHeaders};
    /// let policy = Policy::default()
    ///     .rate_limit_headers(RateLimitHeaders::ietf().and(RateLimitHeaders::github()));
    /// assert!(policy.validate().is_ok());
    /// ```
    #[must_use]
    pub fn rate_limit_headers(mut self, headers: RateLimitHeaders) -> Self {
        self.rate_limit_headers = headers;
        self
    }

    /// Whether a response (a `200` too) whose rate-limit headers say the
    /// quota is exhausted (`r=0`, remaining 0) and give a reset time closes
    /// the origin's gate until then (capped at `max_wait`, like a
    /// `Retry-After`), so the next requests wait instead of collecting
    /// `429`s. Needs `origin_gate`; shared through the store like the gate.
    #[must_use]
    pub fn proactive_gate(mut self, on: bool) -> Self {
        self.proactive_gate = on;
        self
    }

    /// How an [`IdempotencyKey`](crate::IdempotencyKey) extension is written
    /// into the `Idempotency-Key` header this client sends, on every
    /// attempt: a Structured Field string (`"order-42"`, the IETF httpapi
    /// draft's form) or the key as it is (`order-42`, for servers that take
    /// the raw value as the key, such as Stripe's; they would read the
    /// quoted form as the key `"order-42"`, quotes included).
    ///
    /// Both forms refuse the same keys, with `invalid_idempotency_key`,
    /// before anything is sent: empty, or with a control or non-ASCII
    /// character; the raw form also refuses a key that starts or ends with
    /// a space. An `Idempotency-Key` header the caller set is sent as
    /// written in either form. The form changes only the header: a task is
    /// keyed by the key itself, so `order-42` is one key in both forms
    /// (and for a caller's header `order-42` or `"order-42"`).
    ///
    /// # Default
    ///
    /// [`IdempotencyKeyForm::SfString`].
    ///
    /// ```
    /// use reqwest_backpressure::{IdempotencyKeyForm, Policy, RetryAfterMiddleware};
    ///
    /// // A client for an API that reads `Idempotency-Key: order-42` raw.
    /// let middleware = RetryAfterMiddleware::try_new(
    ///     Policy::default().idempotency_key_form(IdempotencyKeyForm::Raw),
    /// );
    /// assert!(middleware.is_ok());
    /// ```
    #[must_use]
    pub fn idempotency_key_form(mut self, form: IdempotencyKeyForm) -> Self {
        self.idempotency_key_form = form;
        self
    }

    /// How long the other requests to an origin wait for its first answer
    /// while it is outstanding (never past their deadline); zero: they do
    /// not wait. The first answer may state the origin's quota
    /// (`RateLimit`, a vendor's limit headers), which then paces them: a
    /// burst that left with the first request would meet a whole wave of
    /// `429`s instead. One wait per origin: when the first answer is
    /// late, or lost (a transport error), every request waiting goes at
    /// once, and later ones do not wait. An origin is new again after it
    /// was forgotten (idle for five minutes). Origins with a declared [`quota`](Self::quota)
    /// do not wait: their pace is known.
    ///
    /// The requests that waited leave together when the answer comes: the
    /// first wave. Until their answers are in (or as long again as this
    /// wait, when some never come), no other request to the origin leaves,
    /// not even the next request of a task already answered: the wave is
    /// the first test of the limits no header states (GitHub's secondary
    /// limit, a cap on requests in flight), and a pushback among its
    /// answers holds the origin before anything follows into the same
    /// second. A request that cannot wait that long goes.
    ///
    /// # Default
    ///
    /// 500 ms (see [`Policy::default`]).
    #[must_use]
    pub fn first_contact(mut self, wait: Duration) -> Self {
        self.first_contact = wait;
        self
    }
}

mod presets;
mod quotas;
mod rules;
mod scopes;

use crate::quota::{Quota, Target};

pub use rules::{InvalidPolicy, Limits};
pub use scopes::DEFAULT_MAX_SCOPES;
pub(crate) use scopes::DeclaredScopes;
