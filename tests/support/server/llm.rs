//! An OpenAI-like server: `POST /v1/chat/completions` under a request
//! quota and a token quota, stated with OpenAI's headers.
//!
//! - **Windows**: fixed windows of [`LlmConfig::window`] (1 s by default),
//!   the first starting at the server's first request. Each admits at most
//!   [`requests`](LlmConfig::requests) requests and
//!   [`tokens`](LlmConfig::tokens) tokens.
//! - **Cost**: a request's token cost is its `x-cost` header (a whole
//!   number; absent or unreadable: 0). A client sets it to the number it
//!   declares as its `Cost`; a real API counts the prompt's tokens plus
//!   `max_tokens` instead.
//! - **Denial**: a request that would take the window past either quota
//!   gets `429` and spends nothing of the window. A request costlier than a
//!   whole window's tokens is never admitted.
//! - **Headers**: every answer (`200` and `429` alike, as OpenAI sends
//!   them) carries `x-ratelimit-limit-requests`,
//!   `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests` and the
//!   same three for `-tokens`: the remaining counts this request if it was
//!   admitted; both resets are the time left in the window as a Go
//!   duration (`1s`, `250ms`, `1.5s`, `0s`), rounded up to the millisecond
//!   (a client waiting that long never arrives before the window ends).
//!   A `429` also carries `retry-after-ms` (the same time left, in whole
//!   milliseconds, rounded up) unless [`LlmConfig::retry_after_ms`] is off,
//!   and never `Retry-After`: the time is there, in OpenAI's own header,
//!   which `RateLimitHeaders::openai()` reads.
//!
//! Tasks are told apart by their `x-task` header (their sends are numbered
//! from 1: the attempt). The server logs every request ([`LlmArrival`]):
//! when it arrived, its window, task, attempt, cost and status; and counts
//! the `429`s, those answered to a task's second or later send, the first
//! request, the first and the last `200`. Everything is answered at once
//! (or after [`LlmConfig::latency`]), from one lock: cheap and
//! deterministic given the arrival times.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::{lock, task_of};

/// The one path the server answers (`POST`).
pub const CHAT_COMPLETIONS: &str = "/v1/chat/completions";

/// `n` request costs in 20..=140 (mean about 80), the same for the same
/// `seed`: the high bits of a 64-bit LCG started at it.
pub fn costs(seed: u64, n: usize) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            20 + (x >> 33) % 121
        })
        .collect()
}

/// How an [`LlmServer`] limits.
#[derive(Debug, Clone, Copy)]
pub struct LlmConfig {
    /// The fixed window (1 s by default).
    pub window: Duration,
    /// Requests admitted per window.
    pub requests: u32,
    /// Tokens admitted per window.
    pub tokens: u64,
    /// Whether a `429` carries `retry-after-ms` (on by default).
    pub retry_after_ms: bool,
    /// How long each answer takes to leave after its request arrived
    /// (zero by default; the quotas are judged at arrival).
    pub latency: Duration,
}

impl LlmConfig {
    /// `requests` requests and `tokens` tokens per 1 s window.
    pub fn new(requests: u32, tokens: u64) -> Self {
        LlmConfig {
            window: Duration::from_secs(1),
            requests,
            tokens,
            retry_after_ms: true,
            latency: Duration::ZERO,
        }
    }

    /// How many windows requests of these `costs`, taken in this order,
    /// need at the least: each window takes the next requests while both
    /// quotas allow (a request costlier than a window's tokens gets a
    /// window of its own, though the server would never admit it).
    pub fn ideal_windows(&self, costs: &[u64]) -> usize {
        let mut windows = 0;
        let (mut used_requests, mut used_tokens) = (0u32, 0u64);
        for &cost in costs {
            let fits = windows > 0
                && used_requests < self.requests
                && used_tokens.saturating_add(cost) <= self.tokens;
            if fits {
                used_requests += 1;
                used_tokens += cost;
            } else {
                windows += 1;
                (used_requests, used_tokens) = (1, cost);
            }
        }
        windows
    }

    /// The least time from the first request to the last success for
    /// these `costs`: the start of the last window they need.
    pub fn ideal(&self, costs: &[u64]) -> Duration {
        let windows = u32::try_from(self.ideal_windows(costs)).unwrap_or(u32::MAX);
        self.window * windows.saturating_sub(1)
    }
}

/// One request as the server judged it.
#[derive(Debug, Clone, Copy)]
pub struct LlmArrival {
    /// Since the server's first request.
    pub at: Duration,
    /// Its window (0: the first).
    pub window: u64,
    pub task: Option<u32>,
    /// The task's send this was (1: its first); 1 without a task.
    pub attempt: u32,
    /// Its `x-cost`.
    pub cost: u64,
    /// `200` or `429`.
    pub status: u16,
}

impl LlmArrival {
    pub fn ok(&self) -> bool {
        self.status == 200
    }
}

/// What one window admitted and denied.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LlmWindow {
    pub index: u64,
    /// Requests admitted.
    pub requests: u32,
    /// Tokens admitted.
    pub tokens: u64,
    /// `429`s answered in it.
    pub rejected: u32,
    /// Tokens of every request that arrived in it, admitted or not: what
    /// the clients offered.
    pub offered: u64,
    /// When its first and its last request arrived, since it started.
    pub first: Option<Duration>,
    pub last: Option<Duration>,
}

/// What the server counted.
#[derive(Debug, Clone)]
pub struct LlmState {
    pub config: LlmConfig,
    /// The server's first request: the start of window 0.
    pub epoch: Option<Instant>,
    /// The current window and what it spent.
    window: u64,
    used_requests: u32,
    used_tokens: u64,
    pub requests: u64,
    pub oks: u64,
    /// `429`s.
    pub rejected: u64,
    /// `429`s answered to a task's second or later send.
    pub rejected_retries: u64,
    /// When the first `200` was answered (left the server).
    pub first_ok: Option<Instant>,
    /// When the last `200` was answered.
    pub last_ok: Option<Instant>,
    /// Sends per task.
    pub sends: HashMap<u32, u32>,
    /// Every request, in order of arrival.
    pub log: Vec<LlmArrival>,
}

/// Whole milliseconds, rounded up.
fn ceil_millis(d: Duration) -> u128 {
    d.as_nanos().div_ceil(1_000_000)
}

/// `d`, rounded up to the millisecond, as Go's `time.Duration` prints it
/// (OpenAI's reset format): `0s`, `250ms`, `1s`, `1.5s`, `6m0s`, `1h0m0.25s`.
pub fn go_duration(d: Duration) -> String {
    let ms = ceil_millis(d);
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (hours, rest) = (ms / 3_600_000, ms % 3_600_000);
    let (minutes, rest) = (rest / 60_000, rest % 60_000);
    let (secs, frac) = (rest / 1000, rest % 1000);
    let mut out = String::new();
    if hours > 0 {
        let _ = write!(out, "{hours}h");
    }
    if hours > 0 || minutes > 0 {
        let _ = write!(out, "{minutes}m");
    }
    let _ = write!(out, "{secs}");
    if frac > 0 {
        let digits = format!("{frac:03}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
    out.push('s');
    out
}

impl LlmState {
    pub fn new(config: LlmConfig) -> Self {
        LlmState {
            config,
            epoch: None,
            window: 0,
            used_requests: 0,
            used_tokens: 0,
            requests: 0,
            oks: 0,
            rejected: 0,
            rejected_retries: 0,
            first_ok: None,
            last_ok: None,
            sends: HashMap::new(),
            log: Vec::new(),
        }
    }

    /// Judges a request of `task` costing `cost`, arriving at `now`, and
    /// answers it.
    pub fn answer(&mut self, task: Option<u32>, cost: u64, now: Instant) -> ResponseTemplate {
        let c = self.config;
        let epoch = *self.epoch.get_or_insert(now);
        let since = now.duration_since(epoch);
        let window_nanos = c.window.as_nanos().max(1);
        let index = u64::try_from(since.as_nanos() / window_nanos).unwrap_or(u64::MAX);
        if index != self.window {
            (self.window, self.used_requests, self.used_tokens) = (index, 0, 0);
        }
        let ends = c.window * u32::try_from(index + 1).unwrap_or(u32::MAX);
        let reset_in = ends.saturating_sub(since);

        self.requests += 1;
        let attempt = match task {
            Some(id) => {
                let sends = self.sends.entry(id).or_default();
                *sends += 1;
                *sends
            }
            None => 1,
        };
        let ok =
            self.used_requests < c.requests && self.used_tokens.saturating_add(cost) <= c.tokens;
        let answered = now + c.latency;
        if ok {
            self.used_requests += 1;
            self.used_tokens += cost;
            self.oks += 1;
            self.first_ok.get_or_insert(answered);
            self.last_ok = Some(answered);
        } else {
            self.rejected += 1;
            self.rejected_retries += u64::from(attempt > 1);
        }
        let status = if ok { 200 } else { 429 };
        self.log.push(LlmArrival {
            at: since,
            window: index,
            task,
            attempt,
            cost,
            status,
        });

        let reset = go_duration(reset_in);
        let mut answer = if ok {
            ResponseTemplate::new(200).set_body_string(format!(
                r#"{{"object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"ok"}},"finish_reason":"stop"}}],"usage":{{"total_tokens":{cost}}}}}"#
            ))
        } else {
            let kind = if self.used_requests >= c.requests {
                "requests"
            } else {
                "tokens"
            };
            let mut a = ResponseTemplate::new(429).set_body_string(format!(
                r#"{{"error":{{"message":"Rate limit reached for {kind}","type":"{kind}","code":"rate_limit_exceeded"}}}}"#
            ));
            if c.retry_after_ms {
                a = a.insert_header("retry-after-ms", ceil_millis(reset_in).to_string().as_str());
            }
            a
        };
        answer = answer
            .insert_header("content-type", "application/json")
            .insert_header(
                "x-ratelimit-limit-requests",
                c.requests.to_string().as_str(),
            )
            .insert_header(
                "x-ratelimit-remaining-requests",
                (c.requests - self.used_requests).to_string().as_str(),
            )
            .insert_header("x-ratelimit-reset-requests", reset.as_str())
            .insert_header("x-ratelimit-limit-tokens", c.tokens.to_string().as_str())
            .insert_header(
                "x-ratelimit-remaining-tokens",
                c.tokens
                    .saturating_sub(self.used_tokens)
                    .to_string()
                    .as_str(),
            )
            .insert_header("x-ratelimit-reset-tokens", reset.as_str());
        if c.latency.is_zero() {
            answer
        } else {
            answer.set_delay(c.latency)
        }
    }

    /// Each window from the first to the last that saw a request (windows
    /// no request reached included, empty).
    pub fn windows(&self) -> Vec<LlmWindow> {
        let last = self.log.iter().map(|a| a.window).max();
        let Some(last) = last else {
            return Vec::new();
        };
        let mut windows: Vec<LlmWindow> = (0..=last)
            .map(|index| LlmWindow {
                index,
                ..LlmWindow::default()
            })
            .collect();
        for a in &self.log {
            let w = &mut windows[usize::try_from(a.window).unwrap_or(usize::MAX)];
            let since = a.at.saturating_sub(self.window_start(a.window));
            w.first.get_or_insert(since);
            w.last = Some(since);
            w.offered += a.cost;
            if a.ok() {
                w.requests += 1;
                w.tokens += a.cost;
            } else {
                w.rejected += 1;
            }
        }
        windows
    }

    /// `429`s answered to requests that arrived after the first `200` had
    /// been answered (a client that reads the headers knows the quotas by
    /// then).
    pub fn rejected_after_first_ok(&self) -> u64 {
        let (Some(epoch), Some(first)) = (self.epoch, self.first_ok) else {
            return 0;
        };
        let first = first.duration_since(epoch);
        self.log.iter().filter(|a| !a.ok() && a.at > first).count() as u64
    }

    /// The `429`s after the first `200` ([`rejected_after_first_ok`](Self::rejected_after_first_ok)),
    /// one line each: when, window, task, attempt, cost, and what the
    /// window had admitted before it.
    pub fn rejections_after_first_ok(&self) -> Vec<String> {
        let (Some(epoch), Some(first)) = (self.epoch, self.first_ok) else {
            return Vec::new();
        };
        let first = first.duration_since(epoch);
        let mut admitted: HashMap<u64, (u32, u64)> = HashMap::new();
        let mut out = Vec::new();
        for a in &self.log {
            let spent = admitted.entry(a.window).or_default();
            if a.ok() {
                spent.0 += 1;
                spent.1 += a.cost;
            } else if a.at > first {
                out.push(format!(
                    "429 at {:.3} s (window {}, {:.3} s in): task {:?} attempt {} cost {}; \
                     the window had admitted {} requests, {} tokens",
                    a.at.as_secs_f64(),
                    a.window,
                    a.at.saturating_sub(self.window_start(a.window))
                        .as_secs_f64(),
                    a.task,
                    a.attempt,
                    a.cost,
                    spent.0,
                    spent.1,
                ));
            }
        }
        out
    }

    /// When window `index` started, since the first request.
    pub fn window_start(&self, index: u64) -> Duration {
        self.config.window * u32::try_from(index).unwrap_or(u32::MAX)
    }

    /// From the first request to the last `200` answered, on the
    /// server's clock.
    pub fn span(&self) -> Option<Duration> {
        Some(self.last_ok?.duration_since(self.epoch?))
    }
}

struct Responder(Arc<Mutex<LlmState>>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let cost = request
            .headers
            .get("x-cost")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        lock(&self.0).answer(task_of(request), cost, Instant::now())
    }
}

/// An [`LlmState`] served on a fresh port (a new origin) at `POST`
/// [`CHAT_COMPLETIONS`].
pub struct LlmServer {
    mock: MockServer,
    state: Arc<Mutex<LlmState>>,
    /// The chat completions URL.
    pub url: String,
}

impl LlmServer {
    pub async fn start(config: LlmConfig) -> Self {
        let state = Arc::new(Mutex::new(LlmState::new(config)));
        let mock = super::serve(
            Mock::given(method("POST"))
                .and(path(CHAT_COMPLETIONS))
                .respond_with(Responder(state.clone())),
        )
        .await;
        let url = format!("{}{CHAT_COMPLETIONS}", mock.uri());
        LlmServer { mock, state, url }
    }

    /// What the server counted so far.
    pub fn state(&self) -> LlmState {
        lock(&self.state).clone()
    }

    /// Stops the server and returns what it counted.
    pub fn finish(self) -> LlmState {
        let LlmServer { mock, state, .. } = self;
        super::stop(mock);
        lock(&state).clone()
    }
}
