//! The pace: learned batches, buckets, slow start, cuts and raises, with fixed times.

use super::*;

#[test]
fn learns_the_admitted_batch_and_releases_one_per_period_after_a_probe() {
    let mut o = after_burst(100);
    // Everyone queued at the closed gate comes back at its time.
    assert_eq!(o.admit(ON, ms(500), LONG), Admission::GateClosed(ms(500)));
    let slots: Vec<Duration> = (0..400).map(|_| slot_at(&mut o, ms(1000))).collect();
    let every = ms(1000) + TUNING.batch_margin;
    assert!((o.rate() - 100.0 / every.as_secs_f64()).abs() < 1e-9);
    // The probe goes alone at the gate time; the rest of its batch a gap
    // later, spread over one interval (the burst itself took no time);
    // each next batch one period after the last slot of the one before.
    let spread = ms(10);
    assert_eq!(slots[0], ms(1000));
    assert_eq!(slots[1], ms(1000) + every / 100 + spread / 100);
    for b in 0..4 {
        let batch = &slots[(100 * b).max(1)..100 * (b + 1)];
        let (first, last) = (batch[0], batch[batch.len() - 1]);
        assert!(last - first <= spread, "batch {b}: {first:?}..{last:?}");
        if b > 0 {
            assert!(first >= slots[100 * b - 1] + every, "batch {b}");
            assert!(
                first <= slots[100 * b - 1] + every + spread / 100,
                "batch {b}"
            );
        }
    }
    // A fixed window of 1 s (starting at the gate time) sees one batch per
    // window; a sliding log never more than the 100 admitted in a second.
    for w in 1..5 {
        let lo = Duration::from_secs(w);
        let hi = lo + Duration::from_secs(1);
        let n = slots.iter().filter(|s| **s >= lo && **s < hi).count();
        assert_eq!(n, 100, "window {w}");
    }
    assert_eq!(most_in_a_second(&slots), 100);
}

#[test]
fn tasks_arriving_during_a_batch_take_its_slots_and_never_make_it_two() {
    let mut o = after_burst(10);
    let mut slots = vec![slot_at(&mut o, ms(1000))];
    // Tasks trickle in one every 150 ms for 6 s: each batch of 10 spans
    // 1.5 s of arrivals, and the next starts a period after its last slot.
    for i in 1..40 {
        slots.push(slot_at(&mut o, ms(1000 + 150 * i)));
    }
    assert!(most_in_a_second(&slots) <= 10, "{slots:?}");
}

#[test]
fn a_drained_bucket_finds_a_token_for_every_slot_of_every_batch() {
    // A token bucket (capacity 100, 100/s), drained by a burst: 100 at once
    // before the first rejection at 2 ms, then one more per 10 ms while it
    // rejects the rest of the burst, until 102 ms: 110 successes, as many
    // as a window admitting 110 would give.
    let mut o = OriginState::new(ms(0));
    for _ in 0..100 {
        o.on_success(ms(1));
    }
    o.on_pushback(ON, ms(2), Some(ms(1002)));
    for i in 1..=10 {
        o.on_success(ms(2 + 10 * i));
    }
    let slots: Vec<Duration> = (0..1000).map(|_| slot_at(&mut o, ms(1002))).collect();
    // Replayed against the bucket, every slot finds a token.
    assert_eq!(short_of_tokens(&slots, 100.0, ms(102)), None);
    // And the same slots against a window admitting 110 a second: one
    // batch per window.
    assert_eq!(most_in_a_second(&slots), 110);
}

/// The first of `slots` (sorted) a token bucket of capacity `cap`,
/// refilling `cap` a second, has no token for, if any; it was empty after
/// its last admission at `drained`.
fn short_of_tokens(slots: &[Duration], cap: f64, drained: Duration) -> Option<(usize, Duration)> {
    let mut tokens = 0.0_f64;
    let mut at = drained;
    for (i, s) in slots.iter().enumerate() {
        tokens = (tokens + (*s - at).as_secs_f64() * cap).min(cap);
        at = *s;
        if tokens < 1.0 - 1e-9 {
            return Some((i, *s));
        }
        tokens -= 1.0;
    }
    None
}

#[test]
fn a_bucket_that_refilled_before_it_rejected_finds_a_token_for_every_slot() {
    // A slow burst (GCRA or a bucket, capacity 100 at 100/s): the arrivals
    // take 80 ms, so the server admits 108 before it first rejects, at
    // 80 ms, and none after. The client reads the answers shuffled: a 429
    // at 50 ms, the last success at 90 ms. No success came long after a
    // rejection, yet the batch of 108 must be spread over the 80 ms the
    // bucket refilled in (it was spread over 69 ms, and its last slot
    // found no token).
    let mut o = OriginState::new(ms(0));
    o.on_success(ms(1));
    o.on_pushback(ON, ms(50), Some(ms(1050)));
    for i in 1..108u64 {
        o.on_success(ms(1 + i * 89 / 107));
    }
    for i in 0..20u64 {
        o.on_pushback(ON, ms(80 + i), Some(ms(1080 + i)));
    }
    let slots: Vec<Duration> = (0..540).map(|_| slot_at(&mut o, ms(1099))).collect();
    assert_eq!(short_of_tokens(&slots, 100.0, ms(80)), None);
    // A window of 108 a second still gets one batch per window.
    assert_eq!(most_in_a_second(&slots), 108);
}

#[test]
fn nothing_admitted_means_one_probe_a_second_then_slow_start() {
    let mut o = after_burst(0);
    // The probe, alone.
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::Reopened);
    assert_eq!(o.rate(), TUNING.min_rate);
    assert!(matches!(
        o.admit(ON, ms(1000), LONG),
        Admission::SlotReserved(d, _) if d == ms(1000)
    ));
    for _ in 0..3 {
        o.on_success(ms(1100));
    }
    assert_eq!(o.rate(), TUNING.min_rate + 3.0 * TUNING.slow_start_step);
}

#[test]
fn a_pushback_while_pacing_cuts_the_batch_by_a_tenth() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let every = (ms(1000) + TUNING.batch_margin).as_secs_f64();
    // Paced, a pushback at 1.5 s after 50 successes.
    for _ in 0..50 {
        o.on_success(ms(1400));
    }
    o.on_pushback(ON, ms(1500), Some(ms(2500)));
    assert_eq!(o.admit(ON, ms(1600), LONG), Admission::GateClosed(ms(900)));
    assert_eq!(slot_at(&mut o, ms(2500)), ms(2500));
    assert!((o.rate() - 90.0 / every).abs() < 1e-9, "{}", o.rate());
    // The probe rejected at once, alone: "not yet", not "too fast".
    o.on_pushback(ON, ms(2505), Some(ms(3505)));
    let _ = slot_at(&mut o, ms(3505));
    assert!((o.rate() - 90.0 / every).abs() < 1e-9, "{}", o.rate());
    // A period that admitted some and was rejected: a tenth again.
    o.on_success(ms(3600));
    o.on_pushback(ON, ms(3700), Some(ms(4700)));
    let _ = slot_at(&mut o, ms(4700));
    assert!((o.rate() - 81.0 / every).abs() < 1e-9, "{}", o.rate());
    let mut o = after_burst(1);
    for i in 1..5 {
        let _ = slot_at(&mut o, ms(1000 * i));
        o.on_pushback(ON, ms(1000 * i + 1), Some(ms(1000 * (i + 1))));
    }
    let _ = slot_at(&mut o, ms(5000));
    assert!((o.rate() - 1.0 / every).abs() < 1e-9, "{}", o.rate());
}

#[test]
fn a_full_queue_refuses_with_the_time_of_its_first_free_slot() {
    let mut o = after_burst(10);
    let _ = slot_at(&mut o, ms(1000));
    for _ in 0..9 {
        let _ = slot_at(&mut o, ms(1000));
    }
    match o.admit(ON, ms(1000), ms(500)) {
        Admission::Refused { free_in } => assert!(free_in > ms(500), "{free_in:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_clean_learned_pace_is_raised_rarely() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let learned = o.rate();
    o.on_success(ms(5000));
    assert_eq!(o.rate(), learned);
    o.on_success(ms(11_000));
    // One batch of 100 a period becomes one of 110.
    assert!((o.rate() - learned * 1.1).abs() < 1e-9);
}

#[test]
fn a_long_sending_period_is_measured_over_its_length() {
    // 50/s for 4 s, then a pushback with a 1 s gate: 200 over 4 s.
    let mut o = OriginState::new(ms(0));
    for i in 0..200 {
        o.on_success(ms(i * 20));
    }
    o.on_pushback(ON, ms(4000), Some(ms(5000)));
    let _ = slot_at(&mut o, ms(5000));
    let every = (ms(1000) + TUNING.batch_margin).as_secs_f64();
    assert!((o.rate() - 50.0 / every).abs() < 1e-9, "{}", o.rate());
}

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
