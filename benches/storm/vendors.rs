//! The vendors' servers (`STORM_SHAPE=vendors`, or one name each): each of
//! issue 28's scenarios with the workload of its figure test
//! (`server/vendor_loads.rs`), one table each, a row per client: `no
//! retry`, `reqwest-retry`, and `reqwest-backpressure` with the default
//! policy and the vendor's preset. Each row runs against a fresh server
//! (a new port, a new origin) with a fresh client.
//!
//! Every count and time is the server's, as in the tests: a last success
//! is from the scenario's first request to its last `200` on the server's
//! clock, beside the best completion the server's configuration allows
//! (the ideal, a function beside each server) and their ratio, shown only
//! where every task of the figure got its `200`. What a client knew when
//! it sent is read from a wire tap innermost in each client
//! (`server/tap.rs`).

mod discord;
mod github_resources;
mod partitions;
mod stripe;

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::{ClientKind, Config};
use crate::outcome::ClientSide;
use crate::report::{pass, secs, with_unfinished};
use crate::summary::print_reasons;

/// A vendor row's limit before partial figures are reported (at least;
/// `STORM_TIMEOUT` if longer): far beyond any of ours, so a slow run still
/// measures how slow.
const VENDOR_TIMEOUT: Duration = Duration::from_secs(60);

/// What every vendor table's shared columns mean.
const COMMON_NOTES: &str = "tasks ok/N: tasks that got their 200 (client-side); failed: the \
     others (why: below). Requests, rejections and premature sends: the server's counts. A last \
     success: from the scenario's first request to its last 200, on the server's clock; × ideal: \
     shown only where every task of the figure got its 200.";

/// A vendor's server and the workload of its figure test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vendor {
    /// GitHub's resources: 300 core reads and 30 searches at once.
    GitHubResources,
    /// Discord's buckets: 200 messages to 5 channels and 10 guild reads.
    Discord,
    /// Two IETF partitions of one origin.
    Partitions,
    /// Stripe's 25 a second and its per-object `lock_timeout`s.
    Stripe,
}

impl Vendor {
    /// Every vendor, in the order they run.
    const ALL: [Vendor; 4] = [
        Vendor::GitHubResources,
        Vendor::Discord,
        Vendor::Partitions,
        Vendor::Stripe,
    ];

    /// Its `STORM_SHAPE` name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Vendor::GitHubResources => "github_resources",
            Vendor::Discord => "discord",
            Vendor::Partitions => "partitions",
            Vendor::Stripe => "stripe",
        }
    }

    /// The vendors `STORM_SHAPE=asked` (trimmed, lowercase) runs: all of
    /// them for `vendors`, one by its name, none for anything else.
    pub(crate) fn asked(asked: &str) -> Vec<Vendor> {
        if asked == "vendors" {
            return Vendor::ALL.to_vec();
        }
        Vendor::ALL
            .into_iter()
            .filter(|v| v.name() == asked)
            .collect()
    }

    /// What its table says.
    fn columns(self) -> Columns {
        match self {
            Vendor::GitHubResources => github_resources::columns(),
            Vendor::Discord => discord::columns(),
            Vendor::Partitions => partitions::columns(),
            Vendor::Stripe => stripe::columns(),
        }
    }

    /// One row: `kind`'s client against a fresh server.
    async fn row(self, cfg: &Config, kind: ClientKind) -> VendorRow {
        let limit = cfg.timeout.max(VENDOR_TIMEOUT);
        match self {
            Vendor::GitHubResources => github_resources::row(kind, limit).await,
            Vendor::Discord => discord::row(kind, limit).await,
            Vendor::Partitions => partitions::row(kind, limit).await,
            Vendor::Stripe => stripe::row(kind, limit).await,
        }
    }
}

/// A last success and the best completion for it (both from the
/// scenario's first request, on the server's clock).
#[derive(Debug, Clone, Copy)]
struct Figure {
    last: Option<Duration>,
    ideal: Duration,
    /// Every task of the figure got its `200`: only then is the ratio
    /// shown (a client that gave up early ends early).
    complete: bool,
}

/// What a vendor's table says: its heading, the names of its own
/// columns, and what they mean.
struct Columns {
    heading: String,
    /// The rejections counted, by kind.
    rejections: &'static [&'static str],
    /// The figures, each shown as its last success, ideal and ratio.
    figures: &'static [&'static str],
    /// The scenario's other columns.
    extra: &'static [&'static str],
    notes: &'static str,
}

/// One client's row against a vendor's server.
struct VendorRow {
    client: ClientKind,
    /// The row's tasks.
    n: usize,
    side: ClientSide,
    /// `Some(limit)` if not every task had ended within it.
    timed_out: Option<Duration>,
    /// Requests the server saw.
    requests: usize,
    /// One count per [`Columns::rejections`].
    rejections: Vec<usize>,
    /// Sends before the time the task's last rate-limit answer named
    /// (`None` where no answer names one).
    premature: Option<usize>,
    /// One per [`Columns::figures`].
    figures: Vec<Figure>,
    /// One per [`Columns::extra`].
    extra: Vec<String>,
    /// Issue 28's targets, met or not, and what was measured against
    /// what (printed for our row only).
    targets: Vec<(bool, String)>,
}

/// Runs each vendor asked for with each single-process client, and
/// prints its table, our targets and why tasks failed.
pub(crate) fn run_and_print(cfg: &Config, runtime: &tokio::runtime::Runtime) {
    for &vendor in &cfg.vendors {
        let mut rows = Vec::new();
        for &kind in cfg.clients.iter().filter(|c| !c.multi_process()) {
            let row = runtime.block_on(vendor.row(cfg, kind));
            eprintln!(
                "storm: {} × {} done ({}/{} ok, {} requests)",
                vendor.name(),
                kind.name(),
                row.side.ok,
                row.n,
                row.requests
            );
            rows.push(row);
        }
        print!("{}", table(&vendor.columns(), &rows));
        print_reasons(rows.iter().map(|r| {
            let name = format!("{} × {}", vendor.name(), r.client.name());
            (name, &r.side.reasons)
        }));
    }
}

/// A target: every one of the row's `n` tasks got its `200` (`ok` did)
/// within the row's limit (`complete`).
fn all_through(ok: u32, n: usize, complete: bool) -> (bool, String) {
    (complete, format!("{ok}/{n} got their 200 (target all)"))
}

/// A target: `what`'s last success at most `times` × the figure's ideal
/// (named `of`: the ideal, or what it is measured against), every task of
/// it through.
fn within(what: &str, f: &Figure, times: f64, of: &str) -> (bool, String) {
    let met = f.complete
        && f.last
            .is_some_and(|l| l.as_secs_f64() <= times * f.ideal.as_secs_f64());
    let text = format!(
        "{what}: last success {} (target ≤ {times} × {of} {})",
        secs_or_dash(f.last),
        secs(f.ideal)
    );
    (met, text)
}

/// A target: no `what` at all (`count` of them seen).
fn none(count: usize, what: &str) -> (bool, String) {
    (count == 0, format!("{count} {what} (target 0)"))
}

/// `d`, or `—` for none.
fn secs_or_dash(d: Option<Duration>) -> String {
    d.map_or_else(|| "—".to_owned(), secs)
}

/// `last / ideal`, or `—` where the figure is not complete.
fn ratio(f: &Figure) -> String {
    match f.last {
        Some(last) if f.complete => {
            format!(
                "{:.2}×",
                last.as_secs_f64() / f.ideal.as_secs_f64().max(f64::EPSILON)
            )
        }
        _ => "—".to_owned(),
    }
}

/// The vendor's table, a row per client, what its columns mean, and our
/// row's targets.
fn table(columns: &Columns, rows: &[VendorRow]) -> String {
    let mut out = format!("\n### {}\n\n", columns.heading);
    let mut head = vec![
        "client".to_owned(),
        "tasks ok/N".to_owned(),
        "requests".to_owned(),
    ];
    head.extend(columns.rejections.iter().map(|r| r.to_string()));
    head.extend(["premature".to_owned(), "failed tasks".to_owned()]);
    for f in columns.figures {
        head.extend([
            format!("{f}: last success"),
            "ideal".to_owned(),
            "× ideal".to_owned(),
        ]);
    }
    head.extend(columns.extra.iter().map(|e| e.to_string()));
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let align: Vec<&str> = (0..head.len())
        .map(|i| if i == 0 { "---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    let (mut targets, mut all) = (String::new(), true);
    for row in rows {
        let c = &row.side;
        let unfinished = row.n.saturating_sub((c.ok + c.failed) as usize);
        let failed = with_unfinished(c.failed, unfinished, row.timed_out);
        let mut cells = vec![
            row.client.name().to_owned(),
            format!("{}/{}", c.ok, row.n),
            row.requests.to_string(),
        ];
        cells.extend(row.rejections.iter().map(usize::to_string));
        cells.push(
            row.premature
                .map_or_else(|| "—".to_owned(), |p| p.to_string()),
        );
        cells.push(failed);
        for f in &row.figures {
            cells.extend([secs_or_dash(f.last), secs(f.ideal), ratio(f)]);
        }
        cells.extend(row.extra.iter().cloned());
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if row.client == ClientKind::Backpressure {
            for (ok, text) in &row.targets {
                let _ = writeln!(targets, "    {}  {text}", pass(*ok));
                all &= ok;
            }
        }
    }
    let _ = writeln!(out, "\n{COMMON_NOTES} {}", columns.notes);
    if !targets.is_empty() {
        let _ = writeln!(
            out,
            "\n{} targets (issue 28):\n{targets}  overall: {}",
            ClientKind::Backpressure.name(),
            if all { "PASS" } else { "MISS (see above)" }
        );
    }
    out
}
