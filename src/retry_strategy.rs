//! [`BackpressureStrategy`]: reqwest-retry kept off the pushbacks this
//! crate handles (feature `reqwest-retry`).
//!
//! Why? reqwest-retry's default strategy calls a `429` (and every `5xx`)
//! transient and resends it after its own backoff, before the server's
//! `Retry-After`, inside one attempt of ours: the server is hit again early,
//! and our middleware sees the pushback only once reqwest-retry gives up.
//! This strategy leaves every pushback to the middleware, so that no answer
//! is retried by both.

use http::StatusCode;
use reqwest_middleware::Error;
use reqwest_retry::{Retryable, RetryableStrategy};

use crate::policy::Policy;

/// A reqwest-retry [`RetryableStrategy`] for a
/// `reqwest_retry::RetryTransientMiddleware` placed *after* (inside) a
/// [`RetryAfterMiddleware`](crate::RetryAfterMiddleware): it leaves every
/// pushback to the middleware and lets reqwest-retry resend only what the
/// middleware never retries.
///
/// Transient (resent by reqwest-retry):
///
/// - a connection error (`reqwest::Error::is_connect`): the request never
///   reached the server, so resending it is safe whatever its method;
/// - a `5xx` status that is not a pushback status of the policy it was
///   built from: not one of [`Policy::statuses`] (`503` by default) nor a
///   status its [rate-limit headers](Policy::rate_limit_headers) declare
///   ([`RateLimitHeaders::pushback_statuses`](crate::RateLimitHeaders::pushback_statuses)).
///
/// Never transient: `429`, any status the policy retries or the
/// rate-limit headers declare (whatever its headers say: a `503` without
/// `Retry-After` is the middleware's too, which retries it through the
/// origin's gate; take `503` out of [`Policy::statuses`] to have
/// reqwest-retry resend it), any other `4xx`, and every other error:
/// a timeout or a connection cut after the request was written, whose
/// outcome is unknown (as the middleware, it does not guess), and errors of
/// the middlewares after it. A `1xx`–`3xx` answer is no failure (`None`).
///
/// reqwest-retry sees the answer, not the request: it resends a `5xx` of a
/// `POST` as readily as of a `GET`. Its resends happen inside one attempt
/// of ours: [`RetryReport::attempts`](crate::RetryReport::attempts) and
/// `max_attempts` count the middleware's sends only, and its backoff runs
/// within the task's deadline (an attempt still resending when it passes
/// ends with `attempt_timed_out`). It also refuses a request with a
/// streaming body before sending it (which the middleware alone would send
/// once).
///
/// Build it from the policy you give the middleware, so the two agree on
/// which statuses are pushbacks:
///
/// ```
/// use reqwest_backpressure::{BackpressureStrategy, Policy, RetryAfterMiddleware};
/// use reqwest_retry::RetryTransientMiddleware;
/// use reqwest_retry::policies::ExponentialBackoff;
///
/// let policy = Policy::default();
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     // Ours first (outermost): it sees every pushback and waits for it.
///     .with(RetryAfterMiddleware::new(policy.clone()))
///     // reqwest-retry inside it: connection errors and 5xx that are no pushback.
///     .with(RetryTransientMiddleware::new_with_policy_and_strategy(
///         ExponentialBackoff::builder().build_with_max_retries(2),
///         BackpressureStrategy::new(&policy),
///     ))
///     .build();
/// # drop(client);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackpressureStrategy {
    /// The `5xx` statuses that are pushbacks of the policy: never
    /// transient.
    pushbacks: Vec<StatusCode>,
}

impl BackpressureStrategy {
    /// The strategy for a middleware running `policy`: its
    /// [`statuses`](Policy::statuses) and the statuses its rate-limit
    /// headers declare are left to the middleware.
    #[must_use]
    pub fn new(policy: &Policy) -> Self {
        let mut pushbacks: Vec<StatusCode> = policy
            .statuses
            .iter()
            .chain(policy.rate_limit_headers.pushback_statuses())
            .copied()
            .filter(StatusCode::is_server_error)
            .collect();
        pushbacks.sort_unstable();
        pushbacks.dedup();
        BackpressureStrategy { pushbacks }
    }

    /// Whether reqwest-retry may resend an answer with `status`: a `5xx`
    /// that is not a pushback of the policy.
    #[must_use]
    pub fn is_transient_status(&self, status: StatusCode) -> bool {
        status.is_server_error() && !self.pushbacks.contains(&status)
    }
}

impl RetryableStrategy for BackpressureStrategy {
    fn handle(&self, res: &Result<reqwest::Response, Error>) -> Option<Retryable> {
        match res {
            Ok(response) => {
                let status = response.status();
                if self.is_transient_status(status) {
                    Some(Retryable::Transient)
                } else if status.is_client_error() || status.is_server_error() {
                    Some(Retryable::Fatal)
                } else {
                    None
                }
            }
            Err(Error::Reqwest(e)) if e.is_connect() => Some(Retryable::Transient),
            Err(_) => Some(Retryable::Fatal),
        }
    }
}
