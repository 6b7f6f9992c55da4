//! The report: the summary table and each row's targets (pass or miss).

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::Config;
use crate::outcome::Row;
use crate::server::Shape;

const SECOND: Duration = Duration::from_secs(1);

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// One table per server shape (in the order run), a row per client; not
/// the silent shapes' ([`crate::silent_report`]).
pub(crate) fn tables(cfg: &Config, rows: &[Row]) -> String {
    let mut out = String::new();
    let mut shapes: Vec<Shape> = Vec::new();
    for row in rows {
        if !row.shape.is_silent() && !shapes.contains(&row.shape) {
            shapes.push(row.shape);
        }
    }
    for shape in shapes {
        let of_shape: Vec<&Row> = rows.iter().filter(|r| r.shape == shape).collect();
        let _ = writeln!(
            out,
            "\n### {} (N={}, CAP={}; ideal last success {})\n",
            shape.name(),
            cfg.n,
            cfg.cap,
            secs(cfg.ideal(shape))
        );
        out.push_str(&table(cfg, &of_shape));
    }
    out
}

/// The rows of one shape.
fn table(cfg: &Config, rows: &[&Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| client | tasks ok/N | requests | 429s | 429s on retries | premature | failed tasks | last success | ideal last success |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        let c = &row.client_side;
        let failed = with_unfinished(c.failed, row.n - c.ok - c.failed, row.timed_out);
        let _ = writeln!(
            out,
            "| {} | {}/{} | {} | {} | {} | {} | {} | {} | {} |",
            row.client.name(),
            c.ok,
            row.n,
            row.server.requests,
            row.server.rejected,
            row.server.rejected_retries,
            row.server.premature,
            failed,
            c.last_ok.map_or_else(|| "—".to_owned(), secs),
            secs(cfg.ideal(row.shape)),
        );
    }
    out
}

/// A failed-tasks cell: `failed`, and if the row hit its limit
/// (`timed_out`), the `unfinished` tasks it cut and the limit.
pub(crate) fn with_unfinished(
    failed: impl std::fmt::Display,
    unfinished: impl std::fmt::Display,
    timed_out: Option<Duration>,
) -> String {
    match timed_out {
        Some(limit) => format!(
            "{failed} + {unfinished} unfinished (timeout {} s)",
            limit.as_secs()
        ),
        None => failed.to_string(),
    }
}

pub(crate) fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// Writes the heading of `row`'s targets and the target every row of ours
/// has, every task succeeding (none unfinished), to `out`; returns whether
/// it was met.
pub(crate) fn heading_and_success(out: &mut String, cfg: &Config, row: &Row) -> bool {
    let c = &row.client_side;
    let all_ok = c.ok == cfg.n && row.timed_out.is_none();
    if cfg.declare {
        let _ = writeln!(out, "{}", crate::declared::heading(cfg, row));
    } else {
        let _ = writeln!(out, "  {}:", row.shape.name());
    }
    let _ = writeln!(
        out,
        "    {}  {}/{} tasks succeed (target {}/{})",
        pass(all_ok),
        c.ok,
        cfg.n,
        cfg.n,
        cfg.n
    );
    all_ok
}

/// [`heading_and_success`], then the other target every row of ours that
/// can send early has, no premature send; returns whether each was met,
/// `(all_ok, no_premature)`.
pub(crate) fn shared_targets(out: &mut String, cfg: &Config, row: &Row) -> (bool, bool) {
    let all_ok = heading_and_success(out, cfg, row);
    let no_premature = row.server.premature == 0;
    let _ = writeln!(
        out,
        "    {}  {} premature sends (target 0)",
        pass(no_premature),
        row.server.premature
    );
    (all_ok, no_premature)
}

/// `row`'s targets (with `STORM_DECLARE`, a declared row's:
/// [`crate::declared::targets`]) and whether all were met.
pub(crate) fn targets(cfg: &Config, row: &Row) -> (String, bool) {
    if cfg.declare {
        let mut out = String::new();
        let (all_ok, no_premature) = shared_targets(&mut out, cfg, row);
        let met = crate::declared::targets(&mut out, cfg, row, all_ok);
        return (out, all_ok && no_premature && met);
    }
    let c = &row.client_side;
    let n = u64::from(cfg.n);
    let max_429 = 1.1 * (n.saturating_sub(u64::from(cfg.cap))) as f64;
    let ideal = cfg.ideal(row.shape);
    let limit = ideal + SECOND;
    let mut out = String::new();
    let (all_ok, no_premature) = shared_targets(&mut out, cfg, row);
    let few_429 = row.server.rejected as f64 <= max_429;
    let retries_admitted = row.server.rejected_retries == 0;
    let fast = c.last_ok.is_some_and(|l| l <= limit) && all_ok;
    let _ = writeln!(
        out,
        "    {}  {} 429s (target ≤ 1.1 × (N − CAP) = {:.0})",
        pass(few_429),
        row.server.rejected,
        max_429
    );
    let _ = writeln!(
        out,
        "    {}  {} 429s on retries (target 0: after the first burst, every retry is admitted)",
        pass(retries_admitted),
        row.server.rejected_retries
    );
    let _ = writeln!(
        out,
        "    {}  last success {} (target ≤ ideal + 1 s = {}{})",
        pass(fast),
        c.last_ok.map_or_else(|| "—".to_owned(), secs),
        secs(limit),
        if all_ok {
            ""
        } else {
            ", with every task succeeding"
        }
    );
    (
        out,
        all_ok && no_premature && few_429 && retries_admitted && fast,
    )
}
