//! Reserved slots given back, with fixed times.

use super::*;

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
    let last = *held.last().expect("twelve tasks queued");
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
                    assert_eq!(o.gate_in(now), None);
                    o.sent(now, r);
                    used.push(r.slot);
                }
                held = later;
            }
        }
    }
    used.extend(held.iter().map(|r| r.slot));
    used.sort();
    let Mode::Batches(b) = o.pace.mode else {
        panic!("not batched")
    };
    let every = b.every;
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
    // The task reads the gate closed, and gives its slot back.
    assert_eq!(o.gate_in(ms(1100)), Some(ms(950)));
    o.release(ms(1100), held[0]);
    assert_eq!(o.pace.reserved, 2);
}

#[test]
fn a_late_confirmation_never_counts_off_a_later_reservation() {
    // Slots handed out, all of whose times come before they are
    // confirmed (a shared store applies confirmations a round trip
    // late): an admission meanwhile counts them off. Their late
    // confirmations must not count off the reservation it made, or the
    // queue would rewind under it and hand its slot out twice.
    let mut o = after_burst(5);
    let _ = o.admit(ON, ms(1000), LONG);
    let old = queue(&mut o, ms(1000), 4);
    let last = old.iter().map(|r| r.slot).max().expect("four tasks queued");
    let later = last + ms(1);
    let fresh = queue(&mut o, later, 3);
    assert_eq!(fresh.len(), 3);
    for r in &old {
        o.sent(later + ms(2), *r);
    }
    assert_eq!(o.pace.reserved, 3);
    // The next task queues behind the three, not on one of their slots.
    let next = queue(&mut o, later + ms(3), 1);
    let taken: Vec<_> = fresh.iter().map(|r| r.slot).collect();
    assert!(
        !taken.contains(&next[0].slot),
        "{:?} handed out twice",
        next[0].slot
    );
}
