//! Items 2 and 3: every declared quota of an origin binds (one in requests
//! and one in cost units side by side), and a declared quota is the
//! caller's own knowledge: its holds and slots are not capped by
//! `max_wait`, which caps server delays; a task waits for its slot while
//! its deadline allows.

use std::time::Duration;

use reqwest_backpressure::{Cost, Deadline, Quota};

use crate::common::{client, exact};
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
        let mut request = client
            .get(url)
            .header("x-task", i)
            .with_extension(deadline);
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
