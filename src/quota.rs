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
/// # Known quotas: stated, declared, in tokens, in flight
///
/// Learning a limit only by being refused costs every first burst a wave of `429`s. Where the limit
/// is known, the crate spends it before the send instead:
///
/// - **Stated.** An answer's rate-limit headers that give the quota's size (`RateLimit-Policy`'s
///   `q` and `w`, the vendors' limit headers) and a reset make a quota that admissions spend and
///   that renews at the reset with the whole quota, with no probe: each window's requests leave at
///   its start, and the server sees no more than it states. An answer to a request sent before the
///   current window opened speaks of an earlier one and changes nothing (servers round their reset
///   up: a late answer of the last window would otherwise empty the next), unless it states the
///   current window's reset (answers applied out of order). A spent answer's reset holds even when
///   earlier than one stated before (a bucket's next unit), and no unit comes back to it. The renewed window's
///   reset is a guess (the last reset plus the window: without a stated `w`, the longest reset
///   stated, counted from the request's send) until an answer of that window states it; the first
///   that does replaces it, later or earlier (express-rate-limit and GitHub open a window at the
///   first request after the last one ended, later than the guess). After a penalty longer
///   than the window (a `Retry-After` of 3 s on a 2 s quota) the quota governs again; a shorter
///   pushback is another limit (GitHub's secondary one within its hourly quota) and its pace is
///   learned; the request it rejected gives its unit of the quota back (the server counted it
///   against the other limit only; the window's next statement still binds where it is smaller),
///   never past the quota's size, and never to a spent quota, which holds until its reset.
/// - **First contact.** While a new origin's first answer is outstanding, the other requests to it
///   wait for it (`Policy::first_contact`, 500 ms at most, never past their deadline; they ask again
///   after as long as the first has been out, 2 to 50 ms), so a stated quota is known before the
///   burst leaves. One wait per origin: an answer that is late, or lost (a transport error), ends it
///   for the whole burst at once. The requests that waited leave together (the first wave), and no
///   other leaves until their answers are in (as long again at most): a pushback among them (GitHub's
///   secondary limit) holds the follow-ups before they meet it. Through the Redis store the first answer is written at once, and a stated quota
///   once per window, so four processes wait for one first request and spend one quota.
/// - **Declared.** `Policy::quota(origin, Quota::per_second(10))` paces an origin from its very
///   first request: a window (the default) leaves in batches of its count, each a little more than
///   its span after the last request of the one before, so no span of it ever holds more, whatever
///   the server's alignment (safe against fixed windows, sliding logs and buckets of that size);
///   `.refilled()` is a bucket (GCRA: the burst, then one per interval, a margin behind the bucket's
///   own times). The origin is a URL's (`https://api.github.com`) or a bare host. Declared and
///   stated quotas combine, one in requests and one in units per origin; the tightest binds. A
///   declared quota is the caller's own knowledge, not a server delay: a task waits for its slot
///   while its deadline allows (`max_wait` and `max_total_wait` do not cap it). It binds whatever
///   the pace learns: a reopened gate, a stated quota and the probe after its hold go on from the
///   slots already handed out, and units count when their request leaves. Slots, not sends, are
///   spaced: a request that leaves late after its slot (a slow shared store) narrows the gap.
/// - **Tokens.** A request's `Cost` extension (an LLM call's prompt plus its most output tokens) is
///   reserved from the origin's quota in tokens (OpenAI's `x-ratelimit-*-tokens`, Anthropic's
///   `anthropic-ratelimit-*tokens-*`, or one declared with `Quota::per_minute(90_000).units()`),
///   holds the request while the quota is short of it, is given back by a request not sent, and is
///   reconciled by the answer's stated remaining (the smaller wins within a window). Without a
///   declared cost, the mean cost per request learned from how the stated remaining falls stands in;
///   before any fall is seen, the first answer's distance from the whole window (the first
///   contact's own cost) does, so the first burst is held to what the window pays for. A rejection
///   that the token quota explains (less left than a request costs) holds the origin until the reset
///   like a spent quota and teaches no pace in requests: the token quota, renewed, governs.
/// - **In flight.** `Policy::max_in_flight(origin, 100)` (GitHub's concurrency limit), or a cap the
///   server states (`RateLimit-Policy: "c";q=10;qu="concurrent-requests"`), is held as a permit
///   from before the send until the answer's headers arrive, given back while a task waits for a
///   retry or when it is dropped (in this process).
///
/// Quotas of a scope: [`Policy::scope_quota`](crate::Policy::scope_quota)
/// (see [`Scope`](crate::Scope)); a quota declared for the origin binds all
/// its scopes together.
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
