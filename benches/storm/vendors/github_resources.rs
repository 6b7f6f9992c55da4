//! GitHub's resources (`server/github_resources.rs`), as the test
//! `scopes::github_resources` runs them: 300 repository reads (core, 100
//! per 4 s) and 30 searches (10 per 3 s) at once, beside the same 300
//! reads alone against a second server at the same time, each with a
//! client of its own; ours with `RateLimitHeaders::github()`.

use std::time::{Duration, Instant};

use reqwest_backpressure::{Policy, RateLimitHeaders};
use reqwest_middleware::{ClientWithMiddleware, RequestBuilder};

use super::{Columns, Figure, VendorRow, all_through, none, within};
use crate::config::ClientKind;
use crate::harness::run_requests;
use crate::server::github::Answer;
use crate::server::github_resources::{Config, Resource, ResourcesState, ideal, sends_into_spent};
use crate::server::tap::Tap;
use crate::server::vendor_loads::github::{
    CORE, CORE_GETS, SEARCH, SEARCHES, core_path, search_path,
};
use crate::server::wire::JudgedServer;

/// The table's heading and columns.
pub(super) fn columns() -> Columns {
    Columns {
        heading: format!(
            "GitHub resources: {CORE_GETS} core GETs + {SEARCHES} searches at once (core {} per \
             {} s, search {} per {} s, each stated with x-ratelimit-resource), beside the \
             {CORE_GETS} core GETs alone (a second server, at the same time)",
            CORE.quota,
            CORE.window.as_secs(),
            SEARCH.quota,
            SEARCH.window.as_secs()
        ),
        rejections: &["core primary-limit answers", "search primary-limit answers"],
        figures: &["core beside searches", "searches", "core alone"],
        extra: &["core beside / alone", "sends into a resource known spent"],
        notes: "Counts are of the run beside searches (premature: both servers). A figure's \
                ideal: its resource's windows back to back from its first request (the first \
                window as the server opened it). The searches' target allows a second more for \
                each window after the first, as the test does: GitHub states its resets and \
                Date in whole seconds. Sends into a resource known spent: sends to a resource after \
                the client heard its remaining 0, before the reset it named (the client's tap).",
    }
}

/// A server with core and search.
async fn server() -> JudgedServer<ResourcesState> {
    JudgedServer::start(ResourcesState::new(Config::new(vec![CORE, SEARCH]))).await
}

/// `GET uri + path` as task `task`.
fn get(client: &ClientWithMiddleware, uri: &str, path: String, task: u32) -> RequestBuilder {
    client.get(format!("{uri}{path}")).header("x-task", task)
}

/// `resource`'s ideal for `n` requests on the server that saw `s`.
fn ideal_of(s: &ResourcesState, resource: &Resource, n: u32) -> Duration {
    s.first_window(resource.name)
        .map_or(Duration::ZERO, |w| ideal(resource, None, w, n))
}

/// One row: `kind`'s clients against two fresh servers, the reads alone
/// on one and the reads and searches on the other, all at once.
pub(super) async fn row(kind: ClientKind, limit: Duration) -> VendorRow {
    let (alone, both) = (server().await, server().await);
    let (alone_tap, both_tap) = (Tap::default(), Tap::default());
    let github = || Policy::default().rate_limit_headers(RateLimitHeaders::github());
    let alone_client = kind.with_policy(github(), Some(alone_tap.clone()));
    let both_client = kind.with_policy(github(), Some(both_tap.clone()));
    let alone_gets = (0..CORE_GETS).map(|i| get(&alone_client, &alone.uri, core_path(i), i));
    let both_gets = (0..CORE_GETS)
        .map(|i| get(&both_client, &both.uri, core_path(i), i))
        .chain((0..SEARCHES).map(|i| {
            let task = CORE_GETS + i;
            get(&both_client, &both.uri, search_path(i), task)
        }));
    let started = Instant::now();
    let ((alone_side, alone_cut), (side, timed_out)) = tokio::join!(
        run_requests(alone_gets, started, limit, None),
        run_requests(both_gets, started, limit, None)
    );
    let (alone, both) = (alone.finish(), both.finish());
    let n = CORE_GETS + SEARCHES;
    let complete = side.ok == n && timed_out.is_none();
    let alone_complete = alone_side.ok == CORE_GETS && alone_cut.is_none();
    let (core_alone, core_both, search) = (
        alone.finished("core"),
        both.finished("core"),
        both.finished("search"),
    );
    let figures = vec![
        Figure {
            last: core_both,
            ideal: ideal_of(&both, &CORE, CORE_GETS),
            complete,
        },
        Figure {
            last: search,
            ideal: ideal_of(&both, &SEARCH, SEARCHES),
            complete,
        },
        Figure {
            last: core_alone,
            ideal: ideal_of(&alone, &CORE, CORE_GETS),
            complete: alone_complete,
        },
    ];
    // GitHub states its resets and `Date` in whole seconds: a client that
    // never sends before the reset can be up to a second late for each
    // search window after the first (as the test allows).
    let whole_seconds = Figure {
        ideal: figures[1].ideal
            + Duration::from_secs(u64::from(SEARCHES.div_ceil(SEARCH.quota) - 1)),
        ..figures[1]
    };
    let beside_alone = match (core_both, core_alone) {
        (Some(b), Some(a)) if complete && alone_complete => {
            Some(b.as_secs_f64() / a.as_secs_f64().max(f64::EPSILON))
        }
        _ => None,
    };
    let beside_alone = beside_alone.map_or_else(|| "—".to_owned(), |r| format!("{r:.2}×"));
    let into_spent = sends_into_spent(&both_tap.heard());
    let premature = both.premature() + alone.premature();
    let search_refused = both.count("search", Answer::Primary);
    let targets = vec![
        all_through(
            side.ok + alone_side.ok,
            (n + CORE_GETS) as usize,
            complete && alone_complete,
        ),
        within(
            "core beside searches",
            &Figure {
                ideal: core_alone.unwrap_or_default(),
                complete: complete && alone_complete,
                ..figures[0]
            },
            1.10,
            "core alone",
        ),
        within("searches", &whole_seconds, 1.10, "ideal in whole seconds"),
        none(search_refused, "searches refused"),
        none(into_spent, "sends into a resource known spent"),
        none(premature, "premature sends"),
    ];
    VendorRow {
        client: kind,
        n: n as usize,
        timed_out: timed_out.or(alone_cut),
        requests: both.arrivals.len(),
        rejections: vec![both.count("core", Answer::Primary), search_refused],
        premature: Some(premature),
        figures,
        extra: vec![beside_alone, into_spent.to_string()],
        targets,
        side,
    }
}
