//! What the storm rows print after they ran: the tables, what "premature"
//! means, each row's targets, and why tasks failed.

use std::collections::BTreeMap;

use crate::config::{ClientKind, Config};
use crate::outcome::Row;
use crate::report::{tables, targets};
use crate::{Skipped, silent_report};

/// The tables, one per shape, what "premature" means, and the rows
/// skipped.
pub(crate) fn print_table(cfg: &Config, rows: &[Row], skipped: &Skipped) {
    print!("{}", tables(cfg, rows));
    if rows.iter().any(|r| !r.shape.is_silent()) {
        print_premature(rows);
    }
    print!("{}", silent_report::tables(cfg, rows));
    for (shape, kind, why) in skipped {
        println!(
            "\nSKIPPED: {} × {}: {why}. The other rows ran.",
            shape.name(),
            kind.name()
        );
    }
}

/// What "premature" means, for the shapes that name a time.
fn print_premature(rows: &[Row]) {
    println!(
        "\npremature: a task's request arriving before the instant its last 429 allowed \
         (fixed window: the next window's start; token bucket: 429 arrival + Retry-After; \
         sliding log: when the oldest admission in the span leaves it; GCRA: governor's \
         earliest possible instant, which its Retry-After: 0 does not name; RateLimit headers: the next window's start, which its t names, rounded up; \
         truncated Retry-After: 0: a send into the window that had already rejected that \
         task, the 429 naming no time), measured server-side. 429s on retries: answered to \
         a task's second or later send. Last success: since the row started, client-side{}.",
        if rows.iter().any(|r| r.client.multi_process()) {
            " (the Redis row: the latest of its workers' last successes, each since \
             the shared instant they all started their tasks at)"
        } else {
            ""
        }
    );
}

/// The single-process reqwest-backpressure rows' targets.
pub(crate) fn print_targets(cfg: &Config, rows: &[Row]) {
    let ours: Vec<&Row> = rows
        .iter()
        .filter(|r| r.client == ClientKind::Backpressure && !r.shape.is_silent())
        .collect();
    print!("{}", silent_report::targets(cfg, rows));
    if !ours.is_empty() {
        println!(
            "\n{} targets (N={}, CAP={}{}):",
            ClientKind::Backpressure.name(),
            cfg.n,
            cfg.cap,
            if cfg.declare {
                "; a declared quota: no 429 at all, last success ≤ ideal + 0.25 s \
                 (the issue's figure at N=500, CAP=100) or ≤ 1.03 × ideal (at N=5000, \
                 CAP=500), whichever is later"
            } else {
                ""
            }
        );
        let mut all = true;
        for row in &ours {
            let (text, ok) = targets(cfg, row);
            print!("{text}");
            all &= ok;
        }
        println!(
            "  overall: {}",
            if all { "PASS" } else { "MISS (see above)" }
        );
    }
}

/// The Redis rows' targets, against the single-process row of their shape.
#[cfg(feature = "redis")]
pub(crate) fn print_redis_targets(cfg: &Config, rows: &[Row], skipped: &Skipped) {
    let multi: Vec<&Row> = rows
        .iter()
        .filter(|r| r.client == ClientKind::BackpressureRedis)
        .collect();
    if !multi.is_empty() {
        println!(
            "\n{} targets (N={}, CAP={}; 429s and last success within 10% of the \
             single-process row, i.e. ≤ 1.1×{}):",
            ClientKind::BackpressureRedis.name(),
            cfg.n,
            cfg.cap,
            if cfg.declare {
                "; and a declared row's own: no 429, last success ≤ ideal + 0.25 s or \
                 ≤ 1.03 × ideal, whichever is later"
            } else {
                ""
            }
        );
        let mut all = true;
        for row in &multi {
            let single = rows
                .iter()
                .find(|r| r.shape == row.shape && r.client == ClientKind::Backpressure);
            let (text, ok) = crate::redis_row::targets(cfg, row, single);
            print!("{text}");
            all &= ok;
        }
        println!(
            "  overall: {}",
            if all { "PASS" } else { "MISS (see above)" }
        );
    }
    if !skipped.is_empty() {
        println!(
            "\n{} targets: not run (redis-server unavailable, see SKIPPED above)",
            ClientKind::BackpressureRedis.name()
        );
    }
}

/// Why tasks failed, row by row.
pub(crate) fn print_failures(rows: &[Row]) {
    print_reasons(rows.iter().map(|row| {
        (
            format!("{} × {}", row.shape.name(), row.client.name()),
            &row.client_side.reasons,
        )
    }));
}

/// Why tasks failed, for each row named (its reasons by label, with their
/// counts); nothing if no task failed.
pub(crate) fn print_reasons<'a>(
    rows: impl IntoIterator<Item = (String, &'a BTreeMap<String, u32>)>,
) {
    let failures: Vec<_> = rows
        .into_iter()
        .filter(|(_, reasons)| !reasons.is_empty())
        .collect();
    if !failures.is_empty() {
        println!("\nwhy tasks failed:");
        for (name, reasons) in failures {
            let reasons = reasons
                .iter()
                .map(|(k, v)| format!("{v} × {k}"))
                .collect::<Vec<_>>()
                .join(", ");
            println!("  {name}: {reasons}");
        }
    }
}
