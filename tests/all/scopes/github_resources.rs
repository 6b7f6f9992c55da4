//! GitHub's resources (`x-ratelimit-resource`) under
//! `RateLimitHeaders::github()`: core's quota and search's are two, and
//! neither holds the other; a search `200` saying `remaining: 0` holds the
//! next search even while core's window is long.

use std::time::Duration;

use reqwest_backpressure::{Policy, RateLimitHeaders};

use super::{client, get, ratio, returned};
use crate::server::github::Answer;
use crate::server::github_resources::{Config, Resource, ResourcesState, ideal, sends_into_spent};
use crate::server::tap::Tap;
use crate::server::vendor_loads::github::{
    CORE, CORE_GETS, SEARCH, SEARCHES, core_path, search_path,
};
use crate::server::wire::JudgedServer;

/// The default policy with GitHub's preset.
fn github() -> Policy {
    Policy::default().rate_limit_headers(RateLimitHeaders::github())
}

/// A server with core and search, and a client of its own with a tap.
async fn start() -> (
    JudgedServer<ResourcesState>,
    Tap,
    reqwest_middleware::ClientWithMiddleware,
) {
    let server = JudgedServer::start(ResourcesState::new(Config::new(vec![CORE, SEARCH]))).await;
    let tap = Tap::default();
    let client = client(github(), &tap);
    (server, tap, client)
}

#[tokio::test]
async fn core_beside_searches_keeps_its_pace_and_searches_keep_theirs() {
    // Core alone and core with searches, side by side: two servers (two
    // origins), two clients, the same load on the machine.
    let (alone, alone_tap, alone_client) = start().await;
    let (both, both_tap, both_client) = start().await;
    let mut tasks: Vec<_> = (0..CORE_GETS)
        .map(|i| get(&alone_client, &alone.uri, core_path(i), i))
        .collect();
    tasks.extend((0..CORE_GETS).map(|i| get(&both_client, &both.uri, core_path(i), i)));
    tasks.extend((0..SEARCHES).map(|i| {
        let task = CORE_GETS + i;
        get(&both_client, &both.uri, search_path(i), task)
    }));
    let back = returned(tasks).await;
    let (alone, both) = (alone.finish(), both.finish());
    let finished = |s: &ResourcesState, r: &str| s.finished(r).unwrap_or(Duration::MAX);
    let (core_alone, core_both, search) = (
        finished(&alone, "core"),
        finished(&both, "core"),
        finished(&both, "search"),
    );
    let ideal_of =
        |s: &ResourcesState, r: &Resource, n| s.first_window(r.name).map(|w| ideal(r, None, w, n));
    let core_ideal = ideal_of(&both, &CORE, CORE_GETS).unwrap_or_default();
    let search_ideal = ideal_of(&both, &SEARCH, SEARCHES).unwrap_or_default();
    let into_spent = sends_into_spent(&both_tap.heard());
    eprintln!(
        "github resources: core alone {core_alone:.2?}, core beside searches {core_both:.2?} \
         ({:.2}× alone; ideal {core_ideal:.2?}), searches {search:.2?} (ideal {search_ideal:.2?}, \
         {:.2}×); requests core {} search {} (alone: {}); primary-limit answers core {} search {} \
         (alone: core {}); sends into a resource known spent {into_spent} (alone: {}); \
         premature {} (alone: {}); returned {back:?}",
        ratio(core_both, core_alone),
        ratio(search, search_ideal),
        both.arrivals
            .iter()
            .filter(|a| a.resource == "core")
            .count(),
        both.arrivals
            .iter()
            .filter(|a| a.resource == "search")
            .count(),
        alone.arrivals.len(),
        both.count("core", Answer::Primary),
        both.count("search", Answer::Primary),
        alone.count("core", Answer::Primary),
        sends_into_spent(&alone_tap.heard()),
        both.premature(),
        alone.premature(),
    );
    let back = back.expect("the run ends");
    assert_eq!(
        back.with(200),
        (2 * CORE_GETS + SEARCHES) as usize,
        "{back:?}"
    );
    assert!(
        core_both.as_secs_f64() <= 1.10 * core_alone.as_secs_f64(),
        "core beside searches took {core_both:?}, alone {core_alone:?}"
    );
    // Searches at their own quota. GitHub states a reset in whole epoch
    // seconds and `Date` in whole seconds: a client that never sends
    // before the reset can be up to a second late for each window after
    // the first (it cannot know where in its second the server is).
    let windows = SEARCHES.div_ceil(SEARCH.quota);
    let whole_seconds = search_ideal + Duration::from_secs(u64::from(windows - 1));
    assert!(
        search.as_secs_f64() <= 1.10 * whole_seconds.as_secs_f64(),
        "searches took {search:?}, ideal {search_ideal:?} ({whole_seconds:?} in whole seconds)"
    );
    assert_eq!(both.count("search", Answer::Primary), 0, "searches refused");
    assert_eq!(into_spent, 0, "sends into a resource known spent");
    assert_eq!((both.premature(), alone.premature()), (0, 0));
}

#[tokio::test]
async fn a_search_200_at_remaining_0_holds_the_next_search_and_no_core_read() {
    // Core's window is an hour; search's 3 per 2 s, its answers slower
    // than core's (300 ms), as GitHub's are.
    let search = Resource {
        name: "search",
        quota: 3,
        window: Duration::from_secs(2),
    };
    let core = Resource {
        name: "core",
        quota: 5000,
        window: Duration::from_secs(3600),
    };
    let mut config = Config::new(vec![core, search]);
    config.slow = vec![("search", Duration::from_millis(300))];
    let server = JudgedServer::start(ResourcesState::new(config)).await;
    let tap = Tap::default();
    let client = client(github(), &tap);
    let (uri, client) = (&server.uri, &client);
    let status = |r: Result<reqwest_middleware::Result<reqwest::Response>, _>| {
        r.expect("no panic").map(|r| r.status().as_u16())
    };
    let search = |task: u32| get(client, uri, format!("/search/issues?q={task}"), task);
    let read = |task: u32| get(client, uri, format!("/repos/o/r/issues/{task}"), task);
    let mut reads_took = Vec::new();
    let run = async {
        let mut back = vec![status(read(0).await)];
        for task in 1..=2 {
            back.push(status(search(task).await));
        }
        // The third search (its 200 says remaining 0) and, sent while it
        // is in flight, a core read answered first: an hour's window.
        let third = search(3);
        while server.peek(|s| s.arrivals.len()) < 4 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        back.push(status(read(4).await));
        back.push(status(third.await));
        // Three more searches, each with a core read after it: the searches
        // wait for search's reset, the reads for nothing.
        for task in 5..=7 {
            back.push(status(search(task).await));
            let started = std::time::Instant::now();
            back.push(status(read(10 + task).await));
            reads_took.push(started.elapsed());
        }
        back
    };
    let back = super::within_limit(run).await;
    let seen = server.finish();
    let into_spent = sends_into_spent(&tap.heard());
    let windows = seen.windows.get("search").cloned().unwrap_or_default();
    // From search's first reset to the fourth search, which opened the
    // second window.
    let fourth_after_reset = match &windows[..] {
        [first, second, ..] => second
            .opened_wall
            .saturating_sub(Duration::from_secs(first.reset)),
        _ => Duration::MAX,
    };
    eprintln!(
        "github resources, reverse: the fourth search {fourth_after_reset:.2?} after search's \
         reset; core reads after searches took {reads_took:.2?}; search primary-limit answers \
         {}; sends into a resource known spent {into_spent}; premature {}; search windows {}; \
         statuses {back:?}",
        seen.count("search", Answer::Primary),
        seen.premature(),
        windows.len(),
    );
    let back = back.expect("the run ends");
    assert!(back.iter().all(|r| matches!(r, Ok(200))), "{back:?}");
    // The fourth search waited for search's reset, told by a 200, and no
    // longer; no core read waited for search.
    assert_eq!(seen.count("search", Answer::Primary), 0);
    assert_eq!(into_spent, 0, "sends into a resource known spent");
    assert!(
        fourth_after_reset <= Duration::from_secs(1),
        "{fourth_after_reset:?}"
    );
    assert!(
        reads_took.iter().all(|&t| t <= Duration::from_secs(1)),
        "{reads_took:?}"
    );
    assert_eq!(seen.premature(), 0);
}
