//! Anthropic's Messages API as its "Rate limits" page documents it, time
//! scaled down ([`AnthropicConfig::minute`]):
//!
//! - **Token buckets.** Requests, input tokens and output tokens each have
//!   a limit per minute, enforced as a bucket of that size "continuously
//!   replenished up to your maximum limit, rather than being reset at
//!   fixed intervals": refilled at limit per minute, never above the
//!   limit. A request is admitted when every bucket holds what it counts.
//! - **What a request counts.** One request; its input tokens
//!   (`x-input-tokens`: a real API counts the prompt); output tokens
//!   estimated from its `max_tokens` (`x-max-tokens`) at the start of the
//!   request, adjusted at its end to what it produced (`x-output-tokens`,
//!   at most `max_tokens`). Answers leave at once, so the adjustment is
//!   made before the answer's headers are written.
//! - **Headers, on every answer** (`200` and `429`):
//!   `anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}`
//!   and `anthropic-ratelimit-tokens-*`, the most restrictive token limit
//!   (the one with the least left). `-reset` is when the bucket is *fully
//!   replenished*, in RFC 3339 (with milliseconds, or whole seconds
//!   rounded up: [`AnthropicConfig::reset_millis`]). Token `remaining` is
//!   rounded to the nearest thousand ([`AnthropicConfig::round`]).
//! - **Over a limit**: `429`, `retry-after` in whole seconds (rounded up:
//!   "earlier retries will fail"), the JSON error `rate_limit_error`; the
//!   request spends nothing.
//!
//! What the docs leave open, chosen: buckets start full; a request needs
//! its whole `max_tokens` free in the output bucket to be admitted.
//!
//! Tasks are told apart by `x-task`; the server logs every request
//! ([`AnthropicArrival`]) and counts sends before the `retry-after` a
//! task's last `429` named (premature).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::wire::{Judge, Reply, Seen, rfc3339};

/// The one path the server answers (`POST`; another request: `404`, not
/// logged).
pub const MESSAGES: &str = "/v1/messages";

/// What one message asks: input tokens, `max_tokens`, and the output it
/// will produce (≤ `max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    pub input: u64,
    pub max_tokens: u64,
    pub output: u64,
}

/// `n` messages, the same for the same `seed`: input 300..=1500 tokens,
/// `max_tokens` 256, output 40..=256.
pub fn messages(seed: u64, n: usize) -> Vec<Message> {
    let mut x = seed;
    let mut next = move |span: u64| {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) % span
    };
    (0..n)
        .map(|_| Message {
            input: 300 + next(1_201),
            max_tokens: 256,
            output: 40 + next(217),
        })
        .collect()
}

/// The limits, per (scaled) minute.
#[derive(Debug, Clone, Copy)]
pub struct AnthropicConfig {
    /// The minute, scaled (a bucket refills its limit in this time).
    pub minute: Duration,
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Token `remaining` rounded to the nearest multiple of this (1000 as
    /// documented; 1: exact).
    pub round: u64,
    /// Resets with milliseconds (`…T12:00:07.250Z`), or whole seconds
    /// rounded up (`…T12:00:08Z`).
    pub reset_millis: bool,
}

impl AnthropicConfig {
    /// A tier's limits over a minute of `minute`, token remaining rounded
    /// to the thousand, resets in milliseconds.
    pub fn new(minute: Duration, requests: u64, input_tokens: u64, output_tokens: u64) -> Self {
        AnthropicConfig {
            minute,
            requests,
            input_tokens,
            output_tokens,
            round: 1_000,
            reset_millis: true,
        }
    }

    /// The least time from the first request to the last admission for
    /// these messages, sent in this order, each as soon as every bucket
    /// holds what it counts (the documented limits' best completion).
    pub fn ideal(&self, messages: &[Message]) -> Duration {
        let t0 = Instant::now();
        let mut b = Buckets::new(self);
        let mut at = t0;
        for m in messages {
            at = b.earliest(at, m);
            b.admit(at, m);
        }
        at - t0
    }
}

/// A token bucket in its GCRA form: full at `full`, `limit` per `minute`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    limit: u64,
    minute: Duration,
    /// When it is full again (at or before now: full).
    full: Option<Instant>,
}

impl Bucket {
    /// How long `units` take to refill.
    fn refill(&self, units: u64) -> Duration {
        let nanos = self.minute.as_nanos() * u128::from(units) / u128::from(self.limit.max(1));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// What it holds at `now`.
    fn level(&self, now: Instant) -> u64 {
        let empty_for = self
            .full
            .map_or(Duration::ZERO, |f| f.saturating_duration_since(now));
        let missing =
            (empty_for.as_nanos() * u128::from(self.limit)).div_ceil(self.minute.as_nanos().max(1));
        self.limit
            .saturating_sub(u64::try_from(missing).unwrap_or(u64::MAX))
    }

    /// The earliest instant from `now` on when it holds `units`.
    fn earliest(&self, now: Instant, units: u64) -> Instant {
        let Some(full) = self.full else { return now };
        // Full at `full`; holds `units` once `limit - units` are missing.
        let at = full.checked_sub(self.refill(self.limit.saturating_sub(units)));
        at.map_or(now, |at| at.max(now))
    }

    fn take(&mut self, now: Instant, units: u64) {
        let from = self.full.map_or(now, |f| f.max(now));
        self.full = Some(from + self.refill(units));
    }

    fn give_back(&mut self, now: Instant, units: u64) {
        if let Some(full) = self.full {
            self.full = Some(full.checked_sub(self.refill(units)).unwrap_or(now).max(now));
        }
    }

    fn full_at(&self, now: Instant) -> Instant {
        self.full.map_or(now, |f| f.max(now))
    }
}

/// The three buckets.
#[derive(Debug, Clone, Copy)]
struct Buckets {
    requests: Bucket,
    input: Bucket,
    output: Bucket,
}

impl Buckets {
    fn new(c: &AnthropicConfig) -> Self {
        let bucket = |limit| Bucket {
            limit,
            minute: c.minute,
            full: None,
        };
        Buckets {
            requests: bucket(c.requests),
            input: bucket(c.input_tokens),
            output: bucket(c.output_tokens),
        }
    }

    fn earliest(&self, now: Instant, m: &Message) -> Instant {
        self.requests
            .earliest(now, 1)
            .max(self.input.earliest(now, m.input))
            .max(self.output.earliest(now, m.max_tokens))
    }

    /// Admits `m` at `now`: spends, then adjusts the output to what it
    /// produced.
    fn admit(&mut self, now: Instant, m: &Message) {
        self.requests.take(now, 1);
        self.input.take(now, m.input);
        self.output.take(now, m.max_tokens);
        self.output
            .give_back(now, m.max_tokens.saturating_sub(m.output));
    }
}

/// One request as the server judged it.
#[derive(Debug, Clone, Copy)]
pub struct AnthropicArrival {
    /// Since the server's first request.
    pub at: Duration,
    pub task: Option<u32>,
    /// The task's send this was (1: its first).
    pub attempt: u32,
    pub status: u16,
    /// It came before the `retry-after` the task's last `429` named.
    pub premature: bool,
}

/// What the server counted. Served with
/// [`JudgedServer`](super::wire::JudgedServer) at `POST` [`MESSAGES`].
#[derive(Debug, Clone)]
pub struct AnthropicState {
    pub config: AnthropicConfig,
    buckets: Buckets,
    pub epoch: Option<Instant>,
    pub log: Vec<AnthropicArrival>,
    /// When the last `200` was answered.
    pub last_ok: Option<Instant>,
    sends: HashMap<u32, u32>,
    /// Per task: the time its last `429` named.
    told: HashMap<u32, Instant>,
}

/// Each bucket's `limit`, `remaining` and `reset` headers: requests,
/// input tokens, output tokens, and the tightest token bucket.
const HEADERS: [[&str; 3]; 4] = [
    [
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
    ],
    [
        "anthropic-ratelimit-input-tokens-limit",
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
    ],
    [
        "anthropic-ratelimit-output-tokens-limit",
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
    ],
    [
        "anthropic-ratelimit-tokens-limit",
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
    ],
];

/// `n` rounded to the nearest multiple of `step`.
fn nearest(n: u64, step: u64) -> u64 {
    if step <= 1 {
        return n;
    }
    (n + step / 2) / step * step
}

impl AnthropicState {
    pub fn new(config: AnthropicConfig) -> Self {
        AnthropicState {
            config,
            buckets: Buckets::new(&config),
            epoch: None,
            log: Vec::new(),
            last_ok: None,
            sends: HashMap::new(),
            told: HashMap::new(),
        }
    }

    /// Judges message `m` of `task` arriving at `now` (`wall`: the same
    /// instant since the Unix epoch).
    fn answer(&mut self, task: Option<u32>, m: Message, now: Instant, wall: Duration) -> Reply {
        let epoch = *self.epoch.get_or_insert(now);
        let attempt = match task {
            Some(id) => {
                let sends = self.sends.entry(id).or_default();
                *sends += 1;
                *sends
            }
            None => 1,
        };
        let premature = task
            .and_then(|id| self.told.get(&id))
            .is_some_and(|&not_before| now < not_before);
        let b = &mut self.buckets;
        let earliest = b.earliest(now, &m);
        let ok = earliest <= now;
        let mut reply = if ok {
            b.admit(now, &m);
            self.last_ok = Some(now);
            Reply::new(200).body(format!(
                r#"{{"type":"message","role":"assistant","content":[{{"type":"text","text":"ok"}}],"usage":{{"input_tokens":{},"output_tokens":{}}}}}"#,
                m.input, m.output
            ))
        } else {
            let wait = earliest - now;
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            if let Some(id) = task {
                self.told.insert(id, now + Duration::from_secs(secs));
            }
            Reply::new(429)
                .header("retry-after", secs.max(1))
                .body(r#"{"type":"error","error":{"type":"rate_limit_error","message":"rate limit exceeded"}}"#)
        };
        self.log.push(AnthropicArrival {
            at: now - epoch,
            task,
            attempt,
            status: reply.status,
            premature,
        });
        let c = self.config;
        let b = self.buckets;
        let reset = |bucket: &Bucket| rfc3339(wall + (bucket.full_at(now) - now), c.reset_millis);
        let tightest = if b.input.level(now) <= b.output.level(now) {
            b.input
        } else {
            b.output
        };
        let limits = [(b.requests, 1), (b.input, c.round), (b.output, c.round)];
        for ((bucket, round), [limit, remaining, reset_at]) in
            limits.into_iter().chain([(tightest, c.round)]).zip(HEADERS)
        {
            reply = reply
                .header(limit, bucket.limit)
                .header(remaining, nearest(bucket.level(now), round))
                .header(reset_at, reset(&bucket));
        }
        reply
    }

    /// `429`s the server answered.
    pub fn rejected(&self) -> usize {
        self.log.iter().filter(|a| a.status == 429).count()
    }

    /// `200`s.
    pub fn oks(&self) -> usize {
        self.log.iter().filter(|a| a.status == 200).count()
    }

    /// Sends before the `retry-after` their task's last `429` named.
    pub fn premature(&self) -> usize {
        self.log.iter().filter(|a| a.premature).count()
    }

    /// From the first request to the last `200`, on the server's clock.
    pub fn span(&self) -> Option<Duration> {
        Some(self.last_ok?.duration_since(self.epoch?))
    }
}

impl Judge for AnthropicState {
    /// Judges a `POST` [`MESSAGES`]: the message its `x-input-tokens`,
    /// `x-max-tokens` and `x-output-tokens` (at most `max_tokens`) say.
    fn judge(&mut self, request: &Seen<'_>, now: Instant, wall: Duration) -> Reply {
        if request.method != "POST" || request.path != MESSAGES {
            return Reply::new(404);
        }
        // A header's whole number (absent or unreadable: 0).
        let number = |name| {
            request
                .header(name)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let max_tokens = number("x-max-tokens");
        let m = Message {
            input: number("x-input-tokens"),
            max_tokens,
            output: number("x-output-tokens").min(max_tokens),
        };
        self.answer(request.task, m, now, wall)
    }
}
