//! One reset value, in one declared format, turned into a delay.
//!
//! Every vendor writes "when the quota comes back" its own way: a delay in
//! seconds or milliseconds, a Unix time, a Go duration, an RFC 3339 date.
//! The format is declared with the header, never sniffed from the value: a
//! `1700000000` read as a delay is 54 years, read as a Unix time it is a few
//! seconds. Each grammar is exact; anything else is `None`, never a guess.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Longest rate-limit field value read, in bytes; a longer one is ignored.
/// The longest valid vendor value is an RFC 3339 date with a nine-digit
/// fraction and an offset (35 bytes); 1024 leaves room for a `RateLimit`
/// list of several policies while refusing to process garbage of any size.
pub const MAX_RATELIMIT_LEN: usize = 1024;

/// Declared format of a reset header's value.
///
/// Digits are ASCII only; no sign, no exponent, no whitespace inside; a
/// fraction is `"."` and one to nine digits (nanosecond precision; digits
/// below a nanosecond are dropped).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetFormat {
    /// A delay in seconds, optionally with a fraction: `1`, `0.25`,
    /// `30.500` (Discord's `x-ratelimit-reset-after`).
    Seconds,
    /// A Unix time in seconds, optionally with a fraction: `1700000000`
    /// (GitHub), `1470173023.123` (Discord). Measured against `server_now`
    /// (see [`parse_reset`]).
    EpochSeconds,
    /// A delay in milliseconds, optionally with a fraction: `250`
    /// (OpenAI's `retry-after-ms`).
    Millis,
    /// A Go `time.Duration` string, as OpenAI sends it: `1s`, `6m0s`,
    /// `250ms`, `1h2m3.5s`, `0s`. One or more terms, each a number
    /// (optionally with a fraction) and a unit: `h`, `m`, `s`, `ms`, `us`,
    /// `µs` or `μs` (the only non-ASCII accepted, as Go writes and reads
    /// them), `ns`. Terms add up in any order, as Go's `ParseDuration`
    /// reads them. A bare number (even `0`), a sign, `1.s` and `.5s` are
    /// rejected.
    GoDuration,
    /// An RFC 3339 date-time, as Anthropic sends it:
    /// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`, `T`/`t` and `Z`/`z` accepted.
    /// Fields are range-checked (days per month, leap years); second `60`
    /// (a leap second) is read as the first second of the next minute.
    /// Measured against `server_now` (see [`parse_reset`]).
    Rfc3339,
}

/// Parses one reset value in `format` into the delay from `server_now` (the
/// response's `Date`, or the local time it was received).
///
/// Only the absolute formats ([`EpochSeconds`](ResetFormat::EpochSeconds),
/// [`Rfc3339`](ResetFormat::Rfc3339)) read `server_now`; the others are
/// delays as written. The middleware passes the response's `Date` when it
/// has exactly one valid `Date` field line, so skew between the server's
/// clock and ours does not count. `Date` has whole-second resolution (the
/// second the server was in), so the delay is up to 1 s longer than the
/// time the server had left until its reset, never shorter: a retry leaves
/// at the reset or up to a second after it (plus the answer's transit),
/// never before. Without a valid `Date` it passes the local time the
/// response was received, and the skew between the two clocks counts.
///
/// A time in the past is [`Duration::ZERO`]. A value too large for a
/// [`Duration`] (or a time beyond what [`SystemTime`] holds) saturates to
/// [`Duration::MAX`], so the caller's wait limit rejects it instead of the
/// arithmetic overflowing. Leading and trailing SP / HTAB are trimmed.
/// `None` for an empty value, a value over [`MAX_RATELIMIT_LEN`] bytes, and
/// anything that does not match `format` exactly (see [`ResetFormat`]).
///
/// Pure: reads no clock.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use reqwest_backpressure::{ResetFormat, parse_reset};
///
/// let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
/// assert_eq!(parse_reset("6m0s", ResetFormat::GoDuration, now), Some(Duration::from_secs(360)));
/// assert_eq!(parse_reset("1700000030", ResetFormat::EpochSeconds, now), Some(Duration::from_secs(30)));
/// assert_eq!(parse_reset("2023-11-14T22:13:50Z", ResetFormat::Rfc3339, now), Some(Duration::from_secs(30)));
/// assert_eq!(parse_reset("1e3", ResetFormat::Seconds, now), None);
/// assert_eq!(parse_reset("5", ResetFormat::GoDuration, now), None);
/// ```
#[must_use]
pub fn parse_reset(value: &str, format: ResetFormat, server_now: SystemTime) -> Option<Duration> {
    if value.len() > MAX_RATELIMIT_LEN {
        return None;
    }
    let v = trim_ows(value.as_bytes());
    if v.is_empty() {
        return None;
    }
    match format {
        ResetFormat::Seconds => whole_number(v).map(|n| nanos_to_duration(n.scaled(NANOS_PER_SEC))),
        ResetFormat::Millis => whole_number(v).map(|n| nanos_to_duration(n.scaled(NANOS_PER_MS))),
        ResetFormat::GoDuration => go_duration(v).map(nanos_to_duration),
        ResetFormat::EpochSeconds => {
            let since_epoch = nanos_to_duration(whole_number(v)?.scaled(NANOS_PER_SEC));
            Some(match UNIX_EPOCH.checked_add(since_epoch) {
                Some(at) => delay_until(at, server_now),
                None => Duration::MAX,
            })
        }
        ResetFormat::Rfc3339 => rfc3339(v).map(|at| match at {
            Instant::At(at) => delay_until(at, server_now),
            Instant::BeyondRange => Duration::MAX,
            Instant::BeforeRange => Duration::ZERO,
        }),
    }
}

/// Leading and trailing SP / HTAB removed, nothing else.
pub(crate) fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn delay_until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now).unwrap_or(Duration::ZERO)
}

const NANOS_PER_SEC: u128 = 1_000_000_000;
const NANOS_PER_MS: u128 = 1_000_000;
const POW10: [u128; 10] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
];

/// Nanoseconds as a [`Duration`], [`Duration::MAX`] when they do not fit.
fn nanos_to_duration(nanos: u128) -> Duration {
    let secs = u64::try_from(nanos / NANOS_PER_SEC);
    let sub = u32::try_from(nanos % NANOS_PER_SEC);
    match (secs, sub) {
        (Ok(secs), Ok(sub)) => Duration::new(secs, sub),
        _ => Duration::MAX,
    }
}

/// `1*DIGIT [ "." 1*9DIGIT ]`, kept exact until its unit is known.
#[derive(Debug, Clone, Copy)]
struct Number {
    /// The integer part, saturating (a saturated value still saturates
    /// after scaling, since every unit is at least 1 ns).
    whole: u128,
    /// The fraction's digits as an integer, below `10^frac_digits`.
    frac: u128,
    /// `10^(number of fraction digits)`; 1 without a fraction.
    frac_scale: u128,
}

impl Number {
    /// The number times a unit of `unit_ns` nanoseconds, in nanoseconds
    /// (saturating; a fraction below one nanosecond is dropped).
    fn scaled(self, unit_ns: u128) -> u128 {
        let frac = self.frac.saturating_mul(unit_ns) / self.frac_scale;
        self.whole.saturating_mul(unit_ns).saturating_add(frac)
    }
}

fn digits_value(digits: &[u8]) -> u128 {
    digits.iter().fold(0u128, |acc, &d| {
        acc.saturating_mul(10)
            .saturating_add(u128::from(d.wrapping_sub(b'0')))
    })
}

/// A [`Number`] at the start of `s`, and what follows it.
fn number(s: &[u8]) -> Option<(Number, &[u8])> {
    let int_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if int_len == 0 {
        return None;
    }
    let (int, rest) = s.split_at_checked(int_len)?;
    let whole = digits_value(int);
    let [b'.', frac @ ..] = rest else {
        return Some((
            Number {
                whole,
                frac: 0,
                frac_scale: 1,
            },
            rest,
        ));
    };
    let frac_len = frac.iter().take_while(|b| b.is_ascii_digit()).count();
    let frac_scale = *POW10.get(frac_len).filter(|_| frac_len > 0)?;
    let (frac_digits, rest) = frac.split_at_checked(frac_len)?;
    let number = Number {
        whole,
        frac: digits_value(frac_digits),
        frac_scale,
    };
    Some((number, rest))
}

/// A [`Number`] that is the whole value.
fn whole_number(s: &[u8]) -> Option<Number> {
    match number(s)? {
        (n, []) => Some(n),
        _ => None,
    }
}

/// A Go duration in nanoseconds (saturating).
fn go_duration(mut s: &[u8]) -> Option<u128> {
    let mut total = 0u128;
    // `s` is never empty here: the caller rejects an empty value.
    while !s.is_empty() {
        let (n, rest) = number(s)?;
        let (unit_ns, rest) = go_unit(rest)?;
        total = total.saturating_add(n.scaled(unit_ns));
        s = rest;
    }
    Some(total)
}

/// A Go duration unit at the start of `s`: its size in nanoseconds, and
/// what follows it. Longer units are tried first (`ms` before `m`).
fn go_unit(s: &[u8]) -> Option<(u128, &[u8])> {
    const UNITS: [(&[u8], u128); 8] = [
        (b"ns", 1),
        (b"us", 1_000),
        ("\u{b5}s".as_bytes(), 1_000),  // MICRO SIGN, what Go writes
        ("\u{3bc}s".as_bytes(), 1_000), // GREEK SMALL LETTER MU, Go reads it too
        (b"ms", NANOS_PER_MS),
        (b"s", NANOS_PER_SEC),
        (b"m", 60 * NANOS_PER_SEC),
        (b"h", 3_600 * NANOS_PER_SEC),
    ];
    UNITS
        .iter()
        .find_map(|&(unit, ns)| s.strip_prefix(unit).map(|rest| (ns, rest)))
}

/// Where an RFC 3339 date-time falls, relative to what [`SystemTime`] holds.
enum Instant {
    At(SystemTime),
    BeyondRange,
    BeforeRange,
}

/// `s[range]`, all ASCII digits, as a number.
fn digits_at(s: &[u8], range: std::ops::Range<usize>) -> Option<i64> {
    let d = s.get(range)?;
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    i64::try_from(digits_value(d)).ok()
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (month 1..=12, day
/// valid for the month), after Howard Hinnant's `days_from_civil`.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400; // 0..=399
    let mp = (month + 9) % 12; // March is 0
    let doy = (153 * mp + 2) / 5 + day - 1; // 0..=365
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // 0..=146096
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DDTHH:MM:SS[.1*9DIGIT](Z|±HH:MM)`, range-checked.
fn rfc3339(s: &[u8]) -> Option<Instant> {
    let sep = |i: usize, ok: &[u8]| s.get(i).is_some_and(|b| ok.contains(b));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let year = digits_at(s, 0..4)?;
    let month = digits_at(s, 5..7)?;
    let day = digits_at(s, 8..10)?;
    let hour = digits_at(s, 11..13)?;
    let minute = digits_at(s, 14..16)?;
    let second = digits_at(s, 17..19)?;
    if !(1..=12).contains(&month)
        || !(1..=days_in_month(year, month)).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = s.get(19..)?;
    let mut nanos = 0u32;
    if let [b'.', frac @ ..] = rest {
        let len = frac.iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=9).contains(&len) {
            return None;
        }
        let scale = POW10.get(9 - len)?;
        nanos = u32::try_from(digits_value(frac.get(..len)?).saturating_mul(*scale)).ok()?;
        rest = frac.get(len..)?;
    }
    let offset_secs = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let oh = digits_at(rest, 1..3)?;
            let om = digits_at(rest, 4..6)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3_600 + om * 60;
            if *sign == b'-' { -off } else { off }
        }
        _ => return None,
    };
    let unix = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
        - offset_secs;
    Some(if unix >= 0 {
        let since = Duration::new(unix.unsigned_abs(), nanos);
        UNIX_EPOCH
            .checked_add(since)
            .map_or(Instant::BeyondRange, Instant::At)
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(unix.unsigned_abs()))
            .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(nanos))))
            .map_or(Instant::BeforeRange, Instant::At)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_matches_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
        assert_eq!(days_from_civil(0, 1, 1), -719_528);
    }

    #[test]
    fn leap_years() {
        assert!(is_leap(2000) && is_leap(2024) && !is_leap(1900) && !is_leap(2023));
    }

    #[test]
    fn units_longest_first() {
        assert_eq!(go_unit(b"ms").map(|u| u.0), Some(NANOS_PER_MS));
        assert_eq!(go_unit(b"m0s").map(|u| u.0), Some(60 * NANOS_PER_SEC));
        assert_eq!(go_unit(b"d"), None);
    }
}
