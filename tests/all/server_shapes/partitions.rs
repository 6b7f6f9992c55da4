//! The IETF partitions server, judged at fixed instants (no socket, no
//! sleep): two partitions of one origin under one policy name, told apart
//! by `pk`, each its own quota and window.

use std::time::{Duration, Instant};

use crate::server::partitions::{Config, Partition, PartitionsState, ideal};
use crate::server::wire::{Judge, Reply, Seen};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const A: Partition = Partition {
    prefix: "/a",
    key: "dGVuYW50LWE=",
    quota: 2,
    window_secs: 2,
};
const B: Partition = Partition {
    prefix: "/b",
    key: "dGVuYW50LWI=",
    quota: 1,
    window_secs: 1,
};

fn get(s: &mut PartitionsState, t0: Instant, at: u64, path: &str, task: u32) -> Reply {
    let seen = Seen {
        method: "GET",
        path,
        task: Some(task),
        headers: &[],
    };
    s.judge(&seen, t0 + ms(at), Duration::ZERO)
}

fn fields(r: &Reply) -> (u16, Option<&str>, Option<&str>, Option<&str>) {
    (
        r.status,
        r.get("ratelimit"),
        r.get("ratelimit-policy"),
        r.get("retry-after"),
    )
}

#[test]
fn two_partitions_of_one_origin_each_state_their_own_quota() {
    let mut s = PartitionsState::new(Config {
        partitions: vec![A, B],
        policy: "peruser",
        retry_after: true,
    });
    let t0 = Instant::now();
    let a_policy = Some(r#""peruser";q=2;w=2;pk=:dGVuYW50LWE=:"#);
    assert_eq!(
        fields(&get(&mut s, t0, 0, "/a/items/1", 1)),
        (
            200,
            Some(r#""peruser";r=1;t=2;pk=:dGVuYW50LWE=:"#),
            a_policy,
            None
        )
    );
    assert_eq!(
        fields(&get(&mut s, t0, 300, "/a", 2)),
        (
            200,
            Some(r#""peruser";r=0;t=2;pk=:dGVuYW50LWE=:"#),
            a_policy,
            None
        )
    );
    let over = get(&mut s, t0, 1200, "/a/items/3", 3);
    assert_eq!(
        fields(&over),
        (
            429,
            Some(r#""peruser";r=0;t=1;pk=:dGVuYW50LWE=:"#),
            a_policy,
            Some("1")
        )
    );
    assert!(over.body.contains("quota-exceeded"), "{}", over.body);
    // B's quota is its own, under the same policy name.
    assert_eq!(
        fields(&get(&mut s, t0, 1200, "/b/items/1", 4)),
        (
            200,
            Some(r#""peruser";r=0;t=1;pk=:dGVuYW50LWI=:"#),
            Some(r#""peruser";q=1;w=1;pk=:dGVuYW50LWI=:"#),
            None
        )
    );
    // Neither partition: no fields.
    assert_eq!(
        fields(&get(&mut s, t0, 1200, "/ab/1", 5)),
        (404, None, None, None)
    );
    // A's next window opens at its reset (2 s), not before.
    assert_eq!(get(&mut s, t0, 1999, "/a/items/3", 3).status, 429);
    assert_eq!(get(&mut s, t0, 2000, "/a/items/3", 3).status, 200);
    assert_eq!(
        (s.count(0, 200), s.count(0, 429), s.count(1, 200)),
        (3, 2, 1)
    );
    assert_eq!(s.premature(), 1);
    assert_eq!(s.finished(0), Some(ms(2000)));
}

#[test]
fn a_429_without_retry_after_still_states_the_window() {
    let mut s = PartitionsState::new(Config {
        partitions: vec![B],
        policy: "peruser",
        retry_after: false,
    });
    let t0 = Instant::now();
    assert_eq!(get(&mut s, t0, 0, "/b/1", 1).status, 200);
    let over = get(&mut s, t0, 10, "/b/1", 2);
    assert_eq!(
        fields(&over),
        (
            429,
            Some(r#""peruser";r=0;t=1;pk=:dGVuYW50LWI=:"#),
            Some(r#""peruser";q=1;w=1;pk=:dGVuYW50LWI=:"#),
            None
        )
    );
}

#[test]
fn the_ideal_opens_a_partitions_windows_back_to_back() {
    let a = Partition { quota: 10, ..A };
    assert_eq!(ideal(&a, 10), Duration::ZERO);
    assert_eq!(ideal(&a, 11), Duration::from_secs(2));
    assert_eq!(ideal(&a, 50), Duration::from_secs(8));
}
