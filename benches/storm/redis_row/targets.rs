//! The Redis row's targets: against the single-process reqwest-backpressure
//! row of its shape, 429s and last success within 10% (≤ 1.1×), every task
//! succeeding, nothing premature; with a declared quota (`STORM_DECLARE`),
//! the declared row's own targets too ([`crate::declared::targets`]).

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::Config;
use crate::outcome::Row;
use crate::report::{pass, secs, shared_targets};

/// The last `200` on the server's clock, since its first request.
fn last_200(row: &Row) -> Option<Duration> {
    row.server
        .arrivals
        .iter()
        .filter(|a| a.ok)
        .map(|a| a.at)
        .max()
}

/// `×a/b`, or `×—` without a base.
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("×{:.2}", a / b)
    } else {
        "×—".to_owned()
    }
}

fn millis_or_dash(d: Option<Duration>) -> String {
    d.map_or_else(
        || "—".to_owned(),
        |d| format!("{:.1} ms", d.as_secs_f64() * 1e3),
    )
}

/// The Redis row against the single-process reqwest-backpressure row of
/// its shape: 429s and last success within 10% (≤ 1.1×), every task
/// succeeding, nothing premature.
pub(crate) fn targets(cfg: &Config, row: &Row, single: Option<&Row>) -> (String, bool) {
    let mut out = String::new();
    let (all_ok, no_premature) = shared_targets(&mut out, cfg, row);
    let Some(single) = single else {
        let _ = writeln!(
            out,
            "    MISS  no single-process reqwest-backpressure row to compare 429s and last success with"
        );
        return (out, false);
    };
    let few_429 = fewer_429(&mut out, row, single);
    let fast = as_fast(&mut out, row, single, all_ok);
    // A declared quota: the single-process row's own targets too.
    let declared = !(cfg.declare && crate::declared::has_targets(row.shape))
        || crate::declared::targets(&mut out, cfg, row, all_ok);
    server_side(&mut out, row, single);
    (out, all_ok && no_premature && few_429 && fast && declared)
}

/// Rejections (429s, or a silent shape's 503s) within 1.1× of the
/// single-process row's.
fn fewer_429(out: &mut String, row: &Row, single: &Row) -> bool {
    let (ours, theirs) = (row.server.rejected as f64, single.server.rejected as f64);
    let few_429 = ours <= 1.1 * theirs;
    let _ = writeln!(
        out,
        "    {}  {} {}s vs {} single-process ({}; target ≤ 1.1 × {} = {:.0})",
        pass(few_429),
        row.server.rejected,
        row.shape.rejection_status(),
        single.server.rejected,
        ratio(ours, theirs),
        single.server.rejected,
        1.1 * theirs
    );
    few_429
}

/// Last success within 1.1× of the single-process row's, every task
/// succeeding.
fn as_fast(out: &mut String, row: &Row, single: &Row, all_ok: bool) -> bool {
    let c = &row.client_side;
    let fast = match (c.last_ok, single.client_side.last_ok) {
        (Some(ours), Some(theirs)) => all_ok && ours.as_secs_f64() <= 1.1 * theirs.as_secs_f64(),
        _ => false,
    };
    let _ = writeln!(
        out,
        "    {}  last success {} vs {} single-process ({}; target ≤ 1.1 × = {}{})",
        pass(fast),
        c.last_ok.map_or_else(|| "—".to_owned(), secs),
        single
            .client_side
            .last_ok
            .map_or_else(|| "—".to_owned(), secs),
        match (c.last_ok, single.client_side.last_ok) {
            (Some(a), Some(b)) => ratio(a.as_secs_f64(), b.as_secs_f64()),
            _ => "×—".to_owned(),
        },
        single
            .client_side
            .last_ok
            .map_or_else(|| "—".to_owned(), |d| secs(d.mul_f64(1.1))),
        if all_ok {
            ""
        } else {
            ", with every task succeeding"
        }
    );
    fast
}

/// The two rows as their servers saw them.
fn server_side(out: &mut String, row: &Row, single: &Row) {
    let _ = writeln!(
        out,
        "          server side: {} requests vs {}; last 200 {} vs {} after each server's first request; \
         first request {} vs {} after the tasks started",
        row.server.requests,
        single.server.requests,
        last_200(row).map_or_else(|| "—".to_owned(), secs),
        last_200(single).map_or_else(|| "—".to_owned(), secs),
        millis_or_dash(row.epoch_offset),
        millis_or_dash(single.epoch_offset),
    );
}
