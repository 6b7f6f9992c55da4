//! Stripe's preset: what its answers say beside the status (no rate-limit
//! header, no `Retry-After`), as Stripe documents them.

use http::header::HeaderName;
use http::{HeaderMap, StatusCode};

use super::{RateLimitHeaders, single};
use crate::ratelimit::reset::trim_ows;

const STRIPE_SHOULD_RETRY: HeaderName = HeaderName::from_static("stripe-should-retry");

impl RateLimitHeaders {
    /// Stripe: no rate-limit header (Stripe states neither a count nor a
    /// reset), and `Stripe-Should-Retry`, Stripe's word on whether one
    /// request may be retried, which its SDKs follow before anything else:
    ///
    /// - `false`: a pushback stops with `server_said_do_not_retry`, its
    ///   response returned as it is (the server knows the retry would not
    ///   help, say the request already had its effect);
    /// - `true`: an answer with any error status (`4xx`, `5xx`) is a
    ///   pushback, retried as a `429` without `Retry-After` is. Stripe sends
    ///   it where a retry is safe and useful: a `429` `lock_timeout` (the
    ///   object the request changes was busy), a `409` while another
    ///   request with the same idempotency key is running.
    ///
    /// A pushback carrying the field (either value) speaks for the object
    /// the request names, not for the origin: a `lock_timeout` holds that
    /// object's requests (a scope of its own, see
    /// [`Policy::stripe`](crate::Policy::stripe)), while the rest of the
    /// origin's requests keep their pace. Stripe's rate limiter answers
    /// `429` without it: a pushback of the origin. The field is read only
    /// as `true` or `false` (ASCII case ignored, on one field line);
    /// anything else is ignored.
    ///
    /// ```
    /// use http::{HeaderMap, HeaderValue, StatusCode};
    /// use reqwest_backpressure::{Policy, RateLimitHeaders};
    ///
    /// let policy = Policy::default().rate_limit_headers(RateLimitHeaders::stripe());
    /// let mut answer = HeaderMap::new();
    /// answer.insert("stripe-should-retry", HeaderValue::from_static("true"));
    /// let hint = RateLimitHeaders::stripe().read(&answer, std::time::UNIX_EPOCH);
    /// // Another request with the same key is running: retried.
    /// assert!(policy.is_pushback_response(StatusCode::CONFLICT, &hint, &answer));
    /// // A plain 409 is returned as it is.
    /// assert!(!policy.is_pushback_response(StatusCode::CONFLICT, &hint, &HeaderMap::new()));
    /// ```
    #[must_use]
    pub fn stripe() -> Self {
        let mut headers = RateLimitHeaders::none();
        headers.scoping.stripe = true;
        headers
    }

    /// What the server said of retrying this request, when these headers
    /// read a vendor's word on it (Stripe's `Stripe-Should-Retry`).
    pub(crate) fn server_says_retry(&self, headers: &HeaderMap) -> Option<bool> {
        if self.scoping.stripe {
            should_retry(headers)
        } else {
            None
        }
    }

    /// Whether the server said a retry of this answer, whatever its error
    /// status, is safe and useful (`Stripe-Should-Retry: true`).
    pub(crate) fn retry_invited(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        (status.is_client_error() || status.is_server_error())
            && self.server_says_retry(headers) == Some(true)
    }
}

/// Stripe's `Stripe-Should-Retry`: `true` or `false` (OWS trimmed, ASCII
/// case ignored); `None` when absent, sent on more than one field line, or
/// anything else.
pub(crate) fn should_retry(headers: &HeaderMap) -> Option<bool> {
    let value = trim_ows(single(headers, &STRIPE_SHOULD_RETRY)?);
    if value.eq_ignore_ascii_case(b"true") {
        Some(true)
    } else if value.eq_ignore_ascii_case(b"false") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn with(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(STRIPE_SHOULD_RETRY, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn should_retry_reads_true_and_false_only() {
        assert_eq!(should_retry(&with(&["true"])), Some(true));
        assert_eq!(should_retry(&with(&[" False "])), Some(false));
        assert_eq!(should_retry(&with(&[])), None);
        assert_eq!(should_retry(&with(&["yes"])), None);
        assert_eq!(should_retry(&with(&["1"])), None);
        assert_eq!(should_retry(&with(&["true", "true"])), None);
    }

    #[test]
    fn only_the_stripe_preset_reads_it() {
        let yes = with(&["true"]);
        assert_eq!(RateLimitHeaders::ietf().server_says_retry(&yes), None);
        let both = RateLimitHeaders::ietf().and(RateLimitHeaders::stripe());
        assert_eq!(both.server_says_retry(&yes), Some(true));
        assert!(both.retry_invited(StatusCode::CONFLICT, &yes));
        assert!(both.retry_invited(StatusCode::INTERNAL_SERVER_ERROR, &yes));
        assert!(!both.retry_invited(StatusCode::OK, &yes));
        assert!(!both.retry_invited(StatusCode::CONFLICT, &with(&["false"])));
    }
}
