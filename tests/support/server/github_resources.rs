//! GitHub's REST API as its "Rate limits for the REST API" page documents
//! it, with several primary quotas on one host:
//!
//! - Each resource is a quota of its own per window: `core` (everything
//!   not below), `search` (`/search/…`), `code_search` (`/search/code`),
//!   `graphql` (`/graphql`) ([`resource_of`]). A resource's window opens at
//!   its first request at or after its last reset and resets on the whole
//!   epoch second `ceil(opened + window)`: the reset it states is exact.
//! - Every answer of the API carries `x-ratelimit-limit`, `-remaining`,
//!   `-used`, `-reset` (Unix epoch seconds) and `-resource`. A request over
//!   its resource's quota gets a rate-limit status ([`Config::statuses`]:
//!   GitHub sends `403` or `429`) with `x-ratelimit-remaining: 0`. The
//!   request that takes a quota's last unit gets its `200` with
//!   `remaining: 0`.
//! - The secondary limit ([`Secondary`]): points per span over every
//!   request that reaches the API, whatever its resource or answer (GitHub:
//!   `GET`, `HEAD`, `OPTIONS` 1 point, other methods 5; it names no figures
//!   a client could plan with). A request over it gets a rate-limit status
//!   with `retry-after` and its resource's fields (quota left), and spends
//!   no primary quota.
//! - Options beyond the docs: a resource's answers leaving late (search
//!   is slower than a repository read: [`Config::slow`]), a gateway's
//!   `502` on every n-th arrival
//!   (before the API: it counts toward neither limit, and carries no
//!   fields), and a plain `403` on chosen repositories (the fields, quota
//!   left, no `retry-after`; it counts toward both limits, as at GitHub).
//!
//! Each request is recorded on the server's clock with its answer; a
//! task's send before the time its last rate-limit answer named (the
//! `retry-after`, or the reset) is premature. What a client *knew* when it
//! sent is read from its [`Tap`](super::tap::Tap): [`sends_into_spent`].

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::github::{
    Answer, PRIMARY_BODY, REFUSED_BODY, SECONDARY_BODY, ceil_secs, rate_limit_fields,
};
use super::tap::{Heard, header};
use super::wire::{Judge, Reply, Seen, wall_now};

/// One primary quota: `quota` requests per `window` (whole seconds).
#[derive(Debug, Clone, Copy)]
pub struct Resource {
    pub name: &'static str,
    pub quota: u32,
    pub window: Duration,
}

/// The secondary limit: at most `points` in any `span`, above which a
/// request is answered with `retry-after: <retry_after>`.
#[derive(Debug, Clone, Copy)]
pub struct Secondary {
    pub points: u32,
    pub span: Duration,
    pub retry_after: u64,
}

/// How the server limits and fails.
#[derive(Debug, Clone)]
pub struct Config {
    /// The resources served; a request to another resource gets `404`.
    pub resources: Vec<Resource>,
    pub secondary: Option<Secondary>,
    /// The status of the k-th rate-limit answer (primary or secondary) is
    /// `statuses[k % len]`: GitHub sends `403` or `429`.
    pub statuses: Vec<u16>,
    /// Every this many-th arrival gets a gateway's `502` (0: none).
    pub bad_gateway_every: u32,
    /// Repository paths (`/repos/o/r`) whose requests get a plain `403`.
    pub refused: Vec<String>,
    /// Answers of these resources leave this long after their request
    /// arrived (judged on arrival).
    pub slow: Vec<(&'static str, Duration)>,
}

impl Config {
    /// The given resources, no secondary limit, `403`s, no failures.
    pub fn new(resources: Vec<Resource>) -> Self {
        Config {
            resources,
            secondary: None,
            statuses: vec![403],
            bad_gateway_every: 0,
            refused: Vec::new(),
            slow: Vec::new(),
        }
    }
}

/// The resource a request to `path` counts against, as GitHub documents.
pub fn resource_of(path: &str) -> &'static str {
    if path == "/search/code" || path.starts_with("/search/code/") {
        "code_search"
    } else if path.starts_with("/search/") {
        "search"
    } else if path == "/graphql" {
        "graphql"
    } else {
        "core"
    }
}

/// The secondary limit's points for a request of `method`.
fn points(method: &str) -> u32 {
    match method {
        "GET" | "HEAD" | "OPTIONS" => 1,
        _ => 5,
    }
}

/// One window of a resource.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// When its first request arrived.
    pub opened: Instant,
    /// The same instant, since the Unix epoch.
    pub opened_wall: Duration,
    /// The reset every answer in it states, in epoch seconds.
    pub reset: u64,
    pub used: u32,
}

impl Window {
    /// How long it lasts: from its first request to its reset.
    pub fn length(&self) -> Duration {
        Duration::from_secs(self.reset).saturating_sub(self.opened_wall)
    }
}

/// One request as the server judged it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    pub resource: &'static str,
    pub path: String,
    pub task: Option<u32>,
    pub status: u16,
    /// What the API answered; `None` for the gateway's `502`, or a `404`
    /// outside the resources served.
    pub answer: Option<Answer>,
    /// Sent before the time its task's last rate-limit answer named.
    pub premature: bool,
}

/// The earliest times a task was told it may send again.
#[derive(Debug, Default, Clone, Copy)]
struct Told {
    not_before: Option<Instant>,
    reset: Option<u64>,
}

/// The server: its configuration, every arrival, every window.
#[derive(Debug)]
pub struct ResourcesState {
    pub config: Config,
    pub arrivals: Vec<Arrival>,
    pub windows: HashMap<&'static str, Vec<Window>>,
    /// Plain `403`s that took their quota's last unit, so said
    /// `remaining: 0`: a client may rightly send them again at the reset.
    pub refused_at_zero: usize,
    /// Secondary-limit points within the span: arrival and points.
    log: VecDeque<(Instant, u32)>,
    told: HashMap<u32, Told>,
    limit_answers: usize,
}

impl ResourcesState {
    /// A server with `config` that has seen nothing.
    pub fn new(config: Config) -> Self {
        ResourcesState {
            config,
            arrivals: Vec::new(),
            windows: HashMap::new(),
            refused_at_zero: 0,
            log: VecDeque::new(),
            told: HashMap::new(),
            limit_answers: 0,
        }
    }

    /// Requests to `resource` whose answer was `answer`.
    pub fn count(&self, resource: &str, answer: Answer) -> usize {
        self.arrivals
            .iter()
            .filter(|a| a.resource == resource && a.answer == Some(answer))
            .count()
    }

    /// Rate-limit answers with `status` (primary and secondary).
    pub fn limited_with(&self, status: u16) -> usize {
        self.arrivals
            .iter()
            .filter(|a| a.status == status)
            .filter(|a| matches!(a.answer, Some(Answer::Primary | Answer::Secondary)))
            .count()
    }

    /// Secondary-limit answers, any resource.
    pub fn secondary(&self) -> usize {
        let kind = Some(Answer::Secondary);
        self.arrivals.iter().filter(|a| a.answer == kind).count()
    }

    /// Secondary-limit answers to requests that arrived `after` the
    /// first request or later.
    pub fn secondary_after(&self, after: Duration) -> usize {
        let Some(first) = self.arrivals.first().map(|a| a.at) else {
            return 0;
        };
        self.arrivals
            .iter()
            .filter(|a| a.answer == Some(Answer::Secondary) && a.at - first >= after)
            .count()
    }

    /// The gateway's `502`s.
    pub fn bad_gateways(&self) -> usize {
        self.arrivals.iter().filter(|a| a.status == 502).count()
    }

    /// Sends before the time the task's last rate-limit answer named.
    pub fn premature(&self) -> usize {
        self.arrivals.iter().filter(|a| a.premature).count()
    }

    /// From the first request to `resource` to its last final answer (a
    /// `200` or a plain `403`), on the server's clock.
    pub fn finished(&self, resource: &str) -> Option<Duration> {
        let of = || self.arrivals.iter().filter(|a| a.resource == resource);
        let first = of().next()?.at;
        let last = of()
            .rfind(|a| matches!(a.answer, Some(Answer::Ok | Answer::Refused)))?
            .at;
        Some(last - first)
    }

    /// Each window of `resource`: when it opened (from the first request
    /// to the API) and how long it lasted.
    pub fn windows(&self, resource: &str) -> Vec<(Duration, Duration)> {
        let Some(first) = self.arrivals.first().map(|a| a.at) else {
            return Vec::new();
        };
        self.windows.get(resource).map_or_else(Vec::new, |ws| {
            ws.iter()
                .map(|w| (w.opened.duration_since(first), w.length()))
                .collect()
        })
    }

    /// The length of `resource`'s first window (from its first request to
    /// its reset: between one window and a second more).
    pub fn first_window(&self, resource: &str) -> Option<Duration> {
        self.windows.get(resource)?.first().map(Window::length)
    }

    /// The status of the next rate-limit answer.
    fn limit_status(&mut self) -> u16 {
        let statuses = &self.config.statuses;
        let status = statuses[self.limit_answers % statuses.len()];
        self.limit_answers += 1;
        status
    }

    /// Records `request`, arriving at `now` (`wall`), and its answer.
    fn record(
        &mut self,
        request: &Seen<'_>,
        (now, wall): (Instant, Duration),
        status: u16,
        answer: Option<Answer>,
    ) {
        let premature = request
            .task
            .and_then(|id| self.told.get(&id))
            .is_some_and(|t| {
                t.not_before.is_some_and(|nb| now < nb)
                    || t.reset.is_some_and(|r| wall < Duration::from_secs(r))
            });
        self.arrivals.push(Arrival {
            at: now,
            resource: resource_of(request.path),
            path: request.path.to_owned(),
            task: request.task,
            status,
            answer,
            premature,
        });
    }
}

impl Judge for ResourcesState {
    fn judge(&mut self, request: &Seen<'_>, now: Instant, wall: Duration) -> Reply {
        let every = self.config.bad_gateway_every;
        if every > 0 && (self.arrivals.len() + 1).is_multiple_of(every as usize) {
            self.record(request, (now, wall), 502, None);
            return Reply::new(502).body(r#"{"message":"Server Error"}"#);
        }
        let name = resource_of(request.path);
        let Some(resource) = self
            .config
            .resources
            .iter()
            .find(|r| r.name == name)
            .copied()
        else {
            self.record(request, (now, wall), 404, None);
            return Reply::new(404).body(r#"{"message":"Not Found"}"#);
        };
        let windows = self.windows.entry(name).or_default();
        if windows
            .last()
            .is_none_or(|w| wall >= Duration::from_secs(w.reset))
        {
            windows.push(Window {
                opened: now,
                opened_wall: wall,
                reset: ceil_secs(wall + resource.window),
                used: 0,
            });
        }
        let window = *windows.last().expect("a window was just opened");
        let delay = self
            .config
            .slow
            .iter()
            .find(|s| s.0 == name)
            .map_or(Duration::ZERO, |s| s.1);
        let fields = |reply: Reply, remaining: u32| {
            rate_limit_fields(resource.quota, remaining, window.reset, name)
                .into_iter()
                .fold(reply.after(delay), |r, (n, v)| r.header(n, v))
        };
        let left = resource.quota.saturating_sub(window.used);
        if let Some(sec) = self.config.secondary {
            self.log.push_back((now, points(request.method)));
            while self
                .log
                .front()
                .is_some_and(|&(t, _)| now.duration_since(t) >= sec.span)
            {
                self.log.pop_front();
            }
            if self.log.iter().map(|&(_, p)| p).sum::<u32>() > sec.points {
                let status = self.limit_status();
                self.record(request, (now, wall), status, Some(Answer::Secondary));
                if let Some(id) = request.task {
                    let wait = Duration::from_secs(sec.retry_after);
                    self.told.entry(id).or_default().not_before = Some(now + wait);
                }
                return fields(Reply::new(status), left)
                    .header("retry-after", sec.retry_after)
                    .body(SECONDARY_BODY);
            }
        }
        if left == 0 {
            let status = self.limit_status();
            self.record(request, (now, wall), status, Some(Answer::Primary));
            if let Some(id) = request.task {
                self.told.entry(id).or_default().reset = Some(window.reset);
            }
            return fields(Reply::new(status), 0).body(PRIMARY_BODY);
        }
        if let Some(w) = self.windows.get_mut(name).and_then(|w| w.last_mut()) {
            w.used += 1;
        }
        let refused = self.config.refused.iter().any(|repo| {
            request.path == repo.as_str()
                || request
                    .path
                    .strip_prefix(repo.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        });
        let (status, answer, body) = if refused {
            (403, Answer::Refused, REFUSED_BODY)
        } else {
            (200, Answer::Ok, "[]")
        };
        self.record(request, (now, wall), status, Some(answer));
        if refused && left == 1 {
            // It took the quota's last unit: to a client, a primary-limit
            // answer (GitHub documents `403` with remaining 0 as one).
            self.refused_at_zero += 1;
            if let Some(id) = request.task {
                self.told.entry(id).or_default().reset = Some(window.reset);
            }
        }
        fields(Reply::new(status), left - 1).body(body)
    }
}

/// The best completion of `n` requests to `resource` (plain `403`s
/// included: they count): the time from the first request to the last,
/// for a client that sends each at the earliest instant every limit
/// admits it, so is never refused. Its first window lasts `first_window`
/// (the server's, [`ResourcesState::first_window`]), every later one
/// `resource.window` and a second more: the server resets a window on the
/// whole epoch second `ceil(opened + window)`, and a window opened after
/// the last reset's instant by any time at all resets a whole second after
/// `reset + window` (no request arrives at the instant itself). A
/// secondary limit admits `points` requests (one point each) in any
/// `span`.
pub fn ideal(
    resource: &Resource,
    secondary: Option<&Secondary>,
    first_window: Duration,
    n: u32,
) -> Duration {
    let (points, span) = secondary.map_or((usize::MAX, Duration::ZERO), |s| {
        (s.points as usize, s.span)
    });
    let (mut t, mut reset, mut used) = (Duration::ZERO, first_window, 0u32);
    let mut log: VecDeque<Duration> = VecDeque::new();
    for _ in 0..n {
        loop {
            if t >= reset {
                (used, reset) = (0, t + resource.window + Duration::from_secs(1));
            }
            while log.front().is_some_and(|&a| t >= a + span) {
                log.pop_front();
            }
            let quota_full = used >= resource.quota;
            let rate_full = log.len() >= points;
            if !quota_full && !rate_full {
                break;
            }
            let free = log.front().map_or(reset, |&a| a + span);
            t = match (quota_full, rate_full) {
                (true, false) => reset,
                (false, true) => free,
                _ => reset.min(free),
            };
        }
        used += 1;
        log.push_back(t);
    }
    t
}

/// Sends the client made into a resource it had been told was spent: a
/// request to a resource (by [`resource_of`]) that left after an answer
/// from that resource said `x-ratelimit-remaining: 0`, and before the
/// reset that answer named (on the system clock). A later answer naming a
/// later reset with quota left clears it.
pub fn sends_into_spent(heard: &[Heard]) -> usize {
    // The wall time of a tap instant, by the clocks' offset now.
    let (now, wall) = (Instant::now(), wall_now());
    let wall_of = |at: Instant| wall.saturating_sub(now.duration_since(at));
    let mut spent: HashMap<String, u64> = HashMap::new();
    let mut into = 0;
    for event in heard {
        match event {
            Heard::Answered { headers, .. } => {
                let field = |n| header(headers, n).and_then(|v| v.parse::<u64>().ok());
                let (Some(resource), Some(remaining), Some(reset)) = (
                    header(headers, "x-ratelimit-resource"),
                    field("x-ratelimit-remaining"),
                    field("x-ratelimit-reset"),
                ) else {
                    continue;
                };
                match spent.get(resource) {
                    _ if remaining == 0 => {
                        let known = spent.entry(resource.to_owned()).or_default();
                        *known = (*known).max(reset);
                    }
                    Some(&known) if reset > known => {
                        spent.remove(resource);
                    }
                    _ => {}
                }
            }
            Heard::Sent { at, path, .. } => {
                let told = spent.get(resource_of(path));
                into += usize::from(told.is_some_and(|&r| wall_of(*at) < Duration::from_secs(r)));
            }
            Heard::Failed { .. } => {}
        }
    }
    into
}
