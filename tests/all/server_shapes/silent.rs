//! The silent shapes judged at fixed instants (no clock, no socket): nginx's
//! leaky bucket, HAProxy's counting rate and the outage admit what their
//! originals would, and their rejections say nothing but a status.

use std::time::{Duration, Instant};

use crate::server::{Denial, ServerState, Shape};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Judges one request of task 0 at `t0 + at`: `Ok(())`, or the bare
/// rejection's status (checked to name no time and no rate-limit field).
fn judge(s: &mut ServerState, t0: Instant, at: Duration) -> Result<(), u16> {
    let v = s.judge_verdict(Some(0), t0 + at);
    if v.ok {
        assert_eq!(v.status, 200);
        return Ok(());
    }
    assert_eq!(v.retry_after, None, "a silent rejection at {at:?}");
    assert_eq!(v.ratelimit, None, "a silent rejection at {at:?}");
    assert_eq!(v.allowed, None, "a silent rejection at {at:?}");
    Err(v.status)
}

/// How many of `n` requests at `t0 + at` are admitted.
fn burst(s: &mut ServerState, t0: Instant, at: Duration, n: u32) -> u32 {
    (0..n).map(|_| u32::from(judge(s, t0, at).is_ok())).sum()
}

#[test]
fn leaky_bucket_admits_cap_plus_one_at_once_then_cap_a_second() {
    for (denial, status) in [(Denial::TooManyRequests, 429), (Denial::Unavailable, 503)] {
        let t0 = Instant::now();
        // rate=4r/s burst=4 nodelay: levels 0, 1000, …, 4000 are admitted.
        let mut s = ServerState::starting_at(Shape::Leaky(denial), 4, t0);
        assert_eq!(burst(&mut s, t0, ms(0), 5), 5);
        assert_eq!(judge(&mut s, t0, ms(0)), Err(status));
        // 4000 leaks 4 a ms: 1000 after 250 ms, not before.
        assert_eq!(judge(&mut s, t0, ms(249)), Err(status));
        assert_eq!(judge(&mut s, t0, ms(250)), Ok(()));
        assert_eq!(judge(&mut s, t0, ms(250)), Err(status));
        assert_eq!(judge(&mut s, t0, ms(500)), Ok(()));
        // Rejections change nothing; 1250 ms at rest leak 4000 + 1000:
        // the burst is back, 5 at once.
        assert_eq!(burst(&mut s, t0, ms(1750), 6), 5);
        // Nothing is premature: no rejection named a time. The rejections
        // of a task's later sends are counted instead.
        assert_eq!(s.premature, 0);
        assert_eq!(s.rejected, 4);
        assert_eq!(s.rejected_retries, 4);
    }
}

#[test]
fn leaky_bucket_saturated_admits_one_per_interval() {
    let t0 = Instant::now();
    let cap = 10;
    let mut s = ServerState::starting_at(Shape::Leaky(Denial::TooManyRequests), cap, t0);
    // Twenty requests every millisecond for 3 s.
    let mut ok = Vec::new();
    for t in 0..3000 {
        for _ in 0..20 {
            if judge(&mut s, t0, ms(t)).is_ok() {
                ok.push(t);
            }
        }
    }
    // The burst, 11, in the first millisecond; then one every 100 ms.
    assert_eq!(ok[..11], [0; 11]);
    let expected: Vec<u64> = (1..30).map(|k| 100 * k).collect();
    assert_eq!(ok[11..], expected[..]);
}

#[test]
fn counting_rate_counts_the_requests_it_denies() {
    let t0 = Instant::now();
    let shape = Shape::Counting(Denial::TooManyRequests);
    // A client that waits: 3 at 0, then one at 1.5 s, when the first
    // period's 3 weigh half: ⌊(1·1000 + 3·500) / 1000⌋ = 2 ≤ 3.
    let mut quiet = ServerState::starting_at(shape, 3, t0);
    assert_eq!(burst(&mut quiet, t0, ms(0), 3), 3);
    assert_eq!(judge(&mut quiet, t0, ms(1500)), Ok(()));
    // A client that knocks 5 more times in the first period: they count,
    // ⌊(1·1000 + 8·500) / 1000⌋ = 5 > 3, so it is still denied at 1.5 s.
    let mut knocking = ServerState::starting_at(shape, 3, t0);
    assert_eq!(burst(&mut knocking, t0, ms(0), 3), 3);
    for t in [100, 200, 300, 400, 500] {
        assert_eq!(judge(&mut knocking, t0, ms(t)), Err(429));
    }
    assert_eq!(judge(&mut knocking, t0, ms(1500)), Err(429));
    // Knocking 10 times a second keeps it denied for ever ...
    for t in (1600..6000).step_by(100) {
        assert_eq!(judge(&mut knocking, t0, ms(t)), Err(429), "at {t} ms");
    }
    // ... and two quiet periods forget it all: 3 at once again.
    assert_eq!(burst(&mut knocking, t0, ms(8000), 4), 3);
    assert_eq!(knocking.premature, 0);
}

#[test]
fn counting_rate_in_its_own_integer_arithmetic() {
    let t0 = Instant::now();
    let mut s = ServerState::starting_at(Shape::Counting(Denial::Unavailable), 4, t0);
    assert_eq!(burst(&mut s, t0, ms(0), 4), 4);
    // At 1000 ms the new period starts, the old one weighs 1000/1000:
    // ⌊(1000 + 4000) / 1000⌋ = 5 > 4, denied (and counted: curr = 1).
    assert_eq!(judge(&mut s, t0, ms(1000)), Err(503));
    // At 1001: ⌊(2000 + 4·999) / 1000⌋ = 5, denied again (curr = 2).
    assert_eq!(judge(&mut s, t0, ms(1001)), Err(503));
    // At 1600: ⌊(3000 + 4·400) / 1000⌋ = 4 ≤ 4, admitted.
    assert_eq!(judge(&mut s, t0, ms(1600)), Ok(()));
}

/// The ideal schedule the storm bench names for the counting shape: `CAP`
/// at 0, then in each later period (after a full one) the `k`-th request
/// at `⌊(k − 1)·1000 / CAP⌋ + 1` ms into it.
fn counting_ideal(cap: u64, n: u64) -> Vec<u64> {
    (0..n)
        .map(|i| {
            if i < cap {
                return 0;
            }
            let (period, k) = (i / cap, i % cap + 1);
            period * 1000 + (k - 1) * 1000 / cap + 1
        })
        .collect()
}

#[test]
fn counting_rate_admits_the_ideal_schedule_and_nothing_earlier() {
    let (cap, n) = (50u32, 300u64);
    let schedule = counting_ideal(u64::from(cap), n);
    assert_eq!(schedule.last(), Some(&5981));
    let shape = Shape::Counting(Denial::TooManyRequests);
    let t0 = Instant::now();
    let mut s = ServerState::starting_at(shape, cap, t0);
    for (i, &t) in schedule.iter().enumerate() {
        assert_eq!(judge(&mut s, t0, ms(t)), Ok(()), "request {i} at {t} ms");
    }
    // Each request of a later period, one millisecond earlier, is denied
    // (replayed on a fresh server up to it).
    for i in [50usize, 51, 75, 99, 150, 299] {
        let mut s = ServerState::starting_at(shape, cap, t0);
        for &t in &schedule[..i] {
            assert_eq!(judge(&mut s, t0, ms(t)), Ok(()));
        }
        let early = schedule[i] - 1;
        assert!(
            judge(&mut s, t0, ms(early)).is_err(),
            "request {i} at {early} ms"
        );
    }
}

#[test]
fn outage_answers_503_to_everything_then_a_leaky_bucket_at_rest() {
    let t0 = Instant::now();
    let shape = Shape::Outage { down: ms(2000) };
    let mut s = ServerState::starting_at(shape, 3, t0);
    for t in (0..2000).step_by(50) {
        assert_eq!(judge(&mut s, t0, ms(t)), Err(503), "at {t} ms");
    }
    assert_eq!(judge(&mut s, t0, ms(1999)), Err(503));
    // Up: the bucket of 3 at rest, 3 + 1 at once, then 3 a second, its
    // rejections bare 503s too.
    assert_eq!(burst(&mut s, t0, ms(2000), 5), 4);
    assert_eq!(judge(&mut s, t0, ms(2332)), Err(503));
    assert_eq!(judge(&mut s, t0, ms(2334)), Ok(()));
    assert_eq!(s.premature, 0);
}
