//! Declared quotas on fixed times: the caller's own knowledge, so their
//! holds and slots are not capped by the gate's cap (`max_wait`), and a
//! task waits for them while its deadline allows ([`Within::declared`]).

use super::*;

/// `max_wait` of one second.
const SHORT_GATE: PacingConfig = PacingConfig {
    max_gate: Duration::from_secs(1),
    ..PacingConfig::DEFAULT
};

#[test]
fn a_declared_unit_window_longer_than_the_gates_cap_renews() {
    // 100 units a second, 20 a request, the gate's cap 1 s (under the
    // window's 1.02 s): five go, the sixth is held until the window closes
    // (not the cap), and the next window is whole again.
    let cfg = PacingConfig {
        declared_units: Some(Declared::new(100, Duration::from_secs(1)).units()),
        ..SHORT_GATE
    };
    let mut o = OriginState::new(ms(0));
    for _ in 0..5 {
        assert_eq!(o.admit_costing(cfg, ms(0), LONG, 20), Admission::Now);
    }
    assert_eq!(
        o.admit_costing(cfg, ms(0), LONG, 20),
        Admission::QuotaHeld(ms(1020))
    );
    // Asked again at the cap's end: still held (before the fix this task
    // was a probe that spent again and moved the window's end out).
    assert_eq!(
        o.admit_costing(cfg, ms(1000), LONG, 20),
        Admission::GateClosed(ms(20))
    );
    for _ in 0..5 {
        assert_eq!(o.admit_costing(cfg, ms(1020), LONG, 20), Admission::Now);
    }
    assert_eq!(
        o.admit_costing(cfg, ms(1020), LONG, 20),
        Admission::QuotaHeld(ms(1020))
    );
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn a_declared_hold_is_bounded_by_the_deadline_not_the_gates_cap() {
    // 10 units a minute: the window (61.2 s) is longer than the default
    // cap (60 s). A task that accepts 61.2 s for a declared hold waits it;
    // one that does not is refused, told when the window closes.
    let cfg = PacingConfig {
        declared_units: Some(Declared::per_minute(10).units()),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit_costing(cfg, ms(0), LONG, 10), Admission::Now);
    let window = ms(61_200);
    let within = Within {
        server: LONG,
        declared: ms(120_000),
    };
    assert_eq!(
        o.admit_within(cfg, ms(0), within, 10),
        Admission::QuotaHeld(window)
    );
    let short = Within {
        server: LONG,
        declared: ms(30_000),
    };
    assert_eq!(
        o.admit_within(cfg, ms(0), short, 10),
        Admission::Refused { free_in: window }
    );
}

#[test]
fn a_declared_slot_is_bounded_by_the_deadline_not_the_gates_cap() {
    // 10 requests a minute: the second batch leaves 61.2 s after the
    // first, past the cap, within what the tasks accept for a declared
    // slot.
    let cfg = PacingConfig {
        declared: Some(Declared::per_minute(10)),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    let within = Within {
        server: LONG,
        declared: ms(600_000),
    };
    for _ in 0..10 {
        assert_eq!(o.admit_within(cfg, ms(0), within, 0), Admission::Now);
    }
    match o.admit_within(cfg, ms(0), within, 0) {
        Admission::SlotReserved(wait, _) => assert_eq!(wait, ms(61_200)),
        other => panic!("expected a slot, got {other:?}"),
    }
    // A task that accepts only the cap is refused, told when.
    assert_eq!(
        o.admit_within(cfg, ms(0), Within::both(LONG), 0),
        Admission::Refused {
            free_in: ms(61_200)
        }
    );
}

#[test]
fn a_declared_window_longer_than_the_idle_time_is_not_forgotten() {
    // 3 an hour, in requests and in units: spent at 0, the origin must not
    // be forgotten after five idle minutes (a new state would send another
    // whole window at once).
    for cfg in [
        PacingConfig {
            declared: Some(Declared::per_hour(3)),
            ..ON
        },
        PacingConfig {
            declared_units: Some(Declared::per_hour(3).units()),
            ..ON
        },
    ] {
        let mut o = OriginState::new(ms(0));
        for _ in 0..3 {
            assert_eq!(o.admit_costing(cfg, ms(0), LONG, 1), Admission::Now);
        }
        let later = ms(0) + ORIGIN_IDLE + ms(1000);
        assert!(!o.is_idle(later, ORIGIN_IDLE), "{cfg:?}");
        // Forgotten once its window (and the margin) is over.
        assert!(
            o.is_idle(ms(3_672_000) + ORIGIN_IDLE, ORIGIN_IDLE),
            "{cfg:?}"
        );
    }
}

/// A declared quota of one of the extreme shapes a policy accepts.
fn extreme(count: u8, per: u8, shape: u8) -> Declared {
    let count = [1, 2, 7, u32::MAX][usize::from(count % 4)];
    let per = [ms(1), ms(1000), ms(61_000), Declared::LONGEST_SPAN][usize::from(per % 4)];
    let q = Declared::new(count, per);
    match shape % 4 {
        0 => q,
        1 => q.refilled(),
        2 => q.units(),
        _ => q.refilled().units(),
    }
}

proptest::proptest! {
    /// Any sequence of admissions (with costs) and answers under extreme
    /// declared quotas, gate caps and server times: no panic, no wait
    /// beyond what the task accepts, and the text form round-trips.
    #[test]
    fn extreme_declared_quotas_keep_the_state_sound(
        (count, per, shape, gate) in (0u8..4, 0u8..4, 0u8..4, 0u8..3),
        events in proptest::collection::vec((0u64..70_000, 0u8..7, 0u64..3000), 1..200)
    ) {
        let quota = extreme(count, per, shape);
        let max_gate = [ms(1000), LONG, Duration::MAX][usize::from(gate)];
        let cfg = PacingConfig {
            max_gate,
            first_contact: ms(500),
            declared: (!quota.is_units()).then_some(quota),
            declared_units: quota.is_units().then_some(quota),
            ..ON
        };
        let mut o = OriginState::new(ms(0));
        let mut now = ms(0);
        for (dt, kind, arg) in events {
            now += ms(dt);
            let within = Within {
                server: ms(arg * 10),
                declared: ms(arg * 1000),
            };
            match kind {
                0 | 1 => {
                    let most = within.server.max(within.declared).max(TUNING.slow_start_ahead);
                    match o.admit_within(cfg, now, within, arg % 5 * 1000) {
                        Admission::SlotReserved(d, _) | Admission::GateClosed(d) | Admission::QuotaHeld(d) | Admission::QueueAhead(d) | Admission::FirstAnswer(d) | Admission::FirstWave(d) => {
                            proptest::prop_assert!(d <= most, "{d:?} > {most:?}");
                        }
                        _ => {}
                    }
                }
                2 => o.on_success(now),
                3 => o.on_pushback(cfg, now, Some(now.saturating_add(ms(arg)))),
                4 => o.on_pushback(cfg, now, Some(Duration::MAX)),
                5 => o.on_pushback(cfg, now, None),
                _ => {
                    let _ = o.observe(cfg, now, Outcome::Quota { remaining: arg % 4, reset_in: ms(arg), limit: Some(arg % 7), window: None, sent_ago: Duration::ZERO, tokens: None });
                }
            }
            // (Times past the wire's 584 years saturate there.)
            let wire = o.encode();
            proptest::prop_assert_eq!(OriginState::decode(&wire).map(|d| d.encode()), Some(wire));
            let _ = o.is_idle(now, ORIGIN_IDLE);
        }
    }
}

#[test]
fn a_rate_too_low_to_space_is_as_slow_as_a_declared_year_not_a_second() {
    // 1 / rate does not fit a `Duration`: the spacing is the longest one a
    // policy can declare (a year), not a fallback of one second (which
    // paced such a bucket at one request a second). Only a shared store's
    // text form can still carry such a rate (a longer span is refused).
    let year = Declared::LONGEST_SPAN;
    assert_eq!(crate::origin::pace::interval(1e-30), year);
    assert_eq!(crate::origin::pace::interval(0.0), year);
    assert_eq!(crate::origin::pace::interval(f64::NAN), year);
    assert_eq!(crate::origin::pace::interval(2.0), ms(500));
    let mut o = OriginState::new(ms(0));
    o.pace.mode = Mode::Smooth {
        rate: 1e-30,
        burst: 2,
    };
    let o2 = OriginState::decode(&o.encode()).expect("decodes");
    for mut o in [o, o2] {
        // The bucket's burst, then nothing for a year.
        assert_eq!(o.admit(ON, ms(0), LONG), Admission::Now);
        assert_eq!(o.admit(ON, ms(10), LONG), Admission::Now);
        assert!(
            matches!(o.admit(ON, ms(20), LONG), Admission::Refused { free_in } if free_in >= year - ms(20)),
            "{o:?}"
        );
        o.on_pushback(ON, ms(30), None);
        let _ = o.admit(ON, ms(5000), LONG);
    }
}
