//! Items 2 and 3: every declared quota of an origin binds (one in requests
//! and one in cost units side by side), and a declared quota is the
//! caller's own knowledge: its holds and slots are not capped by
//! `max_wait`, which caps server delays; a task waits for its slot while
//! its deadline allows.

use std::time::Duration;

use reqwest_backpressure::{Cost, Deadline, Policy, Quota, RetryAfterMiddleware};

use crate::offline::{URL, offline};

use crate::common::{client, exact, our_code};
use crate::server::{LimitedServer, ServerState, Shape};

/// `n` GETs at once to `url` through `client`, each costing `cost` units
/// (0: no `Cost`) with a deadline `deadline` from now; the results.
async fn burst(
    client: &reqwest_middleware::ClientWithMiddleware,
    url: &str,
    n: u32,
    cost: u64,
    deadline: Duration,
) -> Vec<reqwest_middleware::Result<reqwest::Response>> {
    let deadline = Deadline::after(deadline);
    let all = (0..n).map(|i| {
        let mut request = client.get(url).header("x-task", i).with_extension(deadline);
        if cost > 0 {
            request = request.with_extension(Cost::new(cost));
        }
        request.send()
    });
    futures_util::future::join_all(all).await
}

/// When each request the server saw arrived, from the first, in order.
fn arrived(seen: &ServerState) -> Vec<Duration> {
    let mut at: Vec<Duration> = seen.arrivals.iter().map(|a| a.at).collect();
    at.sort();
    at.iter().map(|t| *t - at[0]).collect()
}

fn all_ok(results: Vec<reqwest_middleware::Result<reqwest::Response>>) {
    for r in results {
        let r = r.expect("an answer");
        assert_eq!(r.status(), 200);
    }
}

// ------------------------------------------------- 3. both quotas bind ----

#[tokio::test]
async fn a_token_quota_beside_a_request_quota_leaves_it_binding() {
    // The README's own shape: requests and tokens declared for one origin.
    // `per_second(2)` alone paces 6 GETs in three batches; a token quota
    // that never binds must not change that (before the fix it replaced
    // the request quota, and all 6 left within 10 ms). Both orders.
    for units_first in [false, true] {
        let server = LimitedServer::start(Shape::Window, 100, "/").await;
        let origin = server.url.trim_end_matches('/').to_owned();
        let requests = Quota::per_second(2);
        let tokens = Quota::per_second(1_000_000).units();
        let policy = if units_first {
            exact().quota(&origin, tokens).quota(&origin, requests)
        } else {
            exact().quota(&origin, requests).quota(&origin, tokens)
        };
        all_ok(burst(&client(policy), &server.url, 6, 10, Duration::from_secs(30)).await);
        let seen = server.finish();
        let after = arrived(&seen);
        assert_eq!(after.len(), 6);
        // Batches of 2, each a little more than a second after the last.
        assert!(after[2] >= Duration::from_secs(1), "{after:?}");
        assert!(after[4] >= Duration::from_secs(2), "{after:?}");
        assert!(after[5] < Duration::from_secs(4), "{after:?}");
    }
}

#[tokio::test]
async fn the_same_unit_declared_twice_is_replaced() {
    // The later declaration in requests replaces the earlier one: 1 a
    // second would take 5 s for 6 GETs; 100 a second sends them at once.
    let server = LimitedServer::start(Shape::Window, 100, "/").await;
    let origin = server.url.trim_end_matches('/').to_owned();
    let policy = exact()
        .quota(&origin, Quota::per_second(1))
        .quota(&origin, Quota::per_minute(90_000).units())
        .quota(&origin, Quota::per_second(100));
    all_ok(burst(&client(policy), &server.url, 6, 0, Duration::from_secs(30)).await);
    let seen = server.finish();
    let after = arrived(&seen);
    assert!(after[5] < Duration::from_millis(800), "{after:?}");
}

// ------------------------------ 2. a declared quota is not a server delay ----

/// The most arrivals in any span of `span` (sorted times from the first).
fn densest(after: &[Duration], span: Duration) -> usize {
    after
        .iter()
        .map(|&t| after.iter().filter(|&&u| u >= t && u < t + span).count())
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_declared_unit_quota_longer_than_max_wait_renews() {
    // 100 units a second, 20 a request, `max_wait` 1 s: batches of 5, a
    // little more than a second apart. Before the fix the hold after the
    // first 5 was capped at `max_wait` and its probe spent again, pushing
    // the window's end out: one request per `max_wait` after that.
    let server = LimitedServer::start(Shape::Window, 100, "/").await;
    let origin = server.url.trim_end_matches('/').to_owned();
    let policy = exact()
        .max_wait(Duration::from_secs(1))
        .quota(&origin, Quota::new(100, Duration::from_secs(1)).units());
    let results = burst(
        &client(policy),
        &server.url,
        20,
        20,
        Duration::from_secs(30),
    )
    .await;
    all_ok(results);
    let after = arrived(&server.finish());
    assert_eq!(after.len(), 20);
    assert!(densest(&after, Duration::from_secs(1)) <= 5, "{after:?}");
    // Four windows: the last a little more than three seconds in.
    assert!(after[19] >= Duration::from_secs(3), "{after:?}");
    assert!(after[19] < Duration::from_millis(4500), "{after:?}");
}

/// `n` GETs at once through an offline client with default settings and
/// `quota` declared, each costing `cost` with a deadline of ten minutes.
/// All must end `200`; the arrivals, from the first.
async fn offline_backlog(quota: Quota, n: u32, cost: u64) -> Vec<Duration> {
    let origin = URL.trim_end_matches('/');
    let (client, arrivals) = offline(
        RetryAfterMiddleware::new(Policy::default().quota(origin, quota)),
        |_| 200,
    );
    all_ok(burst(&client, URL, n, cost, Duration::from_secs(600)).await);
    let at = arrivals.all();
    at.iter().map(|t| *t - at[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn a_per_minute_request_quota_serves_a_backlog_of_minutes() {
    // 10 a minute, 40 tasks, default settings (`max_wait` 60 s, under the
    // window's 61.2 s): every task waits for its slot, 10 a window. Before
    // the fix the tasks past the first batch were refused at once with
    // `origin_gate_closed` (their slot was more than `max_wait` away).
    let after = offline_backlog(Quota::per_minute(10), 40, 0).await;
    assert_eq!(after.len(), 40);
    assert!(densest(&after, Duration::from_secs(60)) <= 10, "{after:?}");
    assert!(after[39] >= Duration::from_secs(180), "{after:?}");
    assert!(after[39] < Duration::from_secs(190), "{after:?}");
}

#[tokio::test(start_paused = true)]
async fn a_per_minute_unit_quota_serves_a_backlog_of_minutes() {
    // 100 units a minute, 10 a request: the same backlog in cost units.
    let after = offline_backlog(Quota::per_minute(100).units(), 40, 10).await;
    assert_eq!(after.len(), 40);
    assert!(densest(&after, Duration::from_secs(60)) <= 10, "{after:?}");
    assert!(after[39] >= Duration::from_secs(180), "{after:?}");
    assert!(after[39] < Duration::from_secs(190), "{after:?}");
}

#[tokio::test(start_paused = true)]
async fn a_task_whose_deadline_cannot_cover_its_slot_is_refused_at_once() {
    // 5 a minute; 15 tasks with the default deadline (120 s): two batches
    // fit, the third (at ~122 s) does not: those five are refused at once,
    // never sent, never past their deadline.
    let origin = URL.trim_end_matches('/');
    let (client, arrivals) = offline(
        RetryAfterMiddleware::new(Policy::default().quota(origin, Quota::per_minute(5))),
        |_| 200,
    );
    let start = tokio::time::Instant::now();
    let calls = (0..15).map(|_| {
        let client = client.clone();
        async move {
            let r = client.get(URL).send().await;
            (r, start.elapsed())
        }
    });
    let results = futures_util::future::join_all(calls).await;
    let mut refused = 0;
    for (r, took) in results {
        match r {
            Ok(r) => {
                assert_eq!(r.status(), 200);
                assert!(took < Duration::from_secs(120), "{took:?}");
            }
            Err(e) => {
                assert_eq!(our_code(&e), Some("origin_gate_closed"));
                assert_eq!(took, Duration::ZERO);
                refused += 1;
            }
        }
    }
    assert_eq!((refused, arrivals.len()), (5, 10));
}
