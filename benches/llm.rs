//! The LLM batch bench: N keyed `POST /v1/chat/completions`, each with a
//! token cost, `INFLIGHT` at once, against a local OpenAI-like server
//! (`tests/support/server/llm.rs`): fixed windows of 1 s, at most R
//! requests and T tokens per window, every answer stating both quotas in
//! OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, its
//! `429`s `retry-after-ms` too.
//!
//! Two scenarios, one table each, each row on a fresh server (new port, new
//! origin) and a fresh client:
//!
//! - **requests bind**: R = 60, T = 1,000,000;
//! - **tokens bind**: R = 1,000, T = 5,000.
//!
//! The costs are the same in every row: 20..=140 from a fixed
//! pseudo-random sequence (mean about 80), sent as the `x-cost` header the
//! server counts. Each task carries an `IdempotencyKey` (a POST is retried
//! only with one) and its `x-task`. The rows:
//!
//! 1. `reqwest-backpressure, Cost declared`:
//!    `Policy::default().rate_limit_headers(RateLimitHeaders::openai())`,
//!    each request with `Cost::new(its cost)`;
//! 2. `reqwest-backpressure, no Cost`: the same policy, no `Cost` (the
//!    mean cost learned from how the stated remaining falls stands in);
//! 3. `reqwest-retry`: `RetryTransientMiddleware`, `ExponentialBackoff`
//!    with 3 retries (for reference);
//! 4. `no retry`: a bare client (for reference).
//!
//! Columns: tasks that got their `200`; requests and `429`s the server saw;
//! `429`s among requests that arrived after the first `200` was answered
//! (a client reading the headers knows both quotas by then); the wall time
//! from the first send to the last success (client side); the ideal: the
//! fewest windows the costs need, taken in order of submission (each
//! window takes requests while both R and T allow), as (windows − 1) × W;
//! and wall / ideal. The targets (PASS/FAIL lines): with costs declared, no
//! `429` after the first answer and wall ≤ 1.05 × ideal; with none
//! declared, wall ≤ 1.10 × ideal (all tasks ok, for either).
//!
//! ```text
//! cargo bench --bench llm
//! LLM_N=400 LLM_INFLIGHT=64     # defaults
//! LLM_SCENARIO=requests|tokens  # one scenario only
//! LLM_VERBOSE=1                 # what each window of our rows admitted, and every 429 after the first answer
//! ```
//!
//! Run without `--bench` (as `cargo test --benches` does), it makes a quick
//! smoke run of our two rows: N = 40, windows of 250 ms, R and T a tenth
//! of the full run's (unless `LLM_N` is set).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest_backpressure::{
    Cost, IdempotencyKey, Policy, RateLimitHeaders, RetryAfterMiddleware, RetryReport,
};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::RetryTransientMiddleware;
use reqwest_retry::policies::ExponentialBackoff;

/// The test servers (shared with the tests and the examples).
#[path = "../tests/support/server.rs"]
mod server;

use server::llm::{LlmConfig, LlmServer, LlmState, costs};

/// Longest a row may take before its partial figures are reported.
const ROW_TIMEOUT: Duration = Duration::from_secs(40);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Declared,
    Undeclared,
    ReqwestRetry,
    NoRetry,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Declared => "reqwest-backpressure, Cost declared",
            Kind::Undeclared => "reqwest-backpressure, no Cost",
            Kind::ReqwestRetry => "reqwest-retry (3 retries)",
            Kind::NoRetry => "no retry",
        }
    }

    fn client(self) -> ClientWithMiddleware {
        let inner = reqwest::Client::builder()
            .build()
            .expect("reqwest client builds");
        let builder = ClientBuilder::new(inner);
        match self {
            Kind::Declared | Kind::Undeclared => builder
                .with(RetryAfterMiddleware::new(
                    Policy::default().rate_limit_headers(RateLimitHeaders::openai()),
                ))
                .build(),
            Kind::ReqwestRetry => builder
                .with(RetryTransientMiddleware::new_with_policy(
                    ExponentialBackoff::builder().build_with_max_retries(3),
                ))
                .build(),
            Kind::NoRetry => builder.build(),
        }
    }
}

struct Settings {
    n: usize,
    in_flight: usize,
    smoke: bool,
    scenarios: Vec<(&'static str, LlmConfig)>,
    kinds: Vec<Kind>,
    verbose: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn env_usize(name: &str) -> Option<usize> {
    let v = env(name)?;
    match v.trim().parse::<usize>() {
        Ok(n) if n > 0 => Some(n),
        _ => {
            eprintln!("llm: ignoring {name}={v:?} (want a positive integer)");
            None
        }
    }
}

impl Settings {
    fn from_env() -> Self {
        // `cargo bench` passes `--bench`; `cargo test --benches` does not.
        let smoke = !std::env::args().skip(1).any(|a| a == "--bench") && env("LLM_N").is_none();
        let n = env_usize("LLM_N").unwrap_or(if smoke { 40 } else { 400 });
        let in_flight = env_usize("LLM_INFLIGHT").unwrap_or(64);
        let (requests, tokens) = if smoke {
            (
                LlmConfig {
                    window: Duration::from_millis(250),
                    ..LlmConfig::new(6, 100_000)
                },
                LlmConfig {
                    window: Duration::from_millis(250),
                    ..LlmConfig::new(100, 500)
                },
            )
        } else {
            (LlmConfig::new(60, 1_000_000), LlmConfig::new(1_000, 5_000))
        };
        let all = vec![("requests bind", requests), ("tokens bind", tokens)];
        let scenarios = match env("LLM_SCENARIO").map(|s| s.trim().to_ascii_lowercase()) {
            Some(s) if s == "requests" => vec![all[0]],
            Some(s) if s == "tokens" => vec![all[1]],
            Some(s) => {
                eprintln!("llm: ignoring LLM_SCENARIO={s:?} (want requests or tokens)");
                all
            }
            None => all,
        };
        let kinds = if smoke {
            vec![Kind::Declared, Kind::Undeclared]
        } else {
            vec![
                Kind::Declared,
                Kind::Undeclared,
                Kind::ReqwestRetry,
                Kind::NoRetry,
            ]
        };
        Settings {
            n,
            in_flight,
            smoke,
            scenarios,
            kinds,
            verbose: env("LLM_VERBOSE").is_some_and(|v| v.trim() != "0"),
        }
    }
}

/// The seed of the requests' costs: the same every run.
const COST_SEED: u64 = 0x2545_f491_4f6c_dd1d;

/// What one row ended with.
struct Row {
    kind: Kind,
    ok: usize,
    /// From the first send to the last success, client side.
    wall: Option<Duration>,
    /// How the tasks that did not succeed ended, and how many.
    failures: BTreeMap<String, usize>,
    timed_out: bool,
    server: LlmState,
}

/// How a task that did not get its `200` ended.
fn failure(result: &reqwest_middleware::Result<reqwest::Response>) -> String {
    match result {
        Ok(response) => {
            let stop = response
                .extensions()
                .get::<RetryReport>()
                .and_then(RetryReport::stop_reason)
                .map(|r| format!(" ({})", r.code()))
                .unwrap_or_default();
            format!("{}{stop}", response.status().as_u16())
        }
        Err(e) => {
            let e = e.to_string();
            let short: String = e.chars().take(80).collect();
            format!("error: {short}")
        }
    }
}

async fn run_row(kind: Kind, config: LlmConfig, costs: &[u64], in_flight: usize) -> Row {
    let server = LlmServer::start(config).await;
    let client = kind.client();
    let url = server.url.clone();
    let start = Instant::now();
    let sends = futures_util::stream::iter(costs.iter().copied().enumerate())
        .map(|(i, cost)| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let mut request = client
                    .post(url)
                    .header("content-type", "application/json")
                    .header("x-task", i.to_string())
                    .header("x-cost", cost.to_string())
                    .body(format!(
                        r#"{{"model":"m","messages":[{{"role":"user","content":"task {i}"}}],"max_tokens":{cost}}}"#
                    ))
                    .with_extension(IdempotencyKey::new(format!("batch-{i}")));
                if kind == Kind::Declared {
                    request = request.with_extension(Cost::new(cost));
                }
                let result = request.send().await;
                let done = Instant::now();
                match &result {
                    Ok(r) if r.status().is_success() => Ok(done),
                    _ => Err(failure(&result)),
                }
            }
        })
        .buffer_unordered(in_flight)
        .collect::<Vec<_>>();
    let (results, timed_out) = match tokio::time::timeout(ROW_TIMEOUT, sends).await {
        Ok(results) => (results, false),
        Err(_) => (Vec::new(), true),
    };
    let mut failures = BTreeMap::new();
    let mut last = None;
    let mut ok = 0;
    for r in results {
        match r {
            Ok(done) => {
                ok += 1;
                last = last.max(Some(done));
            }
            Err(why) => *failures.entry(why).or_default() += 1,
        }
    }
    let server = server.finish();
    if timed_out {
        ok = usize::try_from(server.oks).unwrap_or(usize::MAX);
        last = server.last_ok;
    }
    Row {
        kind,
        ok,
        wall: last.map(|l| l.duration_since(start)),
        failures,
        timed_out,
        server,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

fn print_table(n: usize, ideal: Duration, rows: &[Row]) {
    println!(
        "| client | ok/{n} | requests | 429s | 429s after the first answer | wall | ideal | wall/ideal |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let wall = row.wall.map_or("—".to_owned(), secs);
        let ratio = match row.wall {
            Some(w) if !ideal.is_zero() => format!("{:.3}", w.as_secs_f64() / ideal.as_secs_f64()),
            _ => "—".to_owned(),
        };
        println!(
            "| {}{} | {} | {} | {} | {} | {wall} | {} | {ratio} |",
            row.kind.name(),
            if row.timed_out { " (timed out)" } else { "" },
            row.ok,
            row.server.requests,
            row.server.rejected,
            row.server.rejected_after_first_ok(),
            secs(ideal),
        );
    }
}

fn print_targets(n: usize, ideal: Duration, rows: &[Row]) {
    let verdict = |pass: bool| if pass { "PASS" } else { "FAIL" };
    for row in rows {
        match row.kind {
            Kind::Declared => {
                let after = row.server.rejected_after_first_ok();
                println!(
                    "{}: Cost declared: 0 429s after the first answer: {after}",
                    verdict(after == 0 && row.ok == n)
                );
                let bound = ideal.mul_f64(1.05);
                println!(
                    "{}: Cost declared: wall ≤ 1.05 × ideal = {}: {}",
                    verdict(row.ok == n && row.wall.is_some_and(|w| w <= bound)),
                    secs(bound),
                    row.wall.map_or("—".to_owned(), secs),
                );
            }
            Kind::Undeclared => {
                let bound = ideal.mul_f64(1.10);
                println!(
                    "{}: no Cost: wall ≤ 1.10 × ideal = {}: {}",
                    verdict(row.ok == n && row.wall.is_some_and(|w| w <= bound)),
                    secs(bound),
                    row.wall.map_or("—".to_owned(), secs),
                );
            }
            Kind::ReqwestRetry | Kind::NoRetry => {}
        }
        if row.ok < n {
            let ended: Vec<String> = row
                .failures
                .iter()
                .map(|(why, count)| format!("{count} × {why}"))
                .collect();
            println!(
                "  {}: {} of {n} not ok{}{}",
                row.kind.name(),
                n - row.ok,
                if ended.is_empty() { "" } else { ": " },
                ended.join(", ")
            );
        }
    }
}

fn print_details(row: &Row) {
    println!(
        "\n{}: per window (requests, tokens admitted; 429s)",
        row.kind.name()
    );
    for w in row.server.windows() {
        let at =
            |d: Option<Duration>| d.map_or("—".to_owned(), |d| format!("{:.3}", d.as_secs_f64()));
        println!(
            "  window {:>2}: {:>4} requests {:>7} tokens {:>4} × 429, arrivals {}–{} s in",
            w.index,
            w.requests,
            w.tokens,
            w.rejected,
            at(w.first),
            at(w.last)
        );
    }
    for line in row.server.rejections_after_first_ok() {
        println!("  {line}");
    }
}

fn main() {
    let settings = Settings::from_env();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let costs = costs(COST_SEED, settings.n);
    let mean = costs.iter().sum::<u64>() as f64 / costs.len().max(1) as f64;
    println!(
        "llm: N={} keyed POSTs, {} in flight, costs 20..=140 (mean {mean:.1}){}",
        settings.n,
        settings.in_flight,
        if settings.smoke {
            " — smoke run (no --bench): `cargo bench --bench llm` for the full run"
        } else {
            ""
        }
    );
    let whole = Instant::now();
    for &(name, config) in &settings.scenarios {
        let ideal = config.ideal(&costs);
        println!(
            "\n### {name}: R = {} requests, T = {} tokens per {} window; ideal {} windows\n",
            config.requests,
            config.tokens,
            secs(config.window),
            config.ideal_windows(&costs),
        );
        let rows: Vec<Row> = settings
            .kinds
            .iter()
            .map(|&kind| runtime.block_on(run_row(kind, config, &costs, settings.in_flight)))
            .collect();
        print_table(settings.n, ideal, &rows);
        println!();
        print_targets(settings.n, ideal, &rows);
        if settings.verbose {
            for row in rows
                .iter()
                .filter(|r| matches!(r.kind, Kind::Declared | Kind::Undeclared))
            {
                print_details(row);
            }
        }
    }
    println!("\nllm: total {}", secs(whole.elapsed()));
}
