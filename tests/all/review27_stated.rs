//! Issue 27's stated quotas, over real HTTP on loopback: a quota whose
//! reset is stated in whole seconds (express-rate-limit's draft-8 `t`,
//! GitHub's epoch-second `x-ratelimit-reset` with no `Date`) renews at
//! the server's reset, never before it, and is never overspent. Counted
//! and timed on the server's side.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest_backpressure::{Policy, RateLimitHeaders};

use crate::common::{client, report, spawn_tasks};
use crate::server::github_epoch::GitHubEpochServer;
use crate::server::{LimitedServer, Shape};

/// express-rate-limit 8, 50 a second, 40 workers looping (send, answer,
/// send again) for 6 s: the stated quota renews at each of its windows'
/// start, so the server admits close to 50 a second and, after the first
/// second, rejects nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn express_rate_limit_under_steady_load_loses_no_ground() {
    const CAP: u32 = 50;
    const WORKERS: u32 = 40;
    const RUN: Duration = Duration::from_secs(6);
    let server = LimitedServer::start(Shape::ExpressRateLimit, CAP, "/steady").await;
    // The bench's client: the default policy, jitter and all.
    let client = client(Policy::default());
    let end = Instant::now() + RUN;
    let calls = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (client, url, calls) = (client.clone(), server.url.clone(), calls.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let answer = client.get(&url).header("x-task", w).send().await;
                    if let Ok(answer) = answer {
                        let _ = answer.bytes().await;
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker");
    }
    let seen = server.finish();
    let first = seen.arrivals.first().map(|a| a.at).unwrap_or_default();
    // The first window holds the workers' first sends only (40 of 50):
    // the rate is that of the windows after it, while the workers loop.
    let steady = Duration::from_secs(1)..RUN;
    let steady_oks = seen
        .arrivals
        .iter()
        .filter(|a| a.ok && steady.contains(&a.at.saturating_sub(first)))
        .count();
    let per_second = steady_oks as f64 / (RUN - Duration::from_secs(1)).as_secs_f64();
    let late: Vec<Duration> = seen
        .arrivals
        .iter()
        .filter(|a| !a.ok && a.at.saturating_sub(first) >= Duration::from_secs(1))
        .map(|a| a.at)
        .collect();
    eprintln!(
        "express-rate-limit: {} calls, {} requests, {} ok ({per_second:.1} a \
         second after the first), {} 429s, {} after the first second, {} premature",
        calls.load(Ordering::Relaxed),
        seen.requests,
        seen.oks,
        seen.rejected,
        late.len(),
        seen.premature
    );
    assert!(late.is_empty(), "429s after the first second at {late:?}");
    assert_eq!(seen.premature, 0);
    assert!(per_second >= 48.0, "{per_second:.1} ok a second");
}

/// A GitHub-like server stating its primary limit (100 per 6 s window, the
/// reset in epoch seconds, no `Date`), 300 GETs at once with `github()`:
/// no window sees more than its 100 (a batch that left before the reset
/// every answer of the window had stated would land in it and be refused),
/// and no task sends before the reset its `403` named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epoch_reset_without_date_is_never_anticipated() {
    const QUOTA: u32 = 100;
    const TASKS: u32 = 300;
    let server = GitHubEpochServer::start(QUOTA, Duration::from_secs(6));
    let client = client(Policy::default().rate_limit_headers(RateLimitHeaders::github()));
    let started = Instant::now();
    let mut failed = Vec::new();
    for (i, task) in spawn_tasks(&client, &server.uri, TASKS)
        .into_iter()
        .enumerate()
    {
        let answer = task.await.expect("task").expect("answer");
        if answer.status() != 200 {
            failed.push((i, answer.status(), report(&answer)));
        }
    }
    let took = started.elapsed();
    let seen = server.finish();
    let windows: Vec<String> = seen
        .windows
        .iter()
        .map(|w| {
            let lead = w
                .first_refused
                .map(|at| Duration::from_secs(w.reset).saturating_sub(at));
            format!(
                "{:.3}→{} {} sent, {} refused{}",
                w.opened.as_secs_f64(),
                w.reset,
                w.arrivals,
                w.refused,
                lead.map_or(String::new(), |l| format!(
                    " (the first {l:.3?} before the reset)"
                ))
            )
        })
        .collect();
    eprintln!(
        "github, no Date: {} requests, {} ok, {} refused, {} premature in {took:.2?}; \
         windows: {windows:#?}",
        seen.requests, seen.oks, seen.refused, seen.premature
    );
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(seen.oks, u64::from(TASKS));
    assert_eq!(seen.premature, 0);
    for w in &seen.windows {
        assert!(w.arrivals <= QUOTA, "{windows:#?}");
    }
}
