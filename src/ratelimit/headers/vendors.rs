//! The vendors' header sets: GitHub, OpenAI, Anthropic, Discord (Shopify's
//! and Stripe's are in files of their own).

use http::StatusCode;
use http::header::HeaderName;

use super::{
    LimitSpec, RETRY_AFTER_MS, RateLimitHeaders, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
    X_RATELIMIT_RESET, X_RATELIMIT_RESET_AFTER,
};
use crate::ratelimit::hint::Unit;
use crate::ratelimit::reset::ResetFormat;

impl RateLimitHeaders {
    /// GitHub: `x-ratelimit-remaining` with `x-ratelimit-reset`
    /// ([`ResetFormat::EpochSeconds`](crate::ResetFormat::EpochSeconds)), and the quota `x-ratelimit-limit`
    /// (no window stated).
    ///
    /// GitHub answers both of its limits with `403` as well as `429`: its
    /// primary limit with `x-ratelimit-remaining: 0` and the reset, its
    /// secondary limit with a `retry-after` while quota is left. So `403`
    /// and `429` are declared with
    /// [`pushback_status_with_retry_after`](Self::pushback_status_with_retry_after):
    /// a pushback when the quota is exhausted (waited for until
    /// `x-ratelimit-reset`) or when the answer carries a valid
    /// `Retry-After` (waited for as the server's time). A `403` with
    /// neither is GitHub refusing the request itself, returned as it is.
    /// (GitHub asks a client that meets a secondary limit with neither to
    /// wait at least a minute; by its headers such an answer cannot be told
    /// apart from any other `403`.)
    #[must_use]
    pub fn github() -> Self {
        let mut headers = RateLimitHeaders::none();
        headers.push(LimitSpec::new(
            X_RATELIMIT_RESET,
            ResetFormat::EpochSeconds,
            Some(X_RATELIMIT_REMAINING),
            Some(X_RATELIMIT_LIMIT),
            Unit::Requests,
        ));
        headers.scoping.github = true;
        headers
            .pushback_status_with_retry_after(StatusCode::FORBIDDEN)
            .pushback_status_with_retry_after(StatusCode::TOO_MANY_REQUESTS)
    }

    /// OpenAI: `x-ratelimit-remaining-requests` with
    /// `x-ratelimit-reset-requests` and the quota
    /// `x-ratelimit-limit-requests`, and `x-ratelimit-remaining-tokens` with
    /// `x-ratelimit-reset-tokens` and the quota `x-ratelimit-limit-tokens`
    /// (both resets [`ResetFormat::GoDuration`](crate::ResetFormat::GoDuration); a token quota is never a
    /// [`RateLimitHint::limit`](crate::RateLimitHint::limit)), and `retry-after-ms`
    /// ([`ResetFormat::Millis`](crate::ResetFormat::Millis), no count).
    #[must_use]
    pub fn openai() -> Self {
        const RESET_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-reset-requests");
        const REMAINING_REQUESTS: HeaderName =
            HeaderName::from_static("x-ratelimit-remaining-requests");
        const LIMIT_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-limit-requests");
        const RESET_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-reset-tokens");
        const REMAINING_TOKENS: HeaderName =
            HeaderName::from_static("x-ratelimit-remaining-tokens");
        const LIMIT_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-limit-tokens");
        let mut headers = RateLimitHeaders::none();
        headers.push(LimitSpec::new(
            RESET_REQUESTS,
            ResetFormat::GoDuration,
            Some(REMAINING_REQUESTS),
            Some(LIMIT_REQUESTS),
            Unit::Requests,
        ));
        headers.push(LimitSpec::new(
            RESET_TOKENS,
            ResetFormat::GoDuration,
            Some(REMAINING_TOKENS),
            Some(LIMIT_TOKENS),
            Unit::Tokens,
        ));
        headers.reset_header(RETRY_AFTER_MS, ResetFormat::Millis, None)
    }

    /// Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,
    /// output-tokens}-remaining` with the matching `-reset`
    /// ([`ResetFormat::Rfc3339`](crate::ResetFormat::Rfc3339)) and the matching quota `-limit`, read as
    /// Anthropic documents them: each limit is a bucket refilled
    /// continuously at its limit per minute, and `-reset` is when it is
    /// *full* again, not when a window opens; token counts are rounded to
    /// the nearest thousand ([`TokenLimit::slack`](crate::TokenLimit::slack)
    /// 500).
    ///
    /// - The request limit: its count folds into
    ///   [`RateLimitHint::remaining`](crate::RateLimitHint::remaining); spent (0), it is waited for until
    ///   the next request's refill (the reset's share of one request), not
    ///   the whole refill; its size is no window's quota
    ///   ([`RateLimitHint::limit`](crate::RateLimitHint::limit) stays `None`).
    /// - The input-token limit is the [`RateLimitHint::tokens`](crate::RateLimitHint::tokens) a
    ///   [`Cost`](crate::Cost) is spent from
    ///   ([`TokenLimit::counts_input_only`](crate::TokenLimit::counts_input_only):
    ///   its input part); the combined `-tokens-` limit (the tighter of
    ///   input and output) stands in when it is absent. Token buckets take
    ///   no part in [`RateLimitHint::remaining`](crate::RateLimitHint::remaining) or
    ///   [`RateLimitHint::exhausted`](crate::RateLimitHint::exhausted): a bucket short of a request's tokens
    ///   refills them in a share of its reset, which the cost quota
    ///   computes.
    /// - The output-token limit is [`RateLimitHint::output_tokens`](crate::RateLimitHint::output_tokens): a
    ///   [`Cost`](crate::Cost)'s output part (`max_tokens`, from which
    ///   Anthropic estimates the output at the start of a message) is
    ///   reserved from it, and the answers' counts (adjusted by Anthropic
    ///   to what was produced) reconcile it.
    #[must_use]
    pub fn anthropic() -> Self {
        const LIMITS: [(&str, &str, &str, Unit, u64); 4] = [
            (
                "anthropic-ratelimit-requests-reset",
                "anthropic-ratelimit-requests-remaining",
                "anthropic-ratelimit-requests-limit",
                Unit::Requests,
                0,
            ),
            (
                "anthropic-ratelimit-tokens-reset",
                "anthropic-ratelimit-tokens-remaining",
                "anthropic-ratelimit-tokens-limit",
                Unit::Tokens,
                500,
            ),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "anthropic-ratelimit-input-tokens-remaining",
                "anthropic-ratelimit-input-tokens-limit",
                Unit::InputTokens,
                500,
            ),
            (
                "anthropic-ratelimit-output-tokens-reset",
                "anthropic-ratelimit-output-tokens-remaining",
                "anthropic-ratelimit-output-tokens-limit",
                Unit::OutputTokens,
                500,
            ),
        ];
        let mut headers = RateLimitHeaders::none();
        for (reset, remaining, limit, unit, slack) in LIMITS {
            headers.push(LimitSpec {
                bucket: true,
                slack,
                ..LimitSpec::new(
                    HeaderName::from_static(reset),
                    ResetFormat::Rfc3339,
                    Some(HeaderName::from_static(remaining)),
                    Some(HeaderName::from_static(limit)),
                    unit,
                )
            });
        }
        headers
    }

    /// Discord: `x-ratelimit-remaining` with `x-ratelimit-reset-after`
    /// ([`ResetFormat::Seconds`](crate::ResetFormat::Seconds), with decimals), or when that is missing or
    /// invalid, `x-ratelimit-reset` ([`ResetFormat::EpochSeconds`](crate::ResetFormat::EpochSeconds), with
    /// decimals) for the same limit, and the quota `x-ratelimit-limit` (no
    /// window stated).
    #[must_use]
    pub fn discord() -> Self {
        let mut headers = RateLimitHeaders::none();
        headers.push(LimitSpec {
            resets: vec![
                (X_RATELIMIT_RESET_AFTER, ResetFormat::Seconds),
                (X_RATELIMIT_RESET, ResetFormat::EpochSeconds),
            ],
            remaining: Some(X_RATELIMIT_REMAINING),
            limit: Some(X_RATELIMIT_LIMIT),
            unit: Unit::Requests,
            bucket: false,
            slack: 0,
        });
        headers.scoping.discord = true;
        headers
    }
}
