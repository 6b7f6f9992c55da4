//! Vendor presets: a [`Policy`] for one vendor's API, as the vendor
//! documents it.
//!
//! A preset is [`Policy::default()`] with the vendor's rate-limit headers
//! ([`RateLimitHeaders`]), pushback statuses and scope rules, and whatever
//! else the vendor's documentation fixes (an `Idempotency-Key` form, a
//! documented quota). Every setter still applies after it:
//! `Policy::github().max_attempts(5)`.

use super::Policy;
use crate::ratelimit::RateLimitHeaders;

impl Policy {
    /// GitHub's REST API: [`RateLimitHeaders::github`] (each resource of
    /// `x-ratelimit-resource` its own scope, `403` and `429` pushbacks).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::github().validate().is_ok());
    /// ```
    #[must_use]
    pub fn github() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::github())
    }

    /// Discord's HTTP API: [`RateLimitHeaders::discord`] (a bucket of
    /// each route, under the global limit of 50 requests a second).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::discord().validate().is_ok());
    /// ```
    #[must_use]
    pub fn discord() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::discord())
    }

    /// OpenAI's API: [`RateLimitHeaders::openai`] (requests and tokens,
    /// `retry-after-ms`).
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::openai().validate().is_ok());
    /// ```
    #[must_use]
    pub fn openai() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::openai())
    }

    /// Anthropic's API: [`RateLimitHeaders::anthropic`].
    ///
    /// ```
    /// use reqwest_backpressure::Policy;
    /// assert!(Policy::anthropic().validate().is_ok());
    /// ```
    #[must_use]
    pub fn anthropic() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::anthropic())
    }

    /// Shopify's REST Admin API on a standard plan:
    /// [`RateLimitHeaders::shopify`] (the call-limit header as a leaky
    /// bucket of the stated size leaking 2 requests a second, and its
    /// decimal `Retry-After`). For another plan's rate, set the headers
    /// after it: `Policy::shopify().rate_limit_headers(RateLimitHeaders::shopify_leaking(20))`
    /// (Plus).
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, RateLimitHeaders};
    /// assert!(Policy::shopify().validate().is_ok());
    /// let plus = Policy::shopify().rate_limit_headers(RateLimitHeaders::shopify_leaking(20));
    /// assert!(plus.validate().is_ok());
    /// ```
    #[must_use]
    pub fn shopify() -> Policy {
        Policy::default().rate_limit_headers(RateLimitHeaders::shopify())
    }
}
