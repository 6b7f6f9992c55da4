//! A stated bucket of tokens (Anthropic's), with fixed times: capacity
//! comes back progressively, a declared cost is reconciled from the
//! answers, a rounded count is read as its lower bound.

use super::*;
use crate::Cost;

/// A success whose token bucket of `limit` (input tokens only, counts
/// rounded within `slack`) has `remaining` left and is full in `full_in`;
/// the answered request declared `spent` of it.
fn bucket(remaining: u64, full_in: Duration, limit: u64, slack: u64, spent: u64) -> Outcome {
    Outcome::Quota {
        remaining: 1_000,
        reset_in: LONG,
        limit: None,
        window: None,
        sent_ago: Duration::ZERO,
        tokens: Some(Statement {
            remaining,
            reset_in: full_in,
            limit: Some(limit),
            bucket: true,
            slack,
            input_only: true,
            spent,
            output: None,
        }),
    }
}

/// A success whose input bucket has plenty left and whose bucket of
/// output tokens (8,000 a minute, exact counts) has `remaining`, full in
/// `full_in`; the answered request declared `spent` of it.
fn output(remaining: u64, full_in: Duration, spent: u64) -> Outcome {
    let Outcome::Quota {
        tokens: Some(st), ..
    } = bucket(60_000, ms(0), 60_000, 0, 0)
    else {
        unreachable!()
    };
    Outcome::Quota {
        remaining: 1_000,
        reset_in: LONG,
        limit: None,
        window: None,
        sent_ago: Duration::ZERO,
        tokens: Some(Statement {
            output: Some(OutputStatement {
                remaining,
                reset_in: full_in,
                limit: 8_000,
                slack: 0,
                spent,
            }),
            ..st
        }),
    }
}

fn ask(o: &mut OriginState, now: Duration, cost: Cost) -> Admission {
    o.admit_cost(ON, now, Within::both(LONG), cost)
}

fn goes(a: Admission) -> bool {
    matches!(a, Admission::Now | Admission::Reopened)
}

#[test]
fn an_empty_bucket_gives_back_a_message_s_tokens_in_its_share_of_the_refill() {
    let mut o = OriginState::new(ms(0));
    // 60,000 a minute, empty: full in 60 s, 1,000 tokens a second.
    o.observe(ON, ms(0), bucket(0, LONG, 60_000, 0, 0));
    let message = Cost::tokens(1_000, 4_096);
    // Its input part only: 1 s of refill, not the 60 s of the reset.
    assert_eq!(ask(&mut o, ms(0), message), Admission::QuotaHeld(ms(1000)));
    assert!(goes(ask(&mut o, ms(1000), message)));
    // The next waits for its own share again.
    assert_eq!(
        ask(&mut o, ms(1000), message),
        Admission::QuotaHeld(ms(1000))
    );
    // Half a minute later, half the bucket is back: 30 messages, not 60.
    let now = ms(31_000);
    let sent = (0..60).filter(|_| goes(ask(&mut o, now, message))).count();
    assert_eq!(sent, 30);
}

#[test]
fn a_rounded_count_is_read_as_its_lower_bound() {
    let mut o = OriginState::new(ms(0));
    // "1,000 left" rounded to the thousand: 500 at least.
    o.observe(ON, ms(0), bucket(1_000, ms(59_000), 60_000, 500, 0));
    assert!(goes(ask(&mut o, ms(0), Cost::tokens(500, 0))));
    assert!(!goes(ask(&mut o, ms(0), Cost::tokens(100, 0))));
}

#[test]
fn declared_costs_are_reconciled_from_the_answers() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), bucket(10_000, ms(50_000), 60_000, 0, 0));
    // Three messages of 2,000 leave: 4,000 left, as far as we know.
    for _ in 0..3 {
        assert!(goes(ask(&mut o, ms(0), Cost::tokens(2_000, 256))));
    }
    assert!(!goes(ask(&mut o, ms(0), Cost::tokens(5_000, 256))));
    // The first one's answer: the server counted it alone (8,000 left);
    // the other two are still ours to count: 4,000.
    o.observe(ON, ms(0), bucket(8_000, ms(52_000), 60_000, 0, 2_000));
    assert!(goes(ask(&mut o, ms(0), Cost::tokens(4_000, 256))));
    assert!(!goes(ask(&mut o, ms(0), Cost::tokens(1, 0))));
    // The others' answers: the server counted less than declared (1,000
    // each): what it states is what is left, less the 4,000 unanswered.
    o.observe(ON, ms(0), bucket(7_000, ms(53_000), 60_000, 0, 2_000));
    o.observe(ON, ms(0), bucket(6_000, ms(54_000), 60_000, 0, 2_000));
    assert!(goes(ask(&mut o, ms(0), Cost::tokens(2_000, 0))));
    assert!(!goes(ask(&mut o, ms(0), Cost::tokens(1, 0))));
}

#[test]
fn the_refill_rate_is_never_read_faster_than_the_answers_allow() {
    let mut o = OriginState::new(ms(0));
    // 30,000 of 60,000 left (within 500), full in 30 s: the bucket fills
    // from empty in 30 × 60,000 / 29,500 s at most, 61.02 s.
    o.observe(ON, ms(0), bucket(30_000, ms(30_000), 60_000, 500, 0));
    assert!(goes(ask(&mut o, ms(0), Cost::tokens(29_500, 0))));
    // Empty now: 1,000 tokens take 1.017 s at that rate, never less.
    match ask(&mut o, ms(0), Cost::tokens(1_000, 0)) {
        Admission::QuotaHeld(wait) => {
            assert!(wait >= ms(1_000) && wait <= ms(1_020), "{wait:?}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn max_tokens_are_reserved_from_the_output_bucket_and_given_back_by_the_answer() {
    let mut o = OriginState::new(ms(0));
    // 8,000 output tokens a minute: 2,000 left, full in 45 s.
    o.observe(ON, ms(0), output(2_000, ms(45_000), 0));
    let message = Cost::tokens(100, 1_000);
    assert!(goes(ask(&mut o, ms(0), message)));
    assert!(goes(ask(&mut o, ms(0), message)));
    // Both reserved their `max_tokens`: the next waits for 1,000 to
    // refill, 7.5 s at 8,000 a minute.
    assert_eq!(ask(&mut o, ms(0), message), Admission::QuotaHeld(ms(7_500)));
    // They produced 200 each: the answers' counts give the rest back.
    o.observe(ON, ms(0), output(1_800, ms(46_500), 1_000));
    o.observe(ON, ms(0), output(1_600, ms(48_000), 1_000));
    assert!(goes(ask(&mut o, ms(0), message)));
}

#[test]
fn hostile_bucket_statements_neither_panic_nor_open_the_origin_early() {
    let huge = [0, 1, 999, u64::MAX / 2, u64::MAX];
    let times = [
        ms(0),
        ms(1),
        LONG,
        Duration::from_secs(u64::MAX / 4),
        Duration::MAX,
    ];
    for &remaining in &huge {
        for &limit in &huge[1..] {
            for &full_in in &times {
                for &slack in &[0, 500, u64::MAX] {
                    let mut o = OriginState::new(ms(0));
                    o.observe(ON, ms(5), bucket(remaining, full_in, limit, slack, 7));
                    for now in [ms(5), ms(6), LONG, Duration::MAX] {
                        let _ = ask(&mut o, now, Cost::tokens(remaining, u64::MAX));
                        let _ = ask(&mut o, now, Cost::tokens(1, 1));
                    }
                    o.observe(
                        ON,
                        ms(7),
                        bucket(remaining, full_in, limit, slack, u64::MAX),
                    );
                    assert_eq!(OriginState::decode(&o.encode()), Some(o));
                }
            }
        }
    }
    // A count above the limit is read as the limit.
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), bucket(90_000, ms(30_000), 60_000, 0, 0));
    o.observe(ON, ms(0), bucket(30_000, ms(30_000), 60_000, 0, 0));
    assert!(goes(ask(&mut o, ms(0), Cost::tokens(30_000, 0))));
    assert!(!goes(ask(&mut o, ms(0), Cost::tokens(1_000, 0))));
}
