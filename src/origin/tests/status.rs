//! The status view, with fixed times: what it shows is what the next
//! admission finds.

use super::*;

/// The wait the next task asking at `now` is given for a paced slot.
fn next_wait(o: &mut OriginState, now: Duration) -> Option<Duration> {
    match o.admit(ON, now, LONG) {
        Admission::Now | Admission::Reopened => None,
        Admission::SlotReserved(d, _) | Admission::QueueAhead(d) => Some(d),
        other => panic!("expected a slot, got {other:?}"),
    }
}

#[test]
fn a_closed_gate_shows_how_long_it_holds_and_no_slot() {
    // A server time: closed until it, the pace not learned before the
    // gate reopens.
    let o = after_burst(100);
    let s = o.status(ms(400));
    assert_eq!(s.gate_closed_for(), Some(ms(600)));
    assert_eq!(s.reserved(), 0);
    assert_eq!(s.next_slot_in(), None);
    assert_eq!(s.pace(), PaceKind::Unpaced);
    assert_eq!(s.pace().per_second(), None);
    assert_eq!(s.quota_left(), None);
    assert_eq!(o.status(ms(1000)).gate_closed_for(), None);

    // No time at all: the gate's own hold of a second.
    let mut o = OriginState::new(ms(0));
    o.on_pushback(ON, ms(100), None);
    assert_eq!(o.status(ms(300)).gate_closed_for(), Some(ms(800)));
    assert_eq!(o.status(ms(1100)).gate_closed_for(), None);
}

#[test]
fn a_learned_batch_shows_its_reserved_slots_and_the_next_free_one() {
    let mut o = after_burst(100);
    assert_eq!(next_wait(&mut o, ms(1000)), None, "the probe goes at once");
    // The rest of the first batch and all of the second.
    let held = queue(&mut o, ms(1000), 199);
    assert_eq!(held.len(), 199);
    let last = held.iter().map(|r| r.slot).max().expect("199 held");
    let every = ms(1000) + TUNING.batch_margin;
    let s = o.status(ms(1000));
    assert_eq!(s.gate_closed_for(), None);
    assert_eq!(s.reserved(), 199);
    assert_eq!(s.pace(), PaceKind::Batches { size: 100, every });
    assert_eq!(s.pace().per_second(), Some(o.rate()));
    assert_eq!(s.pace().to_string(), "100 per 1.02 s");
    // Both batches are full: the next free slot opens the third, a period
    // after the last slot held.
    assert_eq!(s.next_slot_in(), Some(last + every - ms(1000)));

    // The first batch's tasks send: their slots are no longer reserved.
    let first: Vec<_> = held.iter().filter(|r| r.slot < ms(1500)).collect();
    assert_eq!(first.len(), 99);
    for r in first {
        o.sent(ms(1500), *r);
    }
    let s = o.status(ms(1500));
    assert_eq!(s.reserved(), 100);
    assert_eq!(s.next_slot_in(), Some(last + every - ms(1500)));

    // Once every slot handed out has come, none is reserved (a task may
    // have gone without a word), but the next batch still keeps a period
    // after the last slot: the wait the next task is given.
    let after = last + ms(1);
    let s = o.status(after);
    assert_eq!(s.reserved(), 0);
    assert_eq!(s.next_slot_in(), Some(every - ms(1)));
    assert_eq!(next_wait(&mut o, after), s.next_slot_in());
    assert_eq!(o.status(after).reserved(), 1);
    // Long after, a task goes at once.
    let s = o.status(ms(10_000));
    assert_eq!((s.reserved(), s.next_slot_in()), (0, None));
}

#[test]
fn slow_start_shows_its_rising_rate_and_the_next_slot() {
    // Nothing admitted in the period: slow start at one a second.
    let mut o = after_burst(0);
    assert_eq!(next_wait(&mut o, ms(1000)), None, "the probe");
    assert_eq!(next_wait(&mut o, ms(1000)), Some(ms(1000)));
    let s = o.status(ms(1000));
    assert_eq!(s.pace(), PaceKind::SlowStart { per_second: 1.0 });
    assert_eq!(s.reserved(), 1);
    // The next slot is two seconds away: a task asking now is told to ask
    // again in a second, but the slot is where it is.
    assert_eq!(s.next_slot_in(), Some(ms(2000)));
    assert_eq!(next_wait(&mut o, ms(1000)), Some(TUNING.slow_start_ahead));
    for _ in 0..3 {
        o.on_success(ms(1100));
    }
    let s = o.status(ms(1500));
    assert_eq!(s.pace(), PaceKind::SlowStart { per_second: 4.0 });
    assert_eq!(s.pace().to_string(), "slow start 4.0/s");
    assert_eq!(s.next_slot_in(), Some(ms(1500)));
    // Settled once the pace has moved past the slot handed out.
    assert_eq!(o.status(ms(2000)).reserved(), 1);
    assert_eq!(o.status(ms(3000)).reserved(), 0);
}

#[test]
fn a_stated_quota_shows_what_is_left_until_its_reset() {
    let mut o = OriginState::new(ms(0));
    o.observe(
        ON,
        ms(0),
        Outcome::Quota {
            remaining: 3,
            reset_in: ms(1000),
            limit: None,
            window: None,
            sent_ago: Duration::ZERO,
            tokens: None,
        },
    );
    let s = o.status(ms(0));
    assert_eq!(s.quota_left(), Some(3));
    assert_eq!(s.quota_resets_in(), Some(ms(1000)));
    assert_eq!(s.gate_closed_for(), None);
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::Now);
    assert_eq!(o.status(ms(10)).quota_left(), Some(2));
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::Now);
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::Now);
    // Spent: the origin is held until the reset.
    let s = o.status(ms(100));
    assert_eq!(s.quota_left(), Some(0));
    assert_eq!(s.quota_resets_in(), Some(ms(900)));
    assert_eq!(s.gate_closed_for(), Some(ms(900)));
    // Reset: no quota is counted any more, nothing holds the origin.
    let s = o.status(ms(1000));
    assert_eq!(s.quota_left(), None);
    assert_eq!(s.quota_resets_in(), None);
    assert_eq!(s.gate_closed_for(), None);
}

#[test]
fn the_view_reads_the_same_from_the_text_form() {
    let mut o = after_burst(10);
    let _ = queue(&mut o, ms(1000), 25);
    let decoded = OriginState::decode(&o.encode()).expect("decodes");
    assert_eq!(decoded.status(ms(1200)), o.status(ms(1200)));
}

proptest::proptest! {
    /// Any sequence of admissions and answers: whenever nothing holds the
    /// origin, the next free slot the view shows is the wait the next
    /// admission is given, and slots are reserved only while one is ahead.
    #[test]
    fn the_next_slot_shown_is_the_one_the_next_task_gets(
        events in proptest::collection::vec((0u64..400, 0u8..6, 0u64..3000), 1..300)
    ) {
        let mut o = OriginState::new(ms(0));
        let mut now = ms(0);
        for (dt, kind, arg) in events {
            now += ms(dt);
            let s = o.status(now);
            proptest::prop_assert!(s.reserved() == 0 || s.next_slot_in().is_some(), "{s:?}");
            match kind {
                0 | 1 => {
                    let reopens = o.gate.reopens(now);
                    let admission = o.admit(ON, now, ms(arg * 10));
                    if s.gate_closed_for().is_none() && !reopens {
                        match admission {
                            Admission::Now => proptest::prop_assert_eq!(s.next_slot_in(), None),
                            Admission::SlotReserved(d, _) => {
                                proptest::prop_assert_eq!(s.next_slot_in(), Some(d));
                            }
                            Admission::QueueAhead(d) => {
                                proptest::prop_assert!(s.next_slot_in() >= Some(d));
                            }
                            Admission::Refused { .. } => {
                                proptest::prop_assert!(s.next_slot_in() > Some(ms(arg * 10)));
                            }
                            // A spent quota's probe, past the pace.
                            Admission::Reopened => {}
                            other => proptest::prop_assert!(false, "{other:?} with {s:?}"),
                        }
                    }
                }
                2 => o.on_success(now),
                3 => o.on_pushback(ON, now, Some(now + ms(arg))),
                4 => o.on_pushback(ON, now, None),
                _ => {
                    let _ = o.observe(
                        ON,
                        now,
                        Outcome::Quota { remaining: arg % 4, reset_in: ms(arg), limit: None, window: None, sent_ago: Duration::ZERO, tokens: None },
                    );
                }
            }
        }
    }
}
