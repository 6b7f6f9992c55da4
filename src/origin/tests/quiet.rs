//! A pace learned from a quiet period: one success, then a long
//! `Retry-After`, says little of what the origin admits per window.

use super::*;

/// `n` tasks queued at `start` (each accepting to wait `latest`), each
/// sending when admitted and answered at once with a success: when the
/// last one left, and how many were refused.
fn drain(o: &mut OriginState, start: Duration, n: usize, latest: Duration) -> (Duration, usize) {
    // (when the task asks next, its reservation if it holds one)
    let mut tasks: Vec<(Duration, Option<Reservation>)> = vec![(start, None); n];
    let (mut last, mut refused) = (start, 0);
    while let Some(i) = (0..tasks.len()).min_by_key(|&i| tasks[i].0) {
        let (now, held) = tasks[i];
        if let Some(r) = held {
            match o.recheck(now, r) {
                None => {
                    o.sent(now, r);
                    o.on_success(now);
                    last = last.max(now);
                    tasks.swap_remove(i);
                }
                Some(d) => {
                    o.release(now, r);
                    tasks[i] = (now + d.max(ms(1)), None);
                }
            }
            continue;
        }
        match o.admit(ON, now, latest) {
            Admission::Now | Admission::Reopened => {
                o.on_success(now);
                last = last.max(now);
                tasks.swap_remove(i);
            }
            Admission::SlotReserved(d, r) => tasks[i] = (now + d, Some(r)),
            Admission::GateClosed(d)
            | Admission::QuotaHeld(d)
            | Admission::QueueAhead(d)
            | Admission::FirstAnswer(d) => tasks[i] = (now + d.max(ms(1)), None),
            Admission::Refused { .. } => {
                refused += 1;
                tasks.swap_remove(i);
            }
        }
    }
    (last, refused)
}

/// Confirmed, not fixed (see the report of issue 27): the period learns a
/// batch of 1 per 30.6 s; the queue books one slot per batch at that size
/// at once, and the raises that follow (+1 a batch) move no slot already
/// booked: the 100th task leaves after 3,079 s. Not booking into a learned
/// batch not yet open (as slow start does) drains it in 533 s, but changes
/// how every learned batch books its queue.
#[test]
#[ignore = "issue 27: a pace learned from a quiet period starves its queue (confirmed, open)"]
fn a_quiet_period_then_a_long_retry_after_does_not_starve_the_queue() {
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(ON, ms(10_000), LONG), Admission::Now);
    o.on_success(ms(10_000));
    o.on_pushback(ON, ms(20_000), Some(ms(50_000)));
    let (last, refused) = drain(&mut o, ms(20_000), 100, ms(3_600_000));
    assert_eq!(refused, 0);
    assert!(last < ms(600_000), "the 100th task left at {last:?}");
}
