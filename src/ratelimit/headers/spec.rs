//! One vendor limit as declared (its headers and formats), and how one
//! response's field lines are read for it.

use std::time::{Duration, SystemTime};

use http::HeaderMap;
use http::header::HeaderName;

use crate::ratelimit::hint::{Limit, Unit};
use crate::ratelimit::reset::{MAX_RATELIMIT_LEN, ResetFormat, parse_reset, trim_ows};

/// One vendor limit: reset headers in order of preference (the first one
/// present and valid counts), the header with the count left, the header
/// with the quota, and what the limit counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LimitSpec {
    pub(super) resets: Vec<(HeaderName, ResetFormat)>,
    pub(super) remaining: Option<HeaderName>,
    /// The quota per window (no vendor here states the window).
    pub(super) limit: Option<HeaderName>,
    pub(super) unit: Unit,
    /// A bucket refilled continuously, its reset the time it is full.
    pub(super) bucket: bool,
    /// How far a stated count may be from the true one either way.
    pub(super) slack: u64,
}

impl LimitSpec {
    /// A limit with one reset header.
    pub(super) fn new(
        reset: HeaderName,
        format: ResetFormat,
        remaining: Option<HeaderName>,
        limit: Option<HeaderName>,
        unit: Unit,
    ) -> Self {
        LimitSpec {
            resets: vec![(reset, format)],
            remaining,
            limit,
            unit,
            bucket: false,
            slack: 0,
        }
    }

    /// The limit, when its reset or its count is present and valid (a
    /// quota alone is no limit).
    pub(super) fn read(&self, headers: &HeaderMap, server_now: SystemTime) -> Option<Limit> {
        let reset = self.resets.iter().find_map(|(name, format)| {
            let value = std::str::from_utf8(single(headers, name)?).ok()?;
            upper_bound(value, *format, server_now)
        });
        let remaining = self
            .remaining
            .as_ref()
            .and_then(|name| count(single(headers, name)?));
        if reset.is_none() && remaining.is_none() {
            return None;
        }
        let quota = self
            .limit
            .as_ref()
            .and_then(|name| count(single(headers, name)?));
        if self.bucket && self.unit == Unit::Requests {
            // A bucket of requests is no window that renews whole at its
            // reset (the time it is full): its size is not stated as a
            // window's quota, and spent, its wait is until the next
            // request's refill, a share of the whole refill's time.
            let reset = match (remaining, reset, quota) {
                (Some(0), Some(full_in), Some(size)) if size > 0 => {
                    Some(full_in.div_f64(size as f64))
                }
                (_, reset, _) => reset,
            };
            return Some(Limit::new(remaining, reset));
        }
        Some(Limit {
            quota,
            unit: self.unit,
            bucket: self.bucket,
            slack: self.slack,
            ..Limit::new(remaining, reset)
        })
    }
}

/// `value` read as a plain decimal number of seconds (`2.0`), as its upper
/// bound (one unit of its last digit later: 2.1 s); `None` when it is not
/// one. Pure: a number of seconds needs no clock.
pub(crate) fn decimal_seconds(value: &str) -> Option<Duration> {
    upper_bound(value, ResetFormat::Seconds, std::time::UNIX_EPOCH)
}

/// A reset `value` in `format`, as the delay from `server_now` to its
/// upper bound (see [`last_digit`]); `None` when the format does not read
/// it.
pub(super) fn upper_bound(
    value: &str,
    format: ResetFormat,
    server_now: SystemTime,
) -> Option<Duration> {
    let read = parse_reset(value, format, server_now)?;
    Some(read.saturating_add(last_digit(value, format)))
}

/// One unit of the last digit of a reset in seconds written with a
/// fraction (`1.25`: 10 ms; `1470173023.123`: 1 ms), zero otherwise. A
/// server that truncated the time to those digits (Discord's reset-after
/// is a float of two or three decimals) resets up to that much later than
/// it wrote: read as its upper bound, it is never early.
fn last_digit(value: &str, format: ResetFormat) -> Duration {
    if !matches!(format, ResetFormat::Seconds | ResetFormat::EpochSeconds) {
        return Duration::ZERO;
    }
    match value.trim().split_once('.') {
        Some((_, fraction)) if (1..=9).contains(&fraction.len()) => {
            Duration::from_nanos(10u64.pow(9 - fraction.len() as u32))
        }
        _ => Duration::ZERO,
    }
}

/// The value of the only field line of `name`; `None` when absent or sent
/// more than once (which of two counts would be the real one is a guess).
pub(crate) fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h [u8]> {
    let mut lines = headers.get_all(name).iter();
    let first = lines.next()?;
    match lines.next() {
        Some(_) => None,
        None => Some(first.as_bytes()),
    }
}

/// A count (left, or the quota): `1*DIGIT` (ASCII), OWS trimmed,
/// saturating.
fn count(raw: &[u8]) -> Option<u64> {
    if raw.len() > MAX_RATELIMIT_LEN {
        return None;
    }
    let v = trim_ows(raw);
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |acc, &d| {
        acc.saturating_mul(10)
            .saturating_add(u64::from(d.wrapping_sub(b'0')))
    }))
}
