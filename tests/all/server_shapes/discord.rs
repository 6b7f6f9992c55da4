//! The Discord server, judged at fixed instants (no socket, no sleep): a
//! bucket per route and major parameter, shared hashes, the global limit
//! and its announced wait, a shared resource's `429`, the fields as the
//! docs write them, the ideal of parallel buckets, and what a client's tap
//! says it knew.

use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue};

use crate::server::discord::{
    Config, DiscordState, Kind, Route, Shared, ideal, sends_in_global_wait,
};
use crate::server::tap::Heard;
use crate::server::wire::{Judge, Reply, Seen};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const MESSAGES: &str = "41f2c31d0a8b6e7d95c4b3a2f1e0d9c8";
const READS: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a9";

fn routes() -> Vec<Route> {
    let route = |method, path, bucket| Route {
        method,
        path,
        bucket,
        limit: 2,
        window: ms(1250),
    };
    vec![
        route("POST", "/channels/{}/messages", MESSAGES),
        // Two routes Discord groups: one bucket.
        route("GET", "/channels/{}/messages", READS),
        route("GET", "/channels/{}/messages/{}", READS),
    ]
}

/// `method path` of task `task`, `at` after (`t0`, `w0`).
fn send(
    s: &mut DiscordState,
    (t0, w0): (Instant, Duration),
    at: Duration,
    method: &str,
    path: &str,
    task: u32,
) -> Reply {
    let seen = Seen {
        method,
        path,
        task: Some(task),
        headers: &[],
    };
    s.judge(&seen, t0 + at, w0 + at)
}

fn bucket(r: &Reply) -> (u16, Option<&str>, Option<&str>, Option<&str>) {
    (
        r.status,
        r.get("x-ratelimit-remaining"),
        r.get("x-ratelimit-bucket"),
        r.get("x-ratelimit-scope"),
    )
}

#[test]
fn a_bucket_is_per_route_group_and_major_parameter() {
    let mut s = DiscordState::new(Config::new(routes()));
    let clocks = (Instant::now(), ms(1_700_000_000_000));
    let post = |s: &mut DiscordState, at, channel: &str, task| {
        send(
            s,
            clocks,
            ms(at),
            "POST",
            &format!("/channels/{channel}/messages"),
            task,
        )
    };
    let first = post(&mut s, 0, "11", 1);
    assert_eq!(bucket(&first), (200, Some("1"), Some(MESSAGES), None));
    assert_eq!(first.get("x-ratelimit-limit"), Some("2"));
    assert_eq!(first.get("x-ratelimit-reset"), Some("1700000001.250"));
    assert_eq!(first.get("x-ratelimit-reset-after"), Some("1.250"));
    assert_eq!(
        bucket(&post(&mut s, 250, "11", 2)),
        (200, Some("0"), Some(MESSAGES), None)
    );
    let over = post(&mut s, 500, "11", 3);
    assert_eq!(
        bucket(&over),
        (429, Some("0"), Some(MESSAGES), Some("user"))
    );
    assert_eq!(over.get("x-ratelimit-reset-after"), Some("0.750"));
    // `Retry-After` in whole seconds, rounded up; the body exact.
    assert_eq!(over.get("retry-after"), Some("1"));
    assert!(
        over.body.contains(r#""retry_after": 0.750"#),
        "{}",
        over.body
    );
    assert!(over.body.contains(r#""global": false"#), "{}", over.body);
    // Another channel: the same hash, a limit of its own.
    assert_eq!(
        bucket(&post(&mut s, 500, "22", 4)),
        (200, Some("1"), Some(MESSAGES), None)
    );
    // Two grouped routes spend one bucket.
    let read =
        |s: &mut DiscordState, at, path: &str, task| send(s, clocks, ms(at), "GET", path, task);
    assert_eq!(read(&mut s, 600, "/channels/11/messages", 5).status, 200);
    assert_eq!(read(&mut s, 600, "/channels/11/messages/77", 6).status, 200);
    assert_eq!(read(&mut s, 600, "/channels/11/messages/78", 7).status, 429);
    // An id that is no snowflake, or a method no route has: no route.
    assert_eq!(
        read(&mut s, 700, "/channels/general/messages", 8).status,
        404
    );
    assert_eq!(
        send(&mut s, clocks, ms(700), "PUT", "/channels/11/messages", 9).status,
        404
    );
    // Task 3 came back before the reset its 429 named; then at it.
    assert_eq!(post(&mut s, 1249, "11", 3).status, 429);
    assert_eq!(post(&mut s, 1250, "11", 3).status, 200);
    assert_eq!(s.premature(), 1);
    // Every 429 above was on a bucket that had answered before.
    assert_eq!((s.count(Kind::User), s.known_bucket_429s()), (3, 3));
}

#[test]
fn the_global_limit_counts_every_request_and_announces_its_wait() {
    let mut config = Config::new(routes());
    config.global = 3;
    let mut s = DiscordState::new(config);
    let clocks = (Instant::now(), ms(1_700_000_000_000));
    let post = |s: &mut DiscordState, at, task| {
        send(s, clocks, ms(at), "POST", "/channels/11/messages", task)
    };
    assert_eq!(post(&mut s, 0, 1).status, 200);
    assert_eq!(post(&mut s, 0, 2).status, 200);
    // A bucket's 429 is a request too.
    assert_eq!(post(&mut s, 100, 3).status, 429);
    let global = post(&mut s, 300, 4);
    assert_eq!(global.status, 429);
    assert_eq!(global.get("x-ratelimit-global"), Some("true"));
    assert_eq!(global.get("x-ratelimit-scope"), Some("global"));
    assert_eq!(global.get("retry-after"), Some("1"));
    assert_eq!(global.get("x-ratelimit-bucket"), None);
    assert!(
        global.body.contains(r#""retry_after": 0.700"#),
        "{}",
        global.body
    );
    assert!(global.body.contains(r#""global": true"#), "{}", global.body);
    // Inside the wait: counted; after it, a new second.
    assert_eq!(
        send(&mut s, clocks, ms(999), "GET", "/channels/9/messages", 5).status,
        429
    );
    assert_eq!(
        send(&mut s, clocks, ms(1000), "GET", "/channels/9/messages", 5).status,
        200
    );
    assert_eq!(s.count(Kind::Global), 2);
    assert_eq!(s.in_global_wait(), 1);
    let end = clocks.0 + ms(1000);
    assert_eq!(
        s.global_waits,
        [(clocks.0 + ms(300), end), (clocks.0 + ms(999), end)]
    );
}

#[test]
fn a_shared_resource_limit_leaves_the_bucket_and_says_shared() {
    let mut config = Config::new(routes());
    config.shared = Some(Shared {
        major: "11",
        limit: 1,
        window: ms(5000),
    });
    config.reset_after = false;
    config.clock_skew_ms = 2000;
    let mut s = DiscordState::new(config);
    let clocks = (Instant::now(), ms(1_700_000_000_000));
    let ok = send(&mut s, clocks, ms(0), "POST", "/channels/11/messages", 1);
    assert_eq!(ok.status, 200);
    // The server's clock 2 s ahead: its Date and its resets.
    assert_eq!(ok.get("date"), Some("Tue, 14 Nov 2023 22:13:22 GMT"));
    assert_eq!(ok.get("x-ratelimit-reset"), Some("1700000003.250"));
    assert_eq!(ok.get("x-ratelimit-reset-after"), None);
    let shared = send(&mut s, clocks, ms(10), "POST", "/channels/11/messages", 2);
    assert_eq!(
        bucket(&shared),
        (429, Some("1"), Some(MESSAGES), Some("shared"))
    );
    assert_eq!(shared.get("retry-after"), Some("5"));
    assert!(
        shared.body.contains(r#""retry_after": 4.990"#),
        "{}",
        shared.body
    );
    // Not a bucket's 429, and other channels are free.
    assert_eq!(
        send(&mut s, clocks, ms(20), "POST", "/channels/22/messages", 3).status,
        200
    );
    assert_eq!((s.count(Kind::Shared), s.count(Kind::User)), (1, 0));
}

#[test]
fn the_ideal_runs_the_buckets_side_by_side_under_the_global_limit() {
    let w = ms(1250);
    // 5 channels of 40 messages at 5 per 1.25 s: 8 windows each, the last
    // opening at 8.75 s; 10 guild reads beside, 35 a window in all.
    let mut buckets = vec![(5, w, 40); 5];
    buckets.push((5, w, 10));
    assert_eq!(ideal(&buckets, 50), ms(8750));
    // One bucket of 100 per 10 s under 50 a second: 50 at 0, 50 at 1 s,
    // the last 20 when the bucket resets.
    assert_eq!(
        ideal(&[(100, Duration::from_secs(10), 120)], 50),
        ms(10_000)
    );
    assert_eq!(ideal(&[(100, Duration::from_secs(10), 100)], 50), ms(1000));
    // 10 buckets of 5 per 0.5 s allow 100 a second: 410 requests at the
    // global 50 need 9 seconds' windows, the last opening at 8 s.
    let mut buckets = vec![(5, ms(500), 40); 10];
    buckets.extend([(5, ms(500), 5); 2]);
    assert_eq!(ideal(&buckets, 50), ms(8000));
}

fn global_429(at: Instant) -> Heard {
    let mut headers = HeaderMap::new();
    headers.insert("x-ratelimit-global", HeaderValue::from_static("true"));
    Heard::Answered {
        at,
        path: String::new(),
        status: 429,
        headers,
    }
}

fn sent(at: Instant) -> Heard {
    Heard::Sent {
        at,
        method: "POST".into(),
        path: "/channels/1/messages".into(),
    }
}

#[test]
fn a_send_inside_a_global_wait_counts_only_once_the_client_heard_it() {
    let t = Instant::now();
    let mut s = DiscordState::new(Config::new(routes()));
    s.global_waits = vec![(t, t + ms(500))];
    let heard = [
        // Sent before the client heard it: in flight, not counted.
        sent(t + ms(1)),
        global_429(t + ms(2)),
        sent(t + ms(3)),
        sent(t + ms(499)),
        // The wait is over.
        sent(t + ms(500)),
    ];
    assert_eq!(sends_in_global_wait(&heard, &s), 2);
}
