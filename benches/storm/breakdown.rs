//! `STORM_VERBOSE`: a row's server-side breakdown, window by window.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::outcome::Row;
use crate::report::secs;
use crate::server::Admission;

/// The breakdown of `row`: its notes, how tasks spent their sends, and one
/// line per one-second window of the server's clock.
pub(crate) fn details(row: &Row) -> String {
    let mut out = String::new();
    heading(&mut out, row);
    sends(&mut out, row);
    let s = &row.server;
    if let Some(last) = s.arrivals.iter().filter(|a| a.ok).map(|a| a.at).max() {
        let _ = writeln!(out, "last 200 arrived at {}", secs(last));
    }
    let _ = writeln!(
        out,
        "\n| window | requests | first sends | retries | 200 | 429 | premature | before 429 + RA | 200s arrived | 429s arrived | requests per 100 ms |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|");
    let last_window = s.arrivals.iter().map(|a| a.at.as_secs()).max().unwrap_or(0);
    for k in 0..=last_window {
        let in_window: Vec<&Admission> =
            s.arrivals.iter().filter(|a| a.at.as_secs() == k).collect();
        if !in_window.is_empty() {
            window_line(&mut out, k, &in_window);
        }
    }
    out
}

/// The title, the server's epoch, the row's notes and the failed tasks' span.
fn heading(out: &mut String, row: &Row) {
    let s = &row.server;
    let _ = writeln!(
        out,
        "\n### {} × {}: server-side breakdown",
        row.shape.name(),
        row.client.name()
    );
    let _ = writeln!(
        out,
        "server epoch (first request) {} after the row started; times below are since the epoch",
        row.epoch_offset.map_or_else(
            || "—".to_owned(),
            |d| format!("{:.1} ms", d.as_secs_f64() * 1e3)
        )
    );
    for note in &row.notes {
        let _ = writeln!(out, "{note}");
    }
    if let Some((lo, hi)) = row.client_side.failed_span {
        let _ = writeln!(
            out,
            "failed tasks ended {}–{} after the row started (client-side)",
            secs(lo),
            secs(hi)
        );
    }
    let _ = writeln!(
        out,
        "sends before the last 429 + Retry-After (literal reading): {}; requests without x-task: {}",
        s.early_literal, s.anonymous
    );
}

/// `k×v, …` of a count map.
fn counts(map: &BTreeMap<u32, u32>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}×{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tasks by the sends the server saw, and by `RetryReport::attempts`.
fn sends(out: &mut String, row: &Row) {
    let mut sends: BTreeMap<u32, u32> = BTreeMap::new();
    let mut multi_ok = 0;
    for t in row.server.tasks.values() {
        *sends.entry(t.sends).or_default() += 1;
        multi_ok += u32::from(t.oks > 1);
    }
    let _ = writeln!(
        out,
        "tasks by sends seen: {}{}",
        counts(&sends),
        if multi_ok > 0 {
            format!(" ({multi_ok} tasks got more than one 200)")
        } else {
            String::new()
        }
    );
    let attempts = &row.client_side.attempts;
    if !attempts.is_empty() {
        let _ = writeln!(
            out,
            "successful tasks by RetryReport::attempts: {}",
            counts(attempts)
        );
    }
}

/// When the first and the last arrival answered `ok` (or not) came.
fn span(in_window: &[&Admission], ok: bool) -> String {
    let mut times = in_window.iter().filter(|a| a.ok == ok).map(|a| a.at);
    let first = times.next();
    let (lo, hi) = times.fold((first, first), |(lo, hi), t| {
        (lo.map(|l| l.min(t)), hi.map(|h| h.max(t)))
    });
    match (lo, hi) {
        (Some(lo), Some(hi)) => {
            format!("{:.3}–{:.3} s", lo.as_secs_f64(), hi.as_secs_f64())
        }
        _ => "—".to_owned(),
    }
}

/// One line of the table: window `k` (`k`–`k+1` s on the server's clock).
fn window_line(out: &mut String, k: u64, in_window: &[&Admission]) {
    let count = |f: &dyn Fn(&Admission) -> bool| in_window.iter().filter(|a| f(a)).count();
    let mut tenths = [0u32; 10];
    for a in in_window {
        let i = (a.at.subsec_millis() / 100) as usize;
        tenths[i.min(9)] += 1;
    }
    let _ = writeln!(
        out,
        "| {k}–{} s | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        k + 1,
        in_window.len(),
        count(&|a| !a.retry),
        count(&|a| a.retry),
        count(&|a| a.ok),
        count(&|a| !a.ok),
        count(&|a| a.premature),
        count(&|a| a.early_literal),
        span(in_window, true),
        span(in_window, false),
        tenths
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    );
}
