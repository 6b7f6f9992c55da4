//! Request and response extensions: what a caller attaches to a request,
//! and what the middleware attaches to the response.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::planner::{HintSource, StopReason};
use crate::util::far_future;

mod idempotency;
pub use idempotency::{IdempotencyKey, IdempotencyKeyForm};

/// Request extension: the absolute deadline of the whole task, retries and
/// waits included. Without one, the policy's `default_deadline` applies from
/// when the middleware first sees the request.
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::Deadline;
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// let response = client
///     .get("http://localhost/")
///     .with_extension(Deadline::after(Duration::from_secs(10)))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline `budget` from now (saturating far in the future).
    #[must_use]
    pub fn after(budget: Duration) -> Self {
        let now = Instant::now();
        Deadline(now.checked_add(budget).unwrap_or_else(|| far_future(now)))
    }

    /// The deadline at `instant`.
    #[must_use]
    pub fn at(instant: Instant) -> Self {
        Deadline(instant)
    }

    /// The deadline as an instant.
    #[must_use]
    pub fn instant(&self) -> Instant {
        self.0
    }
}

/// Request extension: what the request spends of its origin's quota in
/// cost units (an LLM API's tokens). Admission reserves it before the send
/// and holds the request while the quota the origin's headers stated (or
/// one declared with [`Quota::units`](crate::Quota::units)) is short of it;
/// a request that is not sent gives it back, and the answer's stated
/// remaining reconciles it. Without one, the mean cost per request learned
/// from how the stated remaining falls stands in.
///
/// # What to declare
///
/// - **OpenAI** ([`Policy::openai`](crate::Policy::openai)): one token
///   limit counts a request's prompt and its `max_tokens` together, so
///   declare [`Cost::tokens(prompt, max_tokens)`](Self::tokens) (or
///   [`Cost::new`] of their sum: the same).
/// - **Anthropic** ([`Policy::anthropic`](crate::Policy::anthropic)):
///   input tokens and output tokens have buckets of their own. Declare
///   [`Cost::tokens(input, max_tokens)`](Self::tokens): the input part is
///   spent from the input-token bucket before the send; `max_tokens`, from
///   which Anthropic estimates a message's output when it starts, is
///   reserved from the output-token bucket. Each answer's stated counts
///   reconcile both (Anthropic adjusts the output to what was produced, so
///   the unused part of `max_tokens` comes back).
///   [`Cost::new(input + max_tokens)`](Self::new) would spend all of it
///   from the input bucket and reserve nothing of the output one.
/// - An API that counts something else: [`Cost::new`] of what it counts.
///
/// ```
/// use reqwest_backpressure::{Cost, IdempotencyKey};
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// // An Anthropic message: 1,200 input tokens, `max_tokens` 256.
/// let response = client
///     .post("http://localhost/v1/messages")
///     .with_extension(IdempotencyKey::new("message-42"))
///     .with_extension(Cost::tokens(1_200, 256))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
///
/// # Which quota it is spent from
///
/// A `Cost` is spent from the quotas in cost units of the limits the
/// request falls under: one the answers state (OpenAI's
/// `x-ratelimit-*-tokens`, Anthropic's `anthropic-ratelimit-*tokens-*`) or
/// one declared with [`Quota::units`](crate::Quota::units) (for the origin
/// with [`Policy::quota`](crate::Policy::quota), for a scope with
/// [`Policy::scope_quota`](crate::Policy::scope_quota)). A quota in
/// requests counts the request as one, whatever its cost (see "What to
/// declare" above for OpenAI's and Anthropic's). The stated remaining then
/// reconciles what was really used. Without a declared cost, the mean cost per request learned from how the
/// stated remaining falls stands in; before any fall is seen, the first
/// answer's distance from the whole window (the first contact's own cost)
/// does, so the first burst is held to what the window pays for. A
/// rejection that the token quota explains (less left than a request costs)
/// holds the origin until the reset like a spent quota and teaches no pace
/// in requests: the token quota, renewed, governs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Cost {
    input: u64,
    output: u64,
}

impl Cost {
    /// A cost of `units` (0: none declared), all of it spent from the
    /// origin's token quota whatever that limit counts.
    #[must_use]
    pub const fn new(units: u64) -> Self {
        Cost {
            input: units,
            output: 0,
        }
    }

    /// An LLM message's tokens: `input` (its prompt, known before the send)
    /// and `max_output` (its `max_tokens`, the most it may produce). A
    /// limit that counts both (OpenAI's) spends their sum; a limit of
    /// input tokens only (Anthropic's) spends `input`, and a limit of
    /// output tokens apart (Anthropic's) reserves `max_output`.
    ///
    /// ```
    /// use reqwest_backpressure::Cost;
    /// let cost = Cost::tokens(1_200, 256);
    /// assert_eq!((cost.input(), cost.output(), cost.units()), (1_200, 256, 1_456));
    /// assert_eq!(Cost::new(1_456).units(), cost.units());
    /// ```
    #[must_use]
    pub const fn tokens(input: u64, max_output: u64) -> Self {
        Cost {
            input,
            output: max_output,
        }
    }

    /// The units it spends from a limit that counts everything: the input
    /// and the most output together (saturating).
    #[must_use]
    pub const fn units(&self) -> u64 {
        self.input.saturating_add(self.output)
    }

    /// Its input part: what [`new`](Self::new) was given, or the `input`
    /// of [`tokens`](Self::tokens).
    #[must_use]
    pub const fn input(&self) -> u64 {
        self.input
    }

    /// Its output part: the `max_output` of [`tokens`](Self::tokens) (0
    /// for [`new`](Self::new)).
    #[must_use]
    pub const fn output(&self) -> u64 {
        self.output
    }
}

/// Placed in the request's extensions before each attempt, so a middleware
/// after this one (tracing, metrics) can tell a first send from a resend,
/// e.g. to record OpenTelemetry's `http.request.resend_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    number: u32,
}

impl Attempt {
    pub(crate) fn new(number: u32) -> Self {
        Attempt { number }
    }

    /// 1-based number of this attempt.
    #[must_use]
    pub fn number(&self) -> u32 {
        self.number
    }

    /// How many times this request was sent before (`number - 1`): the value
    /// of OpenTelemetry's `http.request.resend_count`.
    #[must_use]
    pub fn resend_count(&self) -> u32 {
        self.number.saturating_sub(1)
    }
}

/// Inserted into the extensions of every response the middleware returns:
/// what happened to the task.
///
/// ```
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// use reqwest_backpressure::RetryReport;
/// let response = client.get("http://localhost/").send().await?;
/// if let Some(report) = response.extensions().get::<RetryReport>() {
///     println!("{} attempts, waited {:?}", report.attempts(), report.waited());
///     if let Some(reason) = report.stop_reason() {
///         println!("stopped: {}", reason.code());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryReport {
    pub(crate) attempts: u32,
    pub(crate) waited: Duration,
    pub(crate) stop_reason: Option<StopReason>,
    pub(crate) retry_at: Option<SystemTime>,
    pub(crate) hint_source: Option<HintSource>,
}

impl RetryReport {
    /// Sends this middleware made, counting the first (what
    /// [`max_attempts`](crate::Policy::max_attempts) bounds). A retry
    /// middleware placed after this one (reqwest-retry) resends inside one
    /// of these attempts: its resends are not counted here.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time the task spent waiting: for the server's time (and jitter)
    /// between attempts, and at the origin's gate or for a paced slot,
    /// including any time queued there before the first send.
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Why the task stopped retrying a pushed-back response; `None` when the
    /// returned response is not a push-back status (e.g. a success).
    #[must_use]
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop_reason
    }

    /// When the caller may usefully send this request again (on the local
    /// wall clock), set only when the task stopped on a pushback:
    ///
    /// - the server's earliest retry time from the last pushed-back
    ///   response, when it gave a valid one;
    /// - or later, when the origin's gate or the paced queue behind it
    ///   refused the retry: the time the origin could take it. A caller who
    ///   reschedules then neither sends before the server's time nor joins
    ///   the same queue again.
    ///
    /// `None` when the task did not stop on a pushback (a success, also
    /// after a retry: the server's earlier time no longer matters), or when
    /// the server gave no valid time.
    #[must_use]
    pub fn retry_at(&self) -> Option<SystemTime> {
        self.retry_at
    }

    /// Where the time the last pushback asked for came from: the server's
    /// `Retry-After` (`retry_after`), a rate-limit header's reset
    /// (`ratelimit`), the policy's fallback (`fallback`), or, for a
    /// pushback with no time at all, the origin's gate (`gate`: the task
    /// waited there for the hold the pushback closed it for, then for its
    /// paced slot). `None` when no pushback gave a time (a first-try
    /// success, or a stop before one).
    #[must_use]
    pub fn hint_source(&self) -> Option<HintSource> {
        self.hint_source
    }
}
