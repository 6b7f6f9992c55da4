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
        "| server | client | calls | requests sent | 200s | 200s/s while loading (of CAP) | rejections | failed calls | stopped: retry_budget_exhausted | stopped: missing_retry_after |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut targets = String::new();
    for &row in rows {
        let srv = &row.server;
        let per_second = ok_per_second(row, cfg);
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
            "| {} | {} | {} | {} | {} | {per_second:.1} ({:.0}%) | {} | {failed} | {budget} | {missing} |",
            row.shape.name(),
            row.client.name(),
            row.calls.sent,
            srv.requests,
            share(srv.oks, srv.requests),
            100.0 * per_second / f64::from(s.cap.max(1)),
            share(srv.rejected, srv.requests),
        );
        if row.client == ClientKind::Backpressure {
            row_targets(&mut targets, cfg, row, per_second);
        }
    }
    let _ = writeln!(
        out,
        "\n200s/s while loading: the server's 200s to requests arriving within the {:.0} s of \
         load, per second (of CAP: its share of the server's rate). calls, failed calls: the \
         workers' send() calls, a call failing if its final answer was not 200 (its share: of \
         the calls); stopped: failed calls whose report names that stop code. requests sent, \
         200s, rejections: counted by the server (shares: of the requests).",
        secs
    );
    why_failed(&mut out, rows);
    if !targets.is_empty() {
        let _ = writeln!(
            out,
            "\nreqwest-backpressure steady-load targets on the silent shapes (≥ 90% of CAP/s, ≤ 1% failed):"
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

fn row_targets(out: &mut String, cfg: &Config, row: &SteadyRow, per_second: f64) {
    let cap = f64::from(cfg.steady.cap.max(1));
    let fast = per_second >= 0.9 * cap;
    let failed_share = if row.calls.sent == 0 {
        1.0
    } else {
        (row.calls.failed + row.unfinished) as f64 / row.calls.sent as f64
    };
    let few_failed = failed_share <= 0.01;
    let _ = writeln!(out, "  {}:", row.shape.name());
    let _ = writeln!(
        out,
        "    {}  {per_second:.1} 200s/s (target ≥ 90% of {cap:.0} = {:.0})",
        pass(fast),
        0.9 * cap
    );
    let _ = writeln!(
        out,
        "    {}  {:.1}% of calls failed (target ≤ 1%)",
        pass(few_failed),
        100.0 * failed_share
    );
}
