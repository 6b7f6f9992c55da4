//! The one test server: [`Arrivals`], the server-side arrival log every
//! wire test reads, and [`LimitedServer`], a rate-limited wiremock server of
//! a given [`Shape`] that answers `429` + `Retry-After` (or, for the silent
//! shapes, a bare `429` or `503`) and counts what it saw (requests,
//! rejections, *premature* sends: only where an answer named a time).
//!
//! Used by the integration tests (`tests/all/`), the storm bench
//! (`benches/storm/`) and the demo (`examples/demo.rs`), each including it
//! with `#[path = …] mod server;` (as `redis_server.rs` is): a plain module,
//! not a test target of its own. Not every includer uses every item.
//!
//! Adding a server shape (a sliding log, "`Retry-After: 0` inside a closed
//! window", …) is one [`Shape`] variant, its state in [`Limit`] and one arm
//! of [`Limit::admit`], all in `server/shapes.rs`: the transport, the
//! per-task records and the counts stay shared. A server that answers
//! otherwise than `429` + `Retry-After` (GitHub's `403`s, with headers of
//! its own) is a module beside it (`server/github.rs`).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A bare (not pooled) server on a fresh port, so a new origin, answering
/// what `mock` matches.
pub async fn serve(mock: Mock) -> MockServer {
    let server = MockServer::builder()
        .disable_request_recording()
        .start()
        .await;
    mock.mount(&server).await;
    server
}

/// Stops `server`. wiremock's drop blocks on its own lock with a second
/// executor. Inside a tokio task that spent its cooperative budget (a test
/// that just awaited 160 finished join handles) tokio's lock answers
/// "yield" for ever and that executor spins: the run hung at 100% CPU one
/// time in about ten. Dropped on a thread of its own, it has no budget to
/// spend.
pub fn stop(server: MockServer) {
    let _ = std::thread::spawn(move || drop(server)).join();
}

/// Locks `m`, even if a panicking holder poisoned it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ------------------------------------------------------------ arrivals

/// One request as a server saw it, on the server's clock (tokio's: the real
/// one on a wiremock server's thread, the paused one in a paused test).
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: tokio::time::Instant,
    pub path: String,
    /// The `Idempotency-Key` header, if any (lossy UTF-8).
    pub idempotency_key: Option<String>,
    /// When the answer's `Retry-After` allows the next request, if the
    /// responder noted it ([`Arrivals::allow_after`]).
    pub not_before: Option<tokio::time::Instant>,
}

/// Server-side arrival times, in order: responders [`record`](Self::record)
/// each request on the server's thread (or a socket-less terminal middleware
/// [`push`](Self::push)es it); tests read them, or wait for them instead of
/// sleeping.
#[derive(Debug, Clone, Default)]
pub struct Arrivals(Arc<Mutex<Vec<Arrival>>>);

impl Arrivals {
    /// Records `request`, arriving now; returns how many requests to its
    /// path came before it.
    pub fn record(&self, request: &Request) -> usize {
        self.push(
            request.url.path(),
            request
                .headers
                .get("idempotency-key")
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        )
    }

    /// Records a request to `path` with this `Idempotency-Key`, arriving now
    /// on tokio's clock; returns how many requests to `path` came before it.
    pub fn push(&self, path: &str, idempotency_key: Option<String>) -> usize {
        self.push_at(tokio::time::Instant::now(), path, idempotency_key)
    }

    /// Records a request to `path` with this `Idempotency-Key`, arriving at
    /// `at` (a server judging at given instants); returns how many requests
    /// to `path` came before it.
    pub fn push_at(
        &self,
        at: impl Into<tokio::time::Instant>,
        path: &str,
        idempotency_key: Option<String>,
    ) -> usize {
        let mut all = lock(&self.0);
        let before = all.iter().filter(|a| a.path == path).count();
        all.push(Arrival {
            at: at.into(),
            path: path.to_owned(),
            idempotency_key,
            not_before: None,
        });
        before
    }

    /// Notes, on the last arrival, that its answer allows the next request
    /// `delay` after it (for servers answering one request at a time).
    pub fn allow_after(&self, delay: Duration) {
        if let Some(last) = lock(&self.0).last_mut() {
            last.not_before = Some(last.at + delay);
        }
    }

    /// Every arrival, in order.
    pub fn entries(&self) -> Vec<Arrival> {
        lock(&self.0).clone()
    }

    /// Every arrival time, in order.
    pub fn all(&self) -> Vec<Instant> {
        lock(&self.0).iter().map(|a| a.at.into_std()).collect()
    }

    /// Arrival times of requests to path `p`, in order.
    pub fn at(&self, p: &str) -> Vec<Instant> {
        lock(&self.0)
            .iter()
            .filter(|a| a.path == p)
            .map(|a| a.at.into_std())
            .collect()
    }

    pub fn len(&self) -> usize {
        lock(&self.0).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Time between the first and the second arrival.
    pub fn first_gap(&self) -> Duration {
        let a = self.all();
        assert!(
            a.len() >= 2,
            "expected at least 2 arrivals, got {}",
            a.len()
        );
        a[1] - a[0]
    }

    /// The `Idempotency-Key` of each arrival, in order.
    pub fn idempotency_keys(&self) -> Vec<Option<String>> {
        lock(&self.0)
            .iter()
            .map(|a| a.idempotency_key.clone())
            .collect()
    }

    /// Waits (polling every 5 ms on tokio's clock) until the server has seen
    /// `n` requests; panics after 5 s of real time.
    pub async fn wait_for(&self, n: usize) {
        let give_up = Instant::now() + Duration::from_secs(5);
        while self.len() < n {
            assert!(Instant::now() < give_up, "server never saw {n} requests");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

// ------------------------------------------------------------ shapes

#[path = "server/shapes.rs"]
mod shapes;

/// The shapes that say nothing: nginx's leaky bucket, HAProxy's counting
/// rate, an outage.
#[path = "server/silent.rs"]
mod silent;

/// express-rate-limit 8's memory store and draft-8 fields.
#[path = "server/express.rs"]
mod express;

/// A GitHub-like server: its primary and secondary rate limits, and a
/// plain `403`.
#[path = "server/github.rs"]
pub mod github;

/// GitHub's primary limit with no `Date` header (a std-thread server).
#[path = "server/github_epoch.rs"]
pub mod github_epoch;

/// An OpenAI-like server: a request quota and a token quota per fixed
/// window, stated with OpenAI's `x-ratelimit-*` headers.
#[path = "server/llm.rs"]
pub mod llm;

/// Anthropic's Messages API: token buckets of requests, input and
/// output tokens, continuously refilled, stated in `anthropic-ratelimit-*`.
#[path = "server/anthropic.rs"]
pub mod anthropic;
/// A Shopify-like server: the REST Admin API's leaky bucket, stated on
/// every answer, and `429` with `Retry-After: 2.0`.
#[path = "server/shopify.rs"]
pub mod shopify;

/// A Stripe-like server: a token bucket of 25 a second, and `429`
/// `lock_timeout` for an update of an object another one holds.
#[path = "server/stripe.rs"]
pub mod stripe;
/// Serving a vendor-like server's state, judged at given instants.
#[path = "server/wire.rs"]
pub mod wire;

/// A client-side log of sends and answers, in the order the client saw
/// them: what it knew when it sent.
#[path = "server/tap.rs"]
pub mod tap;

/// GitHub with several resources on one host (`core`, `search`,
/// `code_search`, `graphql`), its secondary limit by points, `502`s and
/// plain `403`s.
#[path = "server/github_resources.rs"]
pub mod github_resources;

/// Discord: per-route buckets per major parameter under a global limit.
#[path = "server/discord.rs"]
pub mod discord;

/// Two IETF `RateLimit` partitions (`pk`) of one origin.
#[path = "server/partitions.rs"]
pub mod partitions;

/// What issue 28's figure tests and the storm bench's vendor rows send to
/// the vendors' servers above.
#[path = "server/vendor_loads.rs"]
pub mod vendor_loads;

use shapes::Limit;
// Not every includer names a silent shape's status.
#[allow(unused_imports)]
pub use shapes::{Denial, Shape, Verdict};

// ------------------------------------------------------------ the limiter

/// One request as the rate-limited server judged it.
#[derive(Debug, Clone, Copy)]
pub struct Admission {
    /// Since the server's epoch.
    pub at: Duration,
    pub ok: bool,
    /// The task had sent before.
    pub retry: bool,
    /// Before the instant the task's last 429 allowed.
    pub premature: bool,
    /// Before the task's last 429 arrival + its `Retry-After` (the literal
    /// reading; stricter than `premature` for the fixed window).
    pub early_literal: bool,
}

/// What the server remembers about one task (its `x-task` header).
#[derive(Debug, Default, Clone, Copy)]
pub struct TaskRecord {
    pub sends: u32,
    pub oks: u32,
    /// The instant the last 429 allowed.
    pub allowed: Option<Instant>,
    /// The last 429's arrival + `Retry-After`.
    pub literal: Option<Instant>,
}

/// A rate limiter of one [`Shape`] and what it counted.
#[derive(Debug)]
pub struct ServerState {
    pub shape: Shape,
    pub cap: u32,
    /// Time zero of the windows: the first request, unless set at start.
    pub epoch: Option<Instant>,
    limit: Limit,
    pub requests: u64,
    pub oks: u64,
    /// Rejections: `429`s (or a silent shape's `503`s).
    pub rejected: u64,
    /// Rejections answered to a task's second or later send (for a silent
    /// shape, sends answered while the origin denies: the count that stands
    /// in for "premature" where no time was named).
    pub rejected_retries: u64,
    /// Sends before the instant the task's last rejection allowed (never,
    /// for a silent shape: its rejections allow no instant).
    pub premature: u64,
    pub early_literal: u64,
    /// Requests without a task id.
    pub anonymous: u64,
    pub tasks: HashMap<u32, TaskRecord>,
    pub arrivals: Vec<Admission>,
    /// How long each request is held before its answer leaves (zero unless
    /// set): a request is in flight at least that long, so two requests with
    /// the same `Idempotency-Key` arriving closer than this overlapped.
    pub hold: Duration,
    /// Requests that arrived while another with the same `Idempotency-Key`
    /// was held (counted only with a `hold`).
    pub duplicates: u64,
    /// [`duplicates`](Self::duplicates) per key.
    pub duplicate_keys: HashMap<String, u64>,
    /// Per key: until when its last request is held.
    busy: HashMap<String, Instant>,
    /// Every keyed request, in order (only while `keep_log`).
    pub keyed: Vec<KeyedArrival>,
    /// Keep `arrivals`, `keyed` and the records of finished tasks (on by
    /// default); off, memory stays flat however long the server runs.
    pub keep_log: bool,
}

/// A request that carried an `Idempotency-Key`.
#[derive(Debug, Clone)]
pub struct KeyedArrival {
    pub task: Option<u32>,
    pub key: String,
    pub at: Instant,
    pub ok: bool,
}

impl ServerState {
    /// A fresh limiter whose epoch is its first request.
    pub fn new(shape: Shape, cap: u32) -> Self {
        ServerState {
            shape,
            cap,
            epoch: None,
            limit: Limit::new(shape, cap),
            requests: 0,
            oks: 0,
            rejected: 0,
            rejected_retries: 0,
            premature: 0,
            early_literal: 0,
            anonymous: 0,
            tasks: HashMap::new(),
            arrivals: Vec::new(),
            hold: Duration::ZERO,
            duplicates: 0,
            duplicate_keys: HashMap::new(),
            busy: HashMap::new(),
            keyed: Vec::new(),
            keep_log: true,
        }
    }

    /// A fresh limiter whose epoch is `epoch` (e.g. the server's start).
    pub fn starting_at(shape: Shape, cap: u32, epoch: Instant) -> Self {
        ServerState {
            epoch: Some(epoch),
            ..Self::new(shape, cap)
        }
    }

    /// Judges a request of `task` arriving at `now`: `Ok(())` to admit it,
    /// or `Err(the seconds its 429 names)`; records and counts it.
    pub fn judge(&mut self, task: Option<u32>, now: Instant) -> Result<(), u64> {
        let v = self.judge_verdict_keyed(task, None, now);
        if v.ok { Ok(()) } else { Err(v.names.as_secs()) }
    }

    /// [`judge`](Self::judge), returning the whole [`Verdict`].
    pub fn judge_verdict(&mut self, task: Option<u32>, now: Instant) -> Verdict {
        self.judge_verdict_keyed(task, None, now)
    }

    /// [`judge`](Self::judge) for a request carrying `key` (its
    /// `Idempotency-Key`): also counts it as a duplicate if another request
    /// with that key is still held.
    pub fn judge_keyed(
        &mut self,
        task: Option<u32>,
        key: Option<&str>,
        now: Instant,
    ) -> Result<(), u64> {
        let v = self.judge_verdict_keyed(task, key, now);
        if v.ok { Ok(()) } else { Err(v.names.as_secs()) }
    }

    /// [`judge_keyed`](Self::judge_keyed), returning the whole [`Verdict`].
    pub fn judge_verdict_keyed(
        &mut self,
        task: Option<u32>,
        key: Option<&str>,
        now: Instant,
    ) -> Verdict {
        if let Some(key) = key {
            self.hold_key(key, now);
        }
        let verdict = self.judge_task(task, now);
        if let Some(key) = key
            && self.keep_log
        {
            self.keyed.push(KeyedArrival {
                task,
                key: key.to_owned(),
                at: now,
                ok: verdict.ok,
            });
        }
        if verdict.ok
            && !self.keep_log
            && let Some(id) = task
        {
            // The task is done: forget it, so memory stays flat.
            self.tasks.remove(&id);
        }
        verdict
    }

    fn hold_key(&mut self, key: &str, now: Instant) {
        if self.hold.is_zero() {
            return;
        }
        let until = now + self.hold;
        match self.busy.get_mut(key) {
            Some(busy) => {
                if now < *busy {
                    self.duplicates += 1;
                    *self.duplicate_keys.entry(key.to_owned()).or_default() += 1;
                }
                *busy = (*busy).max(until);
            }
            None => {
                self.busy.insert(key.to_owned(), until);
            }
        }
    }

    fn judge_task(&mut self, task: Option<u32>, now: Instant) -> Verdict {
        let epoch = *self.epoch.get_or_insert(now);
        let verdict = self.limit.verdict(self.shape, self.cap, epoch, now);
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
        let ok = verdict.ok;
        if ok {
            record.oks += 1;
        } else {
            record.allowed = verdict.allowed;
            record.literal = Some(now + verdict.names);
        }
        if ok {
            self.oks += 1;
        } else {
            self.rejected += 1;
            self.rejected_retries += u64::from(retry);
        }
        self.premature += u64::from(premature);
        self.early_literal += u64::from(early_literal);
        if self.keep_log {
            self.arrivals.push(Admission {
                at: now.duration_since(epoch),
                ok,
                retry,
                premature,
                early_literal,
            });
        }
        verdict
    }

    /// [`judge`](Self::judge)s a request arriving now, as an HTTP answer:
    /// `200 ok`, or `429` with `Retry-After` (and the `RateLimit` fields
    /// of the shape that sends them).
    pub fn handle(&mut self, task: Option<u32>) -> ResponseTemplate {
        self.handle_keyed(task, None)
    }

    /// [`handle`](Self::handle) for a request carrying `key`; the answer
    /// leaves after [`hold`](Self::hold).
    pub fn handle_keyed(&mut self, task: Option<u32>, key: Option<&str>) -> ResponseTemplate {
        let v = self.judge_verdict_keyed(task, key, Instant::now());
        let mut answer = if v.ok {
            ResponseTemplate::new(200).set_body_string("ok")
        } else {
            ResponseTemplate::new(v.status)
        };
        if let Some(ra) = v.retry_after {
            answer = answer.insert_header("retry-after", ra.to_string().as_str());
            if self.shape == Shape::Gcra {
                // tower-governor's default answer to a rejection.
                answer = answer
                    .insert_header("x-ratelimit-after", ra.to_string().as_str())
                    .set_body_string(format!("Too Many Requests! Wait for {ra}s"));
            }
        }
        if let Some((r, t)) = v.ratelimit {
            let cap = self.cap;
            // express-rate-limit states its partition key too.
            let pk = match self.shape {
                Shape::ExpressRateLimit => format!("; pk=:{}:", express::PARTITION_KEY),
                _ => String::new(),
            };
            answer = answer
                .insert_header(
                    "ratelimit",
                    format!("\"{cap}-in-1sec\"; r={r}; t={t}").as_str(),
                )
                .insert_header(
                    "ratelimit-policy",
                    format!("\"{cap}-in-1sec\"; q={cap}; w=1{pk}").as_str(),
                );
        }
        if self.hold.is_zero() {
            answer
        } else {
            answer.set_delay(self.hold)
        }
    }
}

/// The task id a request carries in `x-task`.
pub fn task_of(request: &Request) -> Option<u32> {
    request
        .headers
        .get("x-task")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u32>().ok())
}

struct Limited(Arc<Mutex<ServerState>>);

impl Respond for Limited {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let key = request
            .headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok());
        lock(&self.0).handle_keyed(task_of(request), key)
    }
}

/// How a [`LimitedServer`] started with [`LimitedServer::start_with`]
/// answers, beyond its shape.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Each answer leaves this long after its request arrived (so requests
    /// overlap observably); see [`ServerState::hold`].
    pub hold: Duration,
    /// See [`ServerState::keep_log`].
    pub keep_log: bool,
}

/// A rate-limited wiremock server on a fresh port (a new origin), answering
/// `GET <path>`.
pub struct LimitedServer {
    mock: MockServer,
    pub state: Arc<Mutex<ServerState>>,
    /// The one URL the tasks call.
    pub url: String,
    at: String,
}

impl LimitedServer {
    pub async fn start(shape: Shape, cap: u32, at: &str) -> Self {
        Self::start_on(shape, cap, at, Some("GET"), None).await
    }

    /// A server answering every method at `at`, with `options`.
    pub async fn start_with(shape: Shape, cap: u32, at: &str, options: Options) -> Self {
        Self::start_on(shape, cap, at, None, Some(options)).await
    }

    async fn start_on(
        shape: Shape,
        cap: u32,
        at: &str,
        only: Option<&str>,
        options: Option<Options>,
    ) -> Self {
        let mut limiter = ServerState::new(shape, cap);
        if let Some(o) = options {
            limiter.hold = o.hold;
            limiter.keep_log = o.keep_log;
        }
        let state = Arc::new(Mutex::new(limiter));
        let mock_of = match only {
            Some(m) => Mock::given(method(m)).and(path(at)),
            None => Mock::given(path(at)),
        };
        let mock = serve(mock_of.respond_with(Limited(state.clone()))).await;
        let url = format!("{}{at}", mock.uri());
        LimitedServer {
            mock,
            state,
            url,
            at: at.to_owned(),
        }
    }

    /// Gives back the memory wiremock keeps for every request a mock
    /// matched (a copy of each request, even with request recording off):
    /// unmounts and mounts again the responder of a server started with
    /// [`start_with`](Self::start_with), keeping its state. A request
    /// arriving between the two gets `404`: long runs call this rarely and
    /// count those.
    pub async fn recycle(&self) {
        self.mock.reset().await;
        Mock::given(path(self.at.as_str()))
            .respond_with(Limited(self.state.clone()))
            .mount(&self.mock)
            .await;
    }

    /// Stops the server and returns what it counted.
    pub fn finish(self) -> ServerState {
        let LimitedServer { mock, state, .. } = self;
        stop(mock);
        let mut guard = lock(&state);
        let (shape, cap) = (guard.shape, guard.cap);
        std::mem::replace(&mut *guard, ServerState::new(shape, cap))
    }
}
