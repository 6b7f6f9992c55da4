//! What a policy decides: which answers are pushbacks, whether it is usable
//! (validated once), and its limits as plain values.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

use super::Policy;
use crate::origin::PacingConfig;
use crate::quota::{Quota, Target, most_specific};
use crate::ratelimit::RateLimitHint;
use crate::retry_after::Hint;

impl Policy {
    /// Whether a response with `status` is a pushback, given only whether
    /// its rate-limit headers said the quota is `exhausted`: one of
    /// [`statuses`](Self::statuses), or a status the rate-limit headers
    /// declare, with the quota exhausted. It does not see the answer's
    /// `Retry-After`, which makes a status declared with
    /// [`RateLimitHeaders::pushback_status_with_retry_after`](crate::RateLimitHeaders::pushback_status_with_retry_after) (GitHub's
    /// `403`) a pushback too: the middleware decides with
    /// [`is_pushback_response`](Self::is_pushback_response).
    #[must_use]
    pub fn is_pushback(&self, status: StatusCode, exhausted: bool) -> bool {
        self.is_retry_status(status)
            || (exhausted
                && self
                    .rate_limit_headers
                    .pushback_statuses()
                    .contains(&status))
    }

    /// Whether an answer is a pushback, as the middleware decides it: its
    /// `status` is one of [`statuses`](Self::statuses); or the rate-limit
    /// headers declare it and `rate_limit` (what they read on this answer)
    /// says the quota is exhausted; or they declare it with
    /// [`RateLimitHeaders::pushback_status_with_retry_after`](crate::RateLimitHeaders::pushback_status_with_retry_after) and the
    /// answer's `headers` carry a valid `Retry-After`; or, with
    /// [`RateLimitHeaders::stripe`](crate::RateLimitHeaders::stripe), the
    /// status is an error and the server invites a retry
    /// (`Stripe-Should-Retry: true`).
    ///
    /// Any other answer is returned as it is and never retried: its
    /// [`RetryReport`](crate::RetryReport) counts the attempts and names
    /// no stop reason. `Retry-After` is parsed only when it decides.
    ///
    /// ```
    /// use http::{HeaderMap, HeaderValue, StatusCode};
    /// use reqwest_backpressure::{Policy, RateLimitHeaders};
    ///
    /// let github = RateLimitHeaders::github();
    /// let policy = Policy::default().rate_limit_headers(github.clone());
    /// let now = std::time::UNIX_EPOCH;
    /// // GitHub's secondary rate limit: quota left, and a `retry-after`.
    /// let mut secondary = HeaderMap::new();
    /// secondary.insert("x-ratelimit-remaining", HeaderValue::from_static("4987"));
    /// secondary.insert("retry-after", HeaderValue::from_static("60"));
    /// let hint = github.read(&secondary, now);
    /// assert!(policy.is_pushback_response(StatusCode::FORBIDDEN, &hint, &secondary));
    /// // A 403 refusing the request itself.
    /// let mut refused = HeaderMap::new();
    /// refused.insert("x-ratelimit-remaining", HeaderValue::from_static("4987"));
    /// let hint = github.read(&refused, now);
    /// assert!(!policy.is_pushback_response(StatusCode::FORBIDDEN, &hint, &refused));
    /// ```
    #[must_use]
    pub fn is_pushback_response(
        &self,
        status: StatusCode,
        rate_limit: &RateLimitHint,
        headers: &HeaderMap,
    ) -> bool {
        if self.is_pushback(status, rate_limit.exhausted())
            || self.rate_limit_headers.retry_invited(status, headers)
        {
            return true;
        }
        self.rate_limit_headers
            .retry_after_statuses()
            .contains(&status)
            && Hint::from_headers(headers).value().is_some()
    }

    /// The settings of a limit's gate and pace: the origin's, or one
    /// scope's of it (`key` as [`limit_key`](crate::scope::key::limit_key)
    /// writes it), with the quotas declared for it.
    pub(crate) fn pacing_config(&self, key: &str) -> PacingConfig {
        let (origin, scope) = crate::scope::key::split(key);
        let declared = |units| match scope {
            None => self.declared_quota(origin, units),
            Some(scope) => self.scopes.quota(origin, scope, units),
        };
        PacingConfig {
            gate: self.origin_gate,
            pace: self.origin_gate && self.pacing,
            max_gate: self.max_wait,
            first_contact: self.first_contact,
            declared: declared(false),
            declared_units: declared(true),
        }
    }

    /// The quota declared for `origin` in requests (with `units`: in cost
    /// units): for its URL, else for its host, else for `*`.
    fn declared_quota(&self, origin: &str, units: bool) -> Option<Quota> {
        if self.quotas.iter().all(|(_, q)| q.is_units() != units) {
            return None;
        }
        most_specific(
            self.quotas
                .iter()
                .filter(|(_, q)| q.is_units() == units)
                .map(|(t, q)| (t, *q)),
            origin,
        )
    }

    /// The cap on requests in flight declared for `origin`.
    pub(crate) fn declared_in_flight(&self, origin: &str) -> Option<u32> {
        declared_for(&self.in_flight, origin)
    }

    /// Checks that the limits are usable and consistent.
    pub fn validate(&self) -> Result<(), InvalidPolicy> {
        use InvalidPolicy as E;
        if self.max_attempts == 0 {
            return Err(E::ZeroAttempts);
        }
        if self.max_wait.is_zero() {
            return Err(E::ZeroBudget("max_wait"));
        }
        if self.max_total_wait.is_zero() {
            return Err(E::ZeroBudget("max_total_wait"));
        }
        if self.default_deadline.is_zero() {
            return Err(E::ZeroBudget("default_deadline"));
        }
        if self.max_wait > self.max_total_wait {
            return Err(E::Inconsistent("max_wait exceeds max_total_wait"));
        }
        if self.send_reserve >= self.default_deadline {
            return Err(E::Inconsistent(
                "send_reserve leaves nothing of default_deadline",
            ));
        }
        self.retry_budget.validate().map_err(E::Inconsistent)?;
        if self.statuses.is_empty() {
            return Err(E::NoStatuses);
        }
        if let Some(s) = self
            .statuses
            .iter()
            .find(|s| !(s.is_client_error() || s.is_server_error()))
        {
            return Err(E::NotAnErrorStatus(s.as_u16()));
        }
        for (target, n) in &self.in_flight {
            if *target == Target::Invalid {
                return Err(E::Quota(
                    "a cap's origin is neither scheme://host[:port], a host, nor *",
                ));
            }
            if *n == 0 {
                return Err(E::Quota("a cap on requests in flight must be at least 1"));
            }
        }
        for (target, quota) in &self.quotas {
            if *target == Target::Invalid {
                return Err(E::Quota(
                    "a declared quota's origin is neither scheme://host[:port], a host, nor *",
                ));
            }
            if let Some(why) = quota.invalid() {
                return Err(E::Quota(why));
            }
        }
        if self
            .rate_limit_headers
            .leaky_bucket()
            .is_some_and(|bucket| bucket.per_second == 0)
        {
            return Err(E::Quota(
                "a leaky bucket must leak at least 1 request a second (RateLimitHeaders::shopify_leaking)",
            ));
        }
        if let Some(why) = self.scopes.invalid() {
            return Err(E::Scope(why));
        }
        Ok(())
    }

    /// Whether `status` is one of the push-back statuses.
    #[must_use]
    pub fn is_retry_status(&self, status: StatusCode) -> bool {
        self.statuses.contains(&status)
    }

    /// The policy's limits, read back (the setters of the same names
    /// consume the policy, so the values are read through this view).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// let limits = Policy::default().max_attempts(4).limits();
    /// assert_eq!(limits.max_attempts, 4);
    /// ```
    #[doc(hidden)]
    #[must_use]
    pub fn limits(&self) -> Limits {
        Limits {
            max_attempts: self.max_attempts,
            max_wait: self.max_wait,
            max_total_wait: self.max_total_wait,
            default_deadline: self.default_deadline,
            jitter: self.jitter,
            send_reserve: self.send_reserve,
        }
    }
}

/// The limits of a [`Policy`], from [`Policy::limits`]: plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Most sends for one task, counting the first.
    pub max_attempts: u32,
    /// The longest single server delay a task accepts.
    pub max_wait: Duration,
    /// The most time one task may spend waiting (jitter not counted).
    pub max_total_wait: Duration,
    /// The deadline of a task whose request carries no `Deadline`.
    pub default_deadline: Duration,
    /// Upper bound of the jitter added to each wait.
    pub jitter: Duration,
    /// Time kept free before the deadline for the retry itself.
    pub send_reserve: Duration,
}

/// A [`Policy`] that cannot be used, found by [`Policy::validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidPolicy {
    /// `max_attempts` is 0: not even the first send would be allowed.
    #[error("max_attempts must be at least 1")]
    ZeroAttempts,
    /// A budget that must be positive is zero.
    #[error("{0} must be greater than zero")]
    ZeroBudget(&'static str),
    /// Two limits contradict each other.
    #[error("inconsistent policy: {0}")]
    Inconsistent(&'static str),
    /// No push-back status is configured.
    #[error("statuses must name at least one status")]
    NoStatuses,
    /// A configured status is not 4xx or 5xx.
    #[error("status {0} is not a 4xx or 5xx status")]
    NotAnErrorStatus(u16),
    /// A declared quota cannot be used.
    #[error("invalid quota: {0}")]
    Quota(&'static str),
    /// A declared scope cannot be used.
    #[error("invalid scope: {0}")]
    Scope(&'static str),
}

/// What is declared for `origin` in `declared`: for its URL, else for its
/// host, else for `*` (the latest declaration of each).
fn declared_for<T: Copy>(declared: &[(Target, T)], origin: &str) -> Option<T> {
    most_specific(declared.iter().map(|(t, v)| (t, *v)), origin)
}
