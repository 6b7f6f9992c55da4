//! The limiters that say nothing: their rejections carry no `Retry-After`
//! and no rate-limit field, only a status. Each judges a request arriving
//! `now_ms` whole milliseconds after the server's epoch (no clock read
//! here), in integer arithmetic, as the server it copies does.
//!
//! - [`LeakyBucket`]: nginx's `limit_req` with `burst=CAP nodelay`
//!   (`ngx_http_limit_req_lookup`);
//! - [`SlidingRate`]: HAProxy's `sc_http_req_rate` over a stick table's
//!   `http_req_rate(1s)` (`freq_ctr`), which counts the requests it denies;
//! - [`Outage`]: `503` to everything for a while, then a [`LeakyBucket`].

/// nginx `limit_req_zone … rate=CAP r/s` with `limit_req … burst=CAP
/// nodelay`: a leaky bucket whose level, `excess`, is kept in thousandths
/// of a request. A request arriving `ms` after the last admitted one gets
/// `excess' = max(excess + 1000 − rate·ms/1000, 0)` with `rate = CAP·1000`
/// (so `excess` leaks `CAP` requests a second); it is rejected if
/// `excess' > burst·1000`, and admitted otherwise (then `excess = excess'`
/// and `last = now`). A rejection changes nothing. The first request ever
/// creates the entry with `excess = 0`, as nginx does.
///
/// So from rest it admits `CAP + 1` at once (levels 0, 1000, …,
/// `CAP·1000`), then one every `1000 / CAP` ms while saturated.
#[derive(Debug, Clone)]
pub(super) struct LeakyBucket {
    /// Thousandths of a request a second (`CAP · 1000`).
    rate: u64,
    /// `CAP · 1000`.
    burst: u64,
    excess: u64,
    /// The last admission, in ms since the epoch (`None`: no entry yet).
    last: Option<u64>,
}

impl LeakyBucket {
    pub(super) fn new(cap: u32) -> Self {
        LeakyBucket {
            rate: u64::from(cap) * 1000,
            burst: u64::from(cap) * 1000,
            excess: 0,
            last: None,
        }
    }

    /// Admits a request arriving at `now_ms`, or rejects it.
    pub(super) fn admit(&mut self, now_ms: u64) -> bool {
        let Some(last) = self.last else {
            // A new node: `excess = 0`, `last = now`, admitted.
            self.last = Some(now_ms);
            return true;
        };
        let ms = now_ms.abs_diff(last);
        let leaked = self.rate.saturating_mul(ms) / 1000;
        let excess = (self.excess + 1000).saturating_sub(leaked);
        if excess > self.burst {
            return false;
        }
        self.excess = excess;
        self.last = Some(now_ms);
        true
    }
}

/// HAProxy: `http-request track-sc0 src` on a stick table storing
/// `http_req_rate(1s)`, then `http-request deny deny_status <status> if {
/// sc_http_req_rate(0) gt CAP }`. Tracking counts the request before the
/// rule reads the rate, so every request, denied or not, counts.
///
/// The rate is HAProxy's `freq_ctr` over periods of 1000 ms: `curr` counts
/// the current period, `prev` the one before; a request at `now` first
/// rotates (`now − tick ≥ 1000`: `prev = curr`, `curr = 0`, `tick += 1000`;
/// still `≥ 1000`, two periods missed: `prev = 0`, `tick = now`), counts
/// itself (`curr += 1`), then reads `rate = ⌊(curr·1000 + prev·remain) /
/// 1000⌋` with `remain = tick + 1000 − now` (the previous period weighted
/// by the share of the current one still to come). It is denied iff `rate
/// > CAP`. The first request starts the first period.
///
/// A client that keeps knocking at more than `CAP` a second stays denied;
/// one that sends only when admitted gets `CAP` at once, then, each later
/// period following a full one, its `k`-th request admitted from
/// `⌊(k − 1)·1000 / CAP⌋ + 1` ms into the period.
#[derive(Debug, Clone)]
pub(super) struct SlidingRate {
    cap: u64,
    /// The current period's start, in ms since the epoch.
    tick: Option<u64>,
    curr: u64,
    prev: u64,
}

/// The rate's period, in ms.
const PERIOD_MS: u64 = 1000;

impl SlidingRate {
    pub(super) fn new(cap: u32) -> Self {
        SlidingRate {
            cap: u64::from(cap),
            tick: None,
            curr: 0,
            prev: 0,
        }
    }

    /// Counts a request arriving at `now_ms`; admits it or denies it.
    pub(super) fn admit(&mut self, now_ms: u64) -> bool {
        let mut tick = self.tick.unwrap_or(now_ms);
        if now_ms.saturating_sub(tick) >= PERIOD_MS {
            self.prev = self.curr;
            self.curr = 0;
            tick += PERIOD_MS;
            if now_ms.saturating_sub(tick) >= PERIOD_MS {
                self.prev = 0;
                tick = now_ms;
            }
        }
        self.tick = Some(tick);
        self.curr += 1;
        let remain = (tick + PERIOD_MS).saturating_sub(now_ms);
        let rate = (self.curr * PERIOD_MS + self.prev * remain) / PERIOD_MS;
        rate <= self.cap
    }
}

/// `503` to everything until `down_ms` after the epoch (the server's first
/// request); from then on the [`LeakyBucket`] of `CAP`, starting at rest
/// (the requests of the outage never reached it).
#[derive(Debug, Clone)]
pub(super) struct Outage {
    down_ms: u64,
    after: LeakyBucket,
}

impl Outage {
    pub(super) fn new(down_ms: u64, cap: u32) -> Self {
        Outage {
            down_ms,
            after: LeakyBucket::new(cap),
        }
    }

    pub(super) fn admit(&mut self, now_ms: u64) -> bool {
        now_ms >= self.down_ms && self.after.admit(now_ms)
    }
}
