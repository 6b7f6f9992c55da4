//! A self-contained tour of `reqwest-backpressure` against a local server that
//! pushes back, printed as one timeline.
//!
//! ```text
//! cargo run --example demo
//! RUST_LOG=reqwest_backpressure=debug cargo run --example demo   # plus the middleware's own events
//! ```
//!
//! Each scenario runs against its own embedded server on 127.0.0.1 (its own
//! origin, so the scenarios are independent). Scenarios a to g and i run at once:
//! the server prints every arrival; the client prints how each call ended.
//! Then scenario h sends 40 requests at once to a rate-limited server and
//! prints what that server saw, window by window: one rejected burst, then
//! the queue released at the server's rate, with no retry storm.
//! The demo checks every outcome and exits non-zero if one is not what the
//! contract says, so it doubles as a smoke test.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use reqwest::Method;
use reqwest_backpressure::{Deadline, IdempotencyKey, Policy, RetryAfterMiddleware, RetryReport};
use reqwest_middleware::ClientWithMiddleware;
use tokio::task::JoinSet;
use tokio::time::Instant;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The test server (arrival log and rate-limited server), shared with the
/// tests and the storm bench.
#[path = "../tests/support/server.rs"]
mod server;

use server::{Arrivals, LimitedServer, Shape};

/// The jitter of the demo's policy: small, so the timeline stays readable.
const JITTER: Duration = Duration::from_millis(100);

/// What the scripted server answers, one entry per arrival (the last repeats).
#[derive(Debug, Clone, Copy)]
enum Reply {
    /// A final answer with this status.
    Status(u16),
    /// A push-back: this status with `Retry-After: <value>`.
    PushBack(u16, &'static str),
    /// A `429` whose `Retry-After` is an HTTP-date this many seconds ahead.
    PushBackUntil(u64),
    /// A `429` with no `Retry-After`, only the IETF `RateLimit` fields:
    /// quota exhausted, reset this many seconds ahead.
    RateLimited(u64),
}

/// One scenario: a request, the server's script, and the expected outcome.
struct Scenario {
    label: &'static str,
    method: Method,
    path: &'static str,
    key: Option<&'static str>,
    deadline: Duration,
    replies: Vec<Reply>,
    server_says: &'static str,
    expect_status: u16,
    expect_attempts: u32,
    /// `None`: success (no stop reason).
    expect_code: Option<&'static str>,
    expect_text: &'static str,
}

fn scenarios() -> Vec<Scenario> {
    use Reply::*;
    vec![
        Scenario {
            label: "a",
            method: Method::GET,
            path: "/items",
            key: None,
            deadline: Duration::from_secs(5),
            replies: vec![PushBack(429, "1"), Status(200)],
            server_says: "429 Retry-After: 1, then 200",
            expect_status: 200,
            expect_attempts: 2,
            expect_code: None,
            expect_text: "retried after >= 1 s: 200",
        },
        Scenario {
            label: "b",
            method: Method::POST,
            path: "/orders",
            key: None,
            deadline: Duration::from_secs(5),
            replies: vec![PushBack(429, "1"), Status(201)],
            server_says: "429 Retry-After: 1, then 201",
            expect_status: 429,
            expect_attempts: 1,
            expect_code: Some("retry_not_authorized_by_contract"),
            expect_text: "POST without a key: not retried",
        },
        Scenario {
            label: "c",
            method: Method::POST,
            path: "/orders",
            key: Some("order-42"),
            deadline: Duration::from_secs(5),
            replies: vec![PushBack(429, "1"), Status(201)],
            server_says: "429 Retry-After: 1, then 201",
            expect_status: 201,
            expect_attempts: 2,
            expect_code: None,
            expect_text: "IdempotencyKey order-42: retried, 201",
        },
        Scenario {
            label: "d",
            method: Method::GET,
            path: "/slow",
            key: None,
            deadline: Duration::from_millis(1500),
            replies: vec![PushBack(429, "2"), Status(200)],
            server_says: "429 Retry-After: 2",
            expect_status: 429,
            expect_attempts: 1,
            expect_code: Some("deadline_exhausted"),
            expect_text: "deadline 1.5 s < 2 s: stops, no wait",
        },
        Scenario {
            label: "e",
            method: Method::GET,
            path: "/maintenance",
            key: None,
            deadline: Duration::from_secs(5),
            replies: vec![PushBack(503, "86400")],
            server_says: "503 Retry-After: 86400",
            expect_status: 503,
            expect_attempts: 1,
            expect_code: Some("wait_budget_exhausted"),
            expect_text: "a day > max_wait: stops, keeps retry_at",
        },
        Scenario {
            label: "f",
            method: Method::GET,
            path: "/feed",
            key: None,
            deadline: Duration::from_secs(5),
            replies: vec![PushBackUntil(2), Status(200)],
            server_says: "429 Retry-After: <date +2 s>, then 200",
            expect_status: 200,
            expect_attempts: 2,
            expect_code: None,
            expect_text: "retried at that date: 200",
        },
        Scenario {
            label: "g",
            method: Method::GET,
            path: "/search",
            key: None,
            deadline: Duration::from_secs(5),
            replies: vec![PushBack(429, "soon"), Status(200)],
            server_says: "429 Retry-After: soon",
            expect_status: 429,
            expect_attempts: 1,
            expect_code: Some("invalid_retry_after"),
            expect_text: "invalid: stops, never guesses",
        },
        Scenario {
            label: "i",
            method: Method::GET,
            path: "/quota",
            key: None,
            deadline: Duration::from_secs(5),
            replies: vec![RateLimited(2), Status(200)],
            server_says: "429 RateLimit: r=0;t=2 (no Retry-After)",
            expect_status: 200,
            expect_attempts: 2,
            expect_code: None,
            expect_text: "waits for the reset: 200",
        },
    ]
}

/// The demo's clock and printer. Each line is stamped and printed under one
/// lock, so the printed timeline is in time order even though the scenarios
/// (and the servers' threads) run concurrently.
#[derive(Clone)]
struct Timeline {
    start: Instant,
    lock: Arc<Mutex<()>>,
}

impl Timeline {
    fn line(&self, label: &str, side: &str, text: &str) {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let ms = self.start.elapsed().as_millis();
        println!("{ms:>6}  {label:<2} {side:<6}  {text}");
    }
}

/// A wiremock responder that follows a script and logs every arrival.
struct Scripted {
    label: &'static str,
    replies: Vec<Reply>,
    calls: AtomicUsize,
    timeline: Timeline,
    arrivals: Arrivals,
}

impl Respond for Scripted {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        self.arrivals.record(request);
        let reply = self.replies[n.min(self.replies.len() - 1)];
        let (status, retry_after, not_before) = match reply {
            Reply::Status(s) => (s, None, None),
            Reply::PushBack(s, value) => {
                let not_before = value.parse().ok().map(Duration::from_secs);
                (s, Some(value.to_owned()), not_before)
            }
            Reply::PushBackUntil(secs) => {
                // HTTP-dates have whole seconds: the date is the one the
                // server names, and no request may arrive before it.
                let wall = SystemTime::now();
                let date = httpdate::HttpDate::from(wall + Duration::from_secs(secs));
                let until = SystemTime::from(date)
                    .duration_since(wall)
                    .unwrap_or_default();
                (429, Some(date.to_string()), Some(until))
            }
            Reply::RateLimited(secs) => (429, None, Some(Duration::from_secs(secs))),
        };
        if let Some(delay) = not_before {
            self.arrivals.allow_after(delay);
        }
        let key = request
            .headers
            .get("idempotency-key")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());

        let mut text = format!(
            "{:<4} {:<13} -> {status}",
            request.method.as_str(),
            request.url.path()
        );
        if let Some(value) = &retry_after {
            let _ = write!(text, "  Retry-After: {value}");
        }
        if let Reply::RateLimited(secs) = reply {
            let _ = write!(text, "  RateLimit: \"demo\";r=0;t={secs}");
        }
        if let Some(key) = &key {
            let _ = write!(text, "  (got Idempotency-Key: {key})");
        }
        self.timeline.line(self.label, "server", &text);

        let mut response = ResponseTemplate::new(status);
        if let Some(value) = retry_after {
            response = response.insert_header("retry-after", value.as_str());
        }
        if let Reply::RateLimited(secs) = reply {
            response = response
                .insert_header("ratelimit", format!("\"demo\";r=0;t={secs}").as_str())
                .insert_header(
                    "ratelimit-policy",
                    format!("\"demo\";q=10;w={secs}").as_str(),
                );
        }
        response
    }
}

/// Runs one scenario; returns what did not go as expected.
async fn run(
    scenario: &Scenario,
    server: &MockServer,
    client: &ClientWithMiddleware,
    timeline: &Timeline,
) -> Vec<String> {
    let arrivals = Arrivals::default();
    Mock::given(any())
        .respond_with(Scripted {
            label: scenario.label,
            replies: scenario.replies.clone(),
            calls: AtomicUsize::new(0),
            timeline: timeline.clone(),
            arrivals: arrivals.clone(),
        })
        .mount(server)
        .await;

    let started = Instant::now();
    let mut request = client
        .request(
            scenario.method.clone(),
            format!("{}{}", server.uri(), scenario.path),
        )
        .with_extension(Deadline::after(scenario.deadline));
    if let Some(key) = scenario.key {
        request = request.with_extension(IdempotencyKey::new(key));
    }
    let what = format!("{:<4} {:<13}", scenario.method.as_str(), scenario.path);

    let response = match request.send().await {
        Ok(response) => response,
        Err(e) => {
            timeline.line(scenario.label, "client", &format!("{what} => error: {e}"));
            return vec![format!("expected a response, got an error: {e}")];
        }
    };
    let took = started.elapsed();
    let status = response.status().as_u16();
    let Some(report) = response.extensions().get::<RetryReport>().copied() else {
        return vec!["the response carries no RetryReport".to_owned()];
    };
    let code = report.stop_reason().map(|r| r.code());

    let mut text = format!(
        "{what} => {status}, {} attempt{}, waited {} ms: {}",
        report.attempts(),
        if report.attempts() == 1 { "" } else { "s" },
        report.waited().as_millis(),
        code.map_or_else(|| "success".to_owned(), |c| format!("stop {c}")),
    );
    if let Some(at) = report.retry_at().filter(|_| code.is_some()) {
        // Kept on a stop, so the caller can reschedule.
        let secs = at
            .duration_since(SystemTime::now())
            .unwrap_or_default()
            .as_secs_f64()
            .round();
        let _ = write!(
            text,
            "\n{:19}report.retry_at(): {} (in {secs} s), to reschedule",
            "",
            httpdate::fmt_http_date(at)
        );
    }
    timeline.line(scenario.label, "client", &text);

    // Check the outcome against the contract.
    let mut problems = Vec::new();
    if status != scenario.expect_status {
        problems.push(format!(
            "status {status}, expected {}",
            scenario.expect_status
        ));
    }
    if report.attempts() != scenario.expect_attempts {
        problems.push(format!(
            "{} attempts, expected {}",
            report.attempts(),
            scenario.expect_attempts
        ));
    }
    if code != scenario.expect_code {
        problems.push(format!(
            "ended with {}, expected {}",
            code.unwrap_or("success"),
            scenario.expect_code.unwrap_or("success")
        ));
    }
    let arrivals = arrivals.entries();
    if arrivals.len() != scenario.expect_attempts as usize {
        problems.push(format!(
            "the server saw {} requests, expected {}",
            arrivals.len(),
            scenario.expect_attempts
        ));
    }
    // Measured on the server's side: no retry arrived before its Retry-After.
    for pair in arrivals.windows(2) {
        if let Some(not_before) = pair[0].not_before
            && pair[1].at < not_before
        {
            problems.push(format!(
                "a retry arrived {} ms before the server's Retry-After",
                (not_before - pair[1].at).as_millis()
            ));
        }
    }
    // The key travels as a Structured Field string: `"order-42"`.
    if let Some(key) = scenario.key
        && arrivals
            .iter()
            .any(|a| a.idempotency_key.as_deref() != Some(format!("\"{key}\"").as_str()))
    {
        problems.push("an attempt reached the server without its Idempotency-Key".to_owned());
    }
    // Every stop in this demo is decided on the first answer, at once.
    let at_once = report.waited() < Duration::from_millis(50) && took < Duration::from_millis(500);
    if code.is_some() && !at_once {
        problems.push(format!(
            "stopped only after {} ms (waited {} ms); expected at once",
            took.as_millis(),
            report.waited().as_millis()
        ));
    }
    if scenario.expect_code == Some("wait_budget_exhausted") {
        let ahead = report
            .retry_at()
            .and_then(|at| at.duration_since(SystemTime::now()).ok());
        let about_a_day_ahead = ahead.is_some_and(|d| d > Duration::from_secs(86_000));
        if !about_a_day_ahead {
            problems.push(format!(
                "retry_at should be about a day ahead, got {ahead:?}"
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------
// Scenario h: a burst against a rate-limited server, and no storm after it
// ---------------------------------------------------------------------------

/// Tasks that send at once in scenario h.
const BURST_TASKS: u32 = 40;
/// Requests the scenario-h server admits per window.
const WINDOW_CAP: u32 = 10;
/// Each scenario-h task's deadline.
const BURST_DEADLINE: Duration = Duration::from_secs(8);
/// Most `429`s scenario h expects: the first burst's 30, plus a small margin
/// for timer lateness on a busy machine.
const MAX_REJECTED: u64 = 33;
/// Longest scenario h may take: ideally just under 4 s (30 queued tasks at
/// 10 a second from the 1 s mark).
const MAX_BURST_TIME: Duration = Duration::from_secs(6);

/// Runs scenario h with its own client and server, prints what the server
/// saw per window; returns what did not go as expected.
async fn run_burst(policy: &Policy) -> Vec<String> {
    let first_burst = BURST_TASKS - WINDOW_CAP;
    for line in [
        format!(
            "h  {BURST_TASKS} x GET /burst at once (header x-task: 0..{}), from a new client with \
             the same policy,",
            BURST_TASKS - 1
        ),
        format!(
            "   to a fresh server that admits {WINDOW_CAP} requests per 1 s window and answers the \
             rest 429 +"
        ),
        "   Retry-After (whole seconds to the next window). What to look for: the first burst is"
            .to_owned(),
        format!(
            "   rejected once (up to {first_burst} 429s); then the origin gate holds every task \
             until the server's"
        ),
        format!(
            "   time and releases the queue about {WINDOW_CAP} a second after a lone probe, so \
             each later"
        ),
        format!("   window sees ~{WINDOW_CAP} requests and no 429s."),
    ] {
        println!("{line}");
    }
    println!();
    // A fresh server: a new port, so a new origin, with no gate left over
    // from the scenarios above.
    let server = LimitedServer::start(Shape::Window, WINDOW_CAP, "/burst").await;
    let inner = match reqwest::Client::builder().no_proxy().build() {
        Ok(client) => client,
        Err(e) => return vec![format!("cannot build the HTTP client: {e}")],
    };
    let client = reqwest_middleware::ClientBuilder::new(inner)
        .with(RetryAfterMiddleware::new(policy.clone()))
        .build();

    let url = server.url.clone();
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..BURST_TASKS {
        let client = client.clone();
        let url = url.clone();
        tasks.spawn(async move {
            let result = client
                .get(&url)
                .header("x-task", i.to_string())
                .with_extension(Deadline::after(BURST_DEADLINE))
                .send()
                .await;
            let outcome = match result {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let code = response
                        .extensions()
                        .get::<RetryReport>()
                        .and_then(|r| r.stop_reason())
                        .map(|r| r.code());
                    // Read the body so the connection goes back to the pool.
                    let _ = response.bytes().await;
                    match (status, code) {
                        (200, None) => Ok(()),
                        (status, Some(code)) => Err(format!("{status} ({code})")),
                        (status, None) => Err(status.to_string()),
                    }
                }
                Err(e) => Err(format!("error: {e}")),
            };
            (i, outcome)
        });
    }
    let mut ok = 0;
    // How the other tasks ended, counted by outcome.
    let mut failures: BTreeMap<String, u32> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((_, Ok(()))) => ok += 1,
            Ok((_, Err(e))) => *failures.entry(e).or_default() += 1,
            Err(e) => *failures.entry(format!("a panic: {e}")).or_default() += 1,
        }
    }
    let took = started.elapsed();
    let arrivals = server.finish().arrivals;
    let windows = arrivals
        .iter()
        .map(|a| a.at.as_secs())
        .max()
        .map_or(0, |k| k + 1);
    println!(
        "   {:<8} {:>8} {:>5} {:>5} {:>9}",
        "window", "requests", "200", "429", "premature"
    );
    for k in 0..windows {
        let here: Vec<_> = arrivals.iter().filter(|a| a.at.as_secs() == k).collect();
        let oks = here.iter().filter(|a| a.ok).count();
        let premature = here.iter().filter(|a| a.premature).count();
        println!(
            "   {:<8} {:>8} {:>5} {:>5} {:>9}",
            format!("{k}–{} s", k + 1),
            here.len(),
            oks,
            here.len() - oks,
            premature
        );
    }
    let rejected = arrivals.iter().filter(|a| !a.ok).count() as u64;
    let premature = arrivals.iter().filter(|a| a.premature).count();
    let last_ok = arrivals.iter().filter(|a| a.ok).map(|a| a.at).max();
    println!(
        "   tasks ok {ok}/{BURST_TASKS}; the server saw {} requests, {rejected} 429s, {premature} \
         premature;\n   last 200 at {} s on the server's clock (all tasks done {:.2} s after the \
         burst)",
        arrivals.len(),
        last_ok.map_or_else(|| "-".to_owned(), |t| format!("{:.2}", t.as_secs_f64())),
        took.as_secs_f64(),
    );

    let mut problems = Vec::new();
    if ok != BURST_TASKS {
        problems.push(format!(
            "{ok} of {BURST_TASKS} tasks got a 200, expected all"
        ));
    }
    for (outcome, n) in &failures {
        problems.push(format!("{n} task(s) ended with {outcome}"));
    }
    if premature > 0 {
        problems.push(format!(
            "{premature} requests arrived before the window their task's 429 pointed to"
        ));
    }
    if rejected > MAX_REJECTED {
        problems.push(format!(
            "the server sent {rejected} 429s, expected at most {MAX_REJECTED} ({first_burst} for the first burst)"
        ));
    }
    if took > MAX_BURST_TIME {
        problems.push(format!(
            "the tasks took {:.2} s, expected at most {} s",
            took.as_secs_f64(),
            MAX_BURST_TIME.as_secs()
        ));
    }
    problems
}

#[tokio::main]
async fn main() -> ExitCode {
    // Silent unless RUST_LOG asks for the middleware's events (on stderr).
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off")),
        )
        .with_writer(std::io::stderr)
        .init();

    let policy = Policy::default().jitter(JITTER);
    // The servers are on loopback: ignore any HTTP_PROXY of the environment.
    let inner = match reqwest::Client::builder().no_proxy().build() {
        Ok(client) => client,
        Err(e) => {
            eprintln!("cannot build the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = reqwest_middleware::ClientBuilder::new(inner)
        .with(RetryAfterMiddleware::new(policy.clone()))
        .build();
    let scenarios = scenarios();

    println!(
        "reqwest-backpressure demo: local servers push back with 429/503 + Retry-After; the client\n\
         retries no earlier than the server allows and within its deadline, or stops with a stable code.\n"
    );
    println!(
        "policy: Policy::default().jitter(Duration::from_millis({ms})): at most {n} sends per request;\n\
         a server delay over 60 s is never waited (nor shortened); each wait gets 0..{ms} ms of\n\
         jitter added, never subtracted.\n",
        ms = JITTER.as_millis(),
        n = policy.limits().max_attempts,
    );
    println!(
        "scenarios a-g and i (all at once, each against its own local server on 127.0.0.1), then h on its own:"
    );
    println!("     {:<18} {:<39} expected", "request", "server answers");
    for s in &scenarios {
        println!(
            "  {:<2} {:<18} {:<39} {}",
            s.label,
            format!("{} {}", s.method.as_str(), s.path),
            s.server_says,
            s.expect_text
        );
    }
    println!(
        "  {:<2} {:<18} {:<39} no storm: {} 429s, then ~{WINDOW_CAP} a second",
        "h",
        format!("{BURST_TASKS} x GET /burst"),
        format!("{WINDOW_CAP} a 1 s window, rest 429 Retry-After"),
        BURST_TASKS - WINDOW_CAP
    );
    println!();
    println!("{:>6}  {:<2} {:<6}  event", "ms", "#", "side");
    println!(
        "{:>6}  {:<2} {:<6}  {}",
        "------",
        "--",
        "------",
        "-".repeat(64)
    );

    // One server per scenario, all started first and kept to the end: each
    // is its own origin (scheme, host, port), and the middleware's origin
    // gate rightly makes every request to an origin honour a Retry-After that
    // origin sent. (`MockServer::start()` would hand a finished scenario's
    // pooled server, port included, to the next one: same origin.)
    let servers = join_all(scenarios.iter().map(|_| MockServer::builder().start())).await;

    let timeline = Timeline {
        start: Instant::now(),
        lock: Arc::new(Mutex::new(())),
    };
    let results = join_all(
        scenarios
            .iter()
            .zip(&servers)
            .map(|(s, server)| run(s, server, &client, &timeline)),
    )
    .await;
    println!();

    // Scenario h, once the others are done, so their timeline stays readable.
    let burst = run_burst(&policy).await;
    let total = timeline.start.elapsed();

    let mut failed: Vec<_> = scenarios
        .iter()
        .zip(&results)
        .filter(|(_, problems)| !problems.is_empty())
        .map(|(s, problems)| {
            let what = format!("{} ({} {})", s.label, s.method.as_str(), s.path);
            (what, problems.as_slice())
        })
        .collect();
    if !burst.is_empty() {
        failed.push(("h (GET /burst)".to_owned(), burst.as_slice()));
    }
    let count = scenarios.len() + 1;
    println!();
    if failed.is_empty() {
        println!(
            "all {count} scenarios ended as the contract says ({:.1} s).",
            total.as_secs_f64()
        );
        ExitCode::SUCCESS
    } else {
        for (what, problems) in &failed {
            for p in problems.iter() {
                println!("UNEXPECTED in {what}: {p}");
            }
        }
        println!(
            "{} of {count} scenarios did not end as expected.",
            failed.len()
        );
        ExitCode::FAILURE
    }
}
