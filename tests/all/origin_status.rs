//! `Store::origin_status` over real HTTP: a caller holding a clone of the
//! middleware's store reads, mid-run, what the origin holds (the gate after
//! the burst, then the paced slots and the learned batch), as a progress
//! line would.

use std::time::Duration;

use reqwest_backpressure::origin::{OriginStatus, PaceKind};
use reqwest_backpressure::{MemoryStore, Policy, RetryAfterMiddleware, Store};
use tokio::time::Instant;

use crate::common::{client_with, spawn_tasks};
use crate::server::{LimitedServer, Shape};

const CAP: u32 = 40;
const TASKS: u32 = 160;

/// `TASKS` tasks at once against a fixed window admitting `CAP` a second,
/// read through `store` (which the middleware shares) every 20 ms until
/// they are all done: the views, with when each was taken.
async fn run_and_watch<S: Store + Clone>(
    middleware: RetryAfterMiddleware<S>,
    store: S,
) -> Vec<(Duration, OriginStatus)> {
    let server = LimitedServer::start(Shape::Window, CAP, "/").await;
    let url = reqwest::Url::parse(&server.url).expect("the server's url");
    assert_eq!(
        store.origin_status(&url).await.expect("the store answers"),
        None,
        "no state before the first request"
    );
    let client = client_with(middleware);
    let tasks = spawn_tasks(&client, &server.url, TASKS);
    let started = Instant::now();
    let mut seen = Vec::new();
    while !tasks.iter().all(tokio::task::JoinHandle::is_finished) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the tasks did not end"
        );
        if let Some(status) = store.origin_status(&url).await.expect("the store answers") {
            seen.push((started.elapsed(), status));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in tasks {
        assert_eq!(t.await.expect("task").expect("answer").status(), 200);
    }
    let served = server.finish();
    assert_eq!(served.oks, u64::from(TASKS));
    assert!(served.rejected > 0, "the burst met the limit");
    // Everything sent: nothing is held any more.
    let after = store
        .origin_status(&url)
        .await
        .expect("the store answers")
        .expect("the origin is known");
    assert_eq!((after.reserved(), after.gate_closed_for()), (0, None));
    seen
}

/// What every run must show: the gate closed after the burst (before any
/// pace is learned), then tasks holding paced slots at a learned batch no
/// larger than the server admits, with the next free slot ahead.
fn assert_shows_the_run(seen: &[(Duration, OriginStatus)]) {
    let views = || seen.iter().map(|(_, s)| s);
    let closed = views()
        .find(|s| s.gate_closed_for().is_some())
        .unwrap_or_else(|| panic!("the gate never showed closed: {seen:?}"));
    // Held no longer than the window's `Retry-After: 1`.
    assert!(closed.gate_closed_for() <= Some(Duration::from_secs(1)));
    assert_eq!(
        closed.pace(),
        PaceKind::Unpaced,
        "learned when the gate reopens"
    );
    let paced: Vec<_> = views()
        .filter(|s| s.gate_closed_for().is_none() && s.reserved() > 0)
        .collect();
    assert!(!paced.is_empty(), "no paced slots seen: {seen:?}");
    for s in &paced {
        assert!(s.reserved() < TASKS, "{s:?}");
        let PaceKind::Batches { size, every } = s.pace() else {
            panic!("slots reserved without a learned batch: {s:?}");
        };
        assert!((1..=CAP).contains(&size), "{s:?}");
        assert!(every >= Duration::from_secs(1), "{s:?}");
        // A slot held is still to come, so a newcomer would wait.
        assert!(s.next_slot_in().is_some(), "{s:?}");
        assert!(s.next_slot_in() <= Some(Duration::from_secs(10)), "{s:?}");
    }
    let most = paced.iter().map(|s| s.reserved()).max().unwrap_or(0);
    assert!(
        most >= CAP,
        "the queue behind the burst held more than a batch ({most})"
    );
    // The gate was seen closed before the slots were.
    let first_closed = seen.iter().position(|(_, s)| s.gate_closed_for().is_some());
    let first_paced = seen
        .iter()
        .position(|(_, s)| s.gate_closed_for().is_none() && s.reserved() > 0);
    assert!(first_closed < first_paced, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_clone_shows_the_gate_then_the_paced_slots() {
    let store = MemoryStore::new();
    let middleware = RetryAfterMiddleware::with_store(Policy::default(), store.clone());
    let seen = run_and_watch(middleware, store).await;
    assert_shows_the_run(&seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_middlewares_own_store_handle_shows_the_same() {
    // The other pattern: take the store from the middleware before it is
    // moved into the client.
    let middleware = RetryAfterMiddleware::new(Policy::default());
    let store = middleware.store().clone();
    let seen = run_and_watch(middleware, store).await;
    assert_shows_the_run(&seen);
}

/// Over Redis, another handle (as another process would) reads what the
/// middleware's store wrote.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_redis_handle_shows_the_shared_state() {
    use crate::redis::redis_server::RedisServer;
    use reqwest_backpressure::store::RedisStore;

    let redis = RedisServer::start();
    let connect = || async {
        RedisStore::connect(&redis.url())
            .await
            .expect("connect RedisStore")
            .prefix("rbp-status:")
    };
    let middleware = RetryAfterMiddleware::with_store(Policy::default(), connect().await);
    let seen = run_and_watch(middleware, connect().await).await;
    assert_shows_the_run(&seen);
}

/// Under `RateLimitHeaders::github()`, each resource is a scope with a
/// limit of its own, read with `Store::scope_status`: a search answer
/// saying `x-ratelimit-resource: search` and `remaining: 0` shows under
/// scope `search` (spent, held until its reset), while `core`, which its
/// own answer says has quota left, and the origin's own limit are not held.
#[tokio::test]
async fn a_github_resource_shows_under_its_scope() {
    use reqwest_backpressure::RateLimitHeaders;
    use std::time::{SystemTime, UNIX_EPOCH};

    let epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_secs();
    let (server, arrivals) = crate::common::scripted(move |path, _| {
        let (resource, limit, remaining, reset) = if path.starts_with("/search/") {
            ("search", 10, 0, epoch + 30)
        } else {
            ("core", 5000, 4990, epoch + 3600)
        };
        crate::common::ok()
            .insert_header("x-ratelimit-limit", limit.to_string().as_str())
            .insert_header("x-ratelimit-remaining", remaining.to_string().as_str())
            .insert_header("x-ratelimit-used", (limit - remaining).to_string().as_str())
            .insert_header("x-ratelimit-reset", reset.to_string().as_str())
            .insert_header("x-ratelimit-resource", resource)
    })
    .await;
    let store = MemoryStore::new();
    let policy = Policy::default().rate_limit_headers(RateLimitHeaders::github());
    let client = client_with(RetryAfterMiddleware::with_store(policy, store.clone()));
    let url = |path: &str| reqwest::Url::parse(&format!("{}{path}", server.uri())).expect("a url");
    let status = |scope: Option<&'static str>, url: reqwest::Url| {
        let store = store.clone();
        async move {
            match scope {
                Some(scope) => store.scope_status(&url, scope).await,
                None => store.origin_status(&url).await,
            }
            .expect("the store answers")
        }
    };
    assert_eq!(status(Some("search"), url("/")).await, None, "nothing yet");

    for path in ["/repos/o/r", "/search/issues?q=x"] {
        let r = client.get(url(path)).send().await.expect("an answer");
        assert_eq!(r.status(), 200);
    }
    assert_eq!(arrivals.len(), 2);

    // Any URL of the origin reads its scopes.
    let search = status(Some("search"), url("/repos/o/r"))
        .await
        .expect("search is known");
    assert_eq!(search.quota_left(), Some(0), "{search:?}");
    let held = search.gate_closed_for().expect("spent search is held");
    let resets = search.quota_resets_in().expect("the reset is ahead");
    // The reset is whole epoch seconds, 29 to 30 s from now.
    assert!(resets > Duration::from_secs(20), "{search:?}");
    assert!(resets <= Duration::from_secs(31), "{search:?}");
    assert!(held <= resets + Duration::from_secs(1), "{search:?}");

    let core = status(Some("core"), url("/")).await.expect("core is known");
    assert_eq!(core.quota_left(), Some(4990), "{core:?}");
    assert_eq!(core.gate_closed_for(), None, "{core:?}");

    let origin = status(None, url("/")).await.expect("the origin is known");
    assert_eq!(origin.gate_closed_for(), None, "{origin:?}");
    assert_eq!(origin.quota_left(), None, "no resource is the origin's");

    assert_eq!(status(Some("graphql"), url("/")).await, None, "never used");
}
