//! Shopify's REST Admin API, as Shopify documents it: a leaky bucket per app
//! and store, its level and size stated on every answer
//! (`X-Shopify-Shop-Api-Call-Limit: 32/40`), leaking at the rate of the
//! store's plan (2 a second on the standard plans, 4 on Advanced, 20 on
//! Plus, 40 for enterprise; the rate is not stated), and a `429` that
//! carries `Retry-After: 2.0`, seconds written with a fraction.
//!
//! Why a bucket of the stated size at a declared rate, and not a window?
//! A bucket that leaks one request every `1 / rate` admits its size at
//! once and then one request per leak: read as a window renewed at its
//! "reset", its answers would hold the origin until the bucket is empty,
//! or renew it whole while it is still nearly full. So an origin whose
//! answers state the header is paced as a declared bucket
//! ([`Quota::refilled`](crate::Quota::refilled)) refilled at the declared
//! rate, its burst what the answer left free less one request of
//! headroom: a burst, then one request per leak, with no `429` to learn
//! it from.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::{HeaderName, RETRY_AFTER};

use super::{LimitSpec, RateLimitHeaders, single};
use crate::Quota;
use crate::ratelimit::hint::{Limit, Unit};
use crate::ratelimit::reset::{MAX_RATELIMIT_LEN, ResetFormat, trim_ows};

/// Shopify's call-limit header: `used/size` of the bucket.
const CALL_LIMIT: HeaderName = HeaderName::from_static("x-shopify-shop-api-call-limit");

/// A leaky bucket whose level and size the answers state, leaking at a
/// declared rate (Shopify's REST Admin API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LeakyBucket {
    /// Requests that leak out a second (0 makes the policy invalid).
    pub(crate) per_second: u32,
}

impl LeakyBucket {
    /// Of two, the slower: a client reading both never outruns either.
    pub(super) fn slower(self, other: LeakyBucket) -> LeakyBucket {
        LeakyBucket {
            per_second: self.per_second.min(other.per_second),
        }
    }

    /// The pace of a bucket stated to hold `used` of `size` requests
    /// `since` ago: a bucket refilled at the declared rate, its burst what
    /// is free of it now (what it held then, less what leaked since, in
    /// whole requests: never more), less one request of headroom (for
    /// arrivals a little out of the order or time they left in, and a
    /// count the server rounded down), at least one. The burst is capped
    /// at what a [`Quota`] can span ([`Quota::LONGEST_SPAN`]) and `u32`;
    /// the rate is kept, its span rounded up (never faster). `None` when
    /// the rate is 0 (a policy that declares it is invalid).
    ///
    /// The burst counts only where the pace starts (an origin's first
    /// answer, or the first after it was forgotten): from there the pace
    /// keeps its own count of what it sent.
    pub(crate) fn quota(self, size: u64, used: u64, since: Duration) -> Option<Quota> {
        let rate = u64::from(self.per_second);
        if rate == 0 {
            return None;
        }
        let leaked = since
            .as_secs()
            .saturating_mul(rate)
            .saturating_add(u64::from(since.subsec_nanos()).saturating_mul(rate) / 1_000_000_000);
        let held = used.saturating_sub(leaked);
        let longest = Quota::LONGEST_SPAN.as_secs().saturating_mul(rate);
        let burst = size
            .saturating_sub(held)
            .saturating_sub(1)
            .clamp(1, longest)
            .min(u64::from(u32::MAX));
        let count = u32::try_from(burst).ok()?;
        let nanos = u128::from(burst)
            .saturating_mul(1_000_000_000)
            .div_ceil(u128::from(rate));
        let per = Duration::from_nanos(u64::try_from(nanos).ok()?);
        Some(Quota::new(count, per).refilled())
    }
}

/// `used/size`: each `1*DIGIT` (ASCII, saturating), nothing between them
/// but the `/`, OWS trimmed around the whole; a size of 0 is no bucket.
fn call_limit(raw: &[u8]) -> Option<(u64, u64)> {
    if raw.len() > MAX_RATELIMIT_LEN {
        return None;
    }
    let value = trim_ows(raw);
    let slash = value.iter().position(|&b| b == b'/')?;
    let (used, size) = value.split_at_checked(slash)?;
    let number = |digits: &[u8]| {
        (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then(|| {
            digits.iter().fold(0u64, |acc, &d| {
                acc.saturating_mul(10)
                    .saturating_add(u64::from(d.wrapping_sub(b'0')))
            })
        })
    };
    let used = number(used)?;
    let size = number(size.get(1..)?)?;
    (size > 0).then_some((used, size))
}

/// The bucket a Shopify answer states, `(used, size)`, if it states one
/// (exactly one valid field line).
pub(crate) fn stated_bucket(headers: &HeaderMap) -> Option<(u64, u64)> {
    call_limit(single(headers, &CALL_LIMIT)?)
}

/// What a Shopify answer says of its bucket as a limit: the requests left
/// before it is full, and its size. No reset: it leaks all the time, so a
/// full bucket is no quota spent until a time (the declared pace keeps
/// within it; a `429` names its own time).
pub(super) fn read(headers: &HeaderMap) -> Option<Limit> {
    let (used, size) = call_limit(single(headers, &CALL_LIMIT)?)?;
    Some(Limit {
        quota: Some(size),
        unit: Unit::Requests,
        ..Limit::new(Some(size.saturating_sub(used)), None)
    })
}

impl RateLimitHeaders {
    /// Shopify's REST Admin API on a standard plan: its bucket leaking 2
    /// requests a second. See [`shopify_leaking`](Self::shopify_leaking).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use http::{HeaderMap, HeaderValue};
    /// use reqwest_backpressure::RateLimitHeaders;
    ///
    /// let mut answer = HeaderMap::new();
    /// answer.insert("x-shopify-shop-api-call-limit", HeaderValue::from_static("32/40"));
    /// let hint = RateLimitHeaders::shopify().read(&answer, UNIX_EPOCH);
    /// assert_eq!(hint.remaining(), Some(8));
    /// assert_eq!(hint.limit(), Some(40));
    /// // A bucket leaks all the time: a full one is not a spent quota.
    /// answer.insert("x-shopify-shop-api-call-limit", HeaderValue::from_static("40/40"));
    /// assert!(!RateLimitHeaders::shopify().read(&answer, UNIX_EPOCH).exhausted());
    ///
    /// // Its `429`: `Retry-After: 2.0`, read as at most 2.1 s.
    /// answer.insert("retry-after", HeaderValue::from_static("2.0"));
    /// let hint = RateLimitHeaders::shopify().read(&answer, UNIX_EPOCH);
    /// assert_eq!(hint.retry_in(), Some(Duration::from_millis(2100)));
    /// ```
    #[must_use]
    pub fn shopify() -> Self {
        RateLimitHeaders::shopify_leaking(2)
    }

    /// Shopify's REST Admin API on a plan whose bucket leaks `per_second`
    /// requests a second (Shopify documents 2 on the standard plans, 4 on
    /// Advanced, 20 on Plus, 40 for enterprise; its answers state the
    /// bucket's size, not its rate).
    ///
    /// - `X-Shopify-Shop-Api-Call-Limit: used/size`: the requests left
    ///   before the bucket is full ([`RateLimitHint::remaining`](crate::RateLimitHint::remaining))
    ///   and its size ([`RateLimitHint::limit`](crate::RateLimitHint::limit)),
    ///   with no reset: the bucket leaks all the time. Once an origin
    ///   answered with it, requests to it leave as from a declared bucket
    ///   ([`Quota::refilled`](crate::Quota::refilled)) refilled at
    ///   `per_second`: a burst of what the answer left free (less what
    ///   has leaked since), less one request of headroom (for requests
    ///   that arrive a little out of the time they left at), then one
    ///   request per leak. A [`Policy::quota`](crate::Policy::quota)
    ///   declared for the origin replaces it. Until the first answer, the
    ///   other requests wait for it ([`Policy::first_contact`](crate::Policy::first_contact)).
    /// - `Retry-After`, in Shopify's documented format: seconds, with a
    ///   fraction (`2.0`), read as its upper bound (one unit of its last
    ///   digit later: `2.0` is 2.1 s, `2.000` is 2.001 s), never earlier,
    ///   as the server's time for the retry and for its origin's gate. A
    ///   value the strict [`Hint`](crate::Hint) parser reads (`2`) is read
    ///   by it as ever; one that neither reads still stops its task with
    ///   `invalid_retry_after`. Only under these headers: everywhere
    ///   else the strict parser alone reads `Retry-After`.
    ///
    /// A `per_second` of 0 makes a policy that reads these headers invalid
    /// ([`InvalidPolicy::Quota`](crate::InvalidPolicy::Quota)). Combined
    /// with another Shopify set ([`and`](Self::and)), the slower rate
    /// binds.
    ///
    /// ```
    /// use reqwest_backpressure::{Policy, RateLimitHeaders};
    ///
    /// // A Shopify Plus store: 20 requests a second.
    /// let plus = Policy::default().rate_limit_headers(RateLimitHeaders::shopify_leaking(20));
    /// assert!(plus.validate().is_ok());
    /// let never = Policy::default().rate_limit_headers(RateLimitHeaders::shopify_leaking(0));
    /// assert!(never.validate().is_err());
    /// ```
    #[must_use]
    pub fn shopify_leaking(per_second: u32) -> Self {
        let mut headers = RateLimitHeaders::none();
        headers.push(LimitSpec::new(
            RETRY_AFTER,
            ResetFormat::Seconds,
            None,
            None,
            Unit::Requests,
        ));
        headers.bucket = Some(LeakyBucket { per_second });
        headers
    }

    /// The leaky bucket these headers read, if any.
    pub(crate) fn leaky_bucket(&self) -> Option<LeakyBucket> {
        self.bucket
    }

    /// A `Retry-After` the strict parser refuses, read in a format these
    /// headers declare for it (Shopify's `2.0`: a vendor's documented
    /// format, not garbage), as the delay from `server_now` to its upper
    /// bound (see [`read`](Self::read)). Exactly one field line, as for the
    /// strict parser; `None` when no declared format reads it.
    pub(crate) fn vendor_retry_after(
        &self,
        headers: &HeaderMap,
        server_now: SystemTime,
    ) -> Option<Duration> {
        let value = std::str::from_utf8(single(headers, &RETRY_AFTER)?).ok()?;
        self.limits
            .iter()
            .flat_map(|spec| &spec.resets)
            .filter(|(name, _)| *name == RETRY_AFTER)
            .find_map(|(_, format)| super::upper_bound(value, *format, server_now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_limit_is_used_slash_size_and_nothing_else() {
        assert_eq!(call_limit(b"32/40"), Some((32, 40)));
        assert_eq!(call_limit(b" 0/400\t"), Some((0, 400)));
        assert_eq!(call_limit(b"41/40"), Some((41, 40)));
        for bad in [
            &b"32 /40"[..],
            b"32/ 40",
            b"32/0",
            b"/40",
            b"32/",
            b"32",
            b"32/40/1",
            b"-1/40",
            b"3.2/40",
            b"",
        ] {
            assert_eq!(call_limit(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let huge = format!("1/{}", "9".repeat(40));
        assert_eq!(call_limit(huge.as_bytes()), Some((1, u64::MAX)));
        assert_eq!(call_limit("1/".repeat(600).as_bytes()), None);
    }

    #[test]
    fn a_full_bucket_has_nothing_left_and_no_reset() {
        let mut h = HeaderMap::new();
        h.insert(CALL_LIMIT, http::HeaderValue::from_static("41/40"));
        let limit = read(&h).map(|l| (l.remaining, l.reset, l.quota));
        assert_eq!(limit, Some((Some(0), None, Some(40))));
        h.append(CALL_LIMIT, http::HeaderValue::from_static("1/40"));
        assert_eq!(read(&h), None, "two counts: which is the real one?");
    }

    #[test]
    fn only_a_declared_format_reads_a_retry_after_the_strict_parser_refuses() {
        let answer = |values: &[&'static str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(RETRY_AFTER, http::HeaderValue::from_static(v));
            }
            h
        };
        let now = SystemTime::UNIX_EPOCH;
        let shopify = RateLimitHeaders::shopify();
        let read = |values| shopify.vendor_retry_after(&answer(values), now);
        // Its upper bound: one unit of its last digit later.
        assert_eq!(read(&["2.0"]), Some(Duration::from_millis(2100)));
        assert_eq!(read(&["2.000"]), Some(Duration::from_millis(2001)));
        assert_eq!(read(&[" 0.5 "]), Some(Duration::from_millis(600)));
        assert_eq!(read(&["2"]), Some(Duration::from_secs(2)));
        for refused in [&["soon"][..], &["2.0", "2.0"], &["-2.0"], &["2e0"], &[]] {
            assert_eq!(read(refused), None, "{refused:?}");
        }
        // Everywhere else, the strict parser alone reads it.
        for other in [
            RateLimitHeaders::ietf(),
            RateLimitHeaders::discord(),
            RateLimitHeaders::openai(),
            RateLimitHeaders::none(),
        ] {
            assert_eq!(other.vendor_retry_after(&answer(&["2.0"]), now), None);
        }
        let both = RateLimitHeaders::ietf().and(shopify.clone());
        assert_eq!(
            both.vendor_retry_after(&answer(&["2.0"]), now),
            Some(Duration::from_millis(2100))
        );
    }

    #[test]
    fn combined_buckets_leak_at_the_slower_rate() {
        let both = RateLimitHeaders::shopify_leaking(20).and(RateLimitHeaders::shopify());
        assert_eq!(both.leaky_bucket(), Some(LeakyBucket { per_second: 2 }));
        let one = RateLimitHeaders::ietf().and(RateLimitHeaders::shopify_leaking(20));
        assert_eq!(one.leaky_bucket(), Some(LeakyBucket { per_second: 20 }));
        assert_eq!(RateLimitHeaders::ietf().leaky_bucket(), None);
        assert!(!RateLimitHeaders::shopify().is_empty());
        // No scopes: one bucket per app and store, the origin's.
        assert_eq!(
            RateLimitHeaders::shopify().scoping(),
            super::super::Scoping::default()
        );
    }

    #[test]
    fn the_pace_is_what_is_free_less_one_at_the_declared_rate() {
        let two = LeakyBucket { per_second: 2 };
        let pace = |size, used, since| {
            two.quota(size, used, since)
                .map(|q| (q.count(), q.per(), q.is_refilled()))
        };
        // An empty bucket: its size less one.
        assert_eq!(
            pace(40, 0, Duration::ZERO),
            Some((39, Duration::from_millis(19_500), true))
        );
        // 31 held: 8 at once. Leaked since: 1.4 s at 2 a second is 2
        // whole requests (never more), so 10.
        assert_eq!(pace(40, 31, Duration::ZERO).map(|p| p.0), Some(8));
        assert_eq!(
            pace(40, 31, Duration::from_millis(1400)).map(|p| p.0),
            Some(10)
        );
        assert_eq!(
            pace(40, 31, Duration::from_secs(3600)).map(|p| p.0),
            Some(39)
        );
        // Full, or over: one at a time.
        assert_eq!(pace(40, 40, Duration::ZERO).map(|p| p.0), Some(1));
        assert_eq!(pace(40, 41, Duration::ZERO).map(|p| p.0), Some(1));
        assert_eq!(pace(1, 0, Duration::ZERO).map(|p| p.0), Some(1));
        // A rate that does not divide a nanosecond: the span rounds up.
        let three = LeakyBucket { per_second: 3 };
        let q = three.quota(3, 0, Duration::ZERO).map(|q| q.per());
        assert_eq!(q, Some(Duration::from_nanos(666_666_667)));
        // Any size and time the header and clock can give: a usable quota.
        for size in [u64::MAX, u64::from(u32::MAX) + 7, 1 << 40] {
            for rate in [1, u32::MAX] {
                let q = LeakyBucket { per_second: rate }.quota(size, 3, Duration::MAX);
                assert!(
                    q.is_some_and(|q| q.per() <= Quota::LONGEST_SPAN && !q.per().is_zero()),
                    "{size}"
                );
            }
        }
        assert_eq!(
            LeakyBucket { per_second: 0 }.quota(40, 0, Duration::ZERO),
            None
        );
    }
}
