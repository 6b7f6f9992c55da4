//! The pure planner: one decision per pushed-back attempt.
//!
//! Why pure? The questions "may this task retry, and when?" have exact
//! answers that depend only on the policy, the task's state, what the server
//! said and the current time. Keeping them free of I/O, clocks and sleeps
//! makes every row of the decision table testable with fixed times and no
//! runtime, and lets the same rules drive this crate's middleware, a queue
//! consumer, or another HTTP client.
//!
//! Time is always an argument: `now` is a [`tokio::time::Instant`] for
//! waiting, and wall-clock times ([`SystemTime`](std::time::SystemTime)) only ever turn an
//! HTTP-date into a delay.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use tokio::time::Instant;
//! use reqwest_backpressure::planner::{Decision, Planner, Pushback, TaskState};
//! use reqwest_backpressure::{Hint, Policy};
//!
//! let planner = Planner::new(Policy::default().jitter(Duration::ZERO)).unwrap();
//! let t0 = Instant::now();
//! let mut task = TaskState::new(t0 + Duration::from_secs(30));
//! assert!(planner.claim(&mut task, t0).is_send());          // first send
//!
//! let wall = SystemTime::now();
//! let pushback = Pushback::new(Hint::Delay(Duration::from_secs(5)), wall);
//! match planner.plan(&mut task, &pushback, t0, 0) {
//!     Decision::Wait { until, .. } => assert_eq!(until, t0 + Duration::from_secs(5)),
//!     Decision::Stop(reason) => panic!("stopped: {}", reason.code()),
//! }
//! assert!(!planner.claim(&mut task, t0 + Duration::from_secs(4)).is_send()); // not before the server's time
//! assert!(planner.claim(&mut task, t0 + Duration::from_secs(5)).is_send());
//! ```

mod keyed;
mod plan;
mod pushback;

use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

#[doc(hidden)]
pub use keyed::{KeyInUse, KeyedPlanner};
pub use plan::{Planner, TaskState};
pub use pushback::Pushback;

/// Why a task stopped retrying. The [`code`](StopReason::code) strings are
/// stable: match on them in logs and dashboards.
///
/// The rows that lead to each, in the order they are checked, are the
/// [decision table](crate#decisions-and-stop-codes) of the crate docs. A
/// stopped task returns the last real response (the pushback itself) with
/// a [`RetryReport`](crate::RetryReport) whose
/// [`retry_at`](crate::RetryReport::retry_at) says when to come back, when
/// the server said: never earlier than the server's own time. Things that
/// never reached the server are an [`Error`](crate::Error) with its own
/// code (`already_active`, `origin_gate_closed`, …).
///
/// | code | when |
/// |---|---|
/// | `retry_not_authorized_by_contract` | a `POST`/`PATCH` (not idempotent) without an [`IdempotencyKey`](crate::IdempotencyKey) |
/// | `body_not_replayable` | a streaming body, which cannot be sent twice |
/// | `attempt_budget_exhausted` | `max_attempts` sends made (the first counts) |
/// | `deadline_exhausted` | the deadline passed, or the retry could not leave before it less `send_reserve` |
/// | `invalid_retry_after` | a `Retry-After` that does not parse: never guessed at |
/// | `missing_retry_after` | no time given and [`Fallback::Stop`](crate::Fallback::Stop) |
/// | `wait_budget_exhausted` | a server delay over `max_wait` (never clamped), or `max_total_wait` spent |
/// | `retry_budget_exhausted` | a retry at a delay of our own that no gate holds, with the client-wide budget empty |
/// | `store_unavailable` | a shared store failing closed could not answer before the retry |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The method is not idempotent (RFC 9110 §9.2.2) and the request has no
    /// idempotency key. Code `retry_not_authorized_by_contract`.
    RetryNotAuthorizedByContract,
    /// The request body is a stream and cannot be sent again. Code
    /// `body_not_replayable`.
    BodyNotReplayable,
    /// The server said the request must not be retried (Stripe's
    /// `Stripe-Should-Retry: false`, read under
    /// [`RateLimitHeaders::stripe`](crate::RateLimitHeaders::stripe)). Code
    /// `server_said_do_not_retry`.
    ServerSaidDoNotRetry,
    /// `max_attempts` sends were made. Code `attempt_budget_exhausted`.
    AttemptBudgetExhausted,
    /// The task's deadline has passed, or the retry could not be sent before
    /// it. Code `deadline_exhausted`.
    DeadlineExhausted,
    /// `Retry-After` was present but invalid; never guessed at. Code
    /// `invalid_retry_after`.
    InvalidRetryAfter,
    /// `Retry-After` was missing and the policy does not retry without it.
    /// Code `missing_retry_after`.
    MissingRetryAfter,
    /// The server's delay exceeds `max_wait`, or the total wait would exceed
    /// `max_total_wait`. Code `wait_budget_exhausted`.
    WaitBudgetExhausted,
    /// The client-wide retry budget is empty. Code `retry_budget_exhausted`.
    RetryBudgetExhausted,
    /// The shared store could not answer before a retry and fails closed
    /// (see `RedisStore`'s `FailMode`); the pushback is returned. Code
    /// `store_unavailable`.
    StoreUnavailable,
}

impl StopReason {
    /// The stable snake_case code of this reason.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            StopReason::RetryNotAuthorizedByContract => "retry_not_authorized_by_contract",
            StopReason::BodyNotReplayable => "body_not_replayable",
            StopReason::ServerSaidDoNotRetry => "server_said_do_not_retry",
            StopReason::AttemptBudgetExhausted => "attempt_budget_exhausted",
            StopReason::DeadlineExhausted => "deadline_exhausted",
            StopReason::InvalidRetryAfter => "invalid_retry_after",
            StopReason::MissingRetryAfter => "missing_retry_after",
            StopReason::WaitBudgetExhausted => "wait_budget_exhausted",
            StopReason::RetryBudgetExhausted => "retry_budget_exhausted",
            StopReason::StoreUnavailable => "store_unavailable",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Why a store call made on a task's behalf did not answer (the
/// middleware's loop; not part of the documented planner).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFault {
    /// The store failed, and fails closed.
    Unavailable,
    /// The task's deadline passed first.
    Deadline,
}

impl StoreFault {
    /// The stop reason of a task whose store call ended this way.
    #[must_use]
    pub const fn reason(self) -> StopReason {
        match self {
            StoreFault::Unavailable => StopReason::StoreUnavailable,
            StoreFault::Deadline => StopReason::DeadlineExhausted,
        }
    }
}

/// The longest a task may wait for its origin, from `Planner::admission_limit`
/// (the middleware's loop; not part of the documented planner).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimit {
    /// How long from now the task accepts to wait at the gate or for a slot.
    pub latest: Duration,
    /// Why the task stops if the origin cannot take it within `latest`.
    pub reason: StopReason,
    /// How long from now the task accepts to wait for a slot of a quota
    /// the caller declared: its deadline (less the send reserve) alone. A
    /// declared quota is the caller's own knowledge, not a server delay:
    /// `max_wait` and `max_total_wait` do not cap it.
    pub declared: Duration,
}

/// Where the time of a planned retry came from. The
/// [`code`](HintSource::code) strings are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HintSource {
    /// The server's `Retry-After`. Code `retry_after`.
    RetryAfter,
    /// A rate-limit header's reset time (the IETF `RateLimit` field, or a
    /// declared vendor header): the server's time too. Code `ratelimit`.
    RateLimit,
    /// The policy's own fallback delay: the server gave no usable time (no
    /// `Retry-After`, or a zero one repeated). Spends the retry budget when
    /// no origin gate holds the retry. Code `fallback`.
    Fallback,
    /// No time at all, and the origin's gate holds the retry: the pushback
    /// closed the gate for a hold of its own (a second, shorter ones while
    /// the probe after it is rejected too), and the task leaves when the gate
    /// and the pace admit it, with no delay of its own. Spends no retry
    /// budget. Code `gate`.
    Gate,
}

impl HintSource {
    /// The stable snake_case code of this source.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            HintSource::RetryAfter => "retry_after",
            HintSource::RateLimit => "ratelimit",
            HintSource::Fallback => "fallback",
            HintSource::Gate => "gate",
        }
    }
}

impl fmt::Display for HintSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The planner's answer to a pushed-back attempt.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Retry, not before `until`.
    Wait {
        /// The earliest instant the retry may be sent.
        until: Instant,
        /// The server's delay (or the fallback delay), without jitter.
        delay: Duration,
        /// Where `delay` came from.
        source: HintSource,
    },
    /// Do not retry.
    Stop(StopReason),
}

/// The answer to "may this task send now?".
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Send now; this is attempt number `attempt` (1 for the first send).
    Send {
        /// 1-based number of the attempt being claimed.
        attempt: u32,
    },
    /// Too early: the planned retry is not due before this instant.
    NotYet(Instant),
    /// An attempt of this task is already in flight.
    Active,
    /// The last attempt finished and no retry is planned: the task is over.
    NothingPlanned,
    /// The task must not send again.
    Stop(StopReason),
}

impl Claim {
    /// Whether the claim allows sending now.
    #[must_use]
    pub fn is_send(&self) -> bool {
        matches!(self, Claim::Send { .. })
    }
}
