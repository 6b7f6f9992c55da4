//! `STORM_DECLARE=1`: our rows declare the quota the server's documentation
//! states, for the row's server origin (`Policy::quota`), as a user who
//! read it would; and the targets for a declared quota.

use std::fmt::Write as _;
use std::time::Duration;

use reqwest_backpressure::{Policy, Quota};

use crate::config::Config;
use crate::outcome::Row;
use crate::report::{pass, secs};
use crate::server::Shape;

/// The bound on the last success at its 500-task size
/// (`STORM_N=500 STORM_CAP=100`): this much after the ideal.
const AFTER_IDEAL: Duration = Duration::from_millis(250);
/// And at its 5,000-task size (`STORM_N=5000 STORM_CAP=500`): this many
/// times the ideal.
const TIMES_IDEAL: f64 = 1.03;

/// The quota a `shape` server admitting `cap` a second documents, as its
/// user declares it: a window (`Quota::per_second(cap)`) for the limiters
/// that count per span (fixed windows, the sliding log, HAProxy's
/// `http_req_rate(1s)`), a bucket refilled continuously
/// (`Quota::per_second(cap).refilled()`) for those that refill (the token
/// bucket, governor's GCRA, nginx's `rate=cap burst=cap`, which the outage
/// is once it is back up).
pub(crate) fn documented(shape: Shape, cap: u32) -> Quota {
    let window = Quota::per_second(cap);
    match shape {
        Shape::Window
        | Shape::RateLimitHeaders
        | Shape::ExpressRateLimit
        | Shape::TruncatedZero
        | Shape::Spells
        | Shape::SlidingLog
        | Shape::Counting(_) => window,
        Shape::Bucket | Shape::Gcra | Shape::Leaky(_) | Shape::Outage { .. } => window.refilled(),
    }
}

/// `quota` as the caller writes it: `Quota::per_second(100)`,
/// `Quota::per_second(100).refilled()`.
pub(crate) fn describe(quota: Quota) -> String {
    let base = if quota.per() == Duration::from_secs(1) {
        format!("Quota::per_second({})", quota.count())
    } else {
        format!("Quota::new({}, {:?})", quota.count(), quota.per())
    };
    if quota.is_refilled() {
        format!("{base}.refilled()")
    } else {
        base
    }
}

/// `policy` with `quota` declared for the origin of `url`, if one is given.
pub(crate) fn declare(policy: Policy, url: &str, quota: Option<Quota>) -> Policy {
    match quota {
        Some(q) => policy.quota(url, q),
        None => policy,
    }
}

/// The latest last success the issue allows a declared row whose ideal is
/// `ideal`, and how it reads: `ideal + 0.25 s` (its 500-task figure) or
/// `1.03 × ideal` (its 5,000-task one), whichever is later (at 500 tasks
/// and CAP=100 the first, at 5,000 and CAP=500 the second).
pub(crate) fn last_success_limit(ideal: Duration) -> (Duration, String) {
    let after = ideal + AFTER_IDEAL;
    let times = ideal.mul_f64(TIMES_IDEAL);
    if after >= times {
        (
            after,
            format!("ideal + {} = {}", secs(AFTER_IDEAL), secs(after)),
        )
    } else {
        (times, format!("{TIMES_IDEAL} × ideal = {}", secs(times)))
    }
}

/// Whether a declared row of `shape` has [`targets`] of its own: every
/// shape but the outage, whose time down answers everything `503`.
pub(crate) fn has_targets(shape: Shape) -> bool {
    !matches!(shape, Shape::Outage { .. })
}

/// The heading of `row`'s targets with the quota it declared.
pub(crate) fn heading(cfg: &Config, row: &Row) -> String {
    format!(
        "  {} (declared {}):",
        row.shape.name(),
        describe(documented(row.shape, cfg.cap))
    )
}

/// Writes a declared row's own targets to `out`: no rejection at all (the
/// first burst is paced too), and the last success within
/// [`last_success_limit`] with every task succeeding (`all_ok`); returns
/// whether both were met.
pub(crate) fn targets(out: &mut String, cfg: &Config, row: &Row, all_ok: bool) -> bool {
    let status = row.shape.rejection_status();
    let none_rejected = row.server.rejected == 0;
    let (limit, reads) = last_success_limit(cfg.ideal(row.shape));
    let last = row.client_side.last_ok;
    let fast = all_ok && last.is_some_and(|l| l <= limit);
    let _ = writeln!(
        out,
        "    {}  {} {status}s ({} on retries; target 0 with a declared quota)",
        pass(none_rejected),
        row.server.rejected,
        row.server.rejected_retries
    );
    let _ = writeln!(
        out,
        "    {}  last success {} (target ≤ {reads}{})",
        pass(fast),
        last.map_or_else(|| "—".to_owned(), secs),
        if all_ok {
            ""
        } else {
            ", with every task succeeding"
        }
    );
    none_rejected && fast
}
