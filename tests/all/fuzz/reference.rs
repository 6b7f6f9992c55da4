//! Reference predicates, written from the specs and the crate's documented
//! contract, never by calling the crate: RFC 9110 §5.6.7 and §10.2.3
//! (`Retry-After`), RFC 3339 §5.6, RFC 9651 (Structured Fields, for the IETF
//! `RateLimit` drafts and the `Idempotency-Key` sf-string), and the grammars
//! the crate documents for each `ResetFormat`.
//!
//! Each predicate returns an [`Expect`]: the value a conforming parser
//! returns (`None`: it must reject), and, for a few inputs, the label of a
//! known deviation of the crate (counted apart, never silently).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a conforming parser does with one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect<V> {
    /// The value it returns; `None` when it rejects the input.
    pub value: Option<V>,
    /// Set when the crate is known to answer otherwise for this input (a
    /// bug or deviation written up in the report): the label of the class.
    pub known: Option<&'static str>,
}

impl<V> Expect<V> {
    pub fn reject() -> Self {
        Expect {
            value: None,
            known: None,
        }
    }
    pub fn accept(v: V) -> Self {
        Expect {
            value: Some(v),
            known: None,
        }
    }
}

/// Leading and trailing SP / HTAB removed (RFC 9110 OWS).
pub fn trim_ows(v: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = v.iter().position(|b| !is_ows(b)).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !is_ows(b)).map_or(start, |e| e + 1);
    &v[start..end]
}

// ------------------------------------------------------------ calendar ----

pub fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub fn month_len(y: i64, m: i64) -> i64 {
    const LEN: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if m == 2 && is_leap(y) {
        29
    } else {
        LEN[(m - 1) as usize]
    }
}

/// Days from 0000-01-01 to the first day of `y` (proleptic Gregorian, y ≥ 0):
/// 365 per year plus one per leap year in `0..y`.
fn days_before_year(y: i64) -> i64 {
    365 * y + (y + 3) / 4 - (y + 99) / 100 + (y + 399) / 400
}

/// Days from 1970-01-01 to `y-m-d` (a valid date, year 0..=9999).
pub fn days_since_epoch(y: i64, m: i64, d: i64) -> i64 {
    let mut days = days_before_year(y) - days_before_year(1970);
    for month in 1..m {
        days += month_len(y, month);
    }
    days + d - 1
}

/// 0 = Sunday … 6 = Saturday; 1970-01-01 was a Thursday.
pub fn weekday(days_since_epoch: i64) -> usize {
    (days_since_epoch + 4).rem_euclid(7) as usize
}

pub const SHORT_DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
pub const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
pub const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A tiny cursor over the input, for the date grammars.
struct Cur<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    fn new(s: &'a [u8]) -> Self {
        Cur { s, i: 0 }
    }
    fn lit(&mut self, l: &str) -> Option<()> {
        let l = l.as_bytes();
        (self.s.get(self.i..self.i + l.len())? == l).then(|| self.i += l.len())
    }
    /// Exactly `n` ASCII digits.
    fn digits(&mut self, n: usize) -> Option<i64> {
        let d = self.s.get(self.i..self.i + n)?;
        if !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        self.i += n;
        Some(d.iter().fold(0, |a, &b| a * 10 + i64::from(b - b'0')))
    }
    /// One of `names`, by index.
    fn one_of(&mut self, names: &[&str]) -> Option<usize> {
        let k = names
            .iter()
            .position(|n| self.s[self.i..].starts_with(n.as_bytes()))?;
        self.i += names[k].len();
        Some(k)
    }
    fn done(&self) -> bool {
        self.i == self.s.len()
    }
}

/// `hour ":" minute ":" second`, 00:00:00 – 23:59:60 (RFC 9110 §5.6.7).
fn time_of_day(c: &mut Cur<'_>) -> Option<(i64, i64, i64)> {
    let h = c.digits(2)?;
    c.lit(":")?;
    let m = c.digits(2)?;
    c.lit(":")?;
    let s = c.digits(2)?;
    (h <= 23 && m <= 59 && s <= 60).then_some((h, m, s))
}

/// A parsed HTTP-date: Unix seconds (a leap second is the next minute's
/// `:00`).
struct HttpDate {
    unix: i64,
}

fn http_date_fields(
    wday: usize,
    y: i64,
    mon: usize,
    d: i64,
    (h, mi, s): (i64, i64, i64),
) -> Option<HttpDate> {
    let m = mon as i64 + 1;
    // The crate's documented narrowing: dates before 1970 are invalid.
    if y < 1970 || d < 1 || d > month_len(y, m) {
        return None;
    }
    let days = days_since_epoch(y, m, d);
    if weekday(days) != wday {
        return None;
    }
    Some(HttpDate {
        unix: days * 86_400 + h * 3_600 + mi * 60 + s,
    })
}

/// `IMF-fixdate = day-name "," SP date1 SP time-of-day SP GMT`.
fn imf_fixdate(v: &[u8]) -> Option<HttpDate> {
    let mut c = Cur::new(v);
    let wd = c.one_of(&SHORT_DAYS)?;
    c.lit(", ")?;
    let d = c.digits(2)?;
    c.lit(" ")?;
    let mon = c.one_of(&MONTHS)?;
    c.lit(" ")?;
    let y = c.digits(4)?;
    c.lit(" ")?;
    let t = time_of_day(&mut c)?;
    c.lit(" GMT")?;
    c.done().then_some(())?;
    http_date_fields(wd, y, mon, d, t)
}

/// `rfc850-date = day-name-l "," SP date2 SP time-of-day SP GMT`, date2 =
/// `day "-" month "-" 2DIGIT`; the crate reads the year as 1970–2069.
fn rfc850_date(v: &[u8]) -> Option<HttpDate> {
    let mut c = Cur::new(v);
    let wd = c.one_of(&LONG_DAYS)?;
    c.lit(", ")?;
    let d = c.digits(2)?;
    c.lit("-")?;
    let mon = c.one_of(&MONTHS)?;
    c.lit("-")?;
    let yy = c.digits(2)?;
    c.lit(" ")?;
    let t = time_of_day(&mut c)?;
    c.lit(" GMT")?;
    c.done().then_some(())?;
    let y = if yy >= 70 { 1900 + yy } else { 2000 + yy };
    http_date_fields(wd, y, mon, d, t)
}

/// `asctime-date = day-name SP date3 SP time-of-day SP year`, date3 =
/// `month SP ( 2DIGIT / ( SP DIGIT ) )`.
fn asctime_date(v: &[u8]) -> Option<HttpDate> {
    let mut c = Cur::new(v);
    let wd = c.one_of(&SHORT_DAYS)?;
    c.lit(" ")?;
    let mon = c.one_of(&MONTHS)?;
    c.lit(" ")?;
    let d = if c.lit(" ").is_some() {
        c.digits(1)?
    } else {
        c.digits(2)?
    };
    c.lit(" ")?;
    let t = time_of_day(&mut c)?;
    c.lit(" ")?;
    let y = c.digits(4)?;
    c.done().then_some(())?;
    http_date_fields(wd, y, mon, d, t)
}

fn http_date(v: &[u8]) -> Option<HttpDate> {
    imf_fixdate(v)
        .or_else(|| rfc850_date(v))
        .or_else(|| asctime_date(v))
}

/// What a conforming `Retry-After` parser returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAfterRef {
    Delay(Duration),
    At(SystemTime),
}

/// `Retry-After = HTTP-date / delay-seconds` (RFC 9110 §10.2.3), with the
/// crate's documented limits: at most 128 bytes as received, SP/HTAB
/// trimmed, dates before 1970 invalid, RFC 850 years 1970–2069, a
/// `delay-seconds` beyond `u64` saturating to `u64::MAX` seconds.
pub fn retry_after(raw: &[u8]) -> Expect<RetryAfterRef> {
    if raw.len() > 128 {
        return Expect::reject();
    }
    let v = trim_ows(raw);
    if v.is_empty() {
        return Expect::reject();
    }
    if v.iter().all(u8::is_ascii_digit) {
        let significant = v.iter().skip_while(|&&b| b == b'0').count();
        let secs = if significant > 20 {
            u64::MAX
        } else {
            let n: u128 = v.iter().fold(0, |a, &b| a * 10 + u128::from(b - b'0'));
            u64::try_from(n).unwrap_or(u64::MAX)
        };
        return Expect::accept(RetryAfterRef::Delay(Duration::from_secs(secs)));
    }
    match http_date(v) {
        Some(d) => Expect {
            value: Some(RetryAfterRef::At(
                UNIX_EPOCH + Duration::from_secs(d.unix as u64),
            )),
            // RFC 9110 allows second 60 (httpdate 1.0.3 refuses it; the
            // crate reads it as the next minute's :00).
            known: None,
        },
        None => Expect::reject(),
    }
}

// --------------------------------------------------------- reset values ----

/// The formats of `parse_reset`, mirrored so the reference owns its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    Seconds,
    EpochSeconds,
    Millis,
    GoDuration,
    Rfc3339,
}

pub const FMTS: [Fmt; 5] = [
    Fmt::Seconds,
    Fmt::EpochSeconds,
    Fmt::Millis,
    Fmt::GoDuration,
    Fmt::Rfc3339,
];

/// Nanoseconds at or beyond this are more than `Duration::MAX`.
const CAP_NS: u128 = (u64::MAX as u128 + 1) * 1_000_000_000;

fn ns_to_duration(ns: u128) -> Duration {
    if ns >= CAP_NS {
        Duration::MAX
    } else {
        Duration::new((ns / 1_000_000_000) as u64, (ns % 1_000_000_000) as u32)
    }
}

/// `1*DIGIT [ "." 1*9DIGIT ]` at the start of `s`, times a unit of
/// `unit_ns`, floored to a nanosecond and capped at [`CAP_NS`]; and the rest.
fn number_ns(s: &[u8], unit_ns: u128) -> Option<(u128, &[u8])> {
    let int_len = s.iter().take_while(|b| b.is_ascii_digit()).count();
    if int_len == 0 {
        return None;
    }
    let (int, mut rest) = s.split_at(int_len);
    let significant = &int[int.iter().take_while(|&&b| b == b'0').count()..];
    // 10^29 ns is beyond Duration::MAX (≈ 1.8·10^28 ns) for every unit.
    let mut total = if significant.len() > 29 {
        CAP_NS
    } else {
        let n: u128 = significant
            .iter()
            .fold(0, |a, &b| a * 10 + u128::from(b - b'0'));
        n.checked_mul(unit_ns).map_or(CAP_NS, |x| x.min(CAP_NS))
    };
    if let [b'.', frac @ ..] = rest {
        let k = frac.iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=9).contains(&k) {
            return None;
        }
        let f: u128 = frac[..k]
            .iter()
            .fold(0, |a, &b| a * 10 + u128::from(b - b'0'));
        total = (total + f * unit_ns / 10u128.pow(k as u32)).min(CAP_NS);
        rest = &frac[k..];
    }
    Some((total, rest))
}

fn delay_until(at: SystemTime, now: SystemTime) -> Duration {
    at.duration_since(now).unwrap_or(Duration::ZERO)
}

/// Go duration units the crate documents, with their size in nanoseconds.
const GO_UNITS: [(&str, u128); 8] = [
    ("h", 3_600_000_000_000),
    ("ms", 1_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ns", 1),
];

fn go_duration(mut s: &[u8]) -> Option<u128> {
    let mut total = 0u128;
    while !s.is_empty() {
        // The unit decides the scale, so find where the number ends first.
        let (_, after) = number_ns(s, 1)?;
        let unit_at = s.len() - after.len();
        // The longest unit that matches ("ms" over "m").
        let (unit, ns) = GO_UNITS
            .iter()
            .filter(|(u, _)| after.starts_with(u.as_bytes()))
            .max_by_key(|(u, _)| u.len())?;
        let (term, _) = number_ns(&s[..unit_at], *ns)?;
        total = (total + term).min(CAP_NS);
        s = &after[unit.len()..];
    }
    Some(total)
}

/// RFC 3339 §5.6 `date-time`, with the crate's documented reading: `T`/`t`,
/// `Z`/`z`, fraction of one to nine digits, second 60 as the next minute's
/// first second, offsets up to 23:59.
fn rfc3339(v: &[u8]) -> Option<(i64, u32)> {
    let mut c = Cur::new(v);
    let y = c.digits(4)?;
    c.lit("-")?;
    let m = c.digits(2)?;
    c.lit("-")?;
    let d = c.digits(2)?;
    c.lit("T").or_else(|| c.lit("t"))?;
    let h = c.digits(2)?;
    c.lit(":")?;
    let mi = c.digits(2)?;
    c.lit(":")?;
    let s = c.digits(2)?;
    if !(1..=12).contains(&m) || d < 1 || d > month_len(y, m) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut nanos = 0u32;
    if c.lit(".").is_some() {
        let k = c.s[c.i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if !(1..=9).contains(&k) {
            return None;
        }
        let f = c.digits(k)?;
        nanos = (f * 10i64.pow(9 - k as u32)) as u32;
    }
    let offset = if c.lit("Z").or_else(|| c.lit("z")).is_some() {
        0
    } else {
        let sign = if c.lit("+").is_some() {
            1
        } else {
            c.lit("-")?;
            -1
        };
        let oh = c.digits(2)?;
        c.lit(":")?;
        let om = c.digits(2)?;
        if oh > 23 || om > 59 {
            return None;
        }
        sign * (oh * 3_600 + om * 60)
    };
    c.done().then_some(())?;
    let unix = days_since_epoch(y, m, d) * 86_400 + h * 3_600 + mi * 60 + s - offset;
    Some((unix, nanos))
}

/// How much later than written a vendor's reset in seconds may come, as
/// `RateLimitHeaders::read` takes it: one unit of its fraction's last
/// digit (`1.25`: 10 ms), nothing for a whole number or another format.
pub fn truncated_by(value: &[u8], fmt: Fmt) -> Duration {
    if !matches!(fmt, Fmt::Seconds | Fmt::EpochSeconds) {
        return Duration::ZERO;
    }
    let v = trim_ows(value);
    match v.iter().position(|&b| b == b'.') {
        Some(dot) => {
            let digits = v.len() - dot - 1;
            let mut unit: u64 = 1_000_000_000;
            for _ in 0..digits {
                unit /= 10;
            }
            Duration::from_nanos(unit)
        }
        None => Duration::ZERO,
    }
}

/// `parse_reset(value, fmt, now)` as documented on `ResetFormat` and
/// `parse_reset`: at most 1024 bytes as received, SP/HTAB trimmed, exact
/// grammar, delays floored to a nanosecond and saturating at
/// `Duration::MAX`, times in the past giving zero.
pub fn reset(value: &[u8], fmt: Fmt, now: SystemTime) -> Expect<Duration> {
    if value.len() > 1024 {
        return Expect::reject();
    }
    let v = trim_ows(value);
    let whole = |unit| match number_ns(v, unit) {
        Some((ns, [])) => Some(ns),
        _ => None,
    };
    let value = match fmt {
        Fmt::Seconds => whole(1_000_000_000).map(ns_to_duration),
        Fmt::Millis => whole(1_000_000).map(ns_to_duration),
        Fmt::GoDuration => (!v.is_empty())
            .then(|| go_duration(v))
            .flatten()
            .map(ns_to_duration),
        Fmt::EpochSeconds => whole(1_000_000_000).map(|ns| {
            UNIX_EPOCH
                .checked_add(ns_to_duration(ns))
                .map_or(Duration::MAX, |at| delay_until(at, now))
        }),
        Fmt::Rfc3339 => rfc3339(v).map(|(unix, nanos)| {
            let at = if unix >= 0 {
                UNIX_EPOCH.checked_add(Duration::new(unix as u64, nanos))
            } else {
                UNIX_EPOCH
                    .checked_sub(Duration::from_secs(unix.unsigned_abs()))
                    .and_then(|t| t.checked_add(Duration::from_nanos(u64::from(nanos))))
            };
            match at {
                Some(at) => delay_until(at, now),
                None if unix >= 0 => Duration::MAX,
                None => Duration::ZERO,
            }
        }),
    };
    Expect { value, known: None }
}

/// A remaining count as the vendor presets read it: `1*DIGIT`, OWS trimmed,
/// at most 1024 bytes as received, saturating at `u64::MAX`.
pub fn count(raw: &[u8]) -> Option<u64> {
    if raw.len() > 1024 {
        return None;
    }
    let v = trim_ows(raw);
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let significant = v.iter().skip_while(|&&b| b == b'0').count();
    if significant > 20 {
        return Some(u64::MAX);
    }
    let n: u128 = v.iter().fold(0, |a, &b| a * 10 + u128::from(b - b'0'));
    Some(u64::try_from(n).unwrap_or(u64::MAX))
}

// --------------------------------------------- RateLimit hint combining ----

/// One limit: count left and reset delay, at least one present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub remaining: Option<u64>,
    pub reset: Option<Duration>,
}

/// The four answers of `RateLimitHint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HintRef {
    pub remaining: Option<u64>,
    pub reset: Option<Duration>,
    pub exhausted: bool,
    pub retry_in: Option<Duration>,
}

/// The combining rules documented on `RateLimitHint`, applied to the whole
/// set at once (the crate folds incrementally). "Latest" of optional resets
/// takes a present one over an absent one.
pub fn combine(limits: &[Limit]) -> HintRef {
    let latest = |it: &mut dyn Iterator<Item = &Limit>| it.filter_map(|l| l.reset).max();
    let remaining = limits.iter().filter_map(|l| l.remaining).min();
    let exhausted_reset = latest(&mut limits.iter().filter(|l| l.remaining == Some(0)));
    let reset = if exhausted_reset.is_some() {
        exhausted_reset
    } else if let Some(min) = remaining {
        latest(&mut limits.iter().filter(|l| l.remaining == Some(min)))
    } else {
        latest(&mut limits.iter())
    };
    HintRef {
        remaining,
        reset,
        exhausted: exhausted_reset.is_some(),
        retry_in: latest(
            &mut limits
                .iter()
                .filter(|l| matches!(l.remaining, None | Some(0))),
        ),
    }
}

// ------------------------------------------------- Structured Fields ----

/// A bare item of RFC 9651 §3.3, with only what the reference needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Bare {
    Integer(i64),
    Decimal,
    String,
    Token,
    Bytes,
    Boolean,
    Date,
    Display,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SfItem {
    pub bare: Bare,
    /// Parameters, a later duplicate key overwriting the value in place.
    pub params: Vec<(Vec<u8>, Bare)>,
}

impl SfItem {
    fn param(&self, key: &[u8]) -> Option<&Bare> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Member {
    Item(SfItem),
    InnerList,
}

/// The result of a Structured Field parse where the reference cannot tell:
/// a byte sequence whose base64 is not canonical, which RFC 9651 §4.2.7
/// lets a parser accept or refuse.
#[derive(Debug)]
pub struct Ambiguous;

type SfResult<T> = Result<Option<T>, Ambiguous>;

/// An RFC 9651 §4.2 parser over bytes.
struct Sf<'a> {
    s: &'a [u8],
    i: usize,
    ambiguous: bool,
}

impl Sf<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.i += usize::from(hit);
        hit
    }
    fn skip_sp(&mut self) {
        while self.eat(b' ') {}
    }
    fn skip_ows(&mut self) {
        while self.eat(b' ') || self.eat(b'\t') {}
    }
    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn member(&mut self) -> Option<Member> {
        if self.peek() == Some(b'(') {
            self.inner_list()?;
            Some(Member::InnerList)
        } else {
            self.item().map(Member::Item)
        }
    }

    fn inner_list(&mut self) -> Option<()> {
        self.eat(b'(');
        loop {
            self.skip_sp();
            if self.eat(b')') {
                self.params()?;
                return Some(());
            }
            self.item()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return None;
            }
        }
    }

    fn item(&mut self) -> Option<SfItem> {
        let bare = self.bare()?;
        let params = self.params()?;
        Some(SfItem { bare, params })
    }

    fn params(&mut self) -> Option<Vec<(Vec<u8>, Bare)>> {
        let mut params: Vec<(Vec<u8>, Bare)> = Vec::new();
        while self.eat(b';') {
            self.skip_sp();
            let key = self.key()?;
            let value = if self.eat(b'=') {
                self.bare()?
            } else {
                Bare::Boolean
            };
            match params.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => params.push((key, value)),
            }
        }
        Some(params)
    }

    /// `key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )`
    fn key(&mut self) -> Option<Vec<u8>> {
        let start = self.i;
        match self.peek()? {
            b'a'..=b'z' | b'*' => self.i += 1,
            _ => return None,
        }
        while let Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*') = self.peek() {
            self.i += 1;
        }
        Some(self.s[start..self.i].to_vec())
    }

    fn bare(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string().map(|()| Bare::String),
            b'*' | b'A'..=b'Z' | b'a'..=b'z' => {
                self.i += 1;
                while let Some(b) = self.peek() {
                    if is_tchar(b) || b == b':' || b == b'/' {
                        self.i += 1;
                    } else {
                        break;
                    }
                }
                Some(Bare::Token)
            }
            b':' => self.bytes(),
            b'?' => {
                self.i += 1;
                (self.eat(b'0') || self.eat(b'1')).then_some(Bare::Boolean)
            }
            b'@' => {
                self.i += 1;
                match self.number()? {
                    Bare::Integer(_) => Some(Bare::Date),
                    _ => None,
                }
            }
            b'%' => self.display(),
            _ => None,
        }
    }

    /// RFC 9651 §4.2.4: at most 15 integer digits, or 12 + "." + 1–3.
    fn number(&mut self) -> Option<Bare> {
        let negative = self.eat(b'-');
        let int_len = self.s[self.i..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if int_len == 0 {
            return None;
        }
        let int = &self.s[self.i..self.i + int_len];
        self.i += int_len;
        if self.peek() == Some(b'.') {
            if int_len > 12 {
                return None;
            }
            self.i += 1;
            let frac_len = self.s[self.i..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            // A 13th integer digit would have failed above; the decimal's
            // length limit (16 with the ".") is then only about the fraction.
            if frac_len == 0 || frac_len > 3 {
                return None;
            }
            self.i += frac_len;
            return Some(Bare::Decimal);
        }
        if int_len > 15 {
            return None;
        }
        let n = int.iter().fold(0i64, |a, &b| a * 10 + i64::from(b - b'0'));
        Some(Bare::Integer(if negative { -n } else { n }))
    }

    /// `sf-string = DQUOTE *( unescaped / "%" / bs-escaped ) DQUOTE`.
    fn string(&mut self) -> Option<()> {
        self.eat(b'"');
        loop {
            match self.peek()? {
                b'\\' => {
                    self.i += 1;
                    if !(self.eat(b'"') || self.eat(b'\\')) {
                        return None;
                    }
                }
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                0x20..=0x7e => self.i += 1,
                _ => return None,
            }
        }
    }

    /// `sf-binary = ":" base64 ":"`; non-canonical base64 is ambiguous.
    fn bytes(&mut self) -> Option<Bare> {
        self.eat(b':');
        let start = self.i;
        loop {
            match self.peek()? {
                b':' => break,
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'+' | b'/' | b'=' => self.i += 1,
                _ => return None,
            }
        }
        if !canonical_base64(&self.s[start..self.i]) {
            self.ambiguous = true;
        }
        self.i += 1;
        Some(Bare::Bytes)
    }

    /// `%"…"`: printable ASCII but `%` and `"`, `%` + two lowercase hex
    /// digits, the decoded bytes valid UTF-8 (RFC 9651 §4.2.10).
    fn display(&mut self) -> Option<Bare> {
        self.eat(b'%');
        if !self.eat(b'"') {
            return None;
        }
        let mut out = Vec::new();
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return std::str::from_utf8(&out).ok().map(|_| Bare::Display);
                }
                b'%' => {
                    let hex = |b: u8| match b {
                        b'0'..=b'9' => Some(b - b'0'),
                        b'a'..=b'f' => Some(b - b'a' + 10),
                        _ => None,
                    };
                    let hi = hex(*self.s.get(self.i + 1)?)?;
                    let lo = hex(*self.s.get(self.i + 2)?)?;
                    out.push(hi * 16 + lo);
                    self.i += 3;
                }
                b @ 0x20..=0x7e => {
                    out.push(b);
                    self.i += 1;
                }
                _ => return None,
            }
        }
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Whole groups of four, `=` only as the last one or two, zero pad bits.
fn canonical_base64(s: &[u8]) -> bool {
    if !s.len().is_multiple_of(4) {
        return false;
    }
    let pad = s.iter().rev().take_while(|&&b| b == b'=').count();
    if pad > 2 || s[..s.len() - pad].contains(&b'=') {
        return false;
    }
    let val = |b: u8| match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    match (pad, s.len()) {
        (0, _) | (_, 0) => true,
        (1, n) => val(s[n - 2]) & 0b11 == 0,
        (_, n) => val(s[n - 3]) & 0b1111 == 0,
    }
}

fn finish<T>(p: &mut Sf<'_>, parsed: Option<T>) -> SfResult<T> {
    let parsed = parsed.and_then(|v| {
        p.skip_sp();
        p.at_end().then_some(v)
    });
    if parsed.is_some() && p.ambiguous {
        return Err(Ambiguous);
    }
    // An input that failed elsewhere is refused whatever its base64.
    Ok(parsed)
}

/// RFC 9651 §4.2.1 List.
pub fn sf_list(input: &[u8]) -> SfResult<Vec<Member>> {
    let mut p = Sf {
        s: input,
        i: 0,
        ambiguous: false,
    };
    p.skip_sp();
    let parsed = (|| {
        let mut members = Vec::new();
        while !p.at_end() {
            members.push(p.member()?);
            p.skip_ows();
            if p.at_end() {
                break;
            }
            if !p.eat(b',') {
                return None;
            }
            p.skip_ows();
            if p.at_end() {
                return None;
            }
        }
        Some(members)
    })();
    finish(&mut p, parsed)
}

/// RFC 9651 §4.2.2 Dictionary (a later duplicate overwrites in place).
pub fn sf_dictionary(input: &[u8]) -> SfResult<Vec<(Vec<u8>, Member)>> {
    let mut p = Sf {
        s: input,
        i: 0,
        ambiguous: false,
    };
    p.skip_sp();
    let parsed = (|| {
        let mut members: Vec<(Vec<u8>, Member)> = Vec::new();
        while !p.at_end() {
            let key = p.key()?;
            let member = if p.eat(b'=') {
                p.member()?
            } else {
                let params = p.params()?;
                Member::Item(SfItem {
                    bare: Bare::Boolean,
                    params,
                })
            };
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = member,
                None => members.push((key, member)),
            }
            p.skip_ows();
            if p.at_end() {
                break;
            }
            if !p.eat(b',') {
                return None;
            }
            p.skip_ows();
            if p.at_end() {
                return None;
            }
        }
        Some(members)
    })();
    finish(&mut p, parsed)
}

/// RFC 9651 §4.2.3 Item.
pub fn sf_item(input: &[u8]) -> SfResult<SfItem> {
    let mut p = Sf {
        s: input,
        i: 0,
        ambiguous: false,
    };
    p.skip_sp();
    let parsed = p.item();
    finish(&mut p, parsed)
}

fn non_negative(b: Option<&Bare>) -> Option<u64> {
    match b? {
        Bare::Integer(i) => u64::try_from(*i).ok(),
        _ => None,
    }
}

/// The field lines of one name joined with ", " (RFC 9651 §4.2); `None`
/// when absent, empty, or over 1024 bytes.
fn combined(lines: &[Vec<u8>]) -> Option<Vec<u8>> {
    let joined = lines.join(&b", "[..]);
    (!joined.is_empty() && joined.len() <= 1024).then_some(joined)
}

/// The IETF fields as `RateLimitHeaders::ietf()` documents them: the
/// `RateLimit` draft-10 List (at most 16 members; each String or Token item
/// with Integer `r ≥ 0` and optional Integer `t ≥ 0` is a limit, others are
/// skipped), else the draft-07 Dictionary (`limit`, `remaining`, `reset`
/// non-negative Integer items), and draft-06 `RateLimit-Remaining` /
/// `RateLimit-Reset` Integer items.
pub fn ietf(
    ratelimit: &[Vec<u8>],
    remaining: &[Vec<u8>],
    reset: &[Vec<u8>],
) -> Result<Vec<Limit>, Ambiguous> {
    let mut limits = Vec::new();
    if let Some(value) = combined(ratelimit) {
        if let Some(list) = sf_list(&value)? {
            if list.len() <= 16 {
                for m in &list {
                    let Member::Item(item) = m else { continue };
                    if !matches!(item.bare, Bare::String | Bare::Token) {
                        continue;
                    }
                    let Some(r) = non_negative(item.param(b"r")) else {
                        continue;
                    };
                    let t = match item.param(b"t") {
                        None => None,
                        Some(t) => match non_negative(Some(t)) {
                            Some(t) => Some(Duration::from_secs(t)),
                            None => continue,
                        },
                    };
                    limits.push(Limit {
                        remaining: Some(r),
                        reset: t,
                    });
                }
            }
        } else if let Some(dict) = sf_dictionary(&value)? {
            let member = |key: &[u8]| match dict.iter().find(|(k, _)| k == key) {
                Some((_, Member::Item(item))) => non_negative(Some(&item.bare)),
                _ => None,
            };
            if let (Some(_), Some(r), Some(t)) =
                (member(b"limit"), member(b"remaining"), member(b"reset"))
            {
                limits.push(Limit {
                    remaining: Some(r),
                    reset: Some(Duration::from_secs(t)),
                });
            }
        }
    }
    let integer = |lines: &[Vec<u8>]| -> Result<Option<u64>, Ambiguous> {
        let Some(v) = combined(lines) else {
            return Ok(None);
        };
        Ok(sf_item(&v)?.and_then(|i| non_negative(Some(&i.bare))))
    };
    let remaining = integer(remaining)?;
    let reset = integer(reset)?.map(Duration::from_secs);
    if remaining.is_some() || reset.is_some() {
        limits.push(Limit { remaining, reset });
    }
    Ok(limits)
}

// ----------------------------------------------------- Idempotency-Key ----

/// `from_header` as documented: OWS trimmed; non-empty; every byte visible
/// ASCII or SP; a value starting with DQUOTE must be exactly one sf-string
/// (RFC 8941 §3.3.3) with a non-empty content, which is the key; any other
/// value is a bare key, as sent.
pub fn idempotency_from_header(raw: &[u8]) -> Option<String> {
    let v = trim_ows(raw);
    if v.is_empty() || !v.iter().all(|&b| (0x20..=0x7e).contains(&b)) {
        return None;
    }
    if v[0] != b'"' {
        return Some(String::from_utf8(v.to_vec()).expect("ASCII"));
    }
    let mut p = Sf {
        s: v,
        i: 0,
        ambiguous: false,
    };
    p.string()?;
    if !p.at_end() {
        return None;
    }
    let inner = &v[1..v.len() - 1];
    let mut key = String::new();
    let mut escaped = false;
    for &b in inner {
        if !escaped && b == b'\\' {
            escaped = true;
        } else {
            key.push(char::from(b));
            escaped = false;
        }
    }
    (!key.is_empty()).then_some(key)
}

/// `header_value` as documented: `None` for an empty key or one with a
/// character outside SP..`~`; else DQUOTE, the key with `"` and `\`
/// backslash-escaped, DQUOTE.
pub fn idempotency_header_value(key: &str) -> Option<Vec<u8>> {
    if key.is_empty() || !key.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return None;
    }
    let mut out = vec![b'"'];
    for b in key.bytes() {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    Some(out)
}

#[cfg(test)]
mod self_test {
    //! The reference against the specs' own examples.
    use super::*;

    #[test]
    fn reference_reads_the_rfc_9110_examples() {
        let at = |s| RetryAfterRef::At(UNIX_EPOCH + Duration::from_secs(s));
        for v in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                retry_after(v.as_bytes()).value,
                Some(at(784_111_777)),
                "{v}"
            );
        }
        assert_eq!(
            retry_after(b"Fri, 31 Dec 1999 23:59:59 GMT").value,
            Some(at(946_684_799))
        );
        assert_eq!(retry_after(b"Sat, 06 Nov 1994 08:49:37 GMT").value, None);
        assert_eq!(
            retry_after(b" 120\t").value,
            Some(RetryAfterRef::Delay(Duration::from_secs(120)))
        );
        assert_eq!(days_since_epoch(2000, 3, 1), 11_017);
        assert_eq!(days_since_epoch(0, 1, 1), -719_528);
        assert_eq!(days_since_epoch(9999, 12, 31), 2_932_896);
    }

    #[test]
    fn reference_reads_structured_fields() {
        assert!(
            sf_list(br#""burst";r=0;t=30, daily;r=900"#)
                .unwrap()
                .is_some()
        );
        assert!(sf_list(b"a, ").unwrap().is_none());
        assert!(sf_list(b"1234567890123456").unwrap().is_none());
        assert!(
            sf_list(b"123456789012.123, -1.5, ?1, :aGk=:, @-1, %\"%c3%a9\"")
                .unwrap()
                .is_some()
        );
        assert!(sf_list(b"%\"%c3\"").unwrap().is_none());
        assert!(sf_list(b"(a b);q=1, c").unwrap().is_some());
        assert!(
            sf_dictionary(b"limit=100, remaining=50, reset=5")
                .unwrap()
                .is_some()
        );
        assert!(sf_list(b"limit=100").unwrap().is_none());
        assert!(sf_list(b":aGk:").is_err());
    }
}
