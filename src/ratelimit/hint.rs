//! What one response's rate-limit headers said, several limits folded into
//! one answer.

use std::time::Duration;

/// One limit read from the headers: how much quota is left, and when it
/// comes back. At least one of the two is present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limit {
    pub(crate) remaining: Option<u64>,
    pub(crate) reset: Option<Duration>,
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
///   `retry-after-ms`).
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

    /// PLACEHOLDER until the parser lands.
    #[must_use]
    pub fn limit(&self) -> Option<u64> {
        None
    }

    /// PLACEHOLDER until the parser lands.
    #[must_use]
    pub fn window(&self) -> Option<std::time::Duration> {
        None
    }

    /// PLACEHOLDER until the parser lands.
    #[must_use]
    pub fn concurrency(&self) -> Option<u64> {
        None
    }

    /// Whether the headers gave no usable limit at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == RateLimitHint::default()
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
}

impl Fold {
    pub(crate) fn push(&mut self, limit: Limit) {
        let Limit { remaining, reset } = limit;
        self.latest_reset = self.latest_reset.max(reset);
        if let Some(count) = remaining {
            self.min = match self.min {
                Some((min, min_reset)) if min < count => Some((min, min_reset)),
                Some((min, min_reset)) if min == count => Some((min, min_reset.max(reset))),
                _ => Some((count, reset)),
            };
        }
        if matches!(remaining, None | Some(0)) {
            self.retry_in = self.retry_in.max(reset);
        }
        if remaining == Some(0) {
            self.exhausted_reset = self.exhausted_reset.max(reset);
        }
    }

    pub(crate) fn finish(self) -> RateLimitHint {
        let reset = match (self.exhausted_reset, self.min) {
            (Some(r), _) => Some(r),
            (None, Some((_, r))) => r,
            (None, None) => self.latest_reset,
        };
        RateLimitHint {
            remaining: self.min.map(|(count, _)| count),
            reset,
            exhausted: self.exhausted_reset.is_some(),
            retry_in: self.retry_in,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(limits: &[(Option<u64>, Option<u64>)]) -> RateLimitHint {
        let mut f = Fold::default();
        for &(remaining, reset) in limits {
            f.push(Limit {
                remaining,
                reset: reset.map(Duration::from_secs),
            });
        }
        f.finish()
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
}
