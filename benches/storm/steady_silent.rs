//! Steady load on the silent shapes (the leaky bucket and the counting
//! rate, each answering a bare `429` or `503`): what the workers got per
//! second against what the server admits, the failed share, and why calls
//! stopped; with reqwest-backpressure's targets (the issue's: ≥ 90% of the
//! server's rate, ≤ 1% of calls failed).

use std::fmt::Write as _;

use crate::config::{ClientKind, Config};
use crate::report::pass;
use crate::silent_report::{STOP_CODES, stopped};
use crate::steady::{SteadyRow, share, why_failed};

/// The table, what its columns mean, why calls failed, and our targets.
pub(crate) fn table(cfg: &Config, rows: &[&SteadyRow]) -> String {
    let s = &cfg.steady;
    let secs = s.duration.as_secs_f64().max(1e-3);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "steady load on the silent shapes: {} workers, each looping send → answer → send for {} s, \
         against CAP={} per second",
        s.workers,
        s.duration.as_secs(),
        s.cap
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| server | client | calls | requests sent | 200s | 200s/s while loading (of the most) | the most 200s/s | rejections | failed calls | stopped: retry_budget_exhausted | stopped: missing_retry_after |"
    );
    let _ = writeln!(
        out,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    let mut targets = String::new();
    for &row in rows {
        let srv = &row.server;
        let per_second = ok_per_second(row, cfg);
        let most = most_per_second(cfg, row);
        let failed = if row.unfinished > 0 {
            format!(
                "{} + {} unfinished",
                share(row.calls.failed, row.calls.sent),
                row.unfinished
            )
        } else {
            share(row.calls.failed, row.calls.sent)
        };
        let [budget, missing] = STOP_CODES.map(|code| stopped(&row.calls.reasons, code));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {per_second:.1} ({:.0}%) | {most:.1} | {} | {failed} | {budget} | {missing} |",
            row.shape.name(),
            row.client.name(),
            row.calls.sent,
            srv.requests,
            share(srv.oks, srv.requests),
            100.0 * per_second / most,
            share(srv.rejected, srv.requests),
        );
        if row.client == ClientKind::Backpressure {
            row_targets(&mut targets, row, per_second, most);
        }
    }
    let _ = writeln!(
        out,
        "\n200s/s while loading: the server's 200s to requests arriving within the {:.0} s of \
         load, per second (of the most: its share of the most 200s/s, what a client sending each \
         request at the first instant it can be admitted gets from the fresh server in that time: \
         the leaky bucket's burst of CAP + 1 lifts it above CAP). calls, failed calls: the \
         workers' send() calls, a call failing if its final answer was not 200 (its share: of \
         the calls); stopped: failed calls whose report names that stop code. requests sent, \
         200s, rejections: counted by the server (shares: of the requests).",
        secs
    );
    why_failed(&mut out, rows);
    if !targets.is_empty() {
        let _ = writeln!(
            out,
            "\nreqwest-backpressure steady-load targets on the silent shapes (≥ 90% of the most 200s/s, ≤ 1% failed):"
        );
        out.push_str(&targets);
    }
    out
}

/// The server's `200`s to requests that arrived within the load, per
/// second of load.
fn ok_per_second(row: &SteadyRow, cfg: &Config) -> f64 {
    let load = cfg.steady.duration;
    let ok = row
        .server
        .arrivals
        .iter()
        .filter(|a| a.ok && a.at < load)
        .count();
    ok as f64 / load.as_secs_f64().max(1e-3)
}

/// The most `200`s a second a client can get from the row's server within
/// the load ([`Config::steady_most`]).
fn most_per_second(cfg: &Config, row: &SteadyRow) -> f64 {
    let most = cfg
        .steady_most(row.shape)
        .unwrap_or(u64::from(cfg.steady.cap) * cfg.steady.duration.as_secs());
    most as f64 / cfg.steady.duration.as_secs_f64().max(1e-3)
}

fn row_targets(out: &mut String, row: &SteadyRow, per_second: f64, most: f64) {
    let fast = per_second >= 0.9 * most;
    let failed_share = if row.calls.sent == 0 {
        1.0
    } else {
        (row.calls.failed + row.unfinished) as f64 / row.calls.sent as f64
    };
    let few_failed = failed_share <= 0.01;
    let _ = writeln!(out, "  {}:", row.shape.name());
    let _ = writeln!(
        out,
        "    {}  {per_second:.1} 200s/s (target ≥ 90% of the most {most:.1} = {:.1})",
        pass(fast),
        0.9 * most
    );
    let _ = writeln!(
        out,
        "    {}  {:.1}% of calls failed (target ≤ 1%)",
        pass(few_failed),
        100.0 * failed_share
    );
}
