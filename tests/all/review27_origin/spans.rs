//! Item 7: every value a `Quota` constructor accepts works, or the policy
//! is refused with `InvalidPolicy::Quota`; none panics. (Before the fix
//! `Quota::new(1, Duration::MAX)` passed validation and the first GET
//! panicked on a `Duration` overflow, the server seeing nothing.)

use std::time::Duration;

use reqwest_backpressure::{Cost, InvalidPolicy, Policy, Quota, RetryAfterMiddleware};

use crate::common::our_code;
use crate::offline::{URL, offline};

/// Every shape of a quota of `count` per `per`.
fn shapes(count: u32, per: Duration) -> [Quota; 4] {
    let q = Quota::new(count, per);
    [q, q.refilled(), q.units(), q.refilled().units()]
}

/// The extremes of every public constructor, in every shape.
fn extremes() -> Vec<Quota> {
    let spans = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
        Duration::from_millis(1),
        Duration::from_secs(1),
        Quota::LONGEST_SPAN,
        Quota::LONGEST_SPAN + Duration::from_nanos(1),
        Duration::from_secs(u64::MAX),
        Duration::MAX,
    ];
    let mut all = Vec::new();
    for count in [0, 1, 2, u32::MAX] {
        for per in spans {
            all.extend(shapes(count, per));
        }
        for q in [
            Quota::per_second(count),
            Quota::per_minute(count),
            Quota::per_hour(count),
        ] {
            all.extend(shapes(q.count(), q.per()));
        }
    }
    all
}

#[test]
fn a_quota_is_valid_exactly_within_its_documented_bounds() {
    for q in extremes() {
        let valid =
            q.count() >= 1 && q.per() >= Duration::from_millis(1) && q.per() <= Quota::LONGEST_SPAN;
        let policy = Policy::default().quota("http://a.test", q);
        match RetryAfterMiddleware::try_new(policy) {
            Ok(_) => assert!(valid, "accepted {q:?}"),
            Err(InvalidPolicy::Quota(_)) => assert!(!valid, "refused {q:?}"),
            Err(e) => panic!("{q:?}: {e}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn every_accepted_quota_serves_requests_without_a_panic() {
    let origin = URL.trim_end_matches('/');
    for q in extremes() {
        let policy = Policy::default().quota(origin, q);
        if policy.validate().is_err() {
            continue;
        }
        let (client, arrivals) = offline(RetryAfterMiddleware::new(policy), |_| 200);
        let calls = (0..3).map(|_| client.get(URL).with_extension(Cost::new(1)).send());
        let mut sent = 0;
        for r in futures_util::future::join_all(calls).await {
            match r {
                Ok(r) => {
                    assert_eq!(r.status(), 200, "{q:?}");
                    sent += 1;
                }
                // A slot beyond the deadline: refused, never sent.
                Err(e) => assert_eq!(our_code(&e), Some("origin_gate_closed"), "{q:?}"),
            }
        }
        // The first always goes; the server saw every request sent.
        assert!(sent >= 1, "{q:?}");
        assert_eq!(arrivals.len(), sent, "{q:?}");
    }
}
