//! The gate, with fixed times.

use super::*;
use crate::origin::gate::{Closing, Gate};

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
fn an_enormous_server_time_closes_the_gate_for_its_cap() {
    let mut o = after_burst(10);
    let _ = o.admit(ON, ms(1000), LONG);
    let rate = o.rate();
    let closed = o.observe(
        ON,
        ms(5000),
        Outcome::Pushback {
            retry_in: Some(Duration::MAX),
            hold_at_least: None,
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
fn gate_off_admits_everything() {
    let off = PacingConfig {
        gate: false,
        pace: false,
        ..PacingConfig::DEFAULT
    };
    let mut o = OriginState::new(ms(0));
    o.on_pushback(off, ms(0), Some(ms(1000)));
    assert_eq!(o.admit(off, ms(1), LONG), Admission::Now);
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
        hold_at_least: None,
    };
    let mut o = OriginState::new(ms(0));
    // Answered at 100 ms, applied at 400 ms: closed until 1,100 ms.
    assert_eq!(
        o.observe_late(ON, ms(400), ms(300), pushback),
        Some(ms(700))
    );
    assert_eq!(o.gate_until(ms(400)), Some(ms(1100)));
    // The period learned is the server's (1 s), not what was left of it.
    assert_eq!(o.gate.span, ms(1000));

    let mut o = OriginState::new(ms(0));
    // Answered at 100 ms, applied at 1,600 ms: its time has passed.
    assert_eq!(o.observe_late(ON, ms(1600), ms(1500), pushback), None);
    assert_eq!(o.gate_until(ms(1600)), None);
    assert!(o.period.rejected);
    // Applied at once, as before.
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.observe_late(ON, ms(100), ms(0), pushback), Some(ms(1000)));
}

/// An invalid `Retry-After` that still reads as decimal seconds (Shopify's
/// `2.0`: 2.1 s) holds the gate for the longer of our own hold and that
/// reading, capped at `max_gate`, and never shortens a later time.
#[test]
fn an_invalid_time_that_reads_as_seconds_holds_the_gate_at_least_that_long() {
    let invalid = |least| Outcome::Pushback {
        retry_in: None,
        hold_at_least: Some(least),
    };
    // Our own hold alone: a second from the answer.
    let mut bare = OriginState::new(ms(0));
    bare.observe(
        ON,
        ms(10),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: None,
        },
    );
    assert_eq!(bare.gate_until(ms(10)), Some(ms(1010)));
    // The reading is longer: it holds.
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.observe(ON, ms(10), invalid(ms(2100))), Some(ms(2100)));
    assert_eq!(o.admit(ON, ms(2000), LONG), Admission::GateClosed(ms(110)));
    assert_eq!(
        o.admit(ON, ms(2000), ms(50)),
        Admission::Refused { free_in: ms(110) }
    );
    // Behind a learned pace (a hold of a few intervals), the same.
    let mut paced = after_burst(10);
    let _ = paced.admit(ON, ms(1000), LONG);
    paced.observe(ON, ms(1000), invalid(ms(2100)));
    assert_eq!(paced.gate_until(ms(1000)), Some(ms(3100)));
    // Shorter than our own hold: our own hold.
    let mut short = OriginState::new(ms(0));
    short.observe(ON, ms(10), invalid(ms(110)));
    assert_eq!(short.gate_until(ms(10)), Some(ms(1010)));
    // Enormous: capped at max_gate from the answer.
    let mut huge = OriginState::new(ms(0));
    huge.observe(ON, ms(10), invalid(Duration::MAX));
    assert_eq!(huge.gate_until(ms(10)), Some(ms(10) + ON.max_gate));
    // A later server time already set is kept.
    let mut later = OriginState::new(ms(0));
    later.on_pushback(ON, ms(0), Some(ms(5000)));
    later.observe(ON, ms(100), invalid(ms(2100)));
    assert_eq!(later.gate_until(ms(100)), Some(ms(5000)));
    // An earlier close of this burst is lengthened to the reading.
    let mut burst = OriginState::new(ms(0));
    burst.on_pushback(ON, ms(0), Some(ms(500)));
    burst.observe(ON, ms(100), invalid(ms(2100)));
    assert_eq!(burst.gate_until(ms(100)), Some(ms(2200)));
    // Gate off: nothing held.
    let off = PacingConfig {
        gate: false,
        pace: false,
        ..PacingConfig::DEFAULT
    };
    let mut o = OriginState::new(ms(0));
    o.observe(off, ms(10), invalid(ms(2100)));
    assert_eq!(o.admit(off, ms(20), LONG), Admission::Now);
}

proptest::proptest! {
    /// Whatever the pushbacks and their order, the gate never closes less
    /// than a server time (capped) asked, never shortens, never closes
    /// past its cap from the answer that set it, and a refusal is never
    /// told to come back before the latest time a server named.
    #[test]
    fn the_gate_is_never_early_and_never_past_its_cap(
        events in proptest::collection::vec((0u64..50, 0u64..3_000, 0u8..4, 1u64..5), 1..60)
    ) {
        let mut gate = Gate::default();
        let mut now = Duration::ZERO;
        let mut latest_named = Duration::ZERO;
        for (step, delay, kind, cap) in events {
            now += ms(step);
            let max_gate = ms(cap * 500);
            let before = gate.until;
            let server_before = gate.server_until;
            let retry_at = match kind {
                0 => None,
                1 => Some(now),
                _ => Some(now + ms(delay)),
            };
            let closing = match retry_at {
                Some(at) => gate.close(max_gate, now, now, at),
                None => {
                    let closing = gate.close_silent(max_gate, now, TUNING.silent_hold, delay % 2 == 0);
                    // A hold of our own is no server time.
                    proptest::prop_assert_eq!(gate.server_until, server_before);
                    proptest::prop_assert!(gate.until > now, "a silent pushback left it open");
                    proptest::prop_assert!(
                        gate.until <= before.max(now + TUNING.silent_hold_max.min(max_gate))
                    );
                    closing
                }
            };
            proptest::prop_assert!(gate.until >= before, "shortened");
            if let (Some(at), Closing::Closed(_)) = (retry_at, closing)
                && at > now
            {
                latest_named = latest_named.max(at);
                proptest::prop_assert!(gate.until >= at.min(now + max_gate));
            }
            proptest::prop_assert!(gate.until <= before.max(now + max_gate));
            proptest::prop_assert!(gate.server_until >= latest_named);
            proptest::prop_assert!(now + gate.refusal(now, Duration::ZERO) >= latest_named);
        }
    }
}
