//! A server stating its quotas with the IETF fields of
//! draft-ietf-httpapi-ratelimit-headers-11 (`RateLimit-Policy` and
//! `RateLimit`), its capacity divided into partitions of one origin, each
//! named by the `pk` (partition key, a Byte Sequence) parameter:
//!
//! - A request's partition is chosen by the first segment of its path
//!   (`/a/…`, `/b/…`: [`Partition::prefix`]); a path in none gets `404`.
//! - Each partition is a quota of its own per window: `q` requests per
//!   `w` seconds, a fixed window opening at its first request at or after
//!   its last reset.
//! - Every answer of a partition carries `RateLimit-Policy:
//!   "<policy>";q=<q>;w=<w>;pk=:<key>:` and `RateLimit:
//!   "<policy>";r=<left>;t=<seconds to the reset, rounded up>;pk=:<key>:`.
//!   Every partition's policy has the same name ([`Config::policy`]): only
//!   the `pk` tells them apart, as in the draft's `"peruser"` example.
//! - A request over its partition's quota gets `429` with the fields
//!   (`r=0`) and the draft's `quota-exceeded` problem body; with
//!   [`Config::retry_after`], `Retry-After: <t>` too (the draft asks that
//!   it name no time before the window's end: it names the same).
//!
//! What the draft leaves open, chosen: a `429` spends nothing of the
//! quota. Counted: a task's send before the end of the window its last
//! `429` named (premature).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::wire::{Judge, Reply, Seen};

/// One partition: requests under `prefix`, `quota` per `window_secs`.
#[derive(Debug, Clone, Copy)]
pub struct Partition {
    /// The first path segment, with its slash (`/a`).
    pub prefix: &'static str,
    /// Its partition key, as the Byte Sequence's base64.
    pub key: &'static str,
    pub quota: u32,
    pub window_secs: u64,
}

/// How the server limits.
#[derive(Debug, Clone)]
pub struct Config {
    pub partitions: Vec<Partition>,
    /// The one policy name every partition states.
    pub policy: &'static str,
    /// A `429` carries `Retry-After` too.
    pub retry_after: bool,
}

/// One request as the server judged it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    /// The index of its partition in [`Config::partitions`].
    pub partition: Option<usize>,
    pub status: u16,
    pub task: Option<u32>,
    pub premature: bool,
}

/// A partition's window: open until `reset`, `used` of it spent.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    reset: Option<Instant>,
    used: u32,
}

/// The server: its configuration and every arrival.
#[derive(Debug)]
pub struct PartitionsState {
    pub config: Config,
    pub arrivals: Vec<Arrival>,
    windows: Vec<Window>,
    /// Per task: the end of the window its last `429` named.
    told: HashMap<u32, Instant>,
}

/// Whole seconds, rounded up.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl PartitionsState {
    /// A server with `config` that has seen nothing.
    pub fn new(config: Config) -> Self {
        let windows = vec![Window::default(); config.partitions.len()];
        PartitionsState {
            config,
            arrivals: Vec::new(),
            windows,
            told: HashMap::new(),
        }
    }

    /// Answers with `status` from partition `p`.
    pub fn count(&self, p: usize, status: u16) -> usize {
        self.arrivals
            .iter()
            .filter(|a| a.partition == Some(p) && a.status == status)
            .count()
    }

    /// Sends before the end of the window the task's last `429` named.
    pub fn premature(&self) -> usize {
        self.arrivals.iter().filter(|a| a.premature).count()
    }

    /// From partition `p`'s first request to its last `200`, on the
    /// server's clock.
    pub fn finished(&self, p: usize) -> Option<Duration> {
        let of = || self.arrivals.iter().filter(|a| a.partition == Some(p));
        let first = of().next()?.at;
        let last = of().rfind(|a| a.status == 200)?.at;
        Some(last - first)
    }

    /// Records `request`, arriving at `now`, and its answer.
    fn record(&mut self, request: &Seen<'_>, now: Instant, partition: Option<usize>, status: u16) {
        let premature = request
            .task
            .and_then(|id| self.told.get(&id))
            .is_some_and(|&until| now < until);
        self.arrivals.push(Arrival {
            at: now,
            partition,
            status,
            task: request.task,
            premature,
        });
    }
}

impl Judge for PartitionsState {
    fn judge(&mut self, request: &Seen<'_>, now: Instant, _wall: Duration) -> Reply {
        let found = self.config.partitions.iter().position(|p| {
            request
                .path
                .strip_prefix(p.prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        });
        let Some(i) = found else {
            self.record(request, now, None, 404);
            return Reply::new(404);
        };
        let p = self.config.partitions[i];
        let window = &mut self.windows[i];
        let reset = match window.reset {
            Some(reset) if now < reset => reset,
            _ => {
                window.used = 0;
                *window
                    .reset
                    .insert(now + Duration::from_secs(p.window_secs))
            }
        };
        let admitted = window.used < p.quota;
        window.used += u32::from(admitted);
        let left = p.quota - window.used;
        let t = ceil_secs(reset - now);
        let name = self.config.policy;
        let reply = |status: u16| {
            Reply::new(status)
                .header(
                    "ratelimit-policy",
                    format!(
                        "\"{name}\";q={};w={};pk=:{}:",
                        p.quota, p.window_secs, p.key
                    ),
                )
                .header(
                    "ratelimit",
                    format!("\"{name}\";r={left};t={t};pk=:{}:", p.key),
                )
        };
        if admitted {
            self.record(request, now, Some(i), 200);
            return reply(200).body("{}");
        }
        self.record(request, now, Some(i), 429);
        if let Some(id) = request.task {
            self.told.insert(id, reset);
        }
        let body = format!(
            r#"{{"type": "https://iana.org/assignments/http-problem-types#quota-exceeded", "title": "Request cannot be satisfied as assigned quota has been exceeded", "violated-policies": ["{name}"]}}"#
        );
        let answer = reply(429).body(body);
        if self.config.retry_after {
            answer.header("retry-after", t)
        } else {
            answer
        }
    }
}

/// The best completion of `n` requests to partition `p`: its windows
/// opening back to back from the first request, the last request in the
/// last one's opening instant.
pub fn ideal(p: &Partition, n: u32) -> Duration {
    let windows = n.div_ceil(p.quota.max(1));
    Duration::from_secs(p.window_secs) * windows.saturating_sub(1)
}
