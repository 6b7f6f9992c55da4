//! A quota an answer states spent, with fixed times: the spent answer's
//! reset holds the origin though earlier than one stated before (a
//! bucket's next unit), no unit comes back to it, and it holds when
//! applied after the answer to a request that left later.

use super::*;

/// A success stating `remaining` of `limit`, its reset `reset_in` from the
/// answer (no window stated), to a request sent `sent_ago` before.
fn stated(remaining: u64, reset_in: Duration, limit: u64, sent_ago: Duration) -> Outcome {
    Outcome::Quota {
        remaining,
        reset_in,
        limit: Some(limit),
        window: None,
        sent_ago,
        tokens: None,
    }
}

/// A success stating the quota spent until `reset_in` from the answer.
fn exhausted(reset_in: Duration, limit: u64, sent_ago: Duration) -> Outcome {
    Outcome::Exhausted {
        reset_in,
        limit: Some(limit),
        window: None,
        sent_ago,
        tokens: None,
    }
}

fn admitted_now(o: &mut OriginState, now: Duration, n: usize) -> usize {
    (0..n)
        .filter(|_| matches!(o.admit(ON, now, LONG), Admission::Now | Admission::Reopened))
        .count()
}

#[test]
fn a_spent_buckets_earlier_reset_holds_the_origin_until_then() {
    // GitHub-like GCRA, a burst of 3 then one every 2 s (simulation seed
    // 1395): the first answer states 2 left, full at 2105 ms; the second
    // 1 left, full at 4105 ms; the third spent, one unit back at 2105 ms.
    // The spent answer's reset is earlier than the one stated before: it
    // was dropped as an earlier window's, one unit was still counted, and a
    // request left at 105 ms, 2 s before the server's time.
    let mut o = OriginState::new(ms(0));
    assert_eq!(admitted_now(&mut o, ms(6), 1), 1);
    o.observe(ON, ms(17), stated(2, ms(2088), 3, ms(11)));
    assert_eq!(admitted_now(&mut o, ms(29), 1), 1);
    assert_eq!(admitted_now(&mut o, ms(40), 1), 1);
    o.observe(ON, ms(41), stated(1, ms(4064), 3, ms(12)));
    o.observe(ON, ms(50), exhausted(ms(2055), 3, ms(10)));
    assert_eq!(admitted_now(&mut o, ms(105), 1), 0);
    assert_eq!(o.gate_in(ms(105)), Some(ms(2000)));
    assert_eq!(admitted_now(&mut o, ms(2104), 1), 0);
    assert!(admitted_now(&mut o, ms(2105), 1) == 1);
}

#[test]
fn an_answer_sent_before_a_spent_buckets_answer_does_not_undo_it() {
    // The same statements, the spent one first: the answer to the request
    // sent before it, which still saw a unit left, arrives late.
    let mut o = OriginState::new(ms(0));
    assert_eq!(admitted_now(&mut o, ms(6), 1), 1);
    o.observe(ON, ms(17), stated(2, ms(2088), 3, ms(11)));
    assert_eq!(admitted_now(&mut o, ms(29), 1), 1);
    assert_eq!(admitted_now(&mut o, ms(40), 1), 1);
    o.observe(ON, ms(50), exhausted(ms(2055), 3, ms(10)));
    o.observe(ON, ms(60), stated(1, ms(4045), 3, ms(31)));
    assert_eq!(admitted_now(&mut o, ms(105), 1), 0);
    assert_eq!(o.gate_in(ms(105)), Some(ms(2000)));
}

#[test]
fn a_quota_stated_spent_gets_no_unit_back_from_a_request_not_sent() {
    // A GCRA of 5, one back every 12 s, stated as 5 per 60 s (simulation
    // seed 905): the renewed window's first answer states it spent for
    // 11 s; a task admitted before that answer then stops without
    // sending. Its unit came back, and the next request left 570 ms
    // after the answer, 10.4 s before the server's time.
    let window = Some(ms(60_000));
    let mut o = OriginState::new(ms(0));
    o.observe(
        ON,
        ms(10),
        Outcome::Quota {
            remaining: 1,
            reset_in: ms(1000),
            limit: Some(5),
            window,
            sent_ago: ms(5),
            tokens: None,
        },
    );
    assert_eq!(admitted_now(&mut o, ms(20), 1), 1);
    // Renewed at 1010 ms (guessed until 61 s): two tasks leave at once.
    assert_eq!(admitted_now(&mut o, ms(1010), 2), 2);
    o.observe(
        ON,
        ms(1013),
        Outcome::Exhausted {
            reset_in: ms(11_000),
            limit: Some(5),
            window,
            sent_ago: ms(3),
            tokens: None,
        },
    );
    // The second never sent: it gives back what it reserved.
    let unsent = Reservation {
        slot: ms(1010),
        quota: true,
        cost: 0,
        output: 0,
        queue: o.pace.queue,
    };
    o.release(ms(1015), unsent);
    assert_eq!(admitted_now(&mut o, ms(1580), 1), 0);
    assert_eq!(o.gate_in(ms(1580)), Some(ms(10_433)));
    assert_eq!(OriginState::decode(&o.encode()), Some(o));
}

#[test]
fn a_spent_answer_applied_after_a_later_sent_one_of_its_window_holds() {
    // GitHub-like, 10 a window (simulation seed 1834): a burst's answers
    // reach a shared store each after its own round trip, not in the
    // order their requests left. The first applied states a new window
    // (reset 3 s away) and opens it at its send; the spent answer, to a
    // request that left 0.2 ms before, was dropped as an earlier
    // window's, and a request left 2 s later, 1 s before the reset.
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(10), stated(9, ms(3000), 10, ms(0)));
    let late = Duration::from_micros(200);
    o.observe_late(
        ON,
        ms(10) + late,
        late + late,
        exhausted(ms(3000), 10, ms(0)),
    );
    assert_eq!(admitted_now(&mut o, ms(2000), 1), 0);
    assert!(admitted_now(&mut o, ms(3010), 1) == 1);
}
