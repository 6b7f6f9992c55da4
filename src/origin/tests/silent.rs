//! A pace behind pushbacks without a time: holds of our own, smooth paces,
//! probes and slow start, with fixed times.

use super::*;

/// A burst of `n` admitted at 0 and rejected with no time at all (a bare
/// `429`, as nginx's `limit_req` sends) 250 times.
fn after_silent_burst(n: u32) -> OriginState {
    let mut o = OriginState::new(ms(0));
    for _ in 0..n {
        o.on_success(ms(0));
    }
    for t in 0..250 {
        o.observe(
            ON,
            ms(5 + t / 10),
            Outcome::Pushback {
                retry_in: None,
                hold_at_least: None,
            },
        );
    }
    o
}

#[test]
fn a_pushback_without_a_time_closes_the_gate_for_a_second_once_per_burst() {
    let o = after_silent_burst(50);
    // The first rejection (at 5 ms) closed it; the rest of the burst kept it.
    assert_eq!(o.gate_until(ms(10)), Some(ms(1005)));
    // A hold of ours is no server time: a refusal is not told it as one.
    assert_eq!(o.gate.server_until, Duration::ZERO);
    // The pace was not cut: the burst is what the origin admits.
    assert_eq!(o.rate(), 0.0);
}

#[test]
fn the_queue_behind_a_silent_hold_leaves_smoothly_at_what_got_through() {
    let mut o = after_silent_burst(50);
    assert_eq!(o.admit(ON, ms(1005), LONG), Admission::Reopened);
    // 50 admitted per hold of a second (plus its margin), spread evenly:
    // no batch a counting limiter would see on top of the one before.
    let every = (ms(1000) + TUNING.batch_margin).as_secs_f64();
    assert!((o.rate() - 50.0 / every).abs() < 1e-9, "{}", o.rate());
    assert!(matches!(o.pace.mode, Mode::Smooth { .. }));
    let slots: Vec<_> = (0..99).map(|_| slot_at(&mut o, ms(1005))).collect();
    assert!(most_in_a_second(&slots) <= 50, "{slots:?}");
    let step = ms(1020) / 50;
    for pair in slots.windows(2) {
        assert!(pair[1] - pair[0] >= step - ms(1), "{pair:?}");
    }
}

#[test]
fn a_batch_rejected_before_half_got_through_turns_into_a_smooth_pace() {
    // A server that states a time, and whose batches are rejected early
    // after the one before got through whole (it counts admissions over a
    // sliding span): the same rate, a tenth below, spread evenly.
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let learned = o.rate();
    let batch: Vec<_> = (0..99).map(|_| slot_at(&mut o, ms(1000))).collect();
    for t in &batch {
        o.on_success(*t + ms(2));
    }
    let next = slot_at(&mut o, ms(1200));
    assert!(next >= ms(2000), "{next:?}");
    for _ in 0..10 {
        o.on_success(next + ms(2));
    }
    o.on_pushback(ON, next + ms(3), Some(next + ms(1003)));
    assert_eq!(o.admit(ON, next + ms(1003), LONG), Admission::Reopened);
    assert!(
        matches!(o.pace.mode, Mode::Smooth { .. }),
        "{:?}",
        o.pace.mode
    );
    assert!(
        (o.rate() - learned * TUNING.cut_factor).abs() < 1e-9,
        "{}",
        o.rate()
    );
}

#[test]
fn a_smooth_pace_rejected_holds_briefly_and_rises_again_after_a_clean_second() {
    let mut o = after_silent_burst(50);
    assert_eq!(o.admit(ON, ms(1005), LONG), Admission::Reopened);
    let rate = o.rate();
    o.on_success(ms(1010));
    // One request over the server's rate: a hold of four intervals.
    o.observe(
        ON,
        ms(1500),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: None,
        },
    );
    let hold = o.gate_until(ms(1500)).expect("closed") - ms(1500);
    assert_eq!(hold, (ms(1020) / 50 * 4).max(TUNING.smooth_hold_min));
    assert_eq!(o.admit(ON, ms(1500) + hold, LONG), Admission::Reopened);
    assert!(
        (o.rate() - rate * TUNING.cut_factor).abs() < 1e-9,
        "{}",
        o.rate()
    );
    let cut = o.rate();
    o.on_success(ms(1500) + hold + TUNING.smooth_raise_every);
    assert!(
        (o.rate() - cut * TUNING.smooth_raise_factor).abs() < 1e-9,
        "{}",
        o.rate()
    );
}

#[test]
fn a_rejected_probe_grows_the_hold_up_to_its_cap_and_a_success_resets_it() {
    // An outage: every answer is a bare 503.
    let mut o = after_silent_burst(0);
    let mut at = ms(1005);
    let mut holds = Vec::new();
    for _ in 0..6 {
        assert_eq!(o.admit(ON, at, LONG), Admission::Reopened);
        let answered = at + ms(3);
        assert_eq!(
            o.observe(
                ON,
                answered,
                Outcome::Pushback {
                    retry_in: None,
                    hold_at_least: None
                }
            ),
            o.gate_until(answered).map(|until| until - answered)
        );
        let until = o.gate_until(answered).expect("closed again");
        holds.push(until - answered);
        at = until;
    }
    let s = Duration::from_secs_f64;
    assert_eq!(
        holds,
        [s(0.2), s(0.32), s(0.512), s(0.8192), s(1.31072), s(2.0)]
    );
    for _ in 0..4 {
        assert_eq!(o.admit(ON, at, LONG), Admission::Reopened);
        o.observe(
            ON,
            at,
            Outcome::Pushback {
                retry_in: None,
                hold_at_least: None,
            },
        );
        let until = o.gate_until(at).expect("closed again");
        holds.push(until - at);
        at = until;
    }
    assert_eq!(holds[6..], [s(2.0); 4], "at most two seconds");
    // The origin is back: the probe succeeds, and the next silent
    // rejection holds it for a second again.
    assert_eq!(o.admit(ON, at, LONG), Admission::Reopened);
    o.on_success(at + ms(3));
    o.observe(
        ON,
        at + ms(10),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: None,
        },
    );
    assert_eq!(o.gate_until(at + ms(10)), Some(at + ms(1010)));
}

#[test]
fn a_silent_hold_never_passes_max_wait() {
    let mut o = after_silent_burst(0);
    let capped = PacingConfig {
        max_gate: ms(300),
        ..ON
    };
    let mut o2 = OriginState::new(ms(0));
    o2.observe(
        capped,
        ms(0),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: None,
        },
    );
    assert_eq!(o2.gate_until(ms(0)), Some(ms(300)));
    // And a server's later time is never shortened by a hold of ours.
    o.observe(
        ON,
        ms(10),
        Outcome::Pushback {
            retry_in: Some(ms(5000)),
            hold_at_least: None,
        },
    );
    o.observe(
        ON,
        ms(20),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: None,
        },
    );
    assert_eq!(o.gate_until(ms(20)), Some(ms(5010)));
}

#[test]
fn slow_start_books_at_most_a_second_ahead() {
    // Nothing admitted in the period: the pace restarts at one a second.
    let mut o = after_burst(0);
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::Reopened);
    assert!(matches!(
        o.admit(ON, ms(1000), LONG),
        Admission::SlotReserved(d, _) if d == ms(1000)
    ));
    // The next slot is two seconds away: not booked at today's rate, which
    // rises with each success; the task asks again in a second.
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::QueueAhead(ms(1000)));
    // A task that cannot wait that long is still refused at once.
    assert!(matches!(
        o.admit(ON, ms(1000), ms(500)),
        Admission::Refused { .. }
    ));
}

proptest::proptest! {
    /// Learned batches with any mix of new tasks, slots given back and
    /// slots used: no span of the batch spacing ever holds more slots
    /// (used, or still held) than the batch.
    #[test]
    fn batches_never_put_more_than_a_batch_in_a_period(
        size in 2u32..12,
        events in proptest::collection::vec((0u64..60, 0u8..4, 0usize..50), 1..200)
    ) {
        let mut o = after_burst(size);
        let _ = o.admit(ON, ms(1000), LONG);
        let mut used = vec![ms(1000)];
        let mut held: Vec<Reservation> = Vec::new();
        let mut now = ms(1000);
        for (step, kind, pick) in events {
            now += ms(step);
            let (due, later): (Vec<_>, Vec<_>) = held.iter().partition(|r| r.slot <= now);
            for r in due {
                proptest::prop_assert_eq!(o.gate_in(now), None);
                o.sent(now, r);
                used.push(r.slot);
            }
            held = later;
            match kind {
                0 | 1 => match o.admit(ON, now, LONG) {
                    Admission::SlotReserved(_, r) => held.push(r),
                    Admission::Now | Admission::Reopened => used.push(now),
                    _ => {}
                },
                _ if !held.is_empty() => {
                    let r = held.remove(pick % held.len());
                    o.release(now, r);
                }
                _ => {}
            }
        }
        let Mode::Batches(b) = o.pace.mode else {
            return Err(proptest::test_runner::TestCaseError::fail("not batched"));
        };
        used.extend(held.iter().map(|r| r.slot));
        used.sort();
        for (i, t) in used.iter().enumerate() {
            let in_span = used[i..].iter().take_while(|u| **u < *t + b.every).count();
            proptest::prop_assert!(in_span <= b.size as usize, "{} within {:?}", in_span, b.every);
        }
    }
}

#[test]
fn a_slot_booked_before_a_rejected_probe_does_not_leave_when_the_hold_passes() {
    // The queue behind a silent hold is booked smoothly; its probe is
    // rejected at once: the gate holds for a fifth of a second.
    let mut o = after_silent_burst(50);
    assert_eq!(o.admit(ON, ms(1005), LONG), Admission::Reopened);
    let Admission::SlotReserved(wait, booked) = o.admit(ON, ms(1005), LONG) else {
        panic!("expected a slot");
    };
    let mut late = None;
    for _ in 0..30 {
        if let Admission::SlotReserved(d, r) = o.admit(ON, ms(1005), LONG) {
            late = Some((d, r));
        }
    }
    let (late_wait, late) = late.expect("slots booked past the hold");
    o.observe(
        ON,
        ms(1008),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: None,
        },
    );
    let until = o.gate_until(ms(1008)).expect("closed by the probe");
    assert_eq!(until, ms(1008) + TUNING.silent_probe_hold);
    // A slot due while the gate holds waits for it.
    assert_eq!(
        o.recheck(ms(1005) + wait, booked),
        Some(until - (ms(1005) + wait))
    );
    // A slot due after the hold, with no reopening yet, is void: its task
    // asks again, and is the probe; the queue starts anew behind it.
    let due = ms(1005) + late_wait;
    assert!(due > until, "{due:?}");
    assert_eq!(o.recheck(due, late), Some(Duration::ZERO));
    o.release(due, late);
    assert_eq!(o.admit(ON, due, LONG), Admission::Reopened);
    assert!(matches!(
        o.admit(ON, due, LONG),
        Admission::SlotReserved(..)
    ));
}
