//! A queue restarted behind slots booked further ahead, with fixed
//! times: the new queue's slots are counted off when their tasks send.

use super::super::pace::{Pace, Slot};
use super::*;

#[test]
fn a_restarted_queues_slots_are_counted_off_when_used() {
    // Simulation seed 426: a smooth pace had booked slots up to 8.3 s when
    // its queue restarted at 5 s; the restart kept 8.3 s as the time up
    // to which slots were counted off, so the new queue's slots (before
    // it) were never counted off when their tasks sent: 4 slots stayed
    // reserved after the last task.
    let mut p = Pace::new(ms(0));
    p.mode = Mode::Smooth {
        rate: 5.0,
        burst: 1,
    };
    p.next_slot = ms(8300);
    p.unpace(ms(5000));
    p.mode = Mode::Smooth {
        rate: 5.0,
        burst: 1,
    };
    let mut slots = Vec::new();
    for _ in 0..3 {
        match p.take(ms(5000), LONG, false, false) {
            Slot::Go => {}
            Slot::Reserved { slot, .. } => slots.push(slot),
            other => panic!("not admitted: {other:?}"),
        }
    }
    assert_eq!(p.reserved, 2);
    for slot in slots {
        p.used(slot, slot);
    }
    assert_eq!(p.reserved, 0);
}
