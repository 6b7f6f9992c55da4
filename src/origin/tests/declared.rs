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
                        Admission::SlotReserved(d, _) | Admission::GateClosed(d) | Admission::QuotaHeld(d) | Admission::QueueAhead(d) | Admission::FirstAnswer(d) => {
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

/// The sends at times `sent` (sorted) overspend the declared `quota`: a
/// window holding more than its count in a span of its length, or a bucket
/// (GCRA) sending before its time.
fn overspends(quota: Declared, sent: &[Duration]) -> bool {
    let count = usize::try_from(quota.count()).unwrap_or(usize::MAX);
    if quota.is_refilled() {
        let every = quota.per() / quota.count();
        let mut tat = Duration::ZERO;
        return sent.iter().any(|&at| {
            tat = tat.max(at) + every;
            tat - at > quota.per()
        });
    }
    (0..sent.len()).any(|i| {
        sent[i..]
            .iter()
            .take_while(|&&at| at < sent[i] + quota.per())
            .count()
            > count
    })
}

/// What the tasks of `events` send under `cfg`, each at once or at its
/// slot: an admission at `now` every `dt`, answers in between.
fn declared_sends(cfg: PacingConfig, events: &[(u64, u8, u64)]) -> Vec<Duration> {
    let mut o = OriginState::new(ms(0));
    let (mut now, mut sent) = (ms(0), Vec::new());
    for &(dt, kind, arg) in events {
        now += ms(dt);
        match kind {
            0 | 1 => match o.admit(cfg, now, ms(600_000)) {
                Admission::Now | Admission::Reopened => sent.push(now),
                Admission::SlotReserved(wait, _) => sent.push(now + wait),
                _ => {}
            },
            2 => o.on_success(now),
            3 => o.on_pushback(cfg, now, Some(now + ms(arg))),
            4 => o.on_pushback(cfg, now, None),
            _ => {
                let _ = o.observe(
                    cfg,
                    now,
                    Outcome::Quota {
                        remaining: arg % 3,
                        reset_in: ms(arg),
                        limit: Some(arg % 3 + 1),
                        window: Some(ms(arg / 2)),
                        sent_ago: Duration::ZERO,
                        tokens: None,
                    },
                );
            }
        }
    }
    sent.sort();
    sent
}

#[test]
fn a_reopened_gate_does_not_restart_a_declared_window() {
    // 2 a second: both at 0, then a pushback of 100 ms. The reopening's
    // probe and the batch it restarted sent 2 more at 100 ms (seed 1671 of
    // the simulation: 6 in a window of 5).
    let quota = Declared::per_second(2);
    let cfg = PacingConfig {
        declared: Some(quota),
        ..ON
    };
    let events = [(0, 0, 0), (0, 0, 0), (10, 3, 90), (90, 0, 0), (0, 0, 0)];
    let sent = declared_sends(cfg, &events);
    assert_eq!(sent, [ms(0), ms(0), ms(1020), ms(1020)]);
}

#[test]
fn a_stated_quota_does_not_unpace_a_declared_window() {
    // 2 a second: both at 0; the answer states a window of 1 with 0 left
    // for 100 ms, then a pushback longer than that window: the stated quota
    // governs again at the reopening, and the pace stood down (the queue
    // sent at once).
    let quota = Declared::per_second(2);
    let cfg = PacingConfig {
        declared: Some(quota),
        ..ON
    };
    let events = [
        (0, 0, 0),
        (0, 0, 0),
        (5, 5, 200),
        (5, 3, 300),
        (300, 0, 0),
        (0, 0, 0),
    ];
    let sent = declared_sends(cfg, &events);
    assert!(!overspends(quota, &sent), "{sent:?}");
}

proptest::proptest! {
    /// Any sequence of admissions and answers (pushbacks with and without
    /// a time, stated quotas): tasks that send when admitted never overspend
    /// the declared window or bucket.
    #[test]
    fn a_declared_quota_is_never_overspent(
        (count, per, refilled) in (1u32..4, 0usize..3, proptest::bool::ANY),
        events in proptest::collection::vec((0u64..400, 0u8..6, 0u64..3000), 1..200)
    ) {
        let per = [ms(500), ms(1000), ms(6000)][per];
        let quota = if refilled {
            Declared::new(count, per).refilled()
        } else {
            Declared::new(count, per)
        };
        let cfg = PacingConfig {
            declared: Some(quota),
            ..ON
        };
        let sent = declared_sends(cfg, &events);
        proptest::prop_assert!(!overspends(quota, &sent), "{quota:?}: {sent:?}");
    }
}

#[test]
fn a_slot_handed_out_again_after_a_reopening_is_settled_when_used() {
    // A bucket of 2 a second: a burst of 2, a third reserved, a pushback
    // of 100 ms. After the reopening the declared bucket goes on where it
    // was: the slot handed out again lies before the end of the voided
    // queue, and its use must still be counted off (seed 1259 of the
    // simulation: a slot reserved after the last task).
    let cfg = PacingConfig {
        declared: Some(Declared::per_second(2).refilled()),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    assert!(matches!(
        o.admit(cfg, ms(0), LONG),
        Admission::SlotReserved(..)
    ));
    o.on_pushback(cfg, ms(10), Some(ms(100)));
    let Admission::SlotReserved(wait, r) = o.admit(cfg, ms(100), LONG) else {
        panic!("expected a slot: {o:?}");
    };
    let at = ms(100) + wait;
    assert!(at >= ms(500), "{at:?}");
    assert_eq!(o.recheck(at, r), None);
    o.sent(at, r);
    assert_eq!(o.status(at).reserved(), 0, "{o:?}");
}

#[test]
fn the_probe_after_a_stated_quotas_hold_waits_for_the_declared_quota() {
    // 2 every 6 s declared; the origin states its window of 2 spent until
    // 6 s, and the gate's cap is 1 s: after the cap one task finds out, but
    // no sooner than the declared window lets it (seed 1908 of the
    // simulation: the probe left at 5.05 s, a third request in 6 s).
    let quota = Declared::new(2, ms(6000));
    let cfg = PacingConfig {
        declared: Some(quota),
        declared_units: Some(Declared::new(100, ms(1)).units()),
        ..SHORT_GATE
    };
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    let _ = o.observe(
        cfg,
        ms(10),
        Outcome::Quota {
            remaining: 0,
            reset_in: ms(5990),
            limit: Some(2),
            window: Some(ms(6000)),
            sent_ago: ms(10),
            tokens: None,
        },
    );
    assert!(matches!(
        o.admit(cfg, ms(20), LONG),
        Admission::QuotaHeld(_)
    ));
    match o.admit(cfg, ms(1020), LONG) {
        Admission::SlotReserved(wait, _) | Admission::QueueAhead(wait) => {
            assert_eq!(ms(1020) + wait, ms(6120));
        }
        other => panic!("expected the declared slot at 6.12 s, got {other:?}"),
    }
}

#[test]
fn a_declared_buckets_burst_stays_spent_when_its_last_reservation_is_used() {
    // A bucket of 2 a second: a burst of 2 at 0, a third reserved for the
    // refill. Once that one sends, no reservation is left, and the queue
    // was rewound to one interval from then: the burst's two were
    // forgotten, and a fourth left at once (sim seed 693: one every 5 s
    // under a declared 10 a minute).
    let quota = Declared::per_second(2).refilled();
    let cfg = PacingConfig {
        declared: Some(quota),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    let mut sent = vec![ms(0), ms(0)];
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    let Admission::SlotReserved(wait, r) = o.admit(cfg, ms(0), LONG) else {
        panic!("expected a slot: {o:?}");
    };
    assert_eq!(o.recheck(wait, r), None);
    o.sent(wait, r);
    sent.push(wait);
    match o.admit(cfg, wait, LONG) {
        Admission::Now | Admission::Reopened => sent.push(wait),
        Admission::SlotReserved(more, _) => sent.push(wait + more),
        other => panic!("expected a slot, got {other:?}"),
    }
    assert!(!overspends(quota, &sent), "{sent:?}");
}

#[test]
fn declared_units_are_spent_when_their_request_leaves() {
    // 20 units every 500 ms and 2 requests a second. A task admitted at
    // 600 ms leaves at its request slot (1.02 s): its units were counted
    // in a window from 600 ms, which closed at 1.12 s, and a task at 1.2 s
    // spent 15 more within 180 ms of it (sim seed 1335: 30 units at one
    // instant under a declared 20 per 500 ms).
    let units = Declared::new(20, ms(500)).units();
    let cfg = PacingConfig {
        declared: Some(Declared::per_second(2)),
        declared_units: Some(units),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    let mut sent = Vec::new();
    for (at, cost) in [(0, 15), (0, 1), (0, 15), (600, 15), (1200, 15)] {
        match o.admit_costing(cfg, ms(at), LONG, cost) {
            Admission::Now | Admission::Reopened => sent.push((ms(at), cost)),
            Admission::SlotReserved(wait, _) => sent.push((ms(at) + wait, cost)),
            _ => {}
        }
    }
    sent.sort();
    for (i, &(from, _)) in sent.iter().enumerate() {
        let spent: u64 = sent[i..]
            .iter()
            .take_while(|(at, _)| *at < from + units.per())
            .map(|(_, cost)| cost)
            .sum();
        assert!(spent <= 20, "{spent} units from {from:?}: {sent:?}");
    }
}

#[test]
fn a_declared_bucket_is_not_raised_by_successes() {
    // A bucket of 2 every 10 s. A success raised its rate (as a learned
    // smooth pace rises after a clean second), and the queue, rewound when
    // its last reservation was used, measured the bucket's tolerance at
    // that rate: the next slot came 180 ms early (sim seed 617).
    let quota = Declared::new(2, ms(10_000)).refilled();
    let cfg = PacingConfig {
        declared: Some(quota),
        ..ON
    };
    let mut o = OriginState::new(ms(0));
    let mut sent = vec![ms(0), ms(0)];
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    let Admission::SlotReserved(wait, r) = o.admit(cfg, ms(0), LONG) else {
        panic!("expected a slot: {o:?}");
    };
    o.on_success(ms(2000));
    o.sent(wait, r);
    sent.push(wait);
    match o.admit(cfg, wait, LONG) {
        Admission::SlotReserved(more, _) => sent.push(wait + more),
        other => panic!("expected a slot, got {other:?}"),
    }
    assert!(!overspends(quota, &sent), "{sent:?}");
}
