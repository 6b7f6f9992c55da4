//! The strict `Retry-After` parser (RFC 9110 §10.2.3).
//!
//! Why strict? A client that guesses what a malformed value meant either
//! hammers the server (guessing too short) or stalls forever (guessing too
//! long). Anything that is not exactly `delay-seconds` or one of the three
//! HTTP-date formats a recipient must accept is [`InvalidRetryAfter`], and the
//! planner stops on it (`invalid_retry_after`) instead of inventing a delay.
//!
//! This module reads no clock: a date is turned into a delay against a time
//! the caller passes in.

use std::fmt;
use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::{DATE, RETRY_AFTER};

/// Longest `Retry-After` value accepted, in bytes. The longest valid value
/// (an RFC 850 date with a long weekday) is 33 bytes; 128 leaves room for
/// leading zeros while refusing to process garbage of any size.
pub const MAX_RETRY_AFTER_LEN: usize = 128;

/// A valid `Retry-After` value.
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use reqwest_backpressure::{parse_retry_after, RetryAfter};
///
/// assert_eq!(parse_retry_after("120").unwrap(), RetryAfter::Delay(Duration::from_secs(120)));
/// let at = parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
/// let now = UNIX_EPOCH + Duration::from_secs(784_111_777 - 10);
/// assert_eq!(at.delay_from(now), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryAfter {
    /// `delay-seconds`: wait this long after the response was received.
    /// A value too large to represent saturates to an enormous delay that no
    /// budget accepts.
    Delay(Duration),
    /// An HTTP-date: do not retry before this instant (on the server's clock).
    At(SystemTime),
}

impl RetryAfter {
    /// The delay this value asks for, measured from `now`; a date in the past
    /// is a zero delay.
    #[must_use]
    pub fn delay_from(&self, now: SystemTime) -> Duration {
        match *self {
            RetryAfter::Delay(d) => d,
            RetryAfter::At(at) => at.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

/// Why a `Retry-After` value was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The value is empty (or only whitespace).
    Empty,
    /// The value is longer than [`MAX_RETRY_AFTER_LEN`] bytes.
    TooLong,
    /// The value holds a byte that is not visible ASCII (or SP/HTAB).
    NonAscii,
    /// The value is neither `1*DIGIT` nor an accepted HTTP-date.
    Malformed,
    /// The response carried more than one `Retry-After` field line.
    MultipleFields,
}

/// A `Retry-After` value that is not valid; see [`InvalidReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub struct InvalidRetryAfter {
    reason: InvalidReason,
    /// What a malformed value still reads as: a plain decimal number of
    /// seconds, as its upper bound (see [`decimal_seconds`](Self::decimal_seconds)).
    decimal_seconds: Option<Duration>,
}

impl InvalidRetryAfter {
    pub(crate) fn new(reason: InvalidReason) -> Self {
        InvalidRetryAfter {
            reason,
            decimal_seconds: None,
        }
    }

    /// A malformed `value` (trimmed), with what it still reads as a plain
    /// decimal number of seconds.
    fn malformed(value: &str) -> Self {
        InvalidRetryAfter {
            reason: InvalidReason::Malformed,
            decimal_seconds: crate::ratelimit::decimal_seconds(value),
        }
    }

    /// What the value still reads as when it is a plain decimal number of
    /// seconds (`2.0`, as Shopify sends; `1.25`): its upper bound, one
    /// unit of its last digit later (2.1 s; 1.26 s), never earlier. `None`
    /// for anything else (a sign, an exponent, a date in another format).
    /// This is never the time the task that met it retries at (it stops
    /// with `invalid_retry_after`, the value is not guessed at): only the
    /// origin's gate holds the other requests at least this long.
    pub(crate) fn decimal_seconds(&self) -> Option<Duration> {
        self.decimal_seconds
    }

    /// What was wrong with the value.
    #[must_use]
    pub fn reason(&self) -> InvalidReason {
        self.reason
    }
}

impl fmt::Display for InvalidRetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.reason {
            InvalidReason::Empty => "empty value",
            InvalidReason::TooLong => "value longer than 128 bytes",
            InvalidReason::NonAscii => "value with a byte that is not visible ASCII",
            InvalidReason::Malformed => "neither delay-seconds nor an HTTP-date",
            InvalidReason::MultipleFields => "more than one Retry-After field line",
        };
        write!(f, "invalid Retry-After: {what}")
    }
}

/// Parses one `Retry-After` field value.
///
/// Accepts `delay-seconds` (`1*DIGIT`, ASCII digits only, leading zeros
/// allowed) and the three HTTP-date formats RFC 9110 §5.6.7 requires
/// recipients to accept (IMF-fixdate, obsolete RFC 850, asctime). Optional
/// whitespace (SP / HTAB) around the value is ignored. Signs, fractions,
/// exponents, inner whitespace, Unicode digits, other date formats, empty
/// values, non-ASCII bytes and values over 128 bytes are rejected.
///
/// Never panics and never overflows: `delay-seconds` too large for a `u64`
/// saturate to an enormous delay. Dates before 1970 are invalid (no server
/// means them; the task stops rather than guess). An RFC 850 two-digit year
/// is read as 1970–2069, without consulting a clock.
///
/// ```
/// use reqwest_backpressure::parse_retry_after;
/// assert!(parse_retry_after("1.5").is_err());
/// assert!(parse_retry_after("-1").is_err());
/// assert!(parse_retry_after("٣").is_err()); // an Arabic-Indic digit
/// assert!(parse_retry_after("000000000000000000000000000042").is_ok());
/// ```
pub fn parse_retry_after(value: &str) -> Result<RetryAfter, InvalidRetryAfter> {
    parse_bytes(value.as_bytes())
}

fn parse_bytes(raw: &[u8]) -> Result<RetryAfter, InvalidRetryAfter> {
    if raw.len() > MAX_RETRY_AFTER_LEN {
        return Err(InvalidRetryAfter::new(InvalidReason::TooLong));
    }
    let value = trim_ows(raw);
    if value.is_empty() {
        return Err(InvalidRetryAfter::new(InvalidReason::Empty));
    }
    // Visible ASCII and inner SP only: no controls, no HTAB inside, no
    // obs-text. This also keeps the date parser away from anything it might
    // trim or interpret on its own.
    if !value.iter().all(|&b| b == b' ' || b.is_ascii_graphic()) {
        return Err(InvalidRetryAfter::new(InvalidReason::NonAscii));
    }
    if value.iter().all(u8::is_ascii_digit) {
        let secs = value.iter().fold(0u64, |acc, &d| {
            acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
        });
        return Ok(RetryAfter::Delay(Duration::from_secs(secs)));
    }
    let text =
        std::str::from_utf8(value).map_err(|_| InvalidRetryAfter::new(InvalidReason::NonAscii))?;
    parse_date(text)
        .map(RetryAfter::At)
        .ok_or_else(|| InvalidRetryAfter::malformed(text))
}

/// An HTTP-date in one of the three formats, through httpdate, with two
/// gaps of httpdate 1.0.3 closed (both found by the fuzz harness): the
/// byte between an RFC 850 date's year and its hour must be SP (httpdate
/// never looks at it), and a leap second (`:60`, which RFC 9110 §5.6.7
/// allows) is the next minute's `:00` (httpdate refuses it).
fn parse_date(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    // Only RFC 850 dates have a '-': `06-Nov-94 08:49:37`.
    if let Some(dash) = text.rfind('-')
        && bytes.get(dash + 3) != Some(&b' ')
    {
        return None;
    }
    // `HH:MM:60`: the seconds field is the third of `2DIGIT ":" 2DIGIT ":" 2DIGIT`.
    let leap = (5..bytes.len().saturating_sub(2)).find(|&i| {
        bytes[i..i + 3] == *b":60"
            && bytes[i - 5..i].iter().enumerate().all(|(k, b)| {
                if k == 2 {
                    *b == b':'
                } else {
                    b.is_ascii_digit()
                }
            })
            && bytes.get(i + 3).is_none_or(|b| !b.is_ascii_digit())
    });
    match leap {
        None => httpdate::parse_http_date(text).ok(),
        Some(i) => {
            let mut fixed = text.to_owned();
            fixed.replace_range(i + 1..i + 3, "59");
            httpdate::parse_http_date(&fixed)
                .ok()?
                .checked_add(Duration::from_secs(1))
        }
    }
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// What a response said about when to retry, before any policy is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// No `Retry-After` field.
    Missing,
    /// `delay-seconds`.
    Delay(Duration),
    /// An HTTP-date.
    At(SystemTime),
    /// A `Retry-After` that is present but invalid: never guessed at; its
    /// task stops with `invalid_retry_after`. Its pushback still closes
    /// the origin's gate, for a hold of our own as for a missing one, or,
    /// when longer, for what a malformed value still reads as a plain
    /// decimal number of seconds (`2.0`), as its upper bound (one unit of
    /// its last digit later: 2.1 s), at most `max_wait`: the other tasks
    /// are held past the time the server named, never sent into it.
    Invalid(InvalidRetryAfter),
}

impl Hint {
    /// Reads the `Retry-After` field of a response's headers. More than one
    /// field line is [`InvalidReason::MultipleFields`].
    #[must_use]
    pub fn from_headers(headers: &HeaderMap) -> Hint {
        let mut values = headers.get_all(RETRY_AFTER).iter();
        let Some(first) = values.next() else {
            return Hint::Missing;
        };
        if values.next().is_some() {
            return Hint::Invalid(InvalidRetryAfter::new(InvalidReason::MultipleFields));
        }
        match parse_bytes(first.as_bytes()) {
            Ok(RetryAfter::Delay(d)) => Hint::Delay(d),
            Ok(RetryAfter::At(t)) => Hint::At(t),
            Err(e) => Hint::Invalid(e),
        }
    }

    /// The valid value, if the field was present and valid.
    #[must_use]
    pub fn value(&self) -> Option<RetryAfter> {
        match *self {
            Hint::Delay(d) => Some(RetryAfter::Delay(d)),
            Hint::At(t) => Some(RetryAfter::At(t)),
            Hint::Missing | Hint::Invalid(_) => None,
        }
    }

    /// A short stable name of the hint's kind, for logs: `missing`, `delay`,
    /// `date` or `invalid`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Hint::Missing => "missing",
            Hint::Delay(_) => "delay",
            Hint::At(_) => "date",
            Hint::Invalid(_) => "invalid",
        }
    }
}

/// The response's own `Date`, when there is exactly one and it is a valid
/// HTTP-date. A `Retry-After` date is measured from it, which cancels any
/// skew between the server's clock and ours.
#[must_use]
pub fn server_date(headers: &HeaderMap) -> Option<SystemTime> {
    let mut values = headers.get_all(DATE).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    match parse_bytes(first.as_bytes()) {
        Ok(RetryAfter::At(t)) => Some(t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_plain_decimal_still_reads_as_its_upper_bound() {
        let read = |v: &str| parse_retry_after(v).err().and_then(|e| e.decimal_seconds());
        assert_eq!(read("2.0"), Some(Duration::from_millis(2100)));
        assert_eq!(read(" 2.000 "), Some(Duration::from_millis(2001)));
        assert_eq!(read("1.25"), Some(Duration::from_millis(1260)));
        assert_eq!(read("0.5"), Some(Duration::from_millis(600)));
        for not_decimal in [
            "-1",
            "+2",
            "1e3",
            "2.",
            ".5",
            "1.5s",
            "2 .0",
            "soon",
            "1.0000000001",
        ] {
            assert_eq!(read(not_decimal), None, "{not_decimal}");
        }
        // A valid value is no error; other reasons carry no reading.
        assert!(parse_retry_after("2").is_ok());
        assert_eq!(Hint::from_headers(&two_fields()).value(), None);
        match Hint::from_headers(&two_fields()) {
            Hint::Invalid(e) => assert_eq!(e.decimal_seconds(), None),
            other => panic!("{other:?}"),
        }
    }

    fn two_fields() -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.append(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("2.0"),
        );
        h.append(
            http::header::RETRY_AFTER,
            http::HeaderValue::from_static("2.0"),
        );
        h
    }

    #[test]
    fn trims_only_sp_and_htab() {
        assert_eq!(
            parse_retry_after(" \t7\t ").ok(),
            Some(RetryAfter::Delay(Duration::from_secs(7)))
        );
        assert!(parse_retry_after("\n7").is_err());
        assert!(parse_retry_after("7\u{a0}").is_err());
    }
}
