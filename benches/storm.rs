//! The storm benchmark: N tasks, each wanting one `200`, against a local
//! rate-limited server, side by side for three clients:
//!
//! 1. `no retry`: a bare `reqwest_middleware` client;
//! 2. `reqwest-retry`: `RetryTransientMiddleware` with exponential backoff,
//!    3 retries;
//! 3. `reqwest-backpressure`: `RetryAfterMiddleware::new(Policy::default())`.
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
//! STORM_N=500 STORM_CAP=100      # defaults
//! STORM_ONLY=backpressure        # only reqwest-backpressure's rows
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
}

impl ClientKind {
    fn name(self) -> &'static str {
        match self {
            ClientKind::NoRetry => "no retry",
            ClientKind::ReqwestRetry => "reqwest-retry",
            ClientKind::Backpressure => "reqwest-backpressure",
        }
    }

    fn client(self) -> ClientWithMiddleware {
        let inner = reqwest::Client::builder()
            .build()
            .expect("reqwest client builds");
        let builder = ClientBuilder::new(inner);
        match self {
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
        let clients = if only_ours || (smoke && !sized) {
            vec![ClientKind::Backpressure]
        } else {
            vec![
                ClientKind::NoRetry,
                ClientKind::ReqwestRetry,
                ClientKind::Backpressure,
            ]
        };
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

async fn run_row(cfg: &Config, shape: Shape, kind: ClientKind) -> Row {
    let state = Arc::new(Mutex::new(ServerState::new(shape, cfg.cap)));
    // A bare (not pooled) server: a new port, so a new origin for every row.
    let server = MockServer::builder()
        .disable_request_recording()
        .start()
        .await;
    Mock::given(method("GET"))
        .and(path("/work"))
        .respond_with(Limited(state.clone()))
        .mount(&server)
        .await;
    let url = format!("{}/work", server.uri());
    let client = kind.client();
    let side = Arc::new(Mutex::new(ClientSide::default()));

    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..cfg.n {
        let client = client.clone();
        let url = url.clone();
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
    let timed_out = tokio::time::timeout(cfg.timeout, all_done)
        .await
        .is_err()
        .then_some(cfg.timeout);
    set.abort_all();
    while set.join_next().await.is_some() {}
    drop(server);

    let server = {
        let mut guard = lock(&state);
        std::mem::replace(&mut *guard, ServerState::new(shape, cfg.cap))
    };
    let client_side = std::mem::take(&mut *lock(&side));
    Row {
        shape,
        client: kind,
        n: cfg.n,
        epoch_offset: server.epoch.map(|e| e.saturating_duration_since(started)),
        client_side,
        server,
        timed_out,
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

fn targets(cfg: &Config, row: &Row) -> (String, bool) {
    let c = &row.client_side;
    let n = u64::from(cfg.n);
    let max_429 = 1.1 * (n.saturating_sub(u64::from(cfg.cap))) as f64;
    let ideal = cfg.ideal();
    let limit = ideal + SECOND;
    let all_ok = c.ok == cfg.n && row.timed_out.is_none();
    let no_premature = row.server.premature == 0;
    let few_429 = row.server.rejected as f64 <= max_429;
    let fast = c.last_ok.is_some_and(|l| l <= limit) && all_ok;
    let mut out = String::new();
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
// main
// ---------------------------------------------------------------------------

fn main() {
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
    let mut rows = Vec::new();
    for &shape in &cfg.shapes {
        for &kind in &cfg.clients {
            let row = runtime.block_on(run_row(&cfg, shape, kind));
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
         measured server-side. Last success: since the row started, client-side."
    );

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
            Verbose::Ours => row.client == ClientKind::Backpressure,
            Verbose::All => true,
        };
        if show {
            print!("{}", details(row));
        }
    }
    println!("\nstorm: total {}", secs(whole.elapsed()));
}
