//! The simulated server: the innermost middleware, which never calls
//! `next`. It decides each request on arrival against its origin's
//! limiters, records the send and what it stated, and answers after a
//! drawn lateness, in the drawn header family.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::Extensions;
use reqwest::{Request, Response, ResponseBuilderExt};
use reqwest_middleware::{Middleware, Next};
use tokio::time::Instant;

use super::draw::{Family, OriginPlan, RetryAfterForm, Scenario};
use super::limits::{Limiter, Stated};

/// One attempt as the server saw it.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    pub(crate) task: usize,
    pub(crate) origin: usize,
    pub(crate) at: Duration,
    /// When its answer reached the client, or it was dropped.
    pub(crate) done: Option<Duration>,
    pub(crate) cost: u64,
    /// Whether the server refused it (read in `SIM_TRACE`'s listing).
    #[allow(dead_code)]
    pub(crate) refused: bool,
    /// Whether its answer (or transport error) reached the client.
    pub(crate) answered: bool,
}

/// A time the server named to the client: nothing to its limit before
/// `not_before`.
#[derive(Debug, Clone)]
pub(crate) struct Told {
    pub(crate) task: usize,
    pub(crate) origin: usize,
    /// When the server decided, and when the client received it.
    pub(crate) decided: Duration,
    pub(crate) received: Duration,
    pub(crate) not_before: Duration,
    /// A pushback (the task itself may retry), not an exhausted quota on
    /// an answer that admitted it.
    pub(crate) pushback: bool,
    pub(crate) what: &'static str,
    /// The limit a spent quota's reset spoke of, and the instant it named
    /// (before rounding).
    pub(crate) reset: Option<(usize, Duration)>,
}

/// A reset a limit stated, spent or not: the instant it spoke of, and the
/// time the answer named for it (rounded up), when the client received it.
#[derive(Debug, Clone)]
pub(crate) struct ResetTold {
    pub(crate) origin: usize,
    pub(crate) limit: usize,
    pub(crate) at: Duration,
    pub(crate) named: Duration,
    pub(crate) received: Duration,
}

/// What a fixed window stated remained of it, when the client received it.
#[derive(Debug, Clone)]
pub(crate) struct WindowTold {
    pub(crate) origin: usize,
    pub(crate) limit: usize,
    pub(crate) window_id: u64,
    pub(crate) remaining: u64,
    pub(crate) decided: Duration,
    pub(crate) received: Duration,
}

/// Everything the server recorded.
#[derive(Debug, Default)]
pub(crate) struct Log {
    pub(crate) sent: Vec<Sent>,
    /// For each send: the window (limit, id) of each fixed window it was
    /// counted in.
    pub(crate) windows: Vec<Vec<(usize, u64)>>,
    pub(crate) told: Vec<Told>,
    pub(crate) window_told: Vec<WindowTold>,
    pub(crate) resets_told: Vec<ResetTold>,
}

struct OriginServer {
    plan: OriginPlan,
    limiters: Vec<Limiter>,
}

/// The server of every origin of a run.
#[derive(Clone)]
pub(crate) struct SimServer {
    inner: Arc<Mutex<Inner>>,
    pub(crate) log: Arc<Mutex<Log>>,
}

struct Inner {
    origins: Vec<OriginServer>,
    start: Instant,
    wall: SystemTime,
    rng: fastrand::Rng,
}

/// Marks a send done when its answer returns or its future is dropped.
struct Done {
    log: Arc<Mutex<Log>>,
    index: usize,
    start: Instant,
}

impl Drop for Done {
    fn drop(&mut self) {
        let now = self.start.elapsed();
        let mut log = self.log.lock().unwrap();
        log.sent[self.index].done.get_or_insert(now);
    }
}

#[derive(Debug)]
struct TransportError;

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("simulated transport error")
    }
}

impl std::error::Error for TransportError {}

impl SimServer {
    pub(crate) fn new(scenario: &Scenario, seed: u64, start: Instant, wall: SystemTime) -> Self {
        let origins = scenario
            .origins
            .iter()
            .map(|plan| OriginServer {
                plan: plan.clone(),
                limiters: plan.limits.iter().copied().map(Limiter::new).collect(),
            })
            .collect();
        SimServer {
            inner: Arc::new(Mutex::new(Inner {
                origins,
                start,
                wall,
                rng: fastrand::Rng::with_seed(seed ^ 0x5e_57e7),
            })),
            log: Arc::new(Mutex::new(Log::default())),
        }
    }
}

fn header<T: std::str::FromStr>(req: &Request, name: &str) -> Option<T> {
    req.headers().get(name)?.to_str().ok()?.parse().ok()
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn ceil_millis(d: Duration) -> u64 {
    let ms = d.as_millis();
    u64::try_from(ms + u128::from(!d.as_nanos().is_multiple_of(1_000_000))).unwrap_or(u64::MAX)
}

fn go_duration(d: Duration) -> String {
    let ms = ceil_millis(d);
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{:03}s", ms / 1000, ms % 1000)
    } else {
        format!("{}m{}.{:03}s", ms / 60_000, (ms % 60_000) / 1000, ms % 1000)
    }
}

/// A time an answer names: not before, whether a pushback, what, and the
/// limit and instant of a spent quota's reset.
type Names = (Duration, bool, &'static str, Option<(usize, Duration)>);

/// The answer a decision makes: status, headers, and the times it names.
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    told: Vec<Names>,
    windows: Vec<WindowTold>,
    resets: Vec<ResetTold>,
}

impl OriginServer {
    /// The server's wall clock at `t` (skewed).
    fn wall(&self, base: SystemTime, t: Duration) -> SystemTime {
        let local = base + t;
        if self.plan.skew_ahead {
            local + self.plan.skew
        } else {
            local - self.plan.skew
        }
    }

    /// The simulation time at which the server's wall clock reads `at`.
    fn when(&self, base: SystemTime, at: SystemTime) -> Duration {
        let local = if self.plan.skew_ahead {
            at - self.plan.skew
        } else {
            at + self.plan.skew
        };
        local.duration_since(base).unwrap_or_default()
    }

    /// Decides a request of `cost` at `now` (requests count 1 in a
    /// request limit, their cost in a unit limit).
    fn decide(&mut self, origin: usize, now: Duration, cost: u64, base: SystemTime) -> Answer {
        let mut wait = None;
        let mut refused_by = None;
        for (i, limiter) in self.limiters.iter_mut().enumerate() {
            let n = if limiter.plan.units { cost.max(1) } else { 1 };
            if let Err(w) = limiter.check(now, n)
                && wait.is_none_or(|x| w > x)
            {
                wait = Some(w);
                refused_by = Some(i);
            }
        }
        if wait.is_none() {
            for limiter in &mut self.limiters {
                let n = if limiter.plan.units { cost.max(1) } else { 1 };
                limiter.spend(now, n);
            }
        }
        let stated: Vec<(usize, Stated, bool)> = self
            .limiters
            .iter_mut()
            .enumerate()
            .map(|(i, l)| (i, l.stated(now), l.plan.units))
            .collect();
        let mut answer = Answer {
            status: 200,
            headers: Vec::new(),
            told: Vec::new(),
            windows: Vec::new(),
            resets: Vec::new(),
        };
        let wall = self.wall(base, now);
        if self.plan.date {
            let floor = SystemTime::UNIX_EPOCH
                + Duration::from_secs(
                    wall.duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap()
                        .as_secs(),
                );
            answer
                .headers
                .push(("date", httpdate::fmt_http_date(floor)));
        }
        // The request limits this family states (IETF draft-10 lists
        // every one; the others state the first).
        let requests: Vec<&(usize, Stated, bool)> = stated.iter().filter(|s| !s.2).collect();
        let shown: Vec<&(usize, Stated, bool)> = match self.plan.family {
            Family::Silent => Vec::new(),
            Family::Ietf10 => requests.clone(),
            _ => requests.iter().take(1).copied().collect(),
        };
        for &&(i, s, _) in &shown {
            // The reset as this family writes it, and the time it names.
            let (named, text) = match self.plan.family {
                Family::GitHub => {
                    let epoch = ceil_secs(
                        (wall + s.reset_in)
                            .duration_since(SystemTime::UNIX_EPOCH)
                            .unwrap(),
                    );
                    (
                        self.when(base, SystemTime::UNIX_EPOCH + Duration::from_secs(epoch)),
                        epoch.to_string(),
                    )
                }
                Family::Discord => {
                    let ms = ceil_millis(s.reset_in);
                    (
                        now + Duration::from_millis(ms),
                        format!("{}.{:03}", ms / 1000, ms % 1000),
                    )
                }
                Family::OpenAi => (
                    now + Duration::from_millis(ceil_millis(s.reset_in)),
                    go_duration(s.reset_in),
                ),
                _ => {
                    let secs = ceil_secs(s.reset_in);
                    (now + Duration::from_secs(secs), secs.to_string())
                }
            };
            let fixed = matches!(
                self.limiters[i].plan.shape,
                super::draw::Shape::FixedWindow { .. }
            );
            let at = now + s.reset_in;
            answer.resets.push(ResetTold {
                origin,
                limit: i,
                at,
                named,
                received: Duration::ZERO,
            });
            if s.remaining == 0 {
                answer
                    .told
                    .push((named, false, "a spent quota's reset", Some((i, at))));
            }
            if fixed {
                answer.windows.push(WindowTold {
                    origin,
                    limit: i,
                    window_id: s.window_id,
                    remaining: s.remaining,
                    decided: now,
                    received: Duration::ZERO,
                });
            }
            let (q, r) = (s.quota.to_string(), s.remaining.to_string());
            let w = ceil_secs(s.window).max(1);
            match self.plan.family {
                Family::Silent => {}
                Family::Ietf10 => {
                    answer
                        .headers
                        .push(("ratelimit-policy", format!("\"l{i}\";q={q};w={w}")));
                    answer
                        .headers
                        .push(("ratelimit", format!("\"l{i}\";r={r};t={text}")));
                }
                Family::Express8 => {
                    let name = format!("\"{q}-in-1sec\"");
                    answer
                        .headers
                        .push(("ratelimit-policy", format!("{name}; q={q}; w=1")));
                    answer
                        .headers
                        .push(("ratelimit", format!("{name}; r={r}; t={text}")));
                }
                Family::Ietf6 => {
                    answer.headers.push(("ratelimit-limit", q));
                    answer.headers.push(("ratelimit-remaining", r));
                    answer.headers.push(("ratelimit-reset", text));
                }
                Family::GitHub => {
                    answer.headers.push(("x-ratelimit-limit", q));
                    answer.headers.push(("x-ratelimit-remaining", r));
                    answer.headers.push(("x-ratelimit-reset", text));
                    answer.headers.push(("x-ratelimit-resource", "core".into()));
                }
                Family::OpenAi => {
                    answer.headers.push(("x-ratelimit-limit-requests", q));
                    answer.headers.push(("x-ratelimit-remaining-requests", r));
                    answer.headers.push(("x-ratelimit-reset-requests", text));
                }
                Family::Discord => {
                    let epoch = (wall + Duration::from_millis(ceil_millis(s.reset_in)))
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap();
                    answer.headers.push(("x-ratelimit-limit", q));
                    answer.headers.push(("x-ratelimit-remaining", r));
                    answer.headers.push(("x-ratelimit-reset-after", text));
                    answer.headers.push((
                        "x-ratelimit-reset",
                        format!("{}.{:03}", epoch.as_secs(), epoch.subsec_millis()),
                    ));
                    answer.headers.push(("x-ratelimit-bucket", "b0".into()));
                }
            }
        }
        if self.plan.family == Family::OpenAi
            && let Some(&(i, s, _)) = stated.iter().find(|s| s.2)
        {
            let text = go_duration(s.reset_in);
            let (at, named) = (
                now + s.reset_in,
                now + Duration::from_millis(ceil_millis(s.reset_in)),
            );
            answer.resets.push(ResetTold {
                origin,
                limit: i,
                at,
                named,
                received: Duration::ZERO,
            });
            if s.remaining == 0 {
                answer
                    .told
                    .push((named, false, "a spent token quota's reset", Some((i, at))));
            }
            answer
                .headers
                .push(("x-ratelimit-limit-tokens", s.quota.to_string()));
            answer
                .headers
                .push(("x-ratelimit-remaining-tokens", s.remaining.to_string()));
            answer.headers.push(("x-ratelimit-reset-tokens", text));
        }
        let Some(wait) = wait else {
            return answer;
        };
        // A refusal: GitHub's spent primary limit is a 403 (its secondary
        // a 429 with a Retry-After); the others the drawn status.
        let primary = refused_by == Some(0) && !self.limiters[0].plan.units;
        answer.status = match self.plan.family {
            Family::GitHub if !primary => 429,
            _ => self.plan.refusal,
        };
        let form = match self.plan.family {
            Family::GitHub if !primary => RetryAfterForm::Seconds,
            _ => self.plan.retry_after,
        };
        match form {
            RetryAfterForm::None => {}
            RetryAfterForm::Seconds => {
                let secs = ceil_secs(wait);
                answer.headers.push(("retry-after", secs.to_string()));
                answer.told.push((
                    now + Duration::from_secs(secs),
                    true,
                    "Retry-After (seconds)",
                    None,
                ));
            }
            RetryAfterForm::HttpDate => {
                let at = wall + wait;
                let since = at.duration_since(SystemTime::UNIX_EPOCH).unwrap();
                let at = SystemTime::UNIX_EPOCH + Duration::from_secs(ceil_secs(since));
                answer
                    .headers
                    .push(("retry-after", httpdate::fmt_http_date(at)));
                answer
                    .told
                    .push((self.when(base, at), true, "Retry-After (date)", None));
            }
        }
        // Spent-quota statements on a refusal are pushbacks too, unless it
        // named a `Retry-After`: that is the server's time for the retry
        // (it wins when valid), and the reset binds as a 200's would (under
        // the proactive gate).
        if form == RetryAfterForm::None {
            for told in &mut answer.told {
                told.1 = true;
            }
        }
        answer
    }
}

#[async_trait::async_trait]
impl Middleware for SimServer {
    async fn handle(
        &self,
        req: Request,
        _extensions: &mut Extensions,
        _next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let task: usize = header(&req, "x-sim-task").unwrap_or(usize::MAX);
        let cost: u64 = header(&req, "x-sim-cost").unwrap_or(0);
        let url = req.url().clone();
        let (answer, latency, fails, guard, origin, decided) = {
            let mut inner = self.inner.lock().unwrap();
            let inner = &mut *inner;
            let now = inner.start.elapsed();
            let origin = inner
                .origins
                .iter()
                .position(|o| {
                    url.as_str()
                        .starts_with(&o.plan.url[..o.plan.url.len() - 6])
                })
                .unwrap_or(0);
            let (lo, hi) = inner.origins[origin].plan.latency;
            let latency = lo + Duration::from_nanos(inner.rng.u64(..=(hi - lo).as_nanos() as u64));
            let fails = inner.rng.u16(..1000) < inner.origins[origin].plan.transport_errors;
            let answer = inner.origins[origin].decide(origin, now, cost, inner.wall);
            let mut log = self.log.lock().unwrap();
            let index = log.sent.len();
            log.sent.push(Sent {
                task,
                origin,
                at: now,
                done: None,
                cost,
                refused: answer.status != 200,
                answered: false,
            });
            let windows = answer
                .windows
                .iter()
                .map(|w| (w.limit, w.window_id))
                .collect();
            log.windows.push(windows);
            let guard = Done {
                log: self.log.clone(),
                index,
                start: inner.start,
            };
            (answer, latency, fails, guard, origin, now)
        };
        tokio::time::sleep(latency).await;
        let start = guard.start;
        self.log.lock().unwrap().sent[guard.index].answered = true;
        drop(guard);
        if fails {
            return Err(reqwest_middleware::Error::middleware(TransportError));
        }
        let received = start.elapsed();
        {
            let mut log = self.log.lock().unwrap();
            for &(not_before, pushback, what, reset) in &answer.told {
                log.told.push(Told {
                    task,
                    origin,
                    decided,
                    received,
                    not_before,
                    pushback,
                    what,
                    reset,
                });
            }
            for w in &answer.windows {
                log.window_told.push(WindowTold {
                    received,
                    ..w.clone()
                });
            }
            for r in &answer.resets {
                log.resets_told.push(ResetTold {
                    received,
                    ..r.clone()
                });
            }
        }
        let mut builder = http::Response::builder().status(answer.status).url(url);
        for (name, value) in answer.headers {
            builder = builder.header(name, value);
        }
        let response = builder.body(Vec::<u8>::new()).unwrap();
        Ok(Response::from(response))
    }
}
