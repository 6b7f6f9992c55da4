//! The gate and the pace, with fixed times.

use super::*;

const ON: PacingConfig = PacingConfig {
    gate: true,
    pace: true,
    max_gate: Duration::from_secs(60),
};
const LONG: Duration = Duration::from_secs(60);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// An origin that admitted `n` requests in a burst at 0 and then said
/// "come back at 1 s".
fn after_burst(n: u32) -> OriginState {
    let mut o = OriginState::new(ms(0));
    for _ in 0..n {
        o.on_success(ms(0));
    }
    o.on_pushback(ON, ms(0), Some(ms(1000)));
    o
}

fn slot_at(o: &mut OriginState, now: Duration) -> Duration {
    match o.admit(ON, now, LONG) {
        Admission::Now | Admission::Reopened => now,
        Admission::SlotReserved(d, _) => now + d,
        other => panic!("expected a slot, got {other:?}"),
    }
}

#[test]
fn unknown_origin_is_not_held() {
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(ON, ms(5), LONG), Admission::Now);
    assert_eq!(o.rate(), 0.0);
}

#[test]
fn a_closed_gate_queues_and_refuses_past_latest() {
    let mut o = OriginState::new(ms(0));
    o.on_pushback(ON, ms(10), Some(ms(1010)));
    assert_eq!(o.admit(ON, ms(20), LONG), Admission::GateClosed(ms(990)));
    assert_eq!(
        o.admit(ON, ms(20), ms(500)),
        Admission::Refused { free_in: ms(990) }
    );
    // A later pushback keeps the later time; an earlier one never shortens it.
    o.on_pushback(ON, ms(30), Some(ms(900)));
    assert_eq!(o.gate_until(ms(30)), Some(ms(1010)));
}

/// The most slots of `slots` in any span of one second (the window of a
/// sliding-log server).
fn most_in_a_second(slots: &[Duration]) -> usize {
    let mut sorted = slots.to_vec();
    sorted.sort();
    (0..sorted.len())
        .map(|i| {
            sorted[i..]
                .iter()
                .take_while(|s| **s < sorted[i] + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn learns_the_admitted_batch_and_releases_one_per_period_after_a_probe() {
    let mut o = after_burst(100);
    // Everyone queued at the closed gate comes back at its time.
    assert_eq!(o.admit(ON, ms(500), LONG), Admission::GateClosed(ms(500)));
    let slots: Vec<Duration> = (0..400).map(|_| slot_at(&mut o, ms(1000))).collect();
    let every = ms(1000) + BATCH_MARGIN;
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
    assert_eq!(o.rate(), MIN_RATE);
    assert!(matches!(
        o.admit(ON, ms(1000), LONG),
        Admission::SlotReserved(d, _) if d == ms(1000)
    ));
    for _ in 0..3 {
        o.on_success(ms(1100));
    }
    assert_eq!(o.rate(), MIN_RATE + 3.0 * SLOW_START_STEP);
}

#[test]
fn a_pushback_while_pacing_cuts_the_batch_by_a_tenth() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let every = (ms(1000) + BATCH_MARGIN).as_secs_f64();
    // Paced, a pushback at 1.5 s after 50 successes.
    for _ in 0..50 {
        o.on_success(ms(1400));
    }
    o.on_pushback(ON, ms(1500), Some(ms(2500)));
    assert_eq!(o.admit(ON, ms(1600), LONG), Admission::GateClosed(ms(900)));
    assert_eq!(slot_at(&mut o, ms(2500)), ms(2500));
    assert!((o.rate() - 90.0 / every).abs() < 1e-9, "{}", o.rate());
    // Even the probe rejected at once: a tenth again, never to nothing.
    o.on_pushback(ON, ms(2505), Some(ms(3505)));
    let _ = slot_at(&mut o, ms(3505));
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
    let every = (ms(1000) + BATCH_MARGIN).as_secs_f64();
    assert!((o.rate() - 50.0 / every).abs() < 1e-9, "{}", o.rate());
}

#[test]
fn state_round_trips_through_its_text_form() {
    let mut o = after_burst(3);
    let _ = o.admit(ON, ms(10), LONG);
    let o2 = OriginState::decode(&o.encode()).expect("decodes");
    assert_eq!(o2, o);
    let _ = slot_at(&mut o, ms(1000));
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
    assert_eq!(OriginState::decode("o4 1 2"), None);
    assert_eq!(OriginState::decode("garbage"), None);
}

#[test]
fn a_stated_quota_is_spent_by_admissions_then_holds_the_origin() {
    let mut o = OriginState::new(ms(0));
    o.observe(
        ON,
        ms(0),
        Outcome::Quota {
            remaining: 2,
            reset_in: ms(1000),
        },
    );
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::Now);
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::Now);
    // The first task to find it spent is told (the observer hears of it),
    // the others queue as at a closed gate.
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::QuotaHeld(ms(990)));
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::GateClosed(ms(990)));
    assert_eq!(o.gate_in(ms(10)), Some(ms(990)));
    // A later answer in the same window cannot raise what is left ...
    o.observe(
        ON,
        ms(20),
        Outcome::Quota {
            remaining: 1,
            reset_in: ms(980),
        },
    );
    assert_eq!(o.admit(ON, ms(30), LONG), Admission::GateClosed(ms(970)));
    assert_eq!(
        o.admit(ON, ms(30), ms(500)),
        Admission::Refused { free_in: ms(970) }
    );
    // ... and once the window reset, nothing holds the origin.
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::Now);
    // A new window's count starts afresh.
    o.observe(
        ON,
        ms(1100),
        Outcome::Quota {
            remaining: 1,
            reset_in: ms(900),
        },
    );
    assert_eq!(o.admit(ON, ms(1100), LONG), Admission::Now);
    assert_eq!(o.admit(ON, ms(1100), LONG), Admission::QuotaHeld(ms(900)));
}

const CAPPED: PacingConfig = PacingConfig {
    gate: true,
    pace: true,
    max_gate: Duration::from_secs(2),
};

#[test]
fn a_spent_quota_with_a_far_reset_is_held_for_the_cap_then_probed() {
    let mut o = OriginState::new(ms(0));
    let day = Duration::from_secs(86_400);
    o.observe(
        CAPPED,
        ms(0),
        Outcome::Quota {
            remaining: 1,
            reset_in: day,
        },
    );
    assert_eq!(o.admit(CAPPED, ms(10), LONG), Admission::Now);
    // Spent: held as the gate is, at most its cap, and visible as a gate.
    assert_eq!(o.gate_in(ms(10)), Some(ms(2000)));
    assert_eq!(
        o.admit(CAPPED, ms(10), LONG),
        Admission::QuotaHeld(ms(2000))
    );
    // A refusal names the server's reset, never earlier.
    match o.admit(CAPPED, ms(10), ms(500)) {
        Admission::Refused { free_in } => assert!(free_in >= day - ms(10), "{free_in:?}"),
        other => panic!("{other:?}"),
    }
    // At the cap, one probe; the next task waits another cap.
    assert_eq!(o.admit(CAPPED, ms(2010), LONG), Admission::Reopened);
    assert_eq!(
        o.admit(CAPPED, ms(2010), LONG),
        Admission::QuotaHeld(ms(2000))
    );
    // The probe's answer says a fresh window: the origin is free at once.
    o.observe(
        CAPPED,
        ms(2050),
        Outcome::Quota {
            remaining: 100,
            reset_in: day * 2,
        },
    );
    assert_eq!(o.gate_in(ms(2050)), None);
    assert_eq!(o.admit(CAPPED, ms(2060), LONG), Admission::Now);
    // Nothing far ahead keeps an idle origin.
    assert!(o.is_idle(ms(2060) + ORIGIN_IDLE, ORIGIN_IDLE));
}

#[test]
fn a_stated_count_left_spent_by_admissions_holds_without_a_zero_answer() {
    let mut o = OriginState::new(ms(0));
    let day = Duration::from_secs(86_400);
    o.observe(
        CAPPED,
        ms(0),
        Outcome::Quota {
            remaining: 2,
            reset_in: day,
        },
    );
    assert_eq!(o.admit(CAPPED, ms(1), LONG), Admission::Now);
    assert_eq!(o.admit(CAPPED, ms(1), LONG), Admission::Now);
    // Stale answers of the same window never raise the count again.
    for t in [5, 6] {
        o.observe(
            CAPPED,
            ms(t),
            Outcome::Quota {
                remaining: 2,
                reset_in: day - ms(t),
            },
        );
    }
    assert_eq!(
        o.admit(CAPPED, ms(10), LONG),
        Admission::QuotaHeld(ms(1991))
    );
}

#[test]
fn an_enormous_server_time_closes_the_gate_for_its_cap() {
    let mut o = after_burst(10);
    let _ = o.admit(ON, ms(1000), LONG);
    let rate = o.rate();
    let closed = o.observe(
        ON,
        ms(5000),
        Outcome::Pushback {
            retry_in: Some(Duration::MAX),
        },
    );
    assert_eq!(closed, Some(LONG));
    assert_eq!(
        o.rate(),
        rate,
        "an enormous time is not a time-less pushback"
    );
    match o.admit(ON, ms(5000), ms(100)) {
        Admission::Refused { free_in } => assert!(free_in > LONG),
        other => panic!("{other:?}"),
    }
    // Still forgotten once idle past the cap.
    assert!(o.is_idle(ms(5000) + LONG + ORIGIN_IDLE, ORIGIN_IDLE));
}

#[test]
fn pushbacks_without_a_time_cut_at_most_once_per_period() {
    let mut o = after_burst(50);
    let _ = o.admit(ON, ms(1000), LONG);
    let learned = o.rate();
    for t in 0..6 {
        o.observe(ON, ms(1100 + t * 10), Outcome::Pushback { retry_in: None });
    }
    let once = o.rate();
    assert!(
        once >= learned * 0.45 && once < learned,
        "{learned} -> {once}"
    );
    // A period later, the next cut.
    o.observe(ON, ms(2200), Outcome::Pushback { retry_in: None });
    assert!(o.rate() < once * 0.6, "{once} -> {}", o.rate());
}

/// The reservations of `n` tasks queued at `now`.
fn queue(o: &mut OriginState, now: Duration, n: usize) -> Vec<Reservation> {
    (0..n)
        .filter_map(|_| match o.admit(ON, now, LONG) {
            Admission::SlotReserved(_, r) => Some(r),
            _ => None,
        })
        .collect()
}

#[test]
fn slots_given_back_in_any_order_free_the_queue() {
    for order in ["fifo", "lifo", "odd-even"] {
        let mut o = after_burst(5);
        let _ = o.admit(ON, ms(1000), LONG);
        let mut held = queue(&mut o, ms(1000), 100);
        assert!(held.len() >= 90, "{}", held.len());
        match order {
            "lifo" => held.reverse(),
            "odd-even" => {
                let (odd, even): (Vec<_>, Vec<_>) =
                    held.iter().enumerate().partition(|(i, _)| i % 2 == 1);
                held = odd.into_iter().chain(even).map(|(_, r)| *r).collect();
            }
            _ => {}
        }
        for r in held {
            o.release(ms(1100), r);
        }
        // Nothing reserved: the next task waits at most about a period.
        let slot = slot_at(&mut o, ms(1100));
        assert!(slot < ms(1100) + ms(1100), "{order}: next slot at {slot:?}");
    }
}

#[test]
fn the_last_slot_given_back_is_the_next_task_s() {
    let mut o = after_burst(5);
    let _ = o.admit(ON, ms(1000), LONG);
    let held = queue(&mut o, ms(1000), 12);
    let last = *held.last().unwrap();
    o.release(ms(1001), last);
    match o.admit(ON, ms(1001), LONG) {
        Admission::SlotReserved(_, r) => assert_eq!(r.slot, last.slot),
        other => panic!("{other:?}"),
    }
}

#[test]
fn released_slots_never_put_more_than_a_batch_in_a_period() {
    // Any mix of holds, releases and new admissions: no span of a period
    // holds more slots (confirmed or still held) than the batch.
    let mut o = after_burst(5);
    let _ = o.admit(ON, ms(1000), LONG);
    let mut used = vec![ms(1000)];
    let mut held = Vec::new();
    let mut now = ms(1000);
    for step in 0..400u64 {
        now += ms(7);
        match step % 5 {
            0..=2 => {
                if let Admission::SlotReserved(_, r) = o.admit(ON, now, LONG) {
                    held.push(r);
                } else {
                    used.push(now);
                }
            }
            3 if !held.is_empty() => {
                let r = held.remove((step as usize * 7) % held.len());
                o.release(now, r);
            }
            _ => {
                // Confirm every slot whose time came.
                let (due, later): (Vec<_>, Vec<_>) = held.iter().partition(|r| r.slot <= now);
                for r in due {
                    assert_eq!(o.confirm(now, r), None);
                    used.push(r.slot);
                }
                held = later;
            }
        }
    }
    used.extend(held.iter().map(|r| r.slot));
    used.sort();
    let every = o.batch_every;
    for (i, t) in used.iter().enumerate() {
        let in_span = used[i..].iter().take_while(|u| **u < *t + every).count();
        assert!(in_span <= 5, "{in_span} slots within {every:?} from {t:?}");
    }
}

#[test]
fn a_confirmed_slot_behind_a_closed_gate_is_given_back() {
    let mut o = after_burst(5);
    let _ = o.admit(ON, ms(1000), LONG);
    let held = queue(&mut o, ms(1000), 3);
    o.on_pushback(ON, ms(1050), Some(ms(2050)));
    assert_eq!(o.confirm(ms(1100), held[0]), Some(ms(950)));
    assert_eq!(o.reserved, 2);
}

#[test]
fn gate_off_admits_everything() {
    let off = PacingConfig {
        gate: false,
        pace: false,
        max_gate: Duration::from_secs(60),
    };
    let mut o = OriginState::new(ms(0));
    o.on_pushback(off, ms(0), Some(ms(1000)));
    assert_eq!(o.admit(off, ms(1), LONG), Admission::Now);
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
    /// Any sequence of admissions and answers, at times that only move
    /// forward: no panic, a batch never has more slots left than its size,
    /// no slot is handed out before the gate opens, and the text form
    /// round-trips.
    #[test]
    fn any_sequence_of_events_keeps_the_state_sound(
        events in proptest::collection::vec((0u64..400, 0u8..6, 0u64..3000), 1..400)
    ) {
        let mut o = OriginState::new(ms(0));
        let mut now = ms(0);
        for (dt, kind, arg) in events {
            now += ms(dt);
            match kind {
                0 | 1 => {
                    let gate = o.gate_until(now);
                    match o.admit(ON, now, ms(arg * 10)) {
                        Admission::Now | Admission::Reopened => {
                            proptest::prop_assert!(gate.is_none_or(|g| g <= now));
                        }
                        Admission::SlotReserved(d, _) | Admission::GateClosed(d) | Admission::QuotaHeld(d) | Admission::QueueAhead(d) => {
                            proptest::prop_assert!(d <= ms(arg * 10).max(SLOW_START_AHEAD));
                        }
                        Admission::Refused { free_in } => {
                            proptest::prop_assert!(free_in > ms(arg * 10));
                        }
                    }
                }
                2 => o.on_success(now),
                3 => o.on_pushback(ON, now, Some(now + ms(arg))),
                4 => o.on_pushback(ON, now, if arg % 2 == 0 { Some(now) } else { None }),
                _ => {
                    let _ = o.observe(ON, now, Outcome::Exhausted { reset_in: ms(arg) });
                }
            }
            proptest::prop_assert!(o.batch_left <= o.batch);
            proptest::prop_assert_eq!(OriginState::decode(&o.encode()), Some(o));
        }
    }
}

#[test]
fn a_server_stating_its_quota_gets_its_batch_at_once() {
    // 100 admitted over 80 ms, each answer stating the quota left and its
    // reset; the last says it is spent until 1 s.
    let mut o = OriginState::new(ms(0));
    for i in 0..99u64 {
        let _ = o.observe(
            ON,
            ms(i * 80 / 99),
            Outcome::Quota {
                remaining: 99 - i,
                reset_in: ms(1000 - i * 80 / 99),
            },
        );
    }
    let _ = o.observe(ON, ms(80), Outcome::Exhausted { reset_in: ms(920) });
    let slots: Vec<Duration> = (0..100).map(|_| slot_at(&mut o, ms(1000))).collect();
    // Not spread over the 80 ms the answers took: all right after the probe.
    assert!(slots[1..].iter().all(|s| *s == slots[1]), "{slots:?}");
    assert!(slots[1] < ms(1050));
}

/// A fixed window of `cap` per second (windows at whole seconds) stating
/// its quota on every answer as express-rate-limit does: `remaining` and a
/// reset rounded *up* to whole seconds. `tasks` tasks start at once; each
/// asks the origin, sleeps as told (re-checking the gate after a reserved
/// slot, as a task does) and sends. A request arrives at once; its answer
/// `rtt` later, plus `queued` for each request sent at the same instant
/// before it (a batch's answers come over a span, the spent quota's last).
/// Returns (429s answered to retries, time of the last success).
fn stated_window_run(tasks: usize, cap: u64, rtt: Duration, queued: Duration) -> (usize, Duration) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    const ASK: u8 = 0;
    const WAKE: u8 = 1;
    const ANSWER: u8 = 2;
    let mut o = OriginState::new(ms(0));
    // (time, what, task, arrival at the server of the answered request)
    let mut events: BinaryHeap<Reverse<(Duration, u8, usize, Duration)>> = (0..tasks)
        .map(|t| Reverse((ms(0), ASK, t, ms(0))))
        .collect();
    let mut sends = vec![0u32; tasks];
    let (mut window, mut used) = (0u128, 0u64);
    let (mut rejected_retries, mut last_success) = (0, Duration::ZERO);
    let (mut sent_at, mut same) = (Duration::MAX, 0u32);
    while let Some(Reverse((now, what, task, arrived))) = events.pop() {
        let send = match what {
            ANSWER => {
                let w = arrived.as_millis() / 1000;
                if w != window {
                    (window, used) = (w, 0);
                }
                let next = ms(1000) * u32::try_from(w + 1).expect("small");
                let reset_in = Duration::from_secs(
                    u64::try_from(next.saturating_sub(now).as_millis().div_ceil(1000))
                        .expect("small"),
                );
                if used < cap {
                    used += 1;
                    last_success = last_success.max(now);
                    let outcome = if used == cap {
                        Outcome::Exhausted { reset_in }
                    } else {
                        Outcome::Quota {
                            remaining: cap - used,
                            reset_in,
                        }
                    };
                    let _ = o.observe(ON, now, outcome);
                } else {
                    if sends[task] > 1 {
                        rejected_retries += 1;
                    }
                    let retry_in = Some(reset_in.max(ms(1000)));
                    let _ = o.observe(ON, now, Outcome::Pushback { retry_in });
                    events.push(Reverse((now + reset_in.max(ms(1000)), ASK, task, now)));
                }
                false
            }
            // Woken for a reserved slot: sends unless the gate closed
            // meanwhile (then queues anew).
            WAKE => o.gate_until(now).is_none(),
            _ => match o.admit(ON, now, LONG) {
                Admission::Now | Admission::Reopened => true,
                Admission::SlotReserved(d, _) => {
                    events.push(Reverse((now + d, WAKE, task, now)));
                    false
                }
                Admission::GateClosed(d) | Admission::QuotaHeld(d) | Admission::QueueAhead(d) => {
                    events.push(Reverse((now + d, ASK, task, now)));
                    false
                }
                Admission::Refused { .. } => panic!("refused with a long limit"),
            },
        };
        if what == WAKE && !send {
            events.push(Reverse((now, ASK, task, now)));
        }
        if send {
            sends[task] += 1;
            if sent_at == now {
                same += 1;
            } else {
                (sent_at, same) = (now, 0);
            }
            events.push(Reverse((now + rtt + queued * same, ANSWER, task, now)));
        }
    }
    (rejected_retries, last_success)
}

#[test]
fn a_stated_reset_rounded_up_re_anchors_every_batch_and_loses_none() {
    // 500 tasks, 100 a window. The first burst's answers take 250 ms, so
    // its last 429 names 1.25 s; then one batch a window: the last ends
    // near 4.3 s. Each batch's answers state a reset rounded up, and the
    // spent quota comes last, 50 ms after the first: batches booked ahead
    // of that reset were lost, one window in two (6.45 s).
    let (rejected, last) = stated_window_run(500, 100, ms(2), Duration::from_micros(500));
    assert_eq!(rejected, 0);
    assert!(last < ms(4500), "last success at {last:?}");
}

/// An answer applied after it was received (a shared store's round trips)
/// counts its `Retry-After` from when it was received: the gate closes no
/// later than the server said, and an answer whose time has passed by the
/// time it is applied closes nothing (it used to close the gate for a whole
/// period from the time of application).
#[test]
fn a_late_applied_pushback_counts_from_its_answer() {
    let pushback = Outcome::Pushback {
        retry_in: Some(ms(1000)),
    };
    let mut o = OriginState::new(ms(0));
    // Answered at 100 ms, applied at 400 ms: closed until 1,100 ms.
    assert_eq!(
        o.observe_late(ON, ms(400), ms(300), pushback),
        Some(ms(700))
    );
    assert_eq!(o.gate_until(ms(400)), Some(ms(1100)));
    // The period learned is the server's (1 s), not what was left of it.
    assert_eq!(o.gate_span, ms(1000));

    let mut o = OriginState::new(ms(0));
    // Answered at 100 ms, applied at 1,600 ms: its time has passed.
    assert_eq!(o.observe_late(ON, ms(1600), ms(1500), pushback), None);
    assert_eq!(o.gate_until(ms(1600)), None);
    assert!(o.rejected);
    // Applied at once, as before.
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.observe_late(ON, ms(100), ms(0), pushback), Some(ms(1000)));
}

/// A spent quota known only from the answer that spent it (a shared store
/// keeps no count of the answers before it) is a stated quota all the
/// same: batches are not booked ahead of its reset, where the gate it
/// closes would lose them (one window in two at 5,000 tasks over Redis).
#[test]
fn an_exhausted_answer_alone_states_the_quota_until_its_reset() {
    let mut o = OriginState::new(ms(0));
    let exhausted = Outcome::Exhausted { reset_in: ms(1000) };
    assert_eq!(
        o.observe_late(ON, ms(300), ms(100), exhausted),
        Some(ms(900))
    );
    assert!(o.states_quota());
    assert_eq!(o.quota_until, ms(1200));
    assert_eq!(o.quota_left, 0);
    // An answer of an earlier window leaves a later window's quota alone.
    o.on_quota(ON, ms(1300), 40, ms(1000));
    o.observe_late(ON, ms(1400), ms(1300), exhausted);
    assert_eq!((o.quota_until, o.quota_left), (ms(2300), 40));
}
