//! A progress bar for a CLI that calls a rate-limited API: what to copy.
//!
//! ```text
//! cargo run --example progress
//! ```
//!
//! 200 requests go at once to an embedded local server that admits 50 a
//! second and answers the rest `429` + `Retry-After`. An [`Observer`] counts
//! the tasks waiting and stopped; a clone of the middleware's store tells,
//! on each tick, what the origin holds ([`Store::origin_status`]): the
//! paced slots handed out, the next free one, the gate and the learned
//! pace. An `indicatif` bar shows them with the requests done. The bar
//! draws on a terminal (stderr); the summary line is printed either way.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use reqwest_backpressure::observe::{Observer, Stop, Wait, WaitEnd};
use reqwest_backpressure::origin::{OriginStatus, PaceKind};
use reqwest_backpressure::{MemoryStore, Policy, RetryAfterMiddleware, RetryReport, Store};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The test server (a rate-limited wiremock server), shared with the tests,
/// the demo and the storm bench.
#[path = "../tests/support/server.rs"]
mod server;

use server::{LimitedServer, Shape};

const REQUESTS: u64 = 200;
const PER_SECOND: u32 = 50;

/// What the tasks do, counted from the middleware's events.
#[derive(Debug, Default)]
struct Progress {
    /// Tasks in a wait now (after a `429`, at the gate, or paced).
    waiting: AtomicI64,
    /// Tasks that stopped without their answer.
    stopped: AtomicU64,
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
}

impl Progress {
    /// "waiting 80 · stopped 0 · slots 80 · next free slot in 3.2 s · gate open
    /// · pace 50 per 1.02 s", with what the origin holds (`None`: the store
    /// does not know it yet).
    fn line(&self, origin: Option<OriginStatus>) -> String {
        let mut line = format!(
            "waiting {:>3} · stopped {}",
            self.waiting.load(Ordering::Relaxed),
            self.stopped.load(Ordering::Relaxed)
        );
        let Some(origin) = origin else {
            return line;
        };
        line += &format!(" · slots {:>3}", origin.reserved());
        if let Some(next) = origin.next_slot_in() {
            line += &format!(" · next free slot in {:.1} s", next.as_secs_f64());
        }
        line += &match origin.gate_closed_for() {
            Some(left) => format!(" · gate reopens in {:.1} s", left.as_secs_f64()),
            None => " · gate open".to_owned(),
        };
        line += &match origin.pace() {
            PaceKind::Unpaced => " · unpaced".to_owned(),
            pace => format!(" · pace {pace}"),
        };
        line
    }
}

#[tokio::main]
async fn main() {
    let server = LimitedServer::start(Shape::Window, PER_SECOND, "/item").await;
    let url = reqwest::Url::parse(&server.url).expect("the server's url");
    let progress = Arc::new(Progress::default());
    // The middleware moves into the client: keep a clone of its store (the
    // clones share their state) to read the origin's status from.
    let store = MemoryStore::new();
    let client = reqwest_middleware::ClientBuilder::new(
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("a reqwest client"),
    )
    .with(
        RetryAfterMiddleware::with_store(Policy::default(), store.clone())
            .with_observer(progress.clone()),
    )
    .build();
    // What the store holds for the origin, for the bar (a store that
    // cannot answer shows nothing of it).
    let origin = async || store.origin_status(&url).await.ok().flatten();

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
            _ = tick.tick() => bar.set_message(progress.line(origin().await)),
        }
    }
    bar.set_message(progress.line(origin().await));
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
    println!("{}", progress.line(origin().await));
}
