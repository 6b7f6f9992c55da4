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

pub(super) fn admitted_now(
    o: &mut OriginState,
    cfg: PacingConfig,
    now: Duration,
    n: usize,
) -> usize {
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

pub(super) const FIRST: PacingConfig = PacingConfig {
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
    // The answer states a quota: it paces the tasks that waited (the
    // first wave, see `wave.rs`).
    o.observe(FIRST, ms(40), stated(2, ms(960), 3, ms(40)));
    let waited = (0..5)
        .filter(|_| {
            matches!(
                o.admit_task(FIRST, ms(41), Within::both(LONG), crate::Cost::new(0), true),
                Admission::Now | Admission::Reopened
            )
        })
        .count();
    assert_eq!(waited, 2);
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
