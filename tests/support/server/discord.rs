//! Discord's HTTP API as its "Rate Limits" page documents it:
//!
//! - Per-route buckets. A [`Route`] (method and path, ids as `{}`) counts
//!   against a bucket, named by an opaque hash in `X-RateLimit-Bucket`;
//!   routes Discord groups share one hash. A bucket is counted per major
//!   parameter (the channel, guild or webhook id leading the path): the
//!   same hash on two channels is two limits. A bucket's window opens at
//!   its first request at or after its last reset.
//! - Every routed answer carries `X-RateLimit-Limit`, `-Remaining`,
//!   `-Reset` (epoch seconds, with decimals), `-Reset-After` (seconds,
//!   with decimals) and `-Bucket`. Over a bucket: `429` with those,
//!   `X-RateLimit-Scope: user`, `Retry-After` (whole seconds, rounded up,
//!   as the docs' example: 65 for 64.57) and the JSON body `message`,
//!   `retry_after` (seconds, with decimals), `global: false`.
//! - The global limit: [`Config::global`] requests a second (50 for every
//!   bot), over every route, counting every request; a request over it
//!   gets `429` with `X-RateLimit-Global: true`, `X-RateLimit-Scope:
//!   global`, `Retry-After` and the body with `global: true`, and no bucket
//!   fields (as the docs' example).
//! - A shared resource's limit ([`Shared`], optional): a channel limited
//!   for all its users; over it, `429` with `X-RateLimit-Scope: shared` and
//!   the bucket's fields, its quota untouched.
//!
//! What the docs leave open, chosen or varied: a `429` (bucket or global)
//! spends nothing of the bucket; `X-RateLimit-Reset-After` can be left out
//! ([`Config::reset_after`]), and the server's clock skewed
//! ([`Config::clock_skew_ms`]: its `Date` and every `X-RateLimit-Reset`).
//!
//! Counted: a task's send before its last `429`'s `retry_after`
//! (premature); arrivals inside an announced global wait (on the server:
//! requests already in flight included; [`sends_in_global_wait`] reads
//! what the client had heard); a bucket's `429` after that bucket had
//! answered once ([`DiscordState::known_bucket_429s`]).

use std::collections::HashMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::tap::{Heard, header};
use super::wire::{Judge, Reply, Seen};

/// A route and the bucket it counts against.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    /// The path, each id a `{}` (a snowflake: digits).
    pub path: &'static str,
    /// The bucket's hash (routes with the same hash share a limit).
    pub bucket: &'static str,
    pub limit: u32,
    pub window: Duration,
}

/// A limit of one resource (a channel) over all its users.
#[derive(Debug, Clone, Copy)]
pub struct Shared {
    /// The major parameter (the channel id) it limits.
    pub major: &'static str,
    pub limit: u32,
    pub window: Duration,
}

/// How the server limits.
#[derive(Debug, Clone)]
pub struct Config {
    pub routes: Vec<Route>,
    /// Requests a second over every route (Discord: 50).
    pub global: u32,
    /// Send `X-RateLimit-Reset-After` (Discord does).
    pub reset_after: bool,
    /// The server's clock runs this many ms ahead of the system's (behind,
    /// if negative): its `Date` and `X-RateLimit-Reset`.
    pub clock_skew_ms: i64,
    pub shared: Option<Shared>,
}

impl Config {
    /// `routes` under the documented global 50 a second, with every field,
    /// the server's clock right.
    pub fn new(routes: Vec<Route>) -> Self {
        Config {
            routes,
            global: 50,
            reset_after: true,
            clock_skew_ms: 0,
            shared: None,
        }
    }
}

/// `path` matched against a route's `template`: `Some(major parameter)`
/// (empty when the route has none).
fn matches(template: &str, path: &str) -> Option<String> {
    let (t, p): (Vec<_>, Vec<_>) = (template.split('/').collect(), path.split('/').collect());
    if t.len() != p.len() {
        return None;
    }
    for (ts, ps) in t.iter().zip(&p) {
        let id = !ps.is_empty() && ps.bytes().all(|b| b.is_ascii_digit());
        if (*ts == "{}" && !id) || (*ts != "{}" && ts != ps) {
            return None;
        }
    }
    let major =
        matches!(t.get(1), Some(&("channels" | "guilds" | "webhooks"))) && t.get(2) == Some(&"{}");
    Some(if major {
        p[2].to_owned()
    } else {
        String::new()
    })
}

/// What the server answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Admitted: `200`.
    Ok,
    /// The global limit's `429`.
    Global,
    /// A bucket's `429` (`X-RateLimit-Scope: user`).
    User,
    /// A shared resource's `429`.
    Shared,
    /// No route: `404`.
    NotFound,
}

/// One request as the server judged it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    pub path: String,
    /// The bucket it counted against: `hash:major`.
    pub bucket: Option<String>,
    pub kind: Kind,
    pub task: Option<u32>,
    pub premature: bool,
    /// It arrived inside a global wait the server had announced.
    pub in_global_wait: bool,
    /// A bucket's `429` on a bucket that had answered before.
    pub known_bucket: bool,
}

/// A fixed window: open until `reset`, `used` of it spent.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    reset: Option<Instant>,
    used: u32,
}

impl Window {
    /// Rolls to a new window (opening at `now`, `length` long) if the last
    /// one has reset; returns the open window's reset.
    fn roll(&mut self, now: Instant, length: Duration) -> Instant {
        match self.reset {
            Some(reset) if now < reset => reset,
            _ => {
                self.used = 0;
                *self.reset.insert(now + length)
            }
        }
    }
}

/// The server: its configuration and every arrival.
#[derive(Debug)]
pub struct DiscordState {
    pub config: Config,
    pub arrivals: Vec<Arrival>,
    /// Each global `429`: when it was answered and the end of the wait it
    /// announced.
    pub global_waits: Vec<(Instant, Instant)>,
    buckets: HashMap<String, (Window, bool)>,
    global: Window,
    shared: Window,
    /// Per task: the end of the wait its last `429` named.
    told: HashMap<u32, Instant>,
}

/// Seconds with three decimals, as Discord writes them.
fn decimal(d: Duration) -> String {
    format!("{}.{:03}", d.as_secs(), d.subsec_millis())
}

/// Whole seconds, rounded up, at least 1 (a `Retry-After`).
fn whole(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

/// A `429` with `Retry-After` and Discord's JSON body.
fn limited(message: &str, wait: Duration, global: bool) -> Reply {
    let body = format!(
        r#"{{"message": "{message}", "retry_after": {}, "global": {global}}}"#,
        decimal(wait)
    );
    Reply::new(429)
        .header("retry-after", whole(wait))
        .body(body)
}

impl DiscordState {
    /// A server with `config` that has seen nothing.
    pub fn new(config: Config) -> Self {
        DiscordState {
            config,
            arrivals: Vec::new(),
            global_waits: Vec::new(),
            buckets: HashMap::new(),
            global: Window::default(),
            shared: Window::default(),
            told: HashMap::new(),
        }
    }

    /// Requests answered as `kind`.
    pub fn count(&self, kind: Kind) -> usize {
        self.arrivals.iter().filter(|a| a.kind == kind).count()
    }

    /// Sends before the end of the wait the task's last `429` named.
    pub fn premature(&self) -> usize {
        self.arrivals.iter().filter(|a| a.premature).count()
    }

    /// Arrivals inside an announced global wait (requests in flight when
    /// it was announced included).
    pub fn in_global_wait(&self) -> usize {
        self.arrivals.iter().filter(|a| a.in_global_wait).count()
    }

    /// Bucket `429`s on a bucket that had answered before.
    pub fn known_bucket_429s(&self) -> usize {
        self.arrivals.iter().filter(|a| a.known_bucket).count()
    }

    /// From the first request to the last `200`, on the server's clock.
    pub fn finished(&self) -> Option<Duration> {
        let first = self.arrivals.first()?.at;
        let last = self.arrivals.iter().rfind(|a| a.kind == Kind::Ok)?.at;
        Some(last - first)
    }

    /// Records `request`, arriving at `now`, and its answer.
    fn record(&mut self, request: &Seen<'_>, now: Instant, bucket: Option<String>, kind: Kind) {
        let premature = request
            .task
            .and_then(|id| self.told.get(&id))
            .is_some_and(|&until| now < until);
        let in_global_wait = self.global_waits.iter().any(|&(_, end)| now < end);
        let known_bucket = kind == Kind::User
            && bucket
                .as_ref()
                .and_then(|b| self.buckets.get(b))
                .is_some_and(|&(_, answered)| answered);
        self.arrivals.push(Arrival {
            at: now,
            path: request.path.to_owned(),
            bucket,
            kind,
            task: request.task,
            premature,
            in_global_wait,
            known_bucket,
        });
    }

    /// Notes that `task` was told to wait until `until`.
    fn tell(&mut self, task: Option<u32>, until: Instant) {
        if let Some(id) = task {
            self.told.insert(id, until);
        }
    }
}

impl Judge for DiscordState {
    fn judge(&mut self, request: &Seen<'_>, now: Instant, wall: Duration) -> Reply {
        let (skew_ms, reset_after) = (self.config.clock_skew_ms, self.config.reset_after);
        let skew = Duration::from_millis(skew_ms.unsigned_abs());
        let server_wall = |at: Instant| {
            let w = wall + at.saturating_duration_since(now);
            if skew_ms >= 0 {
                w + skew
            } else {
                w.saturating_sub(skew)
            }
        };
        let date = (skew_ms != 0).then(|| httpdate::fmt_http_date(UNIX_EPOCH + server_wall(now)));
        let dated = |reply: Reply| match &date {
            Some(d) => reply.header("date", d),
            None => reply,
        };
        let global_reset = self.global.roll(now, Duration::from_secs(1));
        self.global.used += 1;
        if self.global.used > self.config.global {
            self.record(request, now, None, Kind::Global);
            self.global_waits.push((now, global_reset));
            self.tell(request.task, global_reset);
            let wait = global_reset - now;
            return dated(limited("You are being rate limited.", wait, true))
                .header("x-ratelimit-global", "true")
                .header("x-ratelimit-scope", "global");
        }
        let routed = self.config.routes.iter().find_map(|r| {
            let major = matches(r.path, request.path).filter(|_| r.method == request.method)?;
            Some((*r, major))
        });
        let Some((route, major)) = routed else {
            self.record(request, now, None, Kind::NotFound);
            return dated(Reply::new(404).body(r#"{"message": "404: Not Found", "code": 0}"#));
        };
        let key = format!("{}:{major}", route.bucket);
        let (window, _) = self.buckets.entry(key.clone()).or_default();
        let reset = window.roll(now, route.window);
        let used = window.used;
        let fields = |reply: Reply, remaining: u32| {
            let reply = reply
                .header("x-ratelimit-limit", route.limit)
                .header("x-ratelimit-remaining", remaining)
                .header("x-ratelimit-reset", decimal(server_wall(reset)));
            let reply = if reset_after {
                reply.header("x-ratelimit-reset-after", decimal(reset - now))
            } else {
                reply
            };
            dated(reply.header("x-ratelimit-bucket", route.bucket))
        };
        let shared = self.config.shared.filter(|s| s.major == major);
        if let Some(s) = shared {
            let shared_reset = self.shared.roll(now, s.window);
            self.shared.used += 1;
            if self.shared.used > s.limit {
                self.record(request, now, Some(key), Kind::Shared);
                self.tell(request.task, shared_reset);
                let reply = limited(
                    "The resource is being rate limited.",
                    shared_reset - now,
                    false,
                );
                return fields(reply, route.limit - used).header("x-ratelimit-scope", "shared");
            }
        }
        if used >= route.limit {
            self.record(request, now, Some(key.clone()), Kind::User);
            self.tell(request.task, reset);
            if let Some((_, answered)) = self.buckets.get_mut(&key) {
                *answered = true;
            }
            let reply = limited("You are being rate limited.", reset - now, false);
            return fields(reply, 0).header("x-ratelimit-scope", "user");
        }
        self.record(request, now, Some(key.clone()), Kind::Ok);
        if let Some((window, answered)) = self.buckets.get_mut(&key) {
            window.used += 1;
            *answered = true;
        }
        fields(Reply::new(200).body("{}"), route.limit - used - 1)
    }
}

/// The best completion of `buckets` (each a bucket's limit, window and
/// the requests it takes) under `global` requests a second: the time from
/// the first request to the last, for a client that sends each at the
/// earliest instant its bucket and the global limit admit it.
pub fn ideal(buckets: &[(u32, Duration, u32)], global: u32) -> Duration {
    let mut left: Vec<u32> = buckets.iter().map(|b| b.2).collect();
    let mut windows = vec![(None::<Duration>, 0u32); buckets.len()];
    let (mut g_reset, mut g_used) = (None::<Duration>, 0u32);
    let (mut t, mut last) = (Duration::ZERO, Duration::ZERO);
    while left.iter().any(|&n| n > 0) {
        if g_reset.is_some_and(|r| t >= r) {
            (g_reset, g_used) = (None, 0);
        }
        for w in &mut windows {
            if w.0.is_some_and(|r| t >= r) {
                *w = (None, 0);
            }
        }
        for (i, &(limit, window, _)) in buckets.iter().enumerate() {
            while left[i] > 0 && windows[i].1 < limit && g_used < global {
                windows[i].0.get_or_insert(t + window);
                g_reset.get_or_insert(t + Duration::from_secs(1));
                windows[i].1 += 1;
                g_used += 1;
                left[i] -= 1;
                last = t;
            }
        }
        let blocked = (0..buckets.len())
            .filter(|&i| left[i] > 0 && windows[i].1 >= buckets[i].0)
            .filter_map(|i| windows[i].0);
        let global_full = g_reset.filter(|_| g_used >= global);
        match blocked.chain(global_full).min() {
            Some(next) => t = next,
            None => break,
        }
    }
    last
}

/// Sends the client made inside a global wait it had heard of: after it
/// heard a `429` with `X-RateLimit-Global: true`, before the end of the
/// wait the server had announced last before then.
pub fn sends_in_global_wait(heard: &[Heard], server: &DiscordState) -> usize {
    let mut until: Option<Instant> = None;
    let mut inside = 0;
    for event in heard {
        match event {
            Heard::Answered { at, headers, .. }
                if header(headers, "x-ratelimit-global") == Some("true") =>
            {
                let end = server
                    .global_waits
                    .iter()
                    .filter(|&&(announced, _)| announced <= *at)
                    .map(|&(_, end)| end)
                    .max();
                until = until.max(end);
            }
            Heard::Sent { at, .. } => inside += usize::from(until.is_some_and(|u| *at < u)),
            _ => {}
        }
    }
    inside
}
