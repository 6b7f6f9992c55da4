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
