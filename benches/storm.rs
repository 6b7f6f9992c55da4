//! The storm benchmark: N tasks, each wanting one `200`, against a local
//! rate-limited server, side by side for these clients:
//!
//! 1. `no retry`: a bare `reqwest_middleware` client;
//! 2. `reqwest-retry`: `RetryTransientMiddleware` with exponential backoff,
//!    3 retries;
//! 3. `reqwest-backpressure`: `RetryAfterMiddleware::new(Policy::default())`;
//! 4. with the `redis` feature, `reqwest-backpressure, 4 processes over
//!    Redis`: the same N tasks split over 4 processes (this binary re-run as
//!    workers), each with `RetryAfterMiddleware::with_store(Policy::default(),
//!    RedisStore)` (one key prefix, `FailMode::Closed`) against one
//!    `redis-server` this binary starts (free loopback port, no persistence,
//!    its own temp dir, killed at the end). The rate-limited server is the
//!    parent's, so its counters are comparable with the other rows; the
//!    workers start their tasks at one shared instant and report per-task
//!    results (successes, failures by code, last success since that instant)
//!    on one stdout line (a worker is this binary with `STORM_WORKER=1` and
//!    its settings in `STORM_WORKER_*`). The 429s and last success are
//!    checked against the single-process row (within 10%). Without
//!    `redis-server` on `PATH` only this row is skipped, with a message.
//!
//! Two server shapes, each row on a fresh server (new port, new origin) and
//! a fresh client:
//!
//! - **fixed window**: admits `CAP` requests per 1 s window (windows start at
//!   the server's first request) and answers the rest `429` with
//!   `Retry-After` = whole seconds to the next window (at least 1);
//! - **token bucket**: capacity `CAP`, refilled `CAP` a second, starting
//!   full; `429` with `Retry-After` = whole seconds until one token (at
//!   least 1).
//!
//! The server counts requests, `429`s and *premature* sends: each task
//! carries an `x-task` header; the server remembers, per task, the instant
//! its last `429` allowed (fixed window: the start of the window the
//! `Retry-After` pointed to; token bucket: the `429`'s arrival plus
//! `Retry-After`), and counts a later request of that task that arrives
//! before it. All times are the server's own arrival times.
//!
//! ```text
//! cargo bench --bench storm
//! cargo bench --features redis --bench storm    # + the 4-process Redis row
//! STORM_N=500 STORM_CAP=100      # defaults
//! STORM_ONLY=backpressure        # only reqwest-backpressure's rows (Redis row included)
//! STORM_SHAPE=window|bucket      # only one server shape
//! STORM_VERBOSE=1                # per-window breakdown of our rows (STORM_VERBOSE=all: every row)
//! STORM_TIMEOUT=30               # seconds per row before partial figures are reported
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does), it makes a quick
//! smoke run of our rows only (N=60, CAP=30) unless `STORM_N`/`STORM_CAP` are
//! set.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use reqwest_backpressure::{Policy, RetryAfterMiddleware, RetryReport};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SECOND: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Window,
    Bucket,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Window => "fixed window",
            Shape::Bucket => "token bucket",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    NoRetry,
    ReqwestRetry,
    Backpressure,
    /// [`redis_row::WORKERS`] processes sharing one `RedisStore`.
    #[cfg(feature = "redis")]
    BackpressureRedis,
}

impl ClientKind {
    fn name(self) -> &'static str {
        match self {
            ClientKind::NoRetry => "no retry",
            ClientKind::ReqwestRetry => "reqwest-retry",
            ClientKind::Backpressure => "reqwest-backpressure",
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => "reqwest-backpressure, 4 processes over Redis",
        }
    }

    /// Tasks spread over several processes (timed from a shared instant).
    fn multi_process(self) -> bool {
        match self {
            ClientKind::NoRetry | ClientKind::ReqwestRetry | ClientKind::Backpressure => false,
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => true,
        }
    }

    /// One of reqwest-backpressure's rows (shown by `STORM_VERBOSE=1`).
    fn is_ours(self) -> bool {
        match self {
            ClientKind::NoRetry | ClientKind::ReqwestRetry => false,
            ClientKind::Backpressure => true,
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => true,
        }
    }

    fn client(self) -> ClientWithMiddleware {
        let inner = reqwest::Client::builder()
            .build()
            .expect("reqwest client builds");
        let builder = ClientBuilder::new(inner);
        match self {
            #[cfg(feature = "redis")]
            ClientKind::BackpressureRedis => {
                unreachable!("the Redis row's clients live in its worker processes")
            }
            ClientKind::NoRetry => builder.build(),
            ClientKind::ReqwestRetry => builder
                .with(RetryTransientMiddleware::new_with_policy(
                    ExponentialBackoff::builder().build_with_max_retries(3),
                ))
                .build(),
            ClientKind::Backpressure => builder
                .with(RetryAfterMiddleware::new(Policy::default()))
                .build(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verbose {
    Off,
    Ours,
    All,
}

#[derive(Debug, Clone)]
struct Config {
    n: u32,
    cap: u32,
    clients: Vec<ClientKind>,
    shapes: Vec<Shape>,
    verbose: Verbose,
    timeout: Duration,
    smoke: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_u32(name: &str) -> Option<u32> {
    let v = env(name)?;
    match v.trim().parse::<u32>() {
        Ok(n) if n > 0 => Some(n),
        _ => {
            eprintln!("storm: ignoring {name}={v:?} (want a positive integer)");
            None
        }
    }
}

impl Config {
    fn from_env() -> Config {
        // `cargo bench` passes `--bench`; anything else (criterion-style
        // filters, `--nocapture`, ...) is ignored. Without `--bench` we are
        // run as a test: keep it short.
        let smoke = !std::env::args().skip(1).any(|a| a == "--bench");
        let sized = env("STORM_N").is_some() || env("STORM_CAP").is_some();
        let (default_n, default_cap) = if smoke && !sized {
            (60, 30)
        } else {
            (500, 100)
        };
        let n = env_u32("STORM_N").unwrap_or(default_n);
        let cap = env_u32("STORM_CAP").unwrap_or(default_cap);
        let only_ours = env("STORM_ONLY").is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "backpressure" || v == "reqwest-backpressure" || v == "ours"
        });
        #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
        let mut clients = if only_ours || (smoke && !sized) {
            vec![ClientKind::Backpressure]
        } else {
            vec![
                ClientKind::NoRetry,
                ClientKind::ReqwestRetry,
                ClientKind::Backpressure,
            ]
        };
        #[cfg(feature = "redis")]
        clients.push(ClientKind::BackpressureRedis);
        let shapes = match env("STORM_SHAPE").map(|s| s.trim().to_ascii_lowercase()) {
            Some(s) if s.starts_with("window") || s == "fixed" => vec![Shape::Window],
            Some(s) if s.starts_with("bucket") || s == "token" => vec![Shape::Bucket],
            _ => vec![Shape::Window, Shape::Bucket],
        };
        let verbose = match env("STORM_VERBOSE").map(|s| s.trim().to_ascii_lowercase()) {
            Some(s) if s == "all" || s == "2" => Verbose::All,
            Some(s) if s != "0" && s != "false" => Verbose::Ours,
            _ => Verbose::Off,
        };
        let timeout = Duration::from_secs(env_u32("STORM_TIMEOUT").map_or(30, u64::from));
        Config {
            n,
            cap,
            clients,
            shapes,
            verbose,
            timeout,
            smoke,
        }
    }

    /// The last success of a perfect client: the `N`th admission, at the
    /// start of window `N / CAP - 1` (or when the bucket has refilled
    /// `N - CAP` tokens).
    fn ideal(&self) -> Duration {
        Duration::from_secs_f64((f64::from(self.n) / f64::from(self.cap) - 1.0).max(0.0))
    }
}

// ---------------------------------------------------------------------------
// The rate-limited server
// ---------------------------------------------------------------------------

/// One request as the server saw it.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    /// Since the server's epoch (its first request).
    at: Duration,
    ok: bool,
    /// The task had sent before.
    retry: bool,
    /// Before the instant the task's last 429 allowed.
    premature: bool,
    /// Before the task's last 429 arrival + its `Retry-After` (the literal
    /// reading; stricter than `premature` for the fixed window).
    early_literal: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct TaskRecord {
    sends: u32,
    oks: u32,
    /// The instant the last 429 allowed.
    allowed: Option<Instant>,
    /// The last 429's arrival + `Retry-After`.
    literal: Option<Instant>,
}

#[derive(Debug)]
struct ServerState {
    shape: Shape,
    cap: u32,
    epoch: Option<Instant>,
    // fixed window
    window: u64,
    used: u32,
    // token bucket
    tokens: f64,
    refilled: Option<Instant>,
    // counts
    requests: u64,
    oks: u64,
    rejected: u64,
    premature: u64,
    early_literal: u64,
    anonymous: u64,
    tasks: HashMap<u32, TaskRecord>,
    arrivals: Vec<Arrival>,
}

impl ServerState {
    fn new(shape: Shape, cap: u32) -> Self {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

// ---------------------------------------------------------------------------
// One row
// ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct ClientSide {
    ok: u32,
    failed: u32,
    last_ok: Option<Duration>,
    /// Why tasks failed, by a short label.
    reasons: BTreeMap<String, u32>,
    /// `RetryReport::attempts` of successful tasks (ours only).
    attempts: BTreeMap<u32, u32>,
    /// When the first and the last failed task ended.
    failed_span: Option<(Duration, Duration)>,
}

impl ClientSide {
    fn failed_at(&mut self, at: Duration) {
        self.failed_span = Some(
            self.failed_span
                .map_or((at, at), |(lo, hi)| (lo.min(at), hi.max(at))),
        );
    }
}

struct Row {
    shape: Shape,
    client: ClientKind,
    n: u32,
    client_side: ClientSide,
    server: ServerState,
    /// `None` if the row finished; else the limit it hit.
    timed_out: Option<Duration>,
    /// Server epoch (first request) after the row's start.
    epoch_offset: Option<Duration>,
    /// Extra lines for the breakdown (the Redis row's workers).
    notes: Vec<String>,
}

fn failure_label(result: &reqwest_middleware::Result<reqwest::Response>) -> String {
    match result {
        Ok(r) => {
            let status = r.status().as_u16();
            match r.extensions().get::<RetryReport>() {
                Some(report) => match report.stop_reason() {
                    Some(reason) => format!("{status} ({})", reason.code()),
                    None => format!("{status}"),
                },
                None => format!("{status}"),
            }
        }
        Err(reqwest_middleware::Error::Middleware(e)) => {
            match e.downcast_ref::<reqwest_backpressure::Error>() {
                // Which store failure (its message names no address).
                Some(ours @ reqwest_backpressure::Error::Store(_)) => {
                    format!("error {} ({ours})", ours.code())
                }
                Some(ours) => format!("error {}", ours.code()),
                None => format!("middleware error: {e}"),
            }
        }
        Err(reqwest_middleware::Error::Reqwest(e)) => {
            let kind = if e.is_timeout() {
                "timeout"
            } else if e.is_connect() {
                "connect"
            } else {
                "request"
            };
            format!("transport error ({kind})")
        }
    }
}

/// One row's rate-limited server.
struct LimitedServer {
    mock: MockServer,
    state: Arc<Mutex<ServerState>>,
    /// The one URL the tasks call.
    url: String,
}

impl LimitedServer {
    async fn start(shape: Shape, cap: u32) -> Self {
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
    fn finish(self) -> ServerState {
        let LimitedServer { mock, state, .. } = self;
        drop(mock);
        let mut guard = lock(&state);
        let (shape, cap) = (guard.shape, guard.cap);
        std::mem::replace(&mut *guard, ServerState::new(shape, cap))
    }
}

/// Runs tasks `ids` (each sends one GET with its id in `x-task`) with
/// `client` and returns what they got, their times counted from `started`,
/// and the limit if they had not all finished within `timeout` (then the
/// rest were aborted).
async fn run_tasks(
    client: &ClientWithMiddleware,
    url: &str,
    ids: std::ops::Range<u32>,
    started: Instant,
    timeout: Duration,
) -> (ClientSide, Option<Duration>) {
    let side = Arc::new(Mutex::new(ClientSide::default()));
    let mut set = tokio::task::JoinSet::new();
    for i in ids {
        let client = client.clone();
        let url = url.to_owned();
        let side = side.clone();
        set.spawn(async move {
            let result = client
                .get(&url)
                .header("x-task", i.to_string())
                .send()
                .await;
            let ok = matches!(&result, Ok(r) if r.status() == reqwest::StatusCode::OK);
            let label = (!ok).then(|| failure_label(&result));
            let attempts = result
                .as_ref()
                .ok()
                .and_then(|r| r.extensions().get::<RetryReport>())
                .map(RetryReport::attempts);
            if let Ok(r) = result {
                // Read the body so the connection goes back to the pool.
                let _ = r.bytes().await;
            }
            let at = started.elapsed();
            let mut side = lock(&side);
            match label {
                None => {
                    side.ok += 1;
                    side.last_ok = Some(side.last_ok.map_or(at, |l| l.max(at)));
                    if let Some(a) = attempts {
                        *side.attempts.entry(a).or_default() += 1;
                    }
                }
                Some(label) => {
                    side.failed += 1;
                    side.failed_at(at);
                    *side.reasons.entry(label).or_default() += 1;
                }
            }
        });
    }
    let all_done = async {
        while let Some(joined) = set.join_next().await {
            if let Err(e) = joined {
                let mut side = lock(&side);
                side.failed += 1;
                *side
                    .reasons
                    .entry(format!("task panicked: {e}"))
                    .or_default() += 1;
            }
        }
    };
    let timed_out = tokio::time::timeout(timeout, all_done)
        .await
        .is_err()
        .then_some(timeout);
    set.abort_all();
    while set.join_next().await.is_some() {}
    let client_side = std::mem::take(&mut *lock(&side));
    (client_side, timed_out)
}

async fn run_row(cfg: &Config, shape: Shape, kind: ClientKind) -> Row {
    let server = LimitedServer::start(shape, cfg.cap).await;
    let client = kind.client();
    let started = Instant::now();
    let (client_side, timed_out) =
        run_tasks(&client, &server.url, 0..cfg.n, started, cfg.timeout).await;
    let server = server.finish();
    Row {
        shape,
        client: kind,
        n: cfg.n,
        epoch_offset: server.epoch.map(|e| e.saturating_duration_since(started)),
        client_side,
        server,
        timed_out,
        notes: Vec::new(),
    }
}

// ---------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn table(cfg: &Config, rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| server | client | tasks ok/N | requests | 429s | premature | failed tasks | last success | ideal last success |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let c = &row.client_side;
        let failed = match row.timed_out {
            Some(limit) => format!(
                "{} + {} unfinished (timeout {} s)",
                c.failed,
                row.n - c.ok - c.failed,
                limit.as_secs()
            ),
            None => c.failed.to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {}/{} | {} | {} | {} | {} | {} | {} |",
            row.shape.name(),
            row.client.name(),
            c.ok,
            row.n,
            row.server.requests,
            row.server.rejected,
            row.server.premature,
            failed,
            c.last_ok.map_or_else(|| "—".to_owned(), secs),
            secs(cfg.ideal()),
        );
    }
    out
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// Writes the heading of `row`'s targets and the two targets every row of
/// ours has, every task succeeding (none unfinished) and no premature send,
/// to `out`; returns whether each was met, `(all_ok, no_premature)`.
fn shared_targets(out: &mut String, cfg: &Config, row: &Row) -> (bool, bool) {
    let c = &row.client_side;
    let all_ok = c.ok == cfg.n && row.timed_out.is_none();
    let no_premature = row.server.premature == 0;
    let _ = writeln!(out, "  {}:", row.shape.name());
    let _ = writeln!(
        out,
        "    {}  {}/{} tasks succeed (target {}/{})",
        pass(all_ok),
        c.ok,
        cfg.n,
        cfg.n,
        cfg.n
    );
    let _ = writeln!(
        out,
        "    {}  {} premature sends (target 0)",
        pass(no_premature),
        row.server.premature
    );
    (all_ok, no_premature)
}

fn targets(cfg: &Config, row: &Row) -> (String, bool) {
    let c = &row.client_side;
    let n = u64::from(cfg.n);
    let max_429 = 1.1 * (n.saturating_sub(u64::from(cfg.cap))) as f64;
    let ideal = cfg.ideal();
    let limit = ideal + SECOND;
    let mut out = String::new();
    let (all_ok, no_premature) = shared_targets(&mut out, cfg, row);
    let few_429 = row.server.rejected as f64 <= max_429;
    let fast = c.last_ok.is_some_and(|l| l <= limit) && all_ok;
    let _ = writeln!(
        out,
        "    {}  {} 429s (target ≤ 1.1 × (N − CAP) = {:.0})",
        pass(few_429),
        row.server.rejected,
        max_429
    );
    let _ = writeln!(
        out,
        "    {}  last success {} (target ≤ ideal + 1 s = {}{})",
        pass(fast),
        c.last_ok.map_or_else(|| "—".to_owned(), secs),
        secs(limit),
        if all_ok {
            ""
        } else {
            ", with every task succeeding"
        }
    );
    (out, all_ok && no_premature && few_429 && fast)
}

fn details(row: &Row) -> String {
    let s = &row.server;
    let c = &row.client_side;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n### {} × {}: server-side breakdown",
        row.shape.name(),
        row.client.name()
    );
    let _ = writeln!(
        out,
        "server epoch (first request) {} after the row started; times below are since the epoch",
        row.epoch_offset.map_or_else(
            || "—".to_owned(),
            |d| format!("{:.1} ms", d.as_secs_f64() * 1e3)
        )
    );
    for note in &row.notes {
        let _ = writeln!(out, "{note}");
    }
    if let Some((lo, hi)) = c.failed_span {
        let _ = writeln!(
            out,
            "failed tasks ended {}–{} after the row started (client-side)",
            secs(lo),
            secs(hi)
        );
    }
    let _ = writeln!(
        out,
        "sends before the last 429 + Retry-After (literal reading): {}; requests without x-task: {}",
        s.early_literal, s.anonymous
    );
    let mut sends: BTreeMap<u32, u32> = BTreeMap::new();
    let mut multi_ok = 0;
    for t in s.tasks.values() {
        *sends.entry(t.sends).or_default() += 1;
        multi_ok += u32::from(t.oks > 1);
    }
    let _ = writeln!(
        out,
        "tasks by sends seen: {}{}",
        sends
            .iter()
            .map(|(k, v)| format!("{k}×{v}"))
            .collect::<Vec<_>>()
            .join(", "),
        if multi_ok > 0 {
            format!(" ({multi_ok} tasks got more than one 200)")
        } else {
            String::new()
        }
    );
    if !c.attempts.is_empty() {
        let _ = writeln!(
            out,
            "successful tasks by RetryReport::attempts: {}",
            c.attempts
                .iter()
                .map(|(k, v)| format!("{k}×{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(last) = s.arrivals.iter().filter(|a| a.ok).map(|a| a.at).max() {
        let _ = writeln!(out, "last 200 arrived at {}", secs(last));
    }
    let _ = writeln!(
        out,
        "\n| window | requests | first sends | retries | 200 | 429 | premature | before 429 + RA | 200s arrived | 429s arrived | requests per 100 ms |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|");
    let last_window = s.arrivals.iter().map(|a| a.at.as_secs()).max().unwrap_or(0);
    for k in 0..=last_window {
        let in_window: Vec<&Arrival> = s.arrivals.iter().filter(|a| a.at.as_secs() == k).collect();
        if in_window.is_empty() {
            continue;
        }
        let count = |f: &dyn Fn(&Arrival) -> bool| in_window.iter().filter(|a| f(a)).count();
        let span = |ok: bool| {
            let mut times = in_window.iter().filter(|a| a.ok == ok).map(|a| a.at);
            let first = times.next();
            let (lo, hi) = times.fold((first, first), |(lo, hi), t| {
                (lo.map(|l| l.min(t)), hi.map(|h| h.max(t)))
            });
            match (lo, hi) {
                (Some(lo), Some(hi)) => {
                    format!("{:.3}–{:.3} s", lo.as_secs_f64(), hi.as_secs_f64())
                }
                _ => "—".to_owned(),
            }
        };
        let mut tenths = [0u32; 10];
        for a in &in_window {
            let i = (a.at.subsec_millis() / 100) as usize;
            tenths[i.min(9)] += 1;
        }
        let _ = writeln!(
            out,
            "| {k}–{} s | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            k + 1,
            in_window.len(),
            count(&|a| !a.retry),
            count(&|a| a.retry),
            count(&|a| a.ok),
            count(&|a| !a.ok),
            count(&|a| a.premature),
            count(&|a| a.early_literal),
            span(true),
            span(false),
            tenths
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    out
}

// ---------------------------------------------------------------------------
// The Redis row: worker processes sharing one `RedisStore`
// ---------------------------------------------------------------------------

/// The `redis-server` the Redis row runs against (shared with the Redis
/// tests, whose stop/restart/signal/connection helpers this binary does not
/// use).
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../tests/support/redis_server.rs"]
mod redis_server;

#[cfg(feature = "redis")]
mod redis_row {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::io::Read;
    use std::ops::Range;
    use std::process::{Command, ExitCode, ExitStatus, Stdio};
    use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

    use reqwest_backpressure::store::{FailMode, RedisStore};
    use reqwest_backpressure::{Policy, RetryAfterMiddleware};
    use reqwest_middleware::ClientBuilder;

    use super::{
        ClientKind, ClientSide, Config, LimitedServer, Row, Shape, pass, run_tasks, secs,
        shared_targets,
    };

    /// Worker processes in the row (its name says 4).
    pub const WORKERS: u32 = 4;
    /// From spawning the workers to the instant they all start their tasks:
    /// room for process start-up and the Redis connection, so that neither
    /// skews the burst.
    const START_DELAY: Duration = Duration::from_secs(1);
    /// How long after the row's limit a worker may take to report before it
    /// is killed.
    const GRACE: Duration = Duration::from_secs(5);
    /// A worker that started its tasks this late after the shared instant
    /// is reported.
    const LATE: Duration = Duration::from_millis(20);
    /// The first word of a worker's result line on stdout.
    const RESULT: &str = "STORM_RESULT";

    // Worker settings, passed in the environment. `STORM_WORKER=1` marks a
    // worker process.
    const ROLE: &str = "STORM_WORKER";
    const ID: &str = "STORM_WORKER_ID";
    const SERVER_URL: &str = "STORM_WORKER_SERVER_URL";
    const REDIS_URL: &str = "STORM_WORKER_REDIS_URL";
    const PREFIX: &str = "STORM_WORKER_PREFIX";
    /// `first..end` task ids (`x-task`), unique across the workers.
    const TASKS: &str = "STORM_WORKER_TASKS";
    /// The shared start instant, milliseconds since the UNIX epoch.
    const START_MS: &str = "STORM_WORKER_START_MS";
    const TIMEOUT_MS: &str = "STORM_WORKER_TIMEOUT_MS";

    fn millis(d: Duration) -> u64 {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    // ------------------------------------------------------------- worker

    /// One worker process's settings.
    pub struct Worker {
        id: u32,
        server_url: String,
        redis_url: String,
        prefix: String,
        tasks: Range<u32>,
        start_ms: u64,
        timeout: Duration,
    }

    impl Worker {
        /// `None` unless this process is a worker.
        pub fn from_env() -> Option<Result<Self, String>> {
            std::env::var_os(ROLE)?;
            let var = |name: &str| std::env::var(name).map_err(|_| format!("{name} not set"));
            let num = |name: &str| -> Result<u64, String> {
                var(name)?
                    .parse()
                    .map_err(|_| format!("{name} is not a number"))
            };
            let parse = || -> Result<Self, String> {
                let tasks = var(TASKS)?;
                let (first, end) = tasks
                    .split_once("..")
                    .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                    .ok_or_else(|| format!("{TASKS}={tasks:?} is not first..end"))?;
                Ok(Worker {
                    id: u32::try_from(num(ID)?).map_err(|_| format!("{ID} too large"))?,
                    server_url: var(SERVER_URL)?,
                    redis_url: var(REDIS_URL)?,
                    prefix: var(PREFIX)?,
                    tasks: first..end,
                    start_ms: num(START_MS)?,
                    timeout: Duration::from_millis(num(TIMEOUT_MS)?),
                })
            };
            Some(parse())
        }

        fn command(&self, exe: &std::path::Path) -> Command {
            let mut cmd = Command::new(exe);
            cmd.env(ROLE, "1")
                .env(ID, self.id.to_string())
                .env(SERVER_URL, &self.server_url)
                .env(REDIS_URL, &self.redis_url)
                .env(PREFIX, &self.prefix)
                .env(TASKS, format!("{}..{}", self.tasks.start, self.tasks.end))
                .env(START_MS, self.start_ms.to_string())
                .env(TIMEOUT_MS, millis(self.timeout).to_string())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            cmd
        }

        /// The worker's `main`: runs its tasks from the shared start instant
        /// and prints one result line.
        pub fn run(self) -> ExitCode {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async {
                let store = match RedisStore::connect(&self.redis_url).await {
                    Ok(store) => store
                        .prefix(self.prefix.as_str())
                        // A Redis problem shows up as failed tasks, never as
                        // a silently unshared run.
                        .fail_mode(FailMode::Closed),
                    Err(e) => {
                        eprintln!("storm worker {}: cannot connect to Redis: {e}", self.id);
                        return ExitCode::from(2);
                    }
                };
                let inner = reqwest::Client::builder()
                    .build()
                    .expect("reqwest client builds");
                let client = ClientBuilder::new(inner)
                    .with(RetryAfterMiddleware::with_store(Policy::default(), store))
                    .build();

                // Sleep to just before the shared instant, then spin to it.
                let start = UNIX_EPOCH + Duration::from_millis(self.start_ms);
                if let Ok(wait) = start.duration_since(SystemTime::now()) {
                    tokio::time::sleep(wait.saturating_sub(Duration::from_millis(2))).await;
                }
                while SystemTime::now() < start {
                    std::hint::spin_loop();
                }
                let late = SystemTime::now().duration_since(start).unwrap_or_default();
                // The shared instant on this process's monotonic clock.
                let started = Instant::now()
                    .checked_sub(late)
                    .unwrap_or_else(Instant::now);
                let n = self.tasks.end.saturating_sub(self.tasks.start);
                // Tasks still running at the limit were aborted: unfinished.
                let (side, _) = run_tasks(
                    &client,
                    &self.server_url,
                    self.tasks.clone(),
                    started,
                    self.timeout,
                )
                .await;
                let unfinished = n.saturating_sub(side.ok + side.failed);
                println!("{}", encode(&side, unfinished, late));
                ExitCode::SUCCESS
            })
        }
    }

    /// A label without the result line's separators.
    fn clean(label: &str) -> String {
        label.replace(['\t', '\n', '\r', ';'], " ")
    }

    /// The worker's result line: tab-separated `name=value` fields.
    fn encode(side: &ClientSide, unfinished: u32, late: Duration) -> String {
        let join = |m: &mut dyn Iterator<Item = String>| m.collect::<Vec<_>>().join(";");
        format!(
            "{RESULT}\tok={}\tfailed={}\tunfinished={unfinished}\tlast_ok_us={}\tlate_us={}\tfailed_us={}\tattempts={}\tfailures={}",
            side.ok,
            side.failed,
            side.last_ok
                .map_or_else(|| "-".to_owned(), |d| d.as_micros().to_string()),
            late.as_micros(),
            side.failed_span.map_or_else(
                || "-".to_owned(),
                |(lo, hi)| format!("{}..{}", lo.as_micros(), hi.as_micros())
            ),
            join(&mut side.attempts.iter().map(|(k, v)| format!("{k}={v}"))),
            join(
                &mut side
                    .reasons
                    .iter()
                    .map(|(k, v)| format!("{}={v}", clean(k)))
            ),
        )
    }

    /// What one worker reported.
    #[derive(Debug, Default)]
    struct Report {
        side: ClientSide,
        unfinished: u32,
        late: Duration,
    }

    fn decode(stdout: &str) -> Option<Report> {
        let line = stdout
            .lines()
            .find(|l| l.split('\t').next() == Some(RESULT))?;
        let mut r = Report::default();
        let counts = |v: &str| -> Option<BTreeMap<String, u32>> {
            v.split(';')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    let (k, n) = s.rsplit_once('=')?;
                    Some((k.to_owned(), n.parse().ok()?))
                })
                .collect()
        };
        for field in line.split('\t').skip(1) {
            let (name, value) = field.split_once('=')?;
            match name {
                "ok" => r.side.ok = value.parse().ok()?,
                "failed" => r.side.failed = value.parse().ok()?,
                "unfinished" => r.unfinished = value.parse().ok()?,
                "last_ok_us" if value == "-" => {}
                "last_ok_us" => r.side.last_ok = Some(Duration::from_micros(value.parse().ok()?)),
                "late_us" => r.late = Duration::from_micros(value.parse().ok()?),
                "failed_us" if value == "-" => {}
                "failed_us" => {
                    let (lo, hi) = value.split_once("..")?;
                    r.side.failed_span = Some((
                        Duration::from_micros(lo.parse().ok()?),
                        Duration::from_micros(hi.parse().ok()?),
                    ));
                }
                "attempts" => {
                    r.side.attempts = counts(value)?
                        .into_iter()
                        .map(|(k, v)| Some((k.parse().ok()?, v)))
                        .collect::<Option<_>>()?;
                }
                "failures" => r.side.reasons = counts(value)?,
                _ => {}
            }
        }
        Some(r)
    }

    fn read_on_thread(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    }

    // ---------------------------------------------------------------- row

    /// The row: the rate-limited server here, the tasks in [`WORKERS`]
    /// processes sharing `redis_url`.
    pub async fn run(cfg: &Config, shape: Shape, redis_url: &str) -> Row {
        let server = LimitedServer::start(shape, cfg.cap).await;
        let prefix = format!(
            "storm-{}-{}-{}:",
            std::process::id(),
            match shape {
                Shape::Window => "window",
                Shape::Bucket => "bucket",
            },
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        );
        // The shared start instant, as wall-clock milliseconds for the
        // workers and on this process's monotonic clock.
        let (now_wall, now) = (SystemTime::now(), Instant::now());
        let start_ms = millis(
            (now_wall + START_DELAY)
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        ) + 1;
        let start_wall = UNIX_EPOCH + Duration::from_millis(start_ms);
        let started = now + start_wall.duration_since(now_wall).unwrap_or_default();

        let mut side = ClientSide::default();
        let mut notes = Vec::new();
        let mut unfinished = 0;
        let mut killed = false;
        let mut workers = super::redis_server::Workers(Vec::new());
        let mut pipes = Vec::new();
        let mut ranges = Vec::new();
        match std::env::current_exe() {
            Err(e) => {
                side.failed = cfg.n;
                side.reasons
                    .insert(format!("cannot re-run this binary: {e}"), cfg.n);
            }
            Ok(exe) => {
                for w in 0..WORKERS {
                    let range = cfg.n * w / WORKERS..cfg.n * (w + 1) / WORKERS;
                    let worker = Worker {
                        id: w,
                        server_url: server.url.clone(),
                        redis_url: redis_url.to_owned(),
                        prefix: prefix.clone(),
                        tasks: range.clone(),
                        start_ms,
                        timeout: cfg.timeout,
                    };
                    match worker.command(&exe).spawn() {
                        Ok(mut child) => {
                            let out = child.stdout.take().map(read_on_thread);
                            let err = child.stderr.take().map(read_on_thread);
                            pipes.push((out, err));
                            workers.0.push(child);
                            ranges.push(range);
                        }
                        Err(e) => {
                            let n = range.end - range.start;
                            side.failed += n;
                            *side
                                .reasons
                                .entry(format!("cannot start a worker process: {e}"))
                                .or_default() += n;
                        }
                    }
                }
            }
        }

        // Wait for them (the server answers on this runtime meanwhile).
        let give_up = started + cfg.timeout + GRACE;
        let mut statuses: Vec<Option<ExitStatus>> = vec![None; workers.0.len()];
        while statuses.iter().any(Option::is_none) {
            for (status, child) in statuses.iter_mut().zip(&mut workers.0) {
                if status.is_none() {
                    *status = child.try_wait().ok().flatten();
                }
            }
            if Instant::now() > give_up {
                killed = statuses.iter().any(Option::is_none);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(workers);

        for (w, ((out, err), range)) in pipes.into_iter().zip(ranges).enumerate() {
            let out = out.and_then(|h| h.join().ok()).unwrap_or_default();
            let err = err.and_then(|h| h.join().ok()).unwrap_or_default();
            let status = statuses.get(w).copied().flatten();
            let n = range.end - range.start;
            match decode(&out) {
                Some(r) => {
                    side.ok += r.side.ok;
                    side.failed += r.side.failed;
                    side.last_ok = side.last_ok.max(r.side.last_ok);
                    for (k, v) in r.side.reasons {
                        *side.reasons.entry(k).or_default() += v;
                    }
                    for (k, v) in r.side.attempts {
                        *side.attempts.entry(k).or_default() += v;
                    }
                    if let Some((lo, hi)) = r.side.failed_span {
                        side.failed_at(lo);
                        side.failed_at(hi);
                    }
                    unfinished += r.unfinished;
                    notes.push(format!(
                        "worker {w} (tasks {}..{}): {} ok, {} failed{}, {} unfinished, \
                         last success {}, tasks started {:.1} ms after the shared instant",
                        range.start,
                        range.end,
                        r.side.ok,
                        r.side.failed,
                        r.side
                            .failed_span
                            .map(|(lo, hi)| format!(" (at {}–{})", secs(lo), secs(hi)))
                            .unwrap_or_default(),
                        r.unfinished,
                        r.side.last_ok.map_or_else(|| "—".to_owned(), secs),
                        r.late.as_secs_f64() * 1e3
                    ));
                    if r.late > LATE {
                        eprintln!(
                            "storm: warning: worker {w} started its tasks {:.1} ms after the \
                             shared start instant (start-up took over {} s)",
                            r.late.as_secs_f64() * 1e3,
                            START_DELAY.as_secs()
                        );
                    }
                }
                None => {
                    // Killed, crashed, or could not connect: its tasks
                    // count as failed (or unfinished if killed at the limit).
                    let what = match status {
                        Some(s) => format!("worker process exited ({s}) without a result"),
                        None => "worker process killed at the limit".to_owned(),
                    };
                    eprintln!("storm: worker {w}: {what}; its stderr:\n{err}");
                    if status.is_some() {
                        side.failed += n;
                        let why = err.lines().last().unwrap_or("").trim();
                        *side.reasons.entry(format!("{what}: {why}")).or_default() += n;
                    }
                    notes.push(format!(
                        "worker {w} (tasks {}..{}): {what}",
                        range.start, range.end
                    ));
                }
            }
        }

        let server = server.finish();
        Row {
            shape,
            client: ClientKind::BackpressureRedis,
            n: cfg.n,
            epoch_offset: server.epoch.map(|e| e.saturating_duration_since(started)),
            client_side: side,
            server,
            timed_out: (killed || unfinished > 0).then_some(cfg.timeout),
            notes,
        }
    }

    // ------------------------------------------------------------ targets

    /// The last `200` on the server's clock, since its first request.
    fn last_200(row: &Row) -> Option<Duration> {
        row.server
            .arrivals
            .iter()
            .filter(|a| a.ok)
            .map(|a| a.at)
            .max()
    }

    /// The Redis row against the single-process reqwest-backpressure row of
    /// its shape: 429s and last success within 10% (≤ 1.1×), every task
    /// succeeding, nothing premature.
    pub fn targets(cfg: &Config, row: &Row, single: Option<&Row>) -> (String, bool) {
        let c = &row.client_side;
        let mut out = String::new();
        let (all_ok, no_premature) = shared_targets(&mut out, cfg, row);
        let Some(single) = single else {
            let _ = writeln!(
                out,
                "    MISS  no single-process reqwest-backpressure row to compare 429s and last success with"
            );
            return (out, false);
        };
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("×{:.2}", a / b)
            } else {
                "×—".to_owned()
            }
        };
        let (ours, theirs) = (row.server.rejected as f64, single.server.rejected as f64);
        let few_429 = ours <= 1.1 * theirs;
        let _ = writeln!(
            out,
            "    {}  {} 429s vs {} single-process ({}; target ≤ 1.1 × {} = {:.0})",
            pass(few_429),
            row.server.rejected,
            single.server.rejected,
            ratio(ours, theirs),
            single.server.rejected,
            1.1 * theirs
        );
        let fast = match (c.last_ok, single.client_side.last_ok) {
            (Some(ours), Some(theirs)) => {
                all_ok && ours.as_secs_f64() <= 1.1 * theirs.as_secs_f64()
            }
            _ => false,
        };
        let _ = writeln!(
            out,
            "    {}  last success {} vs {} single-process ({}; target ≤ 1.1 × = {}{})",
            pass(fast),
            c.last_ok.map_or_else(|| "—".to_owned(), secs),
            single
                .client_side
                .last_ok
                .map_or_else(|| "—".to_owned(), secs),
            match (c.last_ok, single.client_side.last_ok) {
                (Some(a), Some(b)) => ratio(a.as_secs_f64(), b.as_secs_f64()),
                _ => "×—".to_owned(),
            },
            single
                .client_side
                .last_ok
                .map_or_else(|| "—".to_owned(), |d| secs(d.mul_f64(1.1))),
            if all_ok {
                ""
            } else {
                ", with every task succeeding"
            }
        );
        let _ = writeln!(
            out,
            "          server side: {} requests vs {}; last 200 {} vs {} after each server's first request; \
             first request {} vs {} after the tasks started",
            row.server.requests,
            single.server.requests,
            last_200(row).map_or_else(|| "—".to_owned(), secs),
            last_200(single).map_or_else(|| "—".to_owned(), secs),
            row.epoch_offset.map_or_else(
                || "—".to_owned(),
                |d| format!("{:.1} ms", d.as_secs_f64() * 1e3)
            ),
            single.epoch_offset.map_or_else(
                || "—".to_owned(),
                |d| format!("{:.1} ms", d.as_secs_f64() * 1e3)
            ),
        );
        (out, all_ok && no_premature && few_429 && fast)
    }
}

// ---------------------------------------------------------------------------
// main
// ---------------------------------------------------------------------------

fn main() -> std::process::ExitCode {
    // A worker process of the Redis row (this binary re-run by itself).
    #[cfg(feature = "redis")]
    if let Some(worker) = redis_row::Worker::from_env() {
        return match worker {
            Ok(worker) => worker.run(),
            Err(e) => {
                eprintln!("storm worker: {e}");
                std::process::ExitCode::from(2)
            }
        };
    }

    let cfg = Config::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    println!(
        "storm: N={} tasks, CAP={} per second, ideal last success {} (N/CAP − 1 s), {} s limit per row{}",
        cfg.n,
        cfg.cap,
        secs(cfg.ideal()),
        cfg.timeout.as_secs(),
        if cfg.smoke {
            " — smoke run (no --bench): `cargo bench --bench storm` for the full run"
        } else {
            ""
        }
    );
    let whole = Instant::now();
    // Rows that could not run, and why.
    #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
    let mut skipped: Vec<(Shape, ClientKind, String)> = Vec::new();
    #[cfg(feature = "redis")]
    let redis = cfg
        .clients
        .contains(&ClientKind::BackpressureRedis)
        .then(|| {
            redis_server::RedisServer::try_start().map_err(|e| match e {
                redis_server::StartError::NotFound => "redis-server not found on PATH; install it \
                     (e.g. apt-get install redis-server) to run this row"
                    .to_owned(),
                redis_server::StartError::Failed(why) => why,
            })
        });
    #[cfg(feature = "redis")]
    if let Some(Err(why)) = &redis {
        println!(
            "storm: SKIPPING the row \"{}\": {why}",
            ClientKind::BackpressureRedis.name()
        );
    }
    let mut rows = Vec::new();
    for &shape in &cfg.shapes {
        for &kind in &cfg.clients {
            let row = match kind {
                #[cfg(feature = "redis")]
                ClientKind::BackpressureRedis => match &redis {
                    Some(Ok(server)) => {
                        runtime.block_on(redis_row::run(&cfg, shape, &server.url()))
                    }
                    Some(Err(why)) => {
                        skipped.push((shape, kind, why.clone()));
                        continue;
                    }
                    None => continue,
                },
                _ => runtime.block_on(run_row(&cfg, shape, kind)),
            };
            eprintln!(
                "storm: {} × {} done in {} ({} ok, {} requests)",
                shape.name(),
                kind.name(),
                secs(row.client_side.last_ok.unwrap_or_default()),
                row.client_side.ok,
                row.server.requests
            );
            rows.push(row);
        }
    }

    println!();
    print!("{}", table(&cfg, &rows));
    println!(
        "\npremature: a task's request arriving before the instant its last 429 allowed \
         (fixed window: the next window's start; token bucket: 429 arrival + Retry-After), \
         measured server-side. Last success: since the row started, client-side{}.",
        if rows.iter().any(|r| r.client.multi_process()) {
            " (the Redis row: the latest of its workers' last successes, each since \
             the shared instant they all started their tasks at)"
        } else {
            ""
        }
    );
    for (shape, kind, why) in &skipped {
        println!(
            "\nSKIPPED: {} × {}: {why}. The other rows ran.",
            shape.name(),
            kind.name()
        );
    }

    let ours: Vec<&Row> = rows
        .iter()
        .filter(|r| r.client == ClientKind::Backpressure)
        .collect();
    if !ours.is_empty() {
        println!(
            "\nreqwest-backpressure targets (N={}, CAP={}):",
            cfg.n, cfg.cap
        );
        let mut all = true;
        for row in &ours {
            let (text, ok) = targets(&cfg, row);
            print!("{text}");
            all &= ok;
        }
        println!(
            "  overall: {}",
            if all { "PASS" } else { "MISS (see above)" }
        );
    }

    #[cfg(feature = "redis")]
    {
        let multi: Vec<&Row> = rows
            .iter()
            .filter(|r| r.client == ClientKind::BackpressureRedis)
            .collect();
        if !multi.is_empty() {
            println!(
                "\n{} targets (N={}, CAP={}; 429s and last success within 10% of the \
                 single-process row, i.e. ≤ 1.1×):",
                ClientKind::BackpressureRedis.name(),
                cfg.n,
                cfg.cap
            );
            let mut all = true;
            for row in &multi {
                let single = rows
                    .iter()
                    .find(|r| r.shape == row.shape && r.client == ClientKind::Backpressure);
                let (text, ok) = redis_row::targets(&cfg, row, single);
                print!("{text}");
                all &= ok;
            }
            println!(
                "  overall: {}",
                if all { "PASS" } else { "MISS (see above)" }
            );
        }
        if !skipped.is_empty() {
            println!(
                "\n{} targets: not run (redis-server unavailable, see SKIPPED above)",
                ClientKind::BackpressureRedis.name()
            );
        }
    }

    let failures: Vec<&Row> = rows
        .iter()
        .filter(|r| !r.client_side.reasons.is_empty())
        .collect();
    if !failures.is_empty() {
        println!("\nwhy tasks failed:");
        for row in failures {
            let reasons = row
                .client_side
                .reasons
                .iter()
                .map(|(k, v)| format!("{v} × {k}"))
                .collect::<Vec<_>>()
                .join(", ");
            println!("  {} × {}: {reasons}", row.shape.name(), row.client.name());
        }
    }

    for row in &rows {
        let show = match cfg.verbose {
            Verbose::Off => false,
            Verbose::Ours => row.client.is_ours(),
            Verbose::All => true,
        };
        if show {
            print!("{}", details(row));
        }
    }
    println!("\nstorm: total {}", secs(whole.elapsed()));
    std::process::ExitCode::SUCCESS
}
