//! The test server's shapes themselves: the sliding-log and GCRA shapes,
//! judged at fixed instants (no clock, no socket): what they admit, what
//! their `429`s say, and the instant each `429` allows; the silent shapes
//! (`silent`: judged at fixed instants; `silent_wire`: over HTTP with a bare
//! reqwest client, every time the server's own); the GitHub-like server
//! (`github`); the vendor servers of many limits per origin, judged at
//! fixed instants (`github_resources`, `discord`, `partitions`), and the
//! vendors of buckets and locks (`anthropic`, `shopify`, `stripe`).

mod anthropic;
mod discord;
mod github;
mod github_resources;
mod partitions;
mod shopify;
mod silent;
mod silent_wire;
mod stripe;

use std::time::{Duration, Instant};

use crate::server::{ServerState, Shape};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Judges one request of task 0 at `t0 + at`; `Ok(())` or the `429`'s
/// (`Retry-After`, the instant it allows, since `t0`).
fn judge(s: &mut ServerState, t0: Instant, at: Duration) -> Result<(), (u64, Duration)> {
    let v = s.judge_verdict(Some(0), t0 + at);
    if v.ok {
        return Ok(());
    }
    let allowed = v.allowed.expect("a 429 names the instant it allows");
    Err((
        v.retry_after.expect("a 429 with Retry-After"),
        allowed.duration_since(t0),
    ))
}

/// The admitted instants of requests every `step` for `span`, from `t0`.
fn admitted(s: &mut ServerState, t0: Instant, step: Duration, span: Duration) -> Vec<Duration> {
    let mut at = Duration::ZERO;
    let mut ok = Vec::new();
    while at < span {
        if judge(s, t0, at).is_ok() {
            ok.push(at);
        }
        at += step;
    }
    ok
}

#[test]
fn sliding_log_names_the_oldest_admission_leaving_the_span() {
    let t0 = Instant::now();
    let mut s = ServerState::starting_at(Shape::SlidingLog, 3, t0);
    for at in [0, 200, 400] {
        assert_eq!(judge(&mut s, t0, ms(at)), Ok(()), "at {at} ms");
    }
    // Full until 1 s, when the admission at 0 leaves (now − 1 s, now].
    assert_eq!(judge(&mut s, t0, ms(500)), Err((1, ms(1000))));
    assert_eq!(judge(&mut s, t0, ms(999)), Err((1, ms(1000))));
    assert_eq!(judge(&mut s, t0, ms(1000)), Ok(()));
    // Now the oldest in the span is the one at 200 ms.
    assert_eq!(judge(&mut s, t0, ms(1000)), Err((1, ms(1200))));
    assert_eq!(judge(&mut s, t0, ms(1200)), Ok(()));
    // Rejected requests are not logged: the span is empty a second after
    // the last admission, and takes a burst of 3 again.
    for _ in 0..3 {
        assert_eq!(judge(&mut s, t0, ms(2200)), Ok(()));
    }
    assert_eq!(judge(&mut s, t0, ms(2300)), Err((1, ms(3200))));
    assert!(judge(&mut s, t0, ms(3199)).is_err());
    // Premature: the sends at 999 ms and 3199 ms, before the instants
    // their last 429s allowed.
    assert_eq!(s.premature, 2);
}

#[test]
fn sliding_log_never_admits_more_than_cap_in_any_second() {
    let t0 = Instant::now();
    let cap = 7;
    let mut s = ServerState::starting_at(Shape::SlidingLog, cap, t0);
    // Requests every 13 ms for 6 s: more than enough to saturate it.
    let ok = admitted(&mut s, t0, ms(13), Duration::from_secs(6));
    for (i, &t) in ok.iter().enumerate() {
        let in_span = ok[..=i]
            .iter()
            .filter(|&&u| t - u < Duration::from_secs(1))
            .count();
        assert!(
            in_span <= cap as usize,
            "{in_span} admitted in the second up to {t:?}"
        );
    }
    // Saturated, it admits a burst of `cap` at the start of each second.
    assert_eq!(ok.len(), 6 * cap as usize);
}

#[test]
fn gcra_admits_cap_at_once_then_one_per_interval() {
    let t0 = Instant::now();
    // Quota::per_second(4): a burst of 4, then one every 250 ms.
    let mut s = ServerState::starting_at(Shape::Gcra, 4, t0);
    for _ in 0..4 {
        assert_eq!(judge(&mut s, t0, ms(0)), Ok(()));
    }
    // tower-governor's Retry-After: the wait, truncated to whole seconds.
    assert_eq!(judge(&mut s, t0, ms(0)), Err((0, ms(250))));
    assert_eq!(judge(&mut s, t0, ms(249)), Err((0, ms(250))));
    assert_eq!(judge(&mut s, t0, ms(250)), Ok(()));
    assert_eq!(judge(&mut s, t0, ms(250)), Err((0, ms(500))));
    assert_eq!(judge(&mut s, t0, ms(500)), Ok(()));
    // Idle for a second: the burst is back, all 4 at once.
    for _ in 0..4 {
        assert_eq!(judge(&mut s, t0, ms(1500)), Ok(()));
    }
    assert_eq!(judge(&mut s, t0, ms(1500)), Err((0, ms(1750))));
    // One send before the instant its last 429 allowed: at 249 ms.
    assert_eq!(s.premature, 1);
}

#[test]
fn gcra_saturated_admits_one_per_interval_and_names_zero_seconds() {
    let t0 = Instant::now();
    let cap = 10;
    let mut s = ServerState::starting_at(Shape::Gcra, cap, t0);
    let mut ok = Vec::new();
    for i in 0..3000 {
        let at = ms(i);
        match judge(&mut s, t0, at) {
            Ok(()) => ok.push(at),
            // Any wait is under 1/cap s: Retry-After is always 0.
            Err((ra, allowed)) => {
                assert_eq!(ra, 0, "at {at:?}");
                assert!(
                    allowed > at && allowed - at <= ms(100),
                    "at {at:?}: {allowed:?}"
                );
            }
        }
    }
    // One request a millisecond: the burst takes the first `cap` of them,
    // then one is admitted every 100 ms.
    let burst: Vec<Duration> = (0..u64::from(cap)).map(ms).collect();
    assert_eq!(ok[..cap as usize], burst[..]);
    let expected: Vec<Duration> = (1..=29).map(|k| ms(100 * k)).collect();
    assert_eq!(ok[cap as usize..], expected[..]);
}
