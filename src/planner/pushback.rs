//! What a pushed-back response told the planner.

use std::time::{Duration, SystemTime};

use crate::retry_after::Hint;

/// What a pushed-back response told the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pushback {
    /// What the response's `Retry-After` said.
    pub hint: Hint,
    /// The time a `Retry-After` date is measured from: the response's valid
    /// `Date` when it has one, else the local wall-clock receive time.
    pub server_now: SystemTime,
    /// The local wall-clock time the response was received; the report's
    /// `retry_at` is this plus the delay.
    pub received_at: SystemTime,
    /// Whether retrying is allowed by the request's contract (an idempotent
    /// method, or an idempotency key).
    pub retry_authorized: bool,
    /// Whether the request can be sent again (its body is not a stream).
    pub body_replayable: bool,
    /// Whether the server said this request must not be retried (Stripe's
    /// `Stripe-Should-Retry: false`): the task stops with
    /// `server_said_do_not_retry`.
    pub server_said_do_not_retry: bool,
    /// Whether a missing `Retry-After` falls back to the policy's
    /// [`Fallback`](crate::Fallback), or stops (`missing_retry_after`).
    /// True for every pushback the middleware sees: a `429`, a `503` and any
    /// status the policy or its rate-limit headers declare.
    pub fallback_allowed: bool,
    /// Whether the origin's gate holds the retry: the answer came from the
    /// origin the retry is sent to (not from where a redirect led). A
    /// pushback with no time then waits at the gate
    /// ([`HintSource::Gate`](crate::planner::HintSource::Gate)) when the
    /// policy's origin gate is on.
    pub gated: bool,
    /// The time the response's rate-limit headers give a pushed-back
    /// request ([`RateLimitHint::retry_in`](crate::RateLimitHint::retry_in)),
    /// measured from `received_at`, when one parsed.
    pub rate_limit: Option<Duration>,
}

impl Pushback {
    /// A pushback for an authorised, replayable `429` received at
    /// `received_at`, with no `Date` header.
    #[must_use]
    pub fn new(hint: Hint, received_at: SystemTime) -> Self {
        Pushback {
            hint,
            server_now: received_at,
            received_at,
            retry_authorized: true,
            body_replayable: true,
            server_said_do_not_retry: false,
            fallback_allowed: true,
            gated: true,
            rate_limit: None,
        }
    }

    /// A pushback for a response with `status` whose `Retry-After` said
    /// `hint`, and whose rate-limit headers gave `rate_limit`. A missing
    /// `Retry-After` falls back to the policy's [`Fallback`](crate::Fallback)
    /// whatever the status: a `503` without it is retried as a `429` is (as
    /// reqwest-retry, go-retryablehttp, Polly and the AWS SDKs do), and an
    /// outage stays bounded by the origin's gate.
    #[must_use]
    pub fn from_response(
        _status: http::StatusCode,
        hint: Hint,
        server_now: SystemTime,
        received_at: SystemTime,
        rate_limit: Option<Duration>,
    ) -> Self {
        Pushback {
            hint,
            server_now,
            received_at,
            retry_authorized: true,
            body_replayable: true,
            server_said_do_not_retry: false,
            fallback_allowed: true,
            gated: true,
            rate_limit,
        }
    }

    /// The delay the server's `Retry-After` asked for, if it gave a valid
    /// one (a past date is zero).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.hint.value().map(|v| v.delay_from(self.server_now))
    }

    /// The server's time: a valid `Retry-After` above zero wins; a missing
    /// or zero one gives way to a rate-limit reset above zero; a zero one
    /// with no later reset is zero. `None` when the server gave no usable
    /// time.
    #[must_use]
    pub fn server_delay(&self) -> Option<Duration> {
        let later_reset = self.rate_limit.filter(|d| !d.is_zero());
        match self.retry_after() {
            Some(d) if !d.is_zero() => Some(d),
            Some(zero) => Some(later_reset.unwrap_or(zero)),
            None => later_reset,
        }
    }

    /// The server's earliest retry time on the local wall clock, when it
    /// gave one (and it is representable).
    #[must_use]
    pub fn retry_at(&self) -> Option<SystemTime> {
        self.server_delay()
            .and_then(|d| self.received_at.checked_add(d))
    }
}
