//! Known quotas, with fixed times: a stated quota of known size renews at
//! its reset, the first answer is waited for, and a declared quota paces
//! from the first request.

use super::*;
use crate::Quota as Declared;

/// What a success stating `remaining` of a quota of `limit` per second,
/// reset `reset_in` from now, to a request sent `sent_ago` before, reads as.
fn stated(remaining: u64, reset_in: Duration, limit: u64, sent_ago: Duration) -> Outcome {
    Outcome::Quota {
        remaining,
        reset_in,
        limit: Some(limit),
        window: Some(ms(1000)),
        sent_ago,
        tokens: None,
    }
}

fn admitted_now(o: &mut OriginState, cfg: PacingConfig, now: Duration, n: usize) -> usize {
    (0..n)
        .filter(|_| {
            matches!(
                o.admit(cfg, now, LONG),
                Admission::Now | Admission::Reopened
            )
        })
        .count()
}

#[test]
fn a_stated_quota_of_known_size_renews_at_its_reset_with_no_probe() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), stated(2, ms(1000), 3, ms(0)));
    assert_eq!(admitted_now(&mut o, ON, ms(10), 5), 2);
    assert_eq!(o.gate_in(ms(10)), Some(ms(990)));
    // At the reset the whole quota is there again, for as many tasks at once.
    assert_eq!(admitted_now(&mut o, ON, ms(1000), 5), 3);
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::GateClosed(ms(1000)));
    // And again a window later, in the server's phase.
    assert_eq!(admitted_now(&mut o, ON, ms(2005), 5), 3);
    // After a long silence the phase is a guess: a window opens at once and
    // closes a whole window later.
    assert_eq!(admitted_now(&mut o, ON, ms(9500), 5), 3);
    assert_eq!(o.gate_in(ms(9500)), Some(ms(1000)));
}

#[test]
fn an_answer_to_a_request_sent_before_the_window_opened_changes_nothing() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), stated(2, ms(1000), 3, ms(0)));
    assert_eq!(admitted_now(&mut o, ON, ms(10), 2), 2);
    assert_eq!(admitted_now(&mut o, ON, ms(1000), 1), 1);
    // The last answers of the old window arrive late, rounded up to the
    // new window's reset: remaining 0, then exhausted.
    o.observe(ON, ms(1010), stated(0, ms(1000), 3, ms(1000)));
    o.observe(
        ON,
        ms(1010),
        Outcome::Exhausted {
            reset_in: ms(1000),
            limit: Some(3),
            window: Some(ms(1000)),
            sent_ago: ms(1000),
            tokens: None,
        },
    );
    assert_eq!(admitted_now(&mut o, ON, ms(1020), 5), 2);
    // One sent in this window counts: none left.
    let mut o2 = o;
    o2.observe(ON, ms(1030), stated(0, ms(970), 3, ms(5)));
    assert_eq!(o2.gate_in(ms(1030)), Some(ms(970)));
}

#[test]
fn an_exhausted_quota_of_known_size_holds_without_closing_the_gate() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), stated(5, ms(1000), 5, ms(0)));
    o.observe(
        ON,
        ms(100),
        Outcome::Exhausted {
            reset_in: ms(900),
            limit: Some(5),
            window: Some(ms(1000)),
            sent_ago: ms(1),
            tokens: None,
        },
    );
    assert_eq!(o.gate_in(ms(100)), Some(ms(900)));
    assert_eq!(o.gate_until(ms(100)), None, "the gate itself stays open");
    assert_eq!(admitted_now(&mut o, ON, ms(1000), 9), 5);
}

#[test]
fn after_a_penalty_a_quota_of_known_size_governs_again() {
    let mut o = OriginState::new(ms(0));
    // 50 a second.
    o.observe(ON, ms(0), stated(50, ms(1000), 50, ms(0)));
    assert_eq!(admitted_now(&mut o, ON, ms(10), 10), 10);
    // A secondary limit: come back in 3 s.
    o.observe(
        ON,
        ms(20),
        Outcome::Pushback {
            retry_in: Some(ms(3000)),
            hold_at_least: None,
        },
    );
    assert!(matches!(
        o.admit(ON, ms(100), LONG),
        Admission::GateClosed(_)
    ));
    assert_eq!(o.admit(ON, ms(3020), LONG), Admission::Reopened);
    // No pace learned from the penalty: the quota's whole renewal goes.
    assert_eq!(o.rate(), 0.0);
    assert_eq!(admitted_now(&mut o, ON, ms(3030), 60), 49);
}

#[test]
fn a_pushback_shorter_than_the_quotas_window_is_another_limit_and_paced() {
    let mut o = OriginState::new(ms(0));
    // 5,000 an hour, and a secondary limit of its own.
    let hour = Duration::from_secs(3600);
    o.observe(
        ON,
        ms(0),
        Outcome::Quota {
            remaining: 4999,
            reset_in: hour,
            limit: Some(5000),
            window: None,
            sent_ago: ms(0),
            tokens: None,
        },
    );
    assert_eq!(admitted_now(&mut o, ON, ms(10), 20), 20);
    for i in 0..10 {
        o.on_success(ms(20 + i));
    }
    o.observe(
        ON,
        ms(40),
        Outcome::Pushback {
            retry_in: Some(ms(1000)),
            hold_at_least: None,
        },
    );
    assert_eq!(o.admit(ON, ms(1040), LONG), Admission::Reopened);
    assert!(o.rate() > 0.0, "the secondary limit's pace is learned");
}

const FIRST: PacingConfig = PacingConfig {
    first_contact: Duration::from_millis(500),
    ..ON
};

#[test]
fn others_wait_for_the_first_answer_a_little_then_less_often() {
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(FIRST, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(FIRST, ms(0), LONG), Admission::FirstAnswer(ms(2)));
    assert_eq!(o.admit(FIRST, ms(30), LONG), Admission::FirstAnswer(ms(30)));
    assert_eq!(
        o.admit(FIRST, ms(300), LONG),
        Admission::FirstAnswer(ms(50))
    );
    assert_eq!(
        o.admit(FIRST, ms(480), LONG),
        Admission::FirstAnswer(ms(20))
    );
    // A task that cannot wait that long goes.
    assert_eq!(o.admit(FIRST, ms(300), ms(10)), Admission::Now);
    // The answer states a quota: it paces the rest.
    o.observe(FIRST, ms(40), stated(2, ms(960), 3, ms(40)));
    assert_eq!(admitted_now(&mut o, FIRST, ms(41), 5), 2);
}

#[test]
fn a_first_contact_whose_answer_is_late_is_waited_for_once() {
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(FIRST, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(FIRST, ms(1), LONG), Admission::FirstAnswer(ms(2)));
    // Its answer never came (late, or lost to a transport error): once the
    // one wait is over, every task goes; none becomes a second first
    // contact for the others to wait for.
    for now in [500, 500, 501, 502, 900] {
        assert_eq!(o.admit(FIRST, ms(now), LONG), Admission::Now, "{now}");
    }
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
    // Any answer ends the wait early, a pushback too.
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(FIRST, ms(0), LONG), Admission::Now);
    o.on_pushback(FIRST, ms(10), Some(ms(20)));
    assert_eq!(o.admit(FIRST, ms(20), LONG), Admission::Reopened);
}

#[test]
fn a_declared_window_paces_the_first_burst_in_batches() {
    let cfg = PacingConfig {
        first_contact: Duration::from_millis(500),
        declared: Some(Declared::per_second(3)),
        ..ON
    };
    let mut o = OriginState::new(ms(5000));
    // No wait for a first answer: the pace is known.
    assert_eq!(admitted_now(&mut o, cfg, ms(5000), 3), 3);
    let later: Vec<Duration> = (0..4)
        .map(|_| match o.admit(cfg, ms(5000), LONG) {
            Admission::SlotReserved(d, _) => d,
            other => panic!("{other:?}"),
        })
        .collect();
    // Each batch a period and its margin after the one before.
    assert_eq!(later, vec![ms(1020), ms(1020), ms(1020), ms(2040)]);
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn a_declared_bucket_lets_its_burst_go_then_one_an_interval() {
    let cfg = PacingConfig {
        declared: Some(Declared::new(4, ms(1000)).refilled()),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    assert_eq!(admitted_now(&mut o, cfg, ms(0), 4), 4);
    let later: Vec<Duration> = (0..3)
        .map(|_| match o.admit(cfg, ms(0), LONG) {
            Admission::SlotReserved(d, _) => d,
            other => panic!("{other:?}"),
        })
        .collect();
    // After the burst, a margin behind the bucket's own times.
    assert_eq!(later, vec![ms(270), ms(520), ms(770)]);
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn a_declared_quota_brings_a_faster_learned_pace_down() {
    let declared = PacingConfig {
        declared: Some(Declared::per_second(5)),
        ..ON
    };
    // Learned: batches of 20 a period.
    let mut o = after_burst(20);
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::Reopened);
    assert!(o.rate() > 5.0);
    let _ = o.admit(declared, ms(1001), LONG);
    assert!(o.rate() <= 5.0, "{}", o.rate());
}

#[test]
fn a_later_rounded_up_reset_does_not_drift_the_window() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), stated(1, ms(1000), 2, ms(0)));
    assert_eq!(admitted_now(&mut o, ON, ms(1), 1), 1);
    // The window's last answer, late in it, rounds its reset up a second.
    o.observe(
        ON,
        ms(100),
        Outcome::Exhausted {
            reset_in: ms(1000),
            limit: Some(2),
            window: Some(ms(1000)),
            sent_ago: ms(99),
            tokens: None,
        },
    );
    assert_eq!(o.gate_in(ms(100)), Some(ms(900)));
    assert_eq!(admitted_now(&mut o, ON, ms(1000), 3), 2);
}

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
    assert_eq!(admitted_costing(&mut o, ms(30), 20), 10);
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
    // The burst behind it is held to what 915 tokens pay for at 85 each.
    assert_eq!(admitted_costing(&mut o, ms(10), 20), 10);
    // Later answers of the window correct it from how the remaining falls.
    for (i, left) in [835, 755, 675].into_iter().enumerate() {
        o.observe(ON, ms(20 + 10 * i as u64), with_tokens(left, 1000, ms(1)));
    }
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
    // The rest of the renewed window leaves at once: 1000 / 80 a request,
    // the reopening's own one of them.
    assert_eq!(admitted_costing(&mut o, ms(1000), 20), 11);
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
