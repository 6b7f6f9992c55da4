//! The GitHub server with several resources, judged at fixed instants (no
//! socket, no sleep): each resource its own quota and reset, the secondary
//! limit by points spending no quota, the `502`s and plain `403`s, the
//! ideal completion, and what a client's tap says it knew.

use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue};

use crate::server::github::Answer;
use crate::server::github_resources::{
    Config, Resource, ResourcesState, Secondary, ideal, resource_of, sends_into_spent,
};
use crate::server::tap::Heard;
use crate::server::wire::{Judge, Reply, Seen, wall_now};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `GET path` of task `task`, `at` after (`t0`, `w0`).
fn get(
    s: &mut ResourcesState,
    (t0, w0): (Instant, Duration),
    at: Duration,
    path: &str,
    task: u32,
) -> Reply {
    let seen = Seen {
        method: "GET",
        path,
        task: Some(task),
        headers: &[],
    };
    s.judge(&seen, t0 + at, w0 + at)
}

fn fields(r: &Reply) -> (u16, &str, &str, &str) {
    let f = |n| r.get(n).unwrap_or("-");
    (
        r.status,
        f("x-ratelimit-resource"),
        f("x-ratelimit-remaining"),
        f("x-ratelimit-used"),
    )
}

#[test]
fn each_resource_is_a_quota_of_its_own_with_its_own_reset() {
    let mut s = ResourcesState::new(Config::new(vec![
        Resource {
            name: "core",
            quota: 3,
            window: secs(60),
        },
        Resource {
            name: "search",
            quota: 2,
            window: secs(10),
        },
    ]));
    // A whole epoch second plus 0.4 s: the resets are whole seconds after.
    let clocks = (Instant::now(), Duration::from_millis(1_700_000_000_400));
    assert_eq!(resource_of("/search/code"), "code_search");
    assert_eq!(resource_of("/search/issues"), "search");
    assert_eq!(resource_of("/graphql"), "graphql");
    assert_eq!(resource_of("/repos/o/r"), "core");
    let a = get(&mut s, clocks, ms(0), "/search/issues", 1);
    assert_eq!(fields(&a), (200, "search", "1", "1"));
    assert_eq!(a.get("x-ratelimit-limit"), Some("2"));
    assert_eq!(a.get("x-ratelimit-reset"), Some("1700000011"));
    // The quota's last unit: a 200 saying remaining 0.
    assert_eq!(
        fields(&get(&mut s, clocks, ms(1), "/search/issues", 2)),
        (200, "search", "0", "2")
    );
    let over = get(&mut s, clocks, ms(2), "/search/issues", 3);
    assert_eq!(fields(&over), (403, "search", "0", "2"));
    assert_eq!(over.get("retry-after"), None);
    // Core is untouched by search's spent quota, and resets on its own.
    let core = get(&mut s, clocks, ms(3), "/repos/o/r", 4);
    assert_eq!(fields(&core), (200, "core", "2", "1"));
    assert_eq!(core.get("x-ratelimit-reset"), Some("1700000061"));
    // A resource it does not serve.
    assert_eq!(get(&mut s, clocks, ms(4), "/graphql", 5).status, 404);
    // Search's next window opens at its reset, not before.
    assert_eq!(
        get(&mut s, clocks, ms(10_599), "/search/issues", 3).status,
        403
    );
    let next = get(&mut s, clocks, ms(10_600), "/search/issues", 3);
    assert_eq!(fields(&next), (200, "search", "1", "1"));
    assert_eq!(next.get("x-ratelimit-reset"), Some("1700000021"));
    assert_eq!(s.count("search", Answer::Primary), 2);
    // Task 3's send at 10.599 s came before the reset it was told.
    assert_eq!(s.premature(), 1);
    assert_eq!(s.first_window("search"), Some(ms(10_600)));
}

#[test]
fn the_secondary_limit_counts_points_of_every_arrival_and_spends_no_quota() {
    let mut config = Config::new(vec![Resource {
        name: "core",
        quota: 100,
        window: secs(60),
    }]);
    config.secondary = Some(Secondary {
        points: 3,
        span: secs(1),
        retry_after: 3,
    });
    config.statuses = vec![403, 429];
    let mut s = ResourcesState::new(config);
    let clocks = (Instant::now(), secs(1_700_000_000));
    for task in 0..3 {
        assert_eq!(get(&mut s, clocks, ms(0), "/repos/o/r", task).status, 200);
    }
    let a = get(&mut s, clocks, ms(10), "/repos/o/r", 3);
    assert_eq!((a.status, a.get("retry-after")), (403, Some("3")));
    // Quota left, none spent by it.
    assert_eq!(fields(&a), (403, "core", "97", "3"));
    // The rejected arrival counts too: 5 points in the span at 0.5 s.
    let b = get(&mut s, clocks, ms(500), "/repos/o/r", 4);
    assert_eq!((b.status, b.get("retry-after")), (429, Some("3")));
    // At 1 s the three at 0 leave the span: 10 ms, 500 ms, and this one.
    assert_eq!(get(&mut s, clocks, ms(1000), "/repos/o/r", 5).status, 200);
    assert_eq!(get(&mut s, clocks, ms(1000), "/repos/o/r", 6).status, 403);
    // Task 3 came back 2 s after its retry-after: 3; task 4 after 3.5 s.
    assert_eq!(get(&mut s, clocks, ms(2010), "/repos/o/r", 3).status, 200);
    assert_eq!(get(&mut s, clocks, ms(4000), "/repos/o/r", 4).status, 200);
    // A POST is 5 points: over a limit of 3 on its own.
    let post = Seen {
        method: "POST",
        path: "/repos/o/r/issues",
        task: Some(7),
        headers: &[],
    };
    assert_eq!(
        s.judge(&post, clocks.0 + secs(5), clocks.1 + secs(5))
            .status,
        429
    );
    assert_eq!(s.premature(), 1);
    assert_eq!((s.limited_with(403), s.limited_with(429)), (2, 2));
    assert_eq!(s.secondary(), 4);
    assert_eq!(s.count("core", Answer::Ok), 6);
}

#[test]
fn bad_gateways_count_toward_nothing_and_refused_repositories_toward_both() {
    let mut config = Config::new(vec![Resource {
        name: "core",
        quota: 3,
        window: secs(60),
    }]);
    config.bad_gateway_every = 3;
    config.refused = vec!["/repos/o/r1".into()];
    let mut s = ResourcesState::new(config);
    let clocks = (Instant::now(), secs(1_700_000_000));
    assert_eq!(
        fields(&get(&mut s, clocks, ms(0), "/repos/o/r1/issues", 1)),
        (403, "core", "2", "1")
    );
    assert_eq!(
        fields(&get(&mut s, clocks, ms(1), "/repos/o/r10", 2)),
        (200, "core", "1", "2")
    );
    let gateway = get(&mut s, clocks, ms(2), "/repos/o/r2", 3);
    assert_eq!(
        (gateway.status, gateway.get("x-ratelimit-remaining")),
        (502, None)
    );
    assert_eq!(
        fields(&get(&mut s, clocks, ms(3), "/repos/o/r2", 3)),
        (200, "core", "0", "3")
    );
    assert_eq!(s.bad_gateways(), 1);
    assert_eq!(s.count("core", Answer::Refused), 1);
    assert_eq!(s.finished("core"), Some(ms(3)));
}

#[test]
fn the_ideal_sends_each_request_when_both_limits_first_admit_it() {
    let r = Resource {
        name: "core",
        quota: 4,
        window: secs(2),
    };
    // Windows open at 0 (1.5 s long), 1.5 s, 4.5 s, … (each later one a
    // second longer than 2 s: the server's reset is the whole second after).
    assert_eq!(ideal(&r, None, ms(1500), 4), Duration::ZERO);
    assert_eq!(ideal(&r, None, ms(1500), 8), ms(1500));
    assert_eq!(ideal(&r, None, ms(1500), 9), ms(4500));
    // At most 3 in any second: 3 at 0 and 1 at 1 s; then 2 at 1.5 s
    // (the one at 1 s is still in the span), 1 at 2 s, 1 at 2.5 s.
    let sec = Secondary {
        points: 3,
        span: secs(1),
        retry_after: 3,
    };
    assert_eq!(ideal(&r, Some(&sec), ms(1500), 4), secs(1));
    assert_eq!(ideal(&r, Some(&sec), ms(1500), 8), ms(2500));
}

fn answered(at: Instant, resource: &str, remaining: u32, reset: u64) -> Heard {
    let mut headers = HeaderMap::new();
    let mut put = |n: &'static str, v: String| {
        headers.insert(n, HeaderValue::from_str(&v).expect("a header value"));
    };
    put("x-ratelimit-resource", resource.to_owned());
    put("x-ratelimit-remaining", remaining.to_string());
    put("x-ratelimit-reset", reset.to_string());
    Heard::Answered {
        at,
        path: String::new(),
        status: 200,
        headers,
    }
}

fn sent(at: Instant, path: &str) -> Heard {
    Heard::Sent {
        at,
        method: "GET".into(),
        path: path.into(),
    }
}

#[test]
fn a_send_into_a_spent_resource_counts_only_once_the_client_heard_it() {
    let t = Instant::now();
    let reset = wall_now().as_secs() + 100;
    let heard = [
        // In flight before the answer: not known.
        sent(t, "/search/issues"),
        answered(t + ms(1), "search", 0, reset),
        // Another resource: free.
        sent(t + ms(2), "/repos/o/r"),
        // Known spent: counted, twice.
        sent(t + ms(3), "/search/issues"),
        sent(t + ms(4), "/search/users"),
        // A later window with quota: search is free again.
        answered(t + ms(5), "search", 9, reset + 60),
        sent(t + ms(6), "/search/issues"),
    ];
    assert_eq!(sends_into_spent(&heard), 2);
    // A reset already past: nothing is spent.
    let past = wall_now().as_secs() - 1;
    let heard = [answered(t, "core", 0, past), sent(t + ms(1), "/repos/o/r")];
    assert_eq!(sends_into_spent(&heard), 0);
}
