//! The silent shapes' report (nginx's leaky bucket, HAProxy's counting
//! rate, the outage): their tables and reqwest-backpressure's targets on
//! them, the figures.
//!
//! Their rejections name no time, so no send can be *premature*; what
//! counts instead is the sends answered while the origin denies (a task's
//! second or later send rejected: "on retries"), and why tasks stopped, by
//! their stop code.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::config::{ClientKind, Config, OUTAGE_DEADLINE};
use crate::outcome::Row;
use crate::report::{heading_and_success, pass, secs, with_unfinished};
use crate::server::{ServerState, Shape};

/// The stop codes counted per row, as `RetryReport::stop_reason` names them.
pub(crate) const STOP_CODES: [&str; 2] = ["retry_budget_exhausted", "missing_retry_after"];

/// Failed tasks (or calls) whose label names `code`.
pub(crate) fn stopped<V: Copy + Into<u64>>(reasons: &BTreeMap<String, V>, code: &str) -> u64 {
    reasons
        .iter()
        .filter(|(label, _)| label.contains(code))
        .map(|(_, &n)| n.into())
        .sum()
}

/// What the server saw of an outage: requests while down and after.
struct Outage {
    /// Retries (a task's second or later send) arriving while down.
    retries_down: u64,
    /// [`retries_down`](Self::retries_down) per second down.
    per_second: f64,
    /// The most requests in one whole second while down, the first second
    /// (the first wave) left out.
    busiest: usize,
    /// Rejections after the recovery (the leaky bucket's).
    denied_after: usize,
}

fn outage(server: &ServerState, down: Duration) -> Outage {
    let arrivals = &server.arrivals;
    let retries_down = arrivals.iter().filter(|a| a.at < down && a.retry).count() as u64;
    let busiest = (1..down.as_secs())
        .map(|k| arrivals.iter().filter(|a| a.at.as_secs() == k).count())
        .max()
        .unwrap_or(0);
    Outage {
        retries_down,
        per_second: retries_down as f64 / down.as_secs_f64().max(1e-3),
        busiest,
        denied_after: arrivals.iter().filter(|a| a.at >= down && !a.ok).count(),
    }
}

fn down_of(shape: Shape) -> Option<Duration> {
    match shape {
        Shape::Outage { down } => Some(down),
        _ => None,
    }
}

/// One table per silent shape (in the order run), a row per client, and
/// what the columns mean.
pub(crate) fn tables(cfg: &Config, rows: &[Row]) -> String {
    let mut out = String::new();
    let mut shapes: Vec<Shape> = Vec::new();
    for row in rows {
        if row.shape.is_silent() && !shapes.contains(&row.shape) {
            shapes.push(row.shape);
        }
    }
    for &shape in &shapes {
        let of_shape: Vec<&Row> = rows.iter().filter(|r| r.shape == shape).collect();
        let extra = down_of(shape).map_or_else(String::new, |d| {
            format!(
                ", down {} s, task deadline {} s",
                d.as_secs(),
                OUTAGE_DEADLINE.as_secs()
            )
        });
        let _ = writeln!(
            out,
            "\n### {} (N={}, CAP={}{extra}; ideal last success {})\n",
            shape.name(),
            cfg.n,
            cfg.cap,
            secs(cfg.ideal(shape))
        );
        out.push_str(&table(cfg, shape, &of_shape));
    }
    if !shapes.is_empty() {
        let _ = writeln!(
            out,
            "\nsilent shapes: rejections are a bare {{429, 503}} (no Retry-After, no rate-limit \
             field), so no send can be premature. on retries: rejections answered to a task's \
             second or later send, sends while the origin denies. stopped: failed tasks whose \
             report names that stop code; other failed tasks: the rest. outage: retries while \
             down, a task's second or later sends arriving before the recovery (per second: over \
             the time down); busiest second: the most requests in one whole second while down, \
             the first (the first wave) left out; 503s after recovery: the leaky bucket's. All \
             counted by the server; last success: client-side, since the row started."
        );
    }
    out
}

fn table(cfg: &Config, shape: Shape, rows: &[&Row]) -> String {
    let mut out = String::new();
    let st = shape.rejection_status();
    match shape {
        Shape::Outage { .. } => {
            let _ = writeln!(
                out,
                "| client | tasks ok/N | requests | 503s | retries while down | retries/s while down | busiest second while down | 503s after recovery | stopped: retry_budget_exhausted | stopped: missing_retry_after | other failed tasks | last success | ideal last success |"
            );
            let _ = writeln!(
                out,
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "| client | tasks ok/N | requests | {st}s | {st}s on retries | stopped: retry_budget_exhausted | stopped: missing_retry_after | other failed tasks | last success | ideal last success |"
            );
            let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        }
    }
    for row in rows {
        let c = &row.client_side;
        let [budget, missing] = STOP_CODES.map(|code| stopped(&c.reasons, code));
        let other = u64::from(c.failed).saturating_sub(budget + missing);
        let other = with_unfinished(other, row.n - c.ok - c.failed, row.timed_out);
        let s = &row.server;
        let middle = match down_of(shape) {
            Some(down) => {
                let o = outage(s, down);
                format!(
                    "{} | {} | {:.2} | {} | {}",
                    s.rejected, o.retries_down, o.per_second, o.busiest, o.denied_after
                )
            }
            None => format!("{} | {}", s.rejected, s.rejected_retries),
        };
        let _ = writeln!(
            out,
            "| {} | {}/{} | {} | {middle} | {budget} | {missing} | {other} | {} | {} |",
            row.client.name(),
            c.ok,
            row.n,
            s.requests,
            c.last_ok.map_or_else(|| "—".to_owned(), secs),
            secs(cfg.ideal(shape)),
        );
    }
    out
}

/// reqwest-backpressure's single-process rows on the silent shapes against
/// the figures; empty without such a row.
pub(crate) fn targets(cfg: &Config, rows: &[Row]) -> String {
    let ours: Vec<&Row> = rows
        .iter()
        .filter(|r| r.client == ClientKind::Backpressure && r.shape.is_silent())
        .collect();
    if ours.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n{} targets on the silent shapes (N={}, CAP={}; the issue's figures{}):\n",
        ClientKind::Backpressure.name(),
        cfg.n,
        cfg.cap,
        if cfg.declare {
            "; a declared quota, but for the outage: no rejection at all, last success ≤ \
             ideal + 0.25 s or ≤ 1.03 × ideal, whichever is later"
        } else {
            ""
        }
    );
    let mut all = true;
    for row in ours {
        all &= row_targets(&mut out, cfg, row);
    }
    let _ = writeln!(
        out,
        "  overall: {}",
        if all { "PASS" } else { "MISS (see above)" }
    );
    out
}

/// Writes `row`'s targets; returns whether all were met.
fn row_targets(out: &mut String, cfg: &Config, row: &Row) -> bool {
    let c = &row.client_side;
    let s = &row.server;
    let ideal = cfg.ideal(row.shape);
    let limit = ideal.mul_f64(1.3);
    let all_ok = heading_and_success(out, cfg, row);
    let fast = all_ok && c.last_ok.is_some_and(|l| l <= limit);
    let budget = stopped(&c.reasons, STOP_CODES[0]);
    // A declared quota: no rejection once the server is up (the outage's
    // own targets stand, its time down answers everything 503).
    let declared = cfg.declare && crate::declared::has_targets(row.shape);
    if declared {
        let mut met = all_ok;
        met &= crate::declared::targets(out, cfg, row, all_ok);
        let _ = writeln!(
            out,
            "    {}  {budget} retry_budget_exhausted (target 0)",
            pass(budget == 0)
        );
        return met && budget == 0;
    }
    let mut line = |ok: bool, text: String| {
        let _ = writeln!(out, "    {}  {text}", pass(ok));
        ok
    };
    let mut met = all_ok;
    met &= line(
        fast,
        format!(
            "last success {} (target ≤ 1.3 × ideal = {}{})",
            c.last_ok.map_or_else(|| "—".to_owned(), secs),
            secs(limit),
            if all_ok {
                ""
            } else {
                ", with every task succeeding"
            }
        ),
    );
    met &= line(
        budget == 0,
        format!("{budget} retry_budget_exhausted (target 0)"),
    );
    match down_of(row.shape) {
        Some(down) => {
            let o = outage(s, down);
            let in_time = c.last_ok.is_some_and(|l| l <= OUTAGE_DEADLINE);
            met &= line(
                o.per_second <= 2.0,
                format!(
                    "{:.2} retries/s while down, busiest second {} (target ≤ ~2 a second)",
                    o.per_second, o.busiest
                ),
            );
            met &= line(
                in_time && all_ok,
                format!(
                    "every success within the {} s deadline",
                    OUTAGE_DEADLINE.as_secs()
                ),
            );
        }
        None => {
            let first_wave = s.rejected - s.rejected_retries;
            let most = 0.2 * first_wave as f64;
            met &= line(
                s.rejected_retries as f64 <= most,
                format!(
                    "{} rejections on retries (target ≤ 20% of the first wave's {first_wave} = {most:.0})",
                    s.rejected_retries
                ),
            );
        }
    }
    met
}
