//! Cost quotas with fixed times: declared costs spent from stated tokens,
//! given back, the mean cost learned, rejections the tokens explain.

use super::known::{FIRST, admitted_now};
use super::*;
use crate::Quota as Declared;

/// A success stating `tokens` left of `limit` tokens, reset in 1 s (and a
/// request quota with plenty left).
fn with_tokens(tokens: u64, limit: u64, sent_ago: Duration) -> Outcome {
    Outcome::Quota {
        remaining: 1000,
        reset_in: ms(1000),
        limit: None,
        window: None,
        sent_ago,
        tokens: Some(Statement {
            remaining: tokens,
            reset_in: ms(1000),
            limit: Some(limit),
            ..Statement::default()
        }),
    }
}

#[test]
fn a_declared_cost_spends_the_stated_tokens_then_holds_until_they_renew() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), with_tokens(100, 100, ms(0)));
    assert_eq!(o.admit_costing(ON, ms(10), LONG, 40), Admission::Now);
    assert_eq!(o.admit_costing(ON, ms(10), LONG, 40), Admission::Now);
    // 20 left: a request of 40 waits for the renewal, one of 20 does not.
    assert_eq!(
        o.admit_costing(ON, ms(10), LONG, 40),
        Admission::QuotaHeld(ms(990))
    );
    assert_eq!(o.admit_costing(ON, ms(10), LONG, 20), Admission::Now);
    assert_eq!(o.admit_costing(ON, ms(1000), LONG, 40), Admission::Now);
    // A request costlier than a whole window goes when it is whole.
    let mut o2 = OriginState::new(ms(0));
    o2.observe(ON, ms(0), with_tokens(100, 100, ms(0)));
    assert_eq!(o2.admit_costing(ON, ms(10), LONG, 500), Admission::Now);
    assert_eq!(OriginState::decode(&o2.encode()), Some(o2));
}

#[test]
fn a_request_not_sent_gives_its_cost_back() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), with_tokens(100, 100, ms(0)));
    assert_eq!(o.admit_costing(ON, ms(10), LONG, 70), Admission::Now);
    assert_eq!(
        o.admit_costing(ON, ms(20), LONG, 60),
        Admission::QuotaHeld(ms(980))
    );
    // A task that reserved 30 with a paced slot is dropped: they come back.
    let reservation = Reservation {
        slot: ms(500),
        quota: false,
        cost: 30,
        output: 0,
        queue: o.pace.queue,
    };
    o.release(ms(30), reservation);
    assert_eq!(o.admit_costing(ON, ms(30), LONG, 60), Admission::Now);
}

#[test]
fn without_a_declared_cost_the_mean_learned_from_the_remaining_stands_in() {
    let mut o = OriginState::new(ms(0));
    // Three answers of one window: 1000, 920, 840 left: 80 a request.
    for (i, left) in [1000, 920, 840].into_iter().enumerate() {
        o.observe(ON, ms(10 * i as u64), with_tokens(left, 1000, ms(1)));
    }
    // 840 pay for ten at 80, but a mean learned from two costs may be
    // far off: six leave at once, the next asks again once answers are
    // back (see `guessed.rs`).
    assert_eq!(admitted_costing(&mut o, ms(30), 20), 6);
    assert_eq!(
        o.admit_costing(ON, ms(30), LONG, 0),
        Admission::QueueAhead(ms(30))
    );
}

fn admitted_costing(o: &mut OriginState, now: Duration, n: usize) -> usize {
    (0..n)
        .filter(|_| matches!(o.admit_costing(ON, now, LONG, 0), Admission::Now))
        .count()
}

#[test]
fn a_declared_quota_in_units_spends_costs_from_the_first_request() {
    let cfg = PacingConfig {
        declared_units: Some(Declared::per_second(100).units()),
        ..FIRST
    };
    let mut o = OriginState::new(ms(0));
    // No wait for a first answer would help less than the declaration: the
    // first contact still goes first, then the quota binds.
    assert_eq!(o.admit_costing(cfg, ms(0), LONG, 60), Admission::Now);
    o.on_success(ms(5));
    assert_eq!(o.admit_costing(cfg, ms(10), LONG, 30), Admission::Now);
    // 10 left; the window closes a window and its margin after its last
    // spend.
    assert_eq!(
        o.admit_costing(cfg, ms(10), LONG, 30),
        Admission::QuotaHeld(ms(1020))
    );
    assert_eq!(o.admit_costing(cfg, ms(1030), LONG, 90), Admission::Now);
    // The origin states its own: within this window the tighter count
    // binds, and from its reset on, the stated quota governs.
    o.observe(cfg, ms(1040), with_tokens(500, 500, ms(5)));
    assert_eq!(
        o.admit_costing(cfg, ms(1050), LONG, 300),
        Admission::QuotaHeld(ms(990))
    );
    assert_eq!(o.admit_costing(cfg, ms(2040), LONG, 300), Admission::Now);
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn the_mean_cost_is_learned_afresh_in_each_window() {
    let mut o = OriginState::new(ms(0));
    for (i, left) in [1000, 920, 840].into_iter().enumerate() {
        o.observe(ON, ms(10 * i as u64), with_tokens(left, 1000, ms(1)));
    }
    assert_eq!(o.tokens.mean, 80);
    // The quota renews at 1 s; the next window's answers fall by 80 too
    // (its first, 920, is no part of the last window's fall from 1000).
    assert_eq!(admitted_costing(&mut o, ms(1000), 1), 1);
    for (i, left) in [920, 840, 760, 680].into_iter().enumerate() {
        o.observe(ON, ms(1010 + 10 * i as u64), with_tokens(left, 1000, ms(1)));
    }
    assert_eq!(o.tokens.mean, 80);
}

#[test]
fn the_first_answers_fall_from_a_whole_window_is_the_first_mean_cost() {
    // The first contact's answer: 915 of 1000 tokens left, so it cost 85.
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(5), with_tokens(915, 1000, ms(5)));
    assert_eq!(o.tokens.mean, 85);
    // The burst behind it is held to what 915 tokens pay for at 85 each,
    // less the stray of costs guessed from one: five leave.
    assert_eq!(admitted_costing(&mut o, ms(10), 20), 5);
    // Their answers, all back, correct it from how the remaining falls.
    for (i, left) in [835, 755, 675, 595].into_iter().enumerate() {
        o.observe(ON, ms(20 + 10 * i as u64), with_tokens(left, 1000, ms(1)));
    }
    assert_eq!(o.tokens.mean, 85);
    o.observe(ON, ms(60), with_tokens(515, 1000, ms(1)));
    assert_eq!(o.tokens.mean, 80);
}

/// An origin stating a token quota of 1000 a second, whose answers fall by
/// 80 a request down to `tokens_left`, then a `429` until the reset at 1 s.
fn tokens_spent_then_rejected(tokens_left: u64) -> OriginState {
    let mut o = OriginState::new(ms(0));
    let answers = (0..)
        .map_while(|i| 1000_u64.checked_sub(80 * i))
        .take_while(|&left| left >= tokens_left);
    for (i, left) in answers.enumerate() {
        o.observe(ON, ms(i as u64), with_tokens(left, 1000, ms(1)));
    }
    assert_eq!(o.tokens.mean, 80);
    o.observe(
        ON,
        ms(50),
        Outcome::Pushback {
            retry_in: Some(ms(950)),
            hold_at_least: None,
        },
    );
    o
}

#[test]
fn a_rejection_the_token_quota_explains_teaches_no_pace_in_requests() {
    // 40 tokens left, less than a request costs: the rejection is the
    // token quota's, which renews at its reset and governs from there.
    let mut o = tokens_spent_then_rejected(40);
    assert_eq!(o.gate_in(ms(50)), Some(ms(950)));
    assert_eq!(o.admit_costing(ON, ms(1000), LONG, 0), Admission::Reopened);
    assert_eq!(o.rate(), 0.0, "{:?}", o.pace.mode);
    // The renewed window leaves at once, as far as the stray of its
    // costs allows (see `guessed.rs`): nine of 1000 / 80, the reopening's
    // own one of them.
    assert_eq!(admitted_costing(&mut o, ms(1000), 20), 8);
    // Tokens to spare: the rejection is another limit's, and its pace is
    // learned from what got through.
    let mut o = tokens_spent_then_rejected(760);
    assert!(matches!(
        o.admit_costing(ON, ms(1000), LONG, 0),
        Admission::Reopened
    ));
    assert!(o.rate() > 0.0, "{:?}", o.pace.mode);
}

#[test]
fn a_request_another_limit_rejects_gives_its_unit_of_the_stated_quota_back() {
    // 10 per 5 s stated, 9 left; six more admitted: 3 left.
    let mut o = OriginState::new(ms(0));
    o.observe(
        ON,
        ms(0),
        Outcome::Quota {
            remaining: 9,
            reset_in: Duration::from_secs(5),
            limit: Some(10),
            window: Some(Duration::from_secs(5)),
            sent_ago: ms(0),
            tokens: None,
        },
    );
    assert_eq!(admitted_now(&mut o, ON, ms(10), 6), 6);
    assert_eq!(o.quota.left, 3);
    // Two of them meet a secondary limit (GitHub's: quota left, a
    // `retry-after`): the server counted neither against the quota.
    for _ in 0..2 {
        o.observe(
            ON,
            ms(20),
            Outcome::Pushback {
                retry_in: Some(ms(1000)),
                hold_at_least: None,
            },
        );
    }
    assert_eq!(o.quota.left, 5);
    // The window's next statement still binds where it is smaller.
    o.observe(
        ON,
        ms(30),
        Outcome::Quota {
            remaining: 4,
            reset_in: Duration::from_secs(5) - ms(30),
            limit: Some(10),
            window: Some(Duration::from_secs(5)),
            sent_ago: ms(20),
            tokens: None,
        },
    );
    assert_eq!(o.quota.left, 4);
}
