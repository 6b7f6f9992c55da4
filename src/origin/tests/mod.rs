//! The origin's parts, with fixed times (one file each), and a property
//! test of any sequence of events.

use super::pace::Mode;
use super::*;

mod bucket;
mod costs;
mod declared;
mod declared_binds;
mod gate;
mod guessed;
mod instants;
mod isolated;
mod known;
mod pace;
mod quiet;
mod renewal;
mod restart;
mod silent;
mod slots;
mod spent;
mod stated;
mod status;
mod wave;

const ON: PacingConfig = PacingConfig::DEFAULT;

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

const CAPPED: PacingConfig = PacingConfig {
    max_gate: Duration::from_secs(2),
    ..PacingConfig::DEFAULT
};

/// The reservations of `n` tasks queued at `now`.
fn queue(o: &mut OriginState, now: Duration, n: usize) -> Vec<Reservation> {
    (0..n)
        .filter_map(|_| match o.admit(ON, now, LONG) {
            Admission::SlotReserved(_, r) => Some(r),
            _ => None,
        })
        .collect()
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
                        Admission::SlotReserved(d, _) | Admission::GateClosed(d) | Admission::QuotaHeld(d) | Admission::QueueAhead(d) | Admission::FirstAnswer(d) | Admission::FirstWave(d) => {
                            proptest::prop_assert!(d <= ms(arg * 10).max(TUNING.slow_start_ahead));
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
                    let _ = o.observe(ON, now, Outcome::Exhausted { reset_in: ms(arg), limit: None, window: None, sent_ago: Duration::ZERO, tokens: None });
                }
            }
            if let Mode::Batches(b) = o.pace.mode {
                proptest::prop_assert!(b.left <= b.size);
            }
            proptest::prop_assert_eq!(OriginState::decode(&o.encode()), Some(o));
        }
    }
}
