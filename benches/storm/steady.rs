//! The steady-load scenario: `WORKERS` workers, each looping (send, wait for
//! the answer, send again) for `SECS` seconds against a server admitting
//! `CAP` a second, one row per client and server shape, each on a fresh
//! server with a fresh client.
//!
//! A worker's id is its `x-task`, so "premature" is per worker: a send
//! before the instant the worker's last `429` allowed (for the truncating
//! shape, a send into the window that had already rejected that worker).
//! A *call* is one `send()` of the client (its retries included); a
//! *request* is one that reached the server.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::config::{ClientKind, Config};
use crate::outcome::failure_label;
use crate::server::{LimitedServer, ServerState, Shape, lock};
use crate::steady_silent;

/// Time left to calls in flight at the end before they are aborted.
const GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub(crate) struct Calls {
    pub(crate) sent: u64,
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    pub(crate) reasons: BTreeMap<String, u64>,
}

pub(crate) struct SteadyRow {
    pub(crate) shape: Shape,
    pub(crate) client: ClientKind,
    pub(crate) calls: Calls,
    /// Calls still in flight `GRACE` after the end (aborted).
    pub(crate) unfinished: u64,
    pub(crate) server: ServerState,
}

/// One steady-load row: `kind`'s client against a fresh `shape` server.
pub(crate) async fn run_steady(cfg: &Config, shape: Shape, kind: ClientKind) -> SteadyRow {
    let s = &cfg.steady;
    let server = LimitedServer::start(shape, s.cap, "/steady").await;
    let client = kind.client(&server.url, cfg.declared(shape, s.cap));
    let calls = Arc::new(Mutex::new(Calls::default()));
    let end = Instant::now() + s.duration;
    let mut set = tokio::task::JoinSet::new();
    for w in 0..s.workers {
        let client = client.clone();
        let url = server.url.clone();
        let calls = calls.clone();
        set.spawn(async move {
            while Instant::now() < end {
                lock(&calls).sent += 1;
                let result = client
                    .get(&url)
                    .header("x-task", w.to_string())
                    .send()
                    .await;
                let ok = matches!(&result, Ok(r) if r.status() == reqwest::StatusCode::OK);
                let label = (!ok).then(|| failure_label(&result));
                if let Ok(r) = result {
                    // Read the body so the connection goes back to the pool.
                    let _ = r.bytes().await;
                }
                let mut calls = lock(&calls);
                match label {
                    None => calls.ok += 1,
                    Some(label) => {
                        calls.failed += 1;
                        *calls.reasons.entry(label).or_default() += 1;
                    }
                }
            }
        });
    }
    let all_done = async { while set.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(s.duration + GRACE, all_done).await;
    set.abort_all();
    while set.join_next().await.is_some() {}
    let calls = std::mem::take(&mut *lock(&calls));
    let unfinished = calls.sent - calls.ok - calls.failed;
    SteadyRow {
        shape,
        client: kind,
        calls,
        unfinished,
        server: server.finish(),
    }
}

pub(crate) fn share(part: u64, whole: u64) -> String {
    if whole == 0 {
        format!("{part} (—)")
    } else {
        format!("{part} ({:.1}%)", 100.0 * part as f64 / whole as f64)
    }
}

/// The steady-load table, what its columns mean, and why calls failed;
/// then the silent shapes' ([`crate::steady_silent`]).
pub(crate) fn steady_table(cfg: &Config, rows: &[SteadyRow]) -> String {
    let (silent, rows): (Vec<&SteadyRow>, Vec<&SteadyRow>) =
        rows.iter().partition(|r| r.shape.is_silent());
    let mut out = if rows.is_empty() {
        String::new()
    } else {
        timed_table(cfg, &rows)
    };
    if !silent.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&steady_silent::table(cfg, &silent));
    }
    out
}

/// The table of the shapes that name a time.
fn timed_table(cfg: &Config, rows: &[&SteadyRow]) -> String {
    let s = &cfg.steady;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "steady load: {} workers, each looping send → answer → send for {} s, against \
         CAP={} per second (at most ≈ {} 200s)",
        s.workers,
        s.duration.as_secs(),
        s.cap,
        u64::from(s.cap) * s.duration.as_secs()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| server | client | calls | requests sent | 200s | 429s | 429s after the first second | premature | failed calls |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for &row in rows {
        let srv = &row.server;
        let late = srv
            .arrivals
            .iter()
            .filter(|a| !a.ok && a.at >= Duration::from_secs(1))
            .count() as u64;
        let failed = if row.unfinished > 0 {
            format!(
                "{} + {} unfinished",
                share(row.calls.failed, row.calls.sent),
                row.unfinished
            )
        } else {
            share(row.calls.failed, row.calls.sent)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.shape.name(),
            row.client.name(),
            row.calls.sent,
            srv.requests,
            share(srv.oks, srv.requests),
            share(srv.rejected, srv.requests),
            share(late, srv.requests),
            share(srv.premature, srv.requests),
            failed,
        );
    }
    let _ = writeln!(
        out,
        "\ncalls: the workers' send() calls (a client's retries inside one call included); \
         failed calls: a call whose final answer was not 200 (its share: of the calls). \
         requests sent, 200s, 429s: counted by the server (shares: of the requests sent); \
         429s after the first second: since the server's first request. premature: a \
         worker's request arriving before the instant its last 429 allowed (fixed window \
         and RateLimit headers: the next window's start, the time `t` names; truncated \
         Retry-After: 0: a send into the window that had already rejected that worker)."
    );
    why_failed(&mut out, rows);
    out
}

/// Why calls failed, row by row.
pub(crate) fn why_failed(out: &mut String, rows: &[&SteadyRow]) {
    let failing: Vec<&&SteadyRow> = rows
        .iter()
        .filter(|r| !r.calls.reasons.is_empty())
        .collect();
    if !failing.is_empty() {
        let _ = writeln!(out, "\nwhy steady-load calls failed:");
        for row in failing {
            let reasons = row
                .calls
                .reasons
                .iter()
                .map(|(k, v)| format!("{v} × {k}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                out,
                "  {} × {}: {reasons}",
                row.shape.name(),
                row.client.name()
            );
        }
    }
}

/// Runs the steady-load rows asked for, shape by shape.
pub(crate) fn run_steady_rows(cfg: &Config, runtime: &tokio::runtime::Runtime) -> Vec<SteadyRow> {
    let mut rows = Vec::new();
    for &shape in &cfg.steady.shapes {
        for &kind in &cfg.steady.clients {
            let row = runtime.block_on(run_steady(cfg, shape, kind));
            eprintln!(
                "storm: steady load × {} × {} done",
                row.shape.name(),
                row.client.name()
            );
            rows.push(row);
        }
    }
    rows
}
