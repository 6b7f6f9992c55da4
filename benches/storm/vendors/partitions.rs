//! Two IETF partitions of one origin (`server/partitions.rs`), as the test
//! `scopes::partitions` runs them: 50 requests to partition `/a` (10 per
//! 2 s) and 24 to `/b` (4 a second) at once, every answer stating its
//! partition's quota in `RateLimit`/`RateLimit-Policy` with its `pk`, no
//! `Retry-After`; ours with the default policy (`RateLimitHeaders::ietf()`).

use std::time::{Duration, Instant};

use reqwest_backpressure::Policy;

use super::{Columns, Figure, VendorRow, all_through, none, within};
use crate::config::ClientKind;
use crate::harness::run_requests;
use crate::server::partitions::{Config, PartitionsState, ideal};
use crate::server::vendor_loads::partitions::{A, B, POLICY, SENDS, path};
use crate::server::wire::JudgedServer;

/// The table's heading and columns.
pub(super) fn columns() -> Columns {
    Columns {
        heading: format!(
            "IETF partitions: {} requests to {} ({} per {} s) + {} to {} ({} per {} s) at once, \
             one origin, one policy name, told apart by pk",
            SENDS[0].1,
            A.prefix,
            A.quota,
            A.window_secs,
            SENDS[1].1,
            B.prefix,
            B.quota,
            B.window_secs
        ),
        rejections: &["429s on /a", "429s on /b"],
        figures: &["/a", "/b"],
        extra: &[],
        notes: "A partition's last success: from its first request to its last 200; its \
                ideal: its windows back to back from its first request. Premature: a send \
                before the end of the window its task's last 429 named.",
    }
}

/// One row: `kind`'s client against a fresh server.
pub(super) async fn row(kind: ClientKind, limit: Duration) -> VendorRow {
    let config = Config {
        partitions: SENDS.iter().map(|&(p, _)| p).collect(),
        policy: POLICY,
        retry_after: false,
    };
    let server = JudgedServer::start(PartitionsState::new(config)).await;
    let client = kind.with_policy(Policy::default(), None);
    let uri = &server.uri;
    let requests = SENDS
        .iter()
        .flat_map(|(p, n)| (0..*n).map(move |i| path(p, i)))
        .zip(0u32..)
        .map(|(path, task)| client.get(format!("{uri}{path}")).header("x-task", task));
    let started = Instant::now();
    let (side, timed_out) = run_requests(requests, started, limit, None).await;
    let seen = server.finish();
    let n: u32 = SENDS.iter().map(|s| s.1).sum();
    let figures: Vec<Figure> = SENDS
        .iter()
        .enumerate()
        .map(|(i, (p, sent))| Figure {
            last: seen.finished(i),
            ideal: ideal(p, *sent),
            // Each task ends at its 200: the server's 200s are its
            // successes.
            complete: seen.count(i, 200) == *sent as usize && timed_out.is_none(),
        })
        .collect();
    let complete = side.ok == n && timed_out.is_none();
    let mut targets = vec![all_through(side.ok, n as usize, complete)];
    targets.extend(
        SENDS
            .iter()
            .zip(&figures)
            .map(|((p, _), f)| within(p.prefix, f, 1.10, "ideal")),
    );
    targets.push(none(seen.premature(), "premature sends"));
    VendorRow {
        client: kind,
        n: n as usize,
        timed_out,
        requests: seen.arrivals.len(),
        rejections: (0..SENDS.len()).map(|i| seen.count(i, 429)).collect(),
        premature: Some(seen.premature()),
        figures,
        extra: Vec::new(),
        targets,
        side,
    }
}
