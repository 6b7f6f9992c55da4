//! The rate-limited server every row runs against: a fixed window or a token
//! bucket, answering `429` + `Retry-After` and counting what it saw.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SECOND: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Window,
    Bucket,
}

impl Shape {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Shape::Window => "fixed window",
            Shape::Bucket => "token bucket",
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    /// Since the server's epoch (its first request).
    pub(crate) at: Duration,
    pub(crate) ok: bool,
    /// The task had sent before.
    pub(crate) retry: bool,
    /// Before the instant the task's last 429 allowed.
    pub(crate) premature: bool,
    /// Before the task's last 429 arrival + its `Retry-After` (the literal
    /// reading; stricter than `premature` for the fixed window).
    pub(crate) early_literal: bool,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TaskRecord {
    pub(crate) sends: u32,
    pub(crate) oks: u32,
    /// The instant the last 429 allowed.
    pub(crate) allowed: Option<Instant>,
    /// The last 429's arrival + `Retry-After`.
    pub(crate) literal: Option<Instant>,
}

#[derive(Debug)]
pub(crate) struct ServerState {
    pub(crate) shape: Shape,
    pub(crate) cap: u32,
    pub(crate) epoch: Option<Instant>,
    // fixed window
    window: u64,
    used: u32,
    // token bucket
    tokens: f64,
    refilled: Option<Instant>,
    // counts
    pub(crate) requests: u64,
    pub(crate) oks: u64,
    pub(crate) rejected: u64,
    pub(crate) premature: u64,
    pub(crate) early_literal: u64,
    pub(crate) anonymous: u64,
    pub(crate) tasks: HashMap<u32, TaskRecord>,
    pub(crate) arrivals: Vec<Arrival>,
}

impl ServerState {
    pub(crate) fn new(shape: Shape, cap: u32) -> Self {
        ServerState {
            shape,
            cap,
            epoch: None,
            window: 0,
            used: 0,
            tokens: f64::from(cap),
            refilled: None,
            requests: 0,
            oks: 0,
            rejected: 0,
            premature: 0,
            early_literal: 0,
            anonymous: 0,
            tasks: HashMap::new(),
            arrivals: Vec::new(),
        }
    }

    /// Admits at `now`, or returns (`Retry-After` in seconds, the instant it
    /// allows).
    fn admit(&mut self, now: Instant) -> Result<(), (u64, Instant)> {
        let epoch = *self.epoch.get_or_insert(now);
        match self.shape {
            Shape::Window => {
                let k = now.duration_since(epoch).as_secs();
                if k != self.window {
                    self.window = k;
                    self.used = 0;
                }
                if self.used < self.cap {
                    self.used += 1;
                    return Ok(());
                }
                let next = epoch + SECOND * u32::try_from(k + 1).unwrap_or(u32::MAX);
                Err((ceil_secs(next.duration_since(now)), next))
            }
            Shape::Bucket => {
                let cap = f64::from(self.cap);
                let last = *self.refilled.get_or_insert(now);
                self.tokens = (self.tokens + now.duration_since(last).as_secs_f64() * cap).min(cap);
                self.refilled = Some(now);
                if self.tokens >= 1.0 {
                    self.tokens -= 1.0;
                    return Ok(());
                }
                let until_token = Duration::from_secs_f64((1.0 - self.tokens) / cap);
                let ra = ceil_secs(until_token);
                Err((ra, now + Duration::from_secs(ra)))
            }
        }
    }

    fn handle(&mut self, task: Option<u32>) -> ResponseTemplate {
        let now = Instant::now();
        let verdict = self.admit(now);
        let epoch = self.epoch.unwrap_or(now);
        self.requests += 1;
        let record = match task {
            Some(id) => self.tasks.entry(id).or_default(),
            None => {
                self.anonymous += 1;
                &mut TaskRecord::default()
            }
        };
        let retry = record.sends > 0;
        record.sends += 1;
        let premature = record.allowed.is_some_and(|a| now < a);
        let early_literal = record.literal.is_some_and(|l| now < l);
        let ok = verdict.is_ok();
        let response = match verdict {
            Ok(()) => {
                record.oks += 1;
                ResponseTemplate::new(200).set_body_string("ok")
            }
            Err((ra, allowed)) => {
                record.allowed = Some(allowed);
                record.literal = Some(now + Duration::from_secs(ra));
                ResponseTemplate::new(429).insert_header("retry-after", ra.to_string().as_str())
            }
        };
        if ok {
            self.oks += 1;
        } else {
            self.rejected += 1;
        }
        self.premature += u64::from(premature);
        self.early_literal += u64::from(early_literal);
        self.arrivals.push(Arrival {
            at: now.duration_since(epoch),
            ok,
            retry,
            premature,
            early_literal,
        });
        response
    }
}

fn ceil_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Limited(Arc<Mutex<ServerState>>);

impl Respond for Limited {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let task = request
            .headers
            .get("x-task")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u32>().ok());
        lock(&self.0).handle(task)
    }
}

/// One row's rate-limited server.
pub(crate) struct LimitedServer {
    mock: MockServer,
    pub(crate) state: Arc<Mutex<ServerState>>,
    /// The one URL the tasks call.
    pub(crate) url: String,
}

impl LimitedServer {
    pub(crate) async fn start(shape: Shape, cap: u32) -> Self {
        let state = Arc::new(Mutex::new(ServerState::new(shape, cap)));
        // A bare (not pooled) server: a new port, so a new origin for every
        // row.
        let mock = MockServer::builder()
            .disable_request_recording()
            .start()
            .await;
        Mock::given(method("GET"))
            .and(path("/work"))
            .respond_with(Limited(state.clone()))
            .mount(&mock)
            .await;
        let url = format!("{}/work", mock.uri());
        LimitedServer { mock, state, url }
    }

    /// Stops the server and returns what it counted.
    pub(crate) fn finish(self) -> ServerState {
        let LimitedServer { mock, state, .. } = self;
        drop(mock);
        let mut guard = lock(&state);
        let (shape, cap) = (guard.shape, guard.cap);
        std::mem::replace(&mut *guard, ServerState::new(shape, cap))
    }
}
