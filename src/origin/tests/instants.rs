//! Resets that name different instants, with fixed times: two spent
//! answers close together are of one instant only when they can be (the
//! known reset is no earlier than the new one's, counted from its send),
//! and a spent answer naming an instant after the renewal of a window is
//! that window's, however long ago its request left.

use super::*;

/// A success stating the quota spent until `reset_in` from the answer, to
/// a request sent `sent_ago` before.
fn exhausted(reset_in: Duration, window: Option<Duration>, sent_ago: Duration) -> Outcome {
    Outcome::Exhausted {
        reset_in,
        limit: Some(if window.is_some() { 10 } else { 2 }),
        window,
        sent_ago,
        tokens: None,
    }
}

fn admitted_now(o: &mut OriginState, now: Duration) -> bool {
    matches!(o.admit(ON, now, LONG), Admission::Now | Admission::Reopened)
}

#[test]
fn a_buckets_next_unit_in_milliseconds_is_not_merged_with_the_last() {
    // Discord-like bucket of 2, one back every 125 ms, its reset in
    // milliseconds (simulation seed 1513). Two spent answers, 57 ms
    // apart as received: the first, to a request answered 100 ms late,
    // names the unit back at 362 ms (received as 462 ms); the second,
    // to a request sent at 369 ms, the next unit, at 467 ms or later.
    // Taken for one window's reset rounded differently, the earlier
    // (462 ms) held, and a request left before the server's time.
    let mut o = OriginState::new(ms(0));
    assert!(admitted_now(&mut o, ms(0)));
    o.observe(ON, ms(50), exhausted(ms(240), None, ms(50)));
    // Renewed at 290 ms: the first of its units leaves.
    assert!(admitted_now(&mut o, ms(300)));
    o.observe(ON, ms(400), exhausted(ms(62), None, ms(100)));
    o.observe(ON, ms(421), exhausted(ms(98), None, ms(52)));
    assert_eq!(o.gate_in(ms(470)), Some(ms(49)));
    assert!(!admitted_now(&mut o, ms(470)));
}

/// An IETF bucket of 10 stated as 10 per 60 s: two requests at 20 and 30
/// ms, their window spent for 1 s, renewed in full at 2 s (one request
/// then); its window.
fn renewed_at_two_seconds() -> (OriginState, Option<Duration>) {
    let window = Some(ms(60_000));
    let mut o = OriginState::new(ms(0));
    o.observe(
        ON,
        ms(10),
        Outcome::Quota {
            remaining: 2,
            reset_in: ms(50_000),
            limit: Some(10),
            window,
            sent_ago: ms(5),
            tokens: None,
        },
    );
    assert!(admitted_now(&mut o, ms(20)));
    assert!(admitted_now(&mut o, ms(30)));
    o.observe(ON, ms(1000), exhausted(ms(1000), window, ms(980)));
    assert!(admitted_now(&mut o, ms(2000)));
    (o, window)
}

#[test]
fn a_spent_answer_naming_an_instant_after_the_renewal_holds() {
    // IETF bucket of 10, one back every 6 s, stated as 10 per 60 s
    // (simulation seed 151): renewed in full at 2 s; the answer to a
    // request sent at 30 ms, received 2 s late, says spent for 6 s (from
    // 6.03 s at the earliest: after the renewal). It was dropped as an
    // earlier window's, and a request left at 3 s.
    let (mut o, window) = renewed_at_two_seconds();
    o.observe(ON, ms(2050), exhausted(ms(6000), window, ms(2020)));
    assert!(!admitted_now(&mut o, ms(3000)));
    assert_eq!(o.gate_in(ms(3000)), Some(ms(5050)));
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn an_earlier_windows_spent_answer_still_changes_nothing() {
    // The same window, the late answer naming an instant before the
    // renewal (spent for 1 s from its send at 30 ms): the renewed window
    // keeps its units.
    let (mut o, window) = renewed_at_two_seconds();
    o.observe(ON, ms(2050), exhausted(ms(1000), window, ms(2020)));
    assert!(admitted_now(&mut o, ms(3000)));
}
