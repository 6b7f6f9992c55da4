//! Quotas the caller declares for an origin: what its documentation says
//! it admits, so that the very first burst is paced, with no first wave of
//! `429`s to learn it from.

use std::time::Duration;

/// A quota declared for an origin with
/// [`Policy::quota`](crate::Policy::quota): at most `count` requests per
/// `per`, as the API's documentation states it (GitHub's 5,000 an hour, a
/// partner API's 10 a second).
///
/// Two shapes, as limiters count:
///
/// - a **window** (the default, [`Quota::new`]): at most `count` in any span
///   of `per`. Requests leave in batches of `count`, each batch a little
///   more than `per` after the last request of the one before, so no span
///   of `per` ever holds more than `count`, whatever the server's window
///   alignment. Safe against fixed windows, sliding logs and token buckets
///   of that size alike.
/// - a **bucket** ([`refilled`](Self::refilled)): a bucket of `count`
///   refilled continuously at `count` per `per` (GCRA, as `governor`
///   counts): a burst of `count`, then one request every `per / count`.
///   Right only for a server that refills continuously; against a window
///   it can send more than `count` in one window.
///
/// Declared and stated quotas combine: the origin's rate-limit headers are
/// still read, and the tightest binds. A quota in cost units
/// ([`units`](Self::units): tokens) is spent by each request's
/// [`Cost`](crate::Cost).
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::{Policy, Quota};
///
/// let policy = Policy::default()
///     .quota("https://api.github.com", Quota::per_hour(5_000))
///     .quota("partner.example", Quota::per_second(10).refilled())
///     // An LLM key: 500 requests and 90,000 tokens a minute.
///     .quota("https://api.openai.com", Quota::per_minute(500))
///     .quota("https://api.openai.com", Quota::per_minute(90_000).units());
/// assert!(policy.validate().is_ok());
/// assert_eq!(Quota::per_minute(60).count(), 60);
/// assert!(Policy::default().quota("https://a.example", Quota::per_second(0)).validate().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    count: u32,
    per: Duration,
    refilled: bool,
    units: bool,
}

impl Quota {
    /// The longest span a quota may be declared over: a year of 366 days.
    /// A longer one makes the policy invalid ([`InvalidPolicy::Quota`](crate::InvalidPolicy::Quota)).
    pub const LONGEST_SPAN: Duration = Duration::from_secs(366 * 24 * 60 * 60);

    /// At most `count` requests in any span of `per` (a window). A count
    /// of 0, or a span under 1 ms or over [`LONGEST_SPAN`](Self::LONGEST_SPAN),
    /// makes the policy that declares it invalid.
    #[must_use]
    pub const fn new(count: u32, per: Duration) -> Self {
        Quota {
            count,
            per,
            refilled: false,
            units: false,
        }
    }

    /// At most `count` requests a second.
    #[must_use]
    pub const fn per_second(count: u32) -> Self {
        Quota::new(count, Duration::from_secs(1))
    }

    /// At most `count` requests a minute.
    #[must_use]
    pub const fn per_minute(count: u32) -> Self {
        Quota::new(count, Duration::from_secs(60))
    }

    /// At most `count` requests an hour.
    #[must_use]
    pub const fn per_hour(count: u32) -> Self {
        Quota::new(count, Duration::from_secs(3600))
    }

    /// The same quota as a bucket of `count`, refilled continuously: a
    /// burst of `count`, then one request every `per / count`.
    #[must_use]
    pub const fn refilled(mut self) -> Self {
        self.refilled = true;
        self
    }

    /// The same quota counted in cost units (an LLM API's tokens per
    /// minute), not requests: each request spends its
    /// [`Cost`](crate::Cost) of it. A window: no span of `per` spends more
    /// than `count`. It paces the first requests, before the origin's
    /// answers state their own (which then govern: a server's statement is
    /// closer than a declaration).
    #[must_use]
    pub const fn units(mut self) -> Self {
        self.units = true;
        self
    }

    /// Whether it counts cost units, not requests.
    #[must_use]
    pub const fn is_units(&self) -> bool {
        self.units
    }

    /// Requests (or units) per [`per`](Self::per).
    #[must_use]
    pub const fn count(&self) -> u32 {
        self.count
    }

    /// The span the count is per.
    #[must_use]
    pub const fn per(&self) -> Duration {
        self.per
    }

    /// Whether it is a bucket refilled continuously, not a window.
    #[must_use]
    pub const fn is_refilled(&self) -> bool {
        self.refilled
    }

    /// Requests per second, on average.
    pub(crate) fn rate(&self) -> f64 {
        f64::from(self.count) / self.per.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Why it cannot be used, if it cannot.
    pub(crate) fn invalid(&self) -> Option<&'static str> {
        if self.count == 0 {
            Some("a declared quota's count must be at least 1")
        } else if self.per < Duration::from_millis(1) {
            Some("a declared quota's span must be at least 1 ms")
        } else if self.per > Quota::LONGEST_SPAN {
            Some("a declared quota's span must be at most 366 days (Quota::LONGEST_SPAN)")
        } else {
            None
        }
    }
}

/// Which origins a declared quota applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// One origin, `scheme://host:port` as the crate names it.
    Origin(String),
    /// Every origin of this host (lower case), whatever its scheme or port.
    Host(String),
    /// `*`: every origin the policy calls that no origin or host
    /// declaration covers.
    Any,
    /// What was given could not be read as any of these.
    Invalid,
}

impl Target {
    /// `scheme://host[:port]` (a URL; its path is ignored), a bare host, or
    /// `*` (every origin).
    pub(crate) fn parse(given: &str) -> Self {
        if given.trim() == "*" {
            return Target::Any;
        }
        if given.contains("://") {
            match reqwest::Url::parse(given) {
                Ok(url) if url.host_str().is_some() => {
                    Target::Origin(crate::http_origin::origin_of(&url))
                }
                _ => Target::Invalid,
            }
        } else {
            let host = given.trim().to_ascii_lowercase();
            let valid = !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
            if valid {
                Target::Host(host)
            } else {
                Target::Invalid
            }
        }
    }

    /// Whether it applies to `origin` (`scheme://host:port`).
    pub(crate) fn matches(&self, origin: &str) -> bool {
        match self {
            Target::Origin(o) => o == origin,
            Target::Host(h) => host_of(origin) == Some(h.as_str()),
            Target::Any => true,
            Target::Invalid => false,
        }
    }

    /// How specific it is: an origin (0) before a host (1) before `*` (2).
    fn rank(&self) -> u8 {
        match self {
            Target::Origin(_) | Target::Invalid => 0,
            Target::Host(_) => 1,
            Target::Any => 2,
        }
    }
}

/// Of the declarations that apply to `origin`, the value of the most
/// specific (an origin's URL, else its host, else `*`), the latest
/// declared among equals.
pub(crate) fn most_specific<'a, T: 'a>(
    declared: impl DoubleEndedIterator<Item = (&'a Target, T)>,
    origin: &str,
) -> Option<T> {
    let mut best: Option<(u8, T)> = None;
    for (target, value) in declared.rev() {
        let rank = target.rank();
        if best.as_ref().is_some_and(|(r, _)| *r <= rank) || !target.matches(origin) {
            continue;
        }
        best = Some((rank, value));
    }
    best.map(|(_, value)| value)
}

/// The host of `scheme://host:port`.
fn host_of(origin: &str) -> Option<&str> {
    let rest = origin.split_once("://")?.1;
    Some(rest.rsplit_once(':').map_or(rest, |(host, _)| host))
}
