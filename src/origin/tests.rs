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
        Admission::SlotReserved(d) => now + d,
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

#[test]
fn learns_the_admitted_rate_and_paces_after_a_probe() {
    let mut o = after_burst(100);
    // Everyone queued at the closed gate comes back at its time.
    assert_eq!(o.admit(ON, ms(500), LONG), Admission::GateClosed(ms(500)));
    let slots: Vec<Duration> = (0..300).map(|_| slot_at(&mut o, ms(1000))).collect();
    assert!(
        (o.rate() - 100.0 * PACE_MARGIN).abs() < 1e-9,
        "{}",
        o.rate()
    );
    // The probe goes alone at the gate time, the next one interval later.
    assert_eq!(slots[0], ms(1000));
    assert_eq!(slots[1], ms(1000) + interval(o.rate()));
    assert!(slots.iter().all(|s| *s >= ms(1000)));
    // No second of the schedule holds more than the 100 admitted.
    for w in 1..4 {
        let lo = Duration::from_secs(w);
        let hi = lo + Duration::from_secs(1);
        let n = slots.iter().filter(|s| **s >= lo && **s < hi).count();
        assert!((98..=100).contains(&n), "window {w}: {n}");
    }
}

#[test]
fn nothing_admitted_means_one_probe_a_second_then_slow_start() {
    let mut o = after_burst(0);
    // The probe, alone.
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::Reopened);
    assert_eq!(o.rate(), MIN_RATE);
    assert_eq!(
        o.admit(ON, ms(1000), LONG),
        Admission::SlotReserved(ms(1000))
    );
    for _ in 0..3 {
        o.on_success(ms(1100));
    }
    assert_eq!(o.rate(), MIN_RATE + 3.0 * SLOW_START_STEP);
}

#[test]
fn a_pushback_while_pacing_cuts_the_pace() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let learned = o.rate();
    // Paced, a pushback at 1.5 s after 50 successes.
    for _ in 0..50 {
        o.on_success(ms(1400));
    }
    o.on_pushback(ON, ms(1500), Some(ms(2500)));
    assert_eq!(o.admit(ON, ms(1600), LONG), Admission::GateClosed(ms(900)));
    assert_eq!(slot_at(&mut o, ms(2500)), ms(2500));
    assert!(
        (o.rate() - learned * CUT_FACTOR).abs() < 1e-9,
        "{}",
        o.rate()
    );
}

#[test]
fn a_rejected_probe_halves_the_pace_at_most() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let learned = o.rate();
    // The probe itself is rejected 5 ms after reopening: nothing measured.
    o.on_pushback(ON, ms(1005), Some(ms(2005)));
    let _ = slot_at(&mut o, ms(2005));
    assert!(
        (o.rate() - learned * CUT_FLOOR).abs() < 1e-9,
        "{}",
        o.rate()
    );
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
    assert!((o.rate() - learned * RAISE_FACTOR).abs() < 1e-9);
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
    assert!((o.rate() - 50.0 * PACE_MARGIN).abs() < 1e-9, "{}", o.rate());
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
    assert_eq!(o.admit(ON, ms(10), LONG), Admission::GateClosed(ms(990)));
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
    assert_eq!(o.admit(ON, ms(1100), LONG), Admission::GateClosed(ms(900)));
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
    assert_eq!(
        o.admit(ON, ms(1000), LONG),
        Admission::SlotReserved(ms(1000))
    );
    // The next slot is two seconds away: not booked at today's rate, which
    // rises with each success; the task asks again in a second.
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::QueueAhead(ms(1000)));
    // A task that cannot wait that long is still refused at once.
    assert!(matches!(
        o.admit(ON, ms(1000), ms(500)),
        Admission::Refused { .. }
    ));
}
