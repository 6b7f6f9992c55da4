//! The GitHub-like crawl (`STORM_SHAPE=github`, or `silent`): 200 GETs, 32
//! at a time, against the GitHub-like server (`server/github.rs`) with both
//! of its limits in reach, one row per client (reqwest-backpressure with the
//! `RateLimitHeaders::github()` preset, as the README's GitHub example;
//! with `STORM_DECLARE`, its primary quota declared too, a window of 60 per
//! 5 s).
//!
//! The server: a primary quota of 60 requests per 5 s window (a request
//! over it gets `403` with `x-ratelimit-remaining: 0` and the reset), a
//! secondary limit of 20 admissions in any 1 s (`403` with `retry-after`
//! while quota remains), and every 20th GET on a `/forbidden/…` path, a
//! plain `403` (quota left, no `retry-after`) that must be returned at once.
//! All 200 count toward the quota: they need 4 primary windows, the last
//! starting 14–15 s after the first request (the first window ends on a
//! whole epoch second), so no crawl ends much before that.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use reqwest_backpressure::{Policy, Quota, RateLimitHeaders};
use reqwest_middleware::ClientWithMiddleware;

use crate::config::{ClientKind, Config};
use crate::declared::declare;
use crate::outcome::{ClientSide, failure_label};
use crate::report::{pass, secs};
use crate::server::github::{Answer, Config as Limits, GitHubServer, GitHubState};
use crate::server::lock;

const GETS: u32 = 200;
const AT_ONCE: usize = 32;
/// Every this many-th GET is a plain `403` path.
const REFUSED_EVERY: u32 = 20;
const LIMITS: Limits = Limits {
    quota: 60,
    window_secs: 5,
    burst: 20,
    span: Duration::from_secs(1),
    status: 403,
};
/// A crawl's limit before partial figures are reported.
const CRAWL_TIMEOUT: Duration = Duration::from_secs(60);

struct CrawlRow {
    client: ClientKind,
    /// `ok`: 200s; `failed`: neither a 200 nor a plain path's 403.
    side: ClientSide,
    /// Plain `403`s returned for the `/forbidden/…` paths.
    refused: u32,
    seen: GitHubState,
    timed_out: bool,
}

/// `kind`'s client for the server at `uri`; with `STORM_DECLARE`, ours
/// declares the primary quota (GitHub documents it; the secondary limit's
/// figures it does not).
fn client(cfg: &Config, kind: ClientKind, uri: &str) -> ClientWithMiddleware {
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    let primary = Quota::new(LIMITS.quota, Duration::from_secs(LIMITS.window_secs));
    kind.with_policy(declare(policy, uri, cfg.declare.then_some(primary)), None)
}

async fn crawl(cfg: &Config, kind: ClientKind) -> CrawlRow {
    let server = GitHubServer::start(LIMITS).await;
    let client = client(cfg, kind, &server.uri);
    let started = Instant::now();
    let side = Mutex::new((ClientSide::default(), 0u32));
    let gets = futures_util::stream::iter(0..GETS)
        .map(|i| {
            let plain = i % REFUSED_EVERY == REFUSED_EVERY - 1;
            let url = if plain {
                format!("{}/forbidden/{i}", server.uri)
            } else {
                format!("{}/repos/o/r/issues/{i}", server.uri)
            };
            let (client, side) = (&client, &side);
            async move {
                let result = client.get(url).header("x-task", i).send().await;
                let status = result.as_ref().map(|r| r.status().as_u16()).ok();
                let label = failure_label(&result);
                if let Ok(r) = result {
                    let _ = r.bytes().await;
                }
                let at = started.elapsed();
                let mut guard = lock(side);
                let (side, refused) = &mut *guard;
                match (status, plain) {
                    (Some(200), false) => {
                        side.ok += 1;
                        side.last_ok = Some(side.last_ok.map_or(at, |l| l.max(at)));
                    }
                    (Some(403), true) => *refused += 1,
                    _ => {
                        side.failed += 1;
                        side.failed_at(at);
                        *side.reasons.entry(label).or_default() += 1;
                    }
                }
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect::<Vec<()>>();
    let limit = cfg.timeout.max(CRAWL_TIMEOUT);
    let timed_out = tokio::time::timeout(limit, gets).await.is_err();
    let seen = server.finish();
    let (side, refused) = std::mem::take(&mut *lock(&side));
    CrawlRow {
        client: kind,
        side,
        refused,
        seen,
        timed_out,
    }
}

/// Tasks whose last answer was `answer` (what the client returned, for a
/// task that ended).
fn ended_on(seen: &GitHubState, answer: Answer) -> usize {
    seen.tasks
        .values()
        .filter(|t| t.last == Some(answer))
        .count()
}

/// Runs the crawl for each single-process client and prints its table and
/// our targets.
pub(crate) fn run_and_print(cfg: &Config, runtime: &tokio::runtime::Runtime) {
    let mut rows = Vec::new();
    for &kind in cfg.clients.iter().filter(|c| !c.multi_process()) {
        let row = runtime.block_on(crawl(cfg, kind));
        eprintln!(
            "storm: GitHub-like crawl × {} done ({} ok, {} requests)",
            kind.name(),
            row.side.ok,
            row.seen.requests
        );
        rows.push(row);
    }
    print!("{}", table(&rows));
}

fn table(rows: &[CrawlRow]) -> String {
    let plain = GETS / REFUSED_EVERY;
    let mut out = format!(
        "\n### GitHub-like crawl ({GETS} GETs, {AT_ONCE} at a time, {plain} of them plain 403s; \
         primary {} per {} s, secondary {} per {} s, status {}; ideal last success ≈ 14–15 s)\n\n",
        LIMITS.quota,
        LIMITS.window_secs,
        LIMITS.burst,
        LIMITS.span.as_secs(),
        LIMITS.status
    );
    let _ = writeln!(
        out,
        "| client | GETs ok | plain 403s returned | requests | primary-limit answers | secondary-limit answers | tasks failed on a secondary-limit answer | tasks failed on a primary-limit answer | plain 403s retried | plain 403s at remaining 0 (retried) | sends before a retry-after or reset | other failed | last success |"
    );
    let _ = writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut targets = String::new();
    for row in rows {
        let s = &row.seen;
        let (secondary, primary) = (ended_on(s, Answer::Secondary), ended_on(s, Answer::Primary));
        let retried: u32 = s
            .tasks
            .values()
            .filter(|t| !t.refused_at_zero)
            .map(|t| t.sends_after_refusal)
            .sum();
        let at_zero = s.tasks.values().filter(|t| t.refused_at_zero).count();
        let at_zero_retried = s
            .tasks
            .values()
            .filter(|t| t.refused_at_zero && t.sends_after_refusal > 0)
            .count();
        let other = row.side.failed as usize - (secondary + primary).min(row.side.failed as usize);
        let _ = writeln!(
            out,
            "| {} | {}/{} | {}/{plain} | {} | {} | {} | {secondary} | {primary} | {retried} | {at_zero} ({at_zero_retried}) | {} | {other}{} | {} |",
            row.client.name(),
            row.side.ok,
            GETS - plain,
            row.refused,
            s.requests,
            s.primary,
            s.secondary,
            s.premature,
            if row.timed_out { " (timed out)" } else { "" },
            row.side.last_ok.map_or_else(|| "—".to_owned(), secs),
        );
        if row.client == ClientKind::Backpressure {
            let checks = [
                (
                    secondary == 0,
                    format!("{secondary} tasks failed on a secondary-limit answer (target 0)"),
                ),
                (
                    retried == 0,
                    format!("{retried} plain 403s retried (target 0)"),
                ),
                (
                    s.premature == 0,
                    format!(
                        "{} sends before a retry-after or reset (target 0)",
                        s.premature
                    ),
                ),
                (
                    row.side.ok == GETS - plain && row.refused == plain && !row.timed_out,
                    format!(
                        "{} GETs ok, {} plain 403s returned (target {}, {plain})",
                        row.side.ok,
                        row.refused,
                        GETS - plain
                    ),
                ),
            ];
            for (ok, text) in checks {
                let _ = writeln!(targets, "    {}  {text}", pass(ok));
            }
        }
    }
    let _ = writeln!(
        out,
        "\nGETs ok: 200s of the non-plain paths; plain 403s returned: the /forbidden paths' 403s \
         the client gave back. Failed on a limit: the task's last answer (the one returned) was \
         that limit's. plain 403s retried: sends of a task after its plain 403 (one with quota \
         left). plain 403s at remaining 0: those that took the quota's last request, so said \
         x-ratelimit-remaining: 0, a primary-limit answer as GitHub documents it (in brackets: \
         the tasks that sent again, at the reset). Sends before a \
         retry-after or reset: a task's send before the time its last rate-limit answer allowed. \
         All counted by the server; last success: client-side."
    );
    if !targets.is_empty() {
        let _ = writeln!(
            out,
            "\nreqwest-backpressure targets on the GitHub-like crawl:"
        );
        out.push_str(&targets);
    }
    out
}
