//! The server's shapes: [`Shape`], what a shape decided about one request
//! ([`Verdict`]), and each shape's own state ([`Limit`]), which judges a
//! request arriving at a given instant (no clock read here). The shapes that
//! say nothing (no `Retry-After`, no rate-limit field) keep their state in
//! `server/silent.rs`.

use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use governor::clock::{Clock, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::express::ExpressWindow;
use super::silent::{LeakyBucket, Outage, SlidingRate};

const SECOND: Duration = Duration::from_secs(1);

/// How a [`LimitedServer`](super::LimitedServer) admits requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `cap` requests per 1 s window (windows start at the server's epoch);
    /// the rest get `Retry-After` = whole seconds to the next window (at
    /// least 1), and may come back at the next window's start.
    Window,
    /// Capacity `cap`, refilled `cap` a second, starting full; `Retry-After`
    /// = whole seconds until one token (at least 1), counted from the `429`.
    Bucket,
    /// The [`Window`](Shape::Window) limit, speaking the IETF draft fields
    /// on every answer (`200`s too) as express-rate-limit 8 does:
    /// `RateLimit: "<cap>-in-1sec"; r=<remaining>; t=<seconds to the next
    /// window, rounded up, at least 1>` and `RateLimit-Policy:
    /// "<cap>-in-1sec"; q=<cap>; w=1`; its `429`s carry no `Retry-After`.
    RateLimitHeaders,
    /// express-rate-limit 8 (`server/express.rs`): `cap` per 1 s window, a
    /// window opening at the first request after the last one ended, the
    /// draft-8 fields on every answer (`t` in whole seconds, rounded up, so
    /// 1 throughout), `Retry-After: <t>` on its `429`s.
    ExpressRateLimit,
    /// `cap` requests per 1 s window, a window starting at the first request
    /// after the last one ended (not on the epoch's seconds); the rest get
    /// `Retry-After` = whole seconds left in the window, *truncated* (so `0`
    /// inside a closed window), as Flask-Limiter does. A task's send before
    /// the end of the window that rejected it is premature.
    TruncatedZero,
    /// Like [`Window`](Self::Window), but every fifth window admits nothing
    /// (a server that pushes back now and then, whatever the load).
    Spells,
    /// At most `cap` admissions in any 1 s span (a log of admission times):
    /// a request at `now` is admitted iff fewer than `cap` logged admissions
    /// lie in `(now − 1 s, now]`. The rest get `Retry-After` = whole seconds,
    /// rounded up (at least 1), until the oldest of those leaves the span;
    /// the instant it allows is that oldest admission + 1 s.
    SlidingLog,
    /// GCRA as the `governor` crate implements it (a real
    /// `governor::RateLimiter`, direct, `Quota::per_second(cap)`: a burst of
    /// `cap`, then one every `1/cap` s), answering as tower-governor does
    /// by default: `Retry-After` and `x-ratelimit-after` =
    /// `wait_time_from(now).as_secs()`, *truncated* (so `0` for any wait
    /// under a second), body `Too Many Requests! Wait for <n>s`. The instant
    /// it allows is governor's `earliest_possible()`.
    Gcra,
    /// nginx `limit_req zone rate=CAP r/s burst=CAP nodelay`, its excess
    /// accounting in thousandths of a request (`server/silent.rs`): `CAP + 1`
    /// at once from rest, then `CAP` a second. Rejections are a bare
    /// [`Denial`] status: no `Retry-After`, no rate-limit field, so nothing
    /// is premature.
    Leaky(Denial),
    /// HAProxy's `sc_http_req_rate(0) gt CAP` over `http_req_rate(1s)`
    /// (`freq_ctr`: the current period plus the previous one weighted by
    /// the share still to come, `server/silent.rs`); every request counts,
    /// denied or not. Rejections are a bare [`Denial`] status.
    Counting(Denial),
    /// `503` without `Retry-After` to every request for `down` after the
    /// server's first request; then the [`Leaky`](Self::Leaky) bucket of
    /// `CAP`, at rest, answering its rejections a bare `503`.
    Outage { down: Duration },
}

/// The status a silent shape's rejections carry, and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// `429 Too Many Requests` (nginx `limit_req_status 429`; HAProxy
    /// `deny_status 429`).
    TooManyRequests,
    /// `503 Service Unavailable` (nginx's default `limit_req_status`).
    Unavailable,
}

impl Denial {
    pub fn status(self) -> u16 {
        match self {
            Denial::TooManyRequests => 429,
            Denial::Unavailable => 503,
        }
    }
}

impl Shape {
    pub fn name(self) -> &'static str {
        match self {
            Shape::Window => "fixed window",
            Shape::Bucket => "token bucket",
            Shape::RateLimitHeaders => "RateLimit headers",
            Shape::ExpressRateLimit => "express-rate-limit (draft-8)",
            Shape::TruncatedZero => "truncated Retry-After: 0",
            Shape::Spells => "window, closed every fifth second",
            Shape::SlidingLog => "sliding log",
            Shape::Gcra => "GCRA (governor)",
            Shape::Leaky(Denial::TooManyRequests) => "leaky bucket (nginx), bare 429",
            Shape::Leaky(Denial::Unavailable) => "leaky bucket (nginx), bare 503",
            Shape::Counting(Denial::TooManyRequests) => "counting denied (HAProxy), bare 429",
            Shape::Counting(Denial::Unavailable) => "counting denied (HAProxy), bare 503",
            Shape::Outage { .. } => "outage (bare 503), then a leaky bucket",
        }
    }

    /// A shape whose rejections name no time (no `Retry-After`, no
    /// rate-limit field).
    pub fn is_silent(self) -> bool {
        matches!(
            self,
            Shape::Leaky(_) | Shape::Counting(_) | Shape::Outage { .. }
        )
    }

    /// The status of its rejections.
    pub fn rejection_status(self) -> u16 {
        match self {
            Shape::Leaky(d) | Shape::Counting(d) => d.status(),
            Shape::Outage { .. } => 503,
            _ => 429,
        }
    }
}

/// What a [`Limit`] decided about one request.
#[derive(Debug, Clone, Copy)]
pub struct Verdict {
    pub ok: bool,
    /// The `Retry-After` of a `429`, in whole seconds (`None`: not sent).
    pub retry_after: Option<u64>,
    /// The `RateLimit` fields, `(r, t)`, if the shape sends them.
    pub ratelimit: Option<(u32, u64)>,
    /// A `429`'s instant it allows the task's next request.
    pub allowed: Option<Instant>,
    /// A `429`'s literal reading: the time it names from its arrival.
    pub names: Duration,
    /// The answer's status: `200`, or the shape's rejection status.
    pub status: u16,
}

impl Verdict {
    fn admitted() -> Self {
        Verdict {
            ok: true,
            retry_after: None,
            ratelimit: None,
            allowed: None,
            names: Duration::ZERO,
            status: 200,
        }
    }

    fn rejected(retry_after: u64, allowed: Instant) -> Self {
        Verdict {
            ok: false,
            retry_after: Some(retry_after),
            ratelimit: None,
            allowed: Some(allowed),
            names: Duration::from_secs(retry_after),
            status: 429,
        }
    }

    /// A rejection that says nothing but its status.
    fn bare(status: u16) -> Self {
        Verdict {
            ok: false,
            status,
            ..Verdict::admitted()
        }
    }
}

/// A shape's own state.
#[derive(Debug)]
pub(super) enum Limit {
    Window {
        window: u64,
        used: u32,
        /// Every `n`-th window admits nothing.
        closed_every: Option<u64>,
    },
    Bucket {
        tokens: f64,
        refilled: Option<Instant>,
    },
    /// Windows starting at a request.
    Floating {
        start: Option<Instant>,
        used: u32,
    },
    /// Admission times in the last second, oldest first.
    SlidingLog {
        log: VecDeque<Instant>,
    },
    /// governor's limiter on a clock the server sets to each request's
    /// arrival: nanoseconds since the epoch (its `Nanos(0)`).
    Gcra {
        limiter: RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<Nanos>>,
        clock: FakeRelativeClock,
    },
    Express(ExpressWindow),
    Leaky(LeakyBucket),
    Counting(SlidingRate),
    Outage(Outage),
}

impl Limit {
    pub(super) fn new(shape: Shape, cap: u32) -> Self {
        match shape {
            Shape::Window | Shape::RateLimitHeaders => Limit::Window {
                window: 0,
                used: 0,
                closed_every: None,
            },
            Shape::Spells => Limit::Window {
                window: 0,
                used: 0,
                closed_every: Some(5),
            },
            Shape::TruncatedZero => Limit::Floating {
                start: None,
                used: 0,
            },
            Shape::Bucket => Limit::Bucket {
                tokens: f64::from(cap),
                refilled: None,
            },
            Shape::SlidingLog => Limit::SlidingLog {
                log: VecDeque::new(),
            },
            Shape::Gcra => {
                let clock = FakeRelativeClock::default();
                let quota = Quota::per_second(NonZeroU32::new(cap).unwrap_or(NonZeroU32::MIN));
                Limit::Gcra {
                    limiter: RateLimiter::direct_with_clock(quota, clock.clone()),
                    clock,
                }
            }
            Shape::ExpressRateLimit => Limit::Express(ExpressWindow::default()),
            Shape::Leaky(_) => Limit::Leaky(LeakyBucket::new(cap)),
            Shape::Counting(_) => Limit::Counting(SlidingRate::new(cap)),
            Shape::Outage { down } => {
                let down_ms = u64::try_from(down.as_millis()).unwrap_or(u64::MAX);
                Limit::Outage(Outage::new(down_ms, cap))
            }
        }
    }

    /// Judges a request of a `shape` server arriving at `now`.
    pub(super) fn verdict(
        &mut self,
        shape: Shape,
        cap: u32,
        epoch: Instant,
        now: Instant,
    ) -> Verdict {
        // Whole milliseconds since the epoch, as nginx and HAProxy count.
        let ms =
            u64::try_from(now.saturating_duration_since(epoch).as_millis()).unwrap_or(u64::MAX);
        let silent = match self {
            Limit::Leaky(l) => Some(l.admit(ms)),
            Limit::Counting(c) => Some(c.admit(ms)),
            Limit::Outage(o) => Some(o.admit(ms)),
            _ => None,
        };
        if let Limit::Express(window) = self {
            return window.verdict(cap, now);
        }
        if let Some(ok) = silent {
            return if ok {
                Verdict::admitted()
            } else {
                Verdict::bare(shape.rejection_status())
            };
        }
        let verdict = match self.admit(cap, epoch, now) {
            Ok(()) => Verdict::admitted(),
            Err((ra, allowed)) => Verdict::rejected(ra, allowed),
        };
        if shape != Shape::RateLimitHeaders {
            return verdict;
        }
        let Limit::Window { window, used, .. } = self else {
            return verdict;
        };
        let next = epoch + SECOND * u32::try_from(*window + 1).unwrap_or(u32::MAX);
        let t = ceil_secs(next.saturating_duration_since(now));
        Verdict {
            retry_after: None,
            ratelimit: Some((cap.saturating_sub(*used), t)),
            names: if verdict.ok {
                Duration::ZERO
            } else {
                Duration::from_secs(t)
            },
            ..verdict
        }
    }

    /// Admits at `now`, or returns (`Retry-After` in whole seconds, the
    /// instant it allows).
    fn admit(&mut self, cap: u32, epoch: Instant, now: Instant) -> Result<(), (u64, Instant)> {
        match self {
            Limit::Window {
                window,
                used,
                closed_every,
            } => {
                let k = now.duration_since(epoch).as_secs();
                if k != *window {
                    *window = k;
                    *used = 0;
                }
                let closed = closed_every.is_some_and(|n| k % n == n - 1);
                if *used < cap && !closed {
                    *used += 1;
                    return Ok(());
                }
                let next = epoch + SECOND * u32::try_from(k + 1).unwrap_or(u32::MAX);
                Err((ceil_secs(next.duration_since(now)), next))
            }
            Limit::Bucket { tokens, refilled } => {
                let cap = f64::from(cap);
                let last = *refilled.get_or_insert(now);
                *tokens = (*tokens + now.duration_since(last).as_secs_f64() * cap).min(cap);
                *refilled = Some(now);
                if *tokens >= 1.0 {
                    *tokens -= 1.0;
                    return Ok(());
                }
                let until_token = Duration::from_secs_f64((1.0 - *tokens) / cap);
                let ra = ceil_secs(until_token);
                Err((ra, now + Duration::from_secs(ra)))
            }
            Limit::Floating { start, used } => {
                let begun = match *start {
                    Some(s) if now < s + SECOND => s,
                    _ => {
                        *used = 0;
                        *start.insert(now)
                    }
                };
                if *used < cap {
                    *used += 1;
                    return Ok(());
                }
                let end = begun + SECOND;
                // Truncated, as Flask-Limiter does: 0 inside a 1 s window.
                Err((end.duration_since(now).as_secs(), end))
            }
            Limit::SlidingLog { log } => {
                while log
                    .front()
                    .is_some_and(|&t| now.duration_since(t) >= SECOND)
                {
                    log.pop_front();
                }
                match log.front() {
                    Some(&oldest) if log.len() >= cap as usize => {
                        let leaves = oldest + SECOND;
                        Err((ceil_secs(leaves.duration_since(now)), leaves))
                    }
                    _ => {
                        log.push_back(now);
                        Ok(())
                    }
                }
            }
            Limit::Gcra { limiter, clock } => {
                // The clock only goes forward: to this arrival, since the epoch.
                let since_epoch = Duration::from(clock.now());
                clock.advance(
                    now.saturating_duration_since(epoch)
                        .saturating_sub(since_epoch),
                );
                let Err(not_until) = limiter.check() else {
                    return Ok(());
                };
                // What tower-governor sends: the wait, truncated to seconds.
                let ra = not_until.wait_time_from(clock.now()).as_secs();
                Err((ra, epoch + Duration::from(not_until.earliest_possible())))
            }
            // Judged in `verdict`.
            Limit::Express(_) | Limit::Leaky(_) | Limit::Counting(_) | Limit::Outage(_) => Ok(()),
        }
    }
}

/// Whole seconds, rounded up, at least 1.
fn ceil_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}
