//! A progress bar for a CLI that calls a rate-limited API: what to copy.
//!
//! ```text
//! cargo run --example progress
//! ```
//!
//! 200 requests go at once to an embedded local server that admits 50 a
//! second and answers the rest `429` + `Retry-After`. An [`Observer`] counts
//! the tasks waiting and stopped and remembers when the origin's gate
//! reopens; an `indicatif` bar shows them with the requests done. The bar
//! draws on a terminal (stderr); the summary line is printed either way.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use reqwest_backpressure::observe::{GateClosed, GateReopened, Observer, Stop, Wait, WaitEnd};
use reqwest_backpressure::{Policy, RetryAfterMiddleware, RetryReport};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The test server (a rate-limited wiremock server), shared with the tests,
/// the demo and the storm bench.
#[path = "../tests/support/server.rs"]
mod server;

use server::{LimitedServer, Shape};

const REQUESTS: u64 = 200;
const PER_SECOND: u32 = 50;

/// What the bar shows, kept up to date by the middleware's events.
#[derive(Debug, Default)]
struct Progress {
    /// Tasks in a wait now (after a `429`, at the gate, or paced).
    waiting: AtomicI64,
    /// Tasks that stopped without their answer.
    stopped: AtomicU64,
    /// When the origin's gate reopens, while it is closed.
    gate_until: Mutex<Option<Instant>>,
}

impl Observer for Progress {
    fn on_wait(&self, _: &Wait<'_>) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
    }

    fn on_wait_end(&self, _: &WaitEnd<'_>) {
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    fn on_stop(&self, _: &Stop<'_>) {
        self.stopped.fetch_add(1, Ordering::Relaxed);
    }

    fn on_gate_closed(&self, gate: &GateClosed<'_>) {
        let until = Instant::now() + gate.duration;
        let mut slot = self.gate_until.lock().unwrap_or_else(|e| e.into_inner());
        *slot = Some(slot.map_or(until, |t| t.max(until)));
    }

    fn on_gate_reopened(&self, _: &GateReopened<'_>) {
        *self.gate_until.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl Progress {
    /// "waiting 12 · stopped 0 · gate reopens in 0.4 s" (or "gate open").
    fn line(&self) -> String {
        let gate = match *self.gate_until.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(t) if t > Instant::now() => format!(
                "gate reopens in {:.1} s",
                t.duration_since(Instant::now()).as_secs_f64()
            ),
            _ => "gate open".to_owned(),
        };
        format!(
            "waiting {:>3} · stopped {} · {gate}",
            self.waiting.load(Ordering::Relaxed),
            self.stopped.load(Ordering::Relaxed)
        )
    }
}

#[tokio::main]
async fn main() {
    let server = LimitedServer::start(Shape::Window, PER_SECOND, "/item").await;
    let progress = Arc::new(Progress::default());
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("a reqwest client"),
    )
    .with(RetryAfterMiddleware::new(Policy::default()).with_observer(progress.clone()))
    .build();

    let bar = ProgressBar::new(REQUESTS).with_style(
        ProgressStyle::with_template("{elapsed:>3} [{bar:30}] {pos}/{len} done · {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..REQUESTS {
        let (client, url) = (client.clone(), server.url.clone());
        tasks.spawn(async move { client.get(url).send().await });
    }

    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let (mut ok, mut failed, mut attempts) = (0u64, 0u64, 0u64);
    loop {
        tokio::select! {
            done = tasks.join_next() => match done {
                Some(Ok(Ok(r))) => {
                    attempts += r.extensions().get::<RetryReport>().map_or(1, |r| u64::from(r.attempts()));
                    if r.status().is_success() { ok += 1 } else { failed += 1 }
                    bar.inc(1);
                }
                Some(_) => { failed += 1; bar.inc(1); }
                None => break,
            },
            _ = tick.tick() => bar.set_message(progress.line()),
        }
    }
    bar.set_message(progress.line());
    bar.finish();
    let seen = server.finish();
    println!(
        "{ok}/{REQUESTS} ok, {failed} failed, {attempts} attempts in {:.1} s; \
         the server saw {} requests, {} rejected, {} premature",
        started.elapsed().as_secs_f64(),
        seen.requests,
        seen.rejected,
        seen.premature,
    );
    println!("{}", progress.line());
}
