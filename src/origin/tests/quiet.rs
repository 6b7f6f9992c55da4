//! A pace learned from a quiet period: one success, then a long
//! `Retry-After`, says little of what the origin admits per window.

use super::*;

/// `n` tasks queued at `start` (each accepting to wait `latest`), each
/// sending when admitted and answered at once with a success: when the
/// first and the last one left, and how many were refused.
fn drain(
    o: &mut OriginState,
    start: Duration,
    n: usize,
    latest: Duration,
) -> (Duration, Duration, usize) {
    // (when the task asks next, its reservation if it holds one)
    let mut tasks: Vec<(Duration, Option<Reservation>)> = vec![(start, None); n];
    let (mut first, mut last, mut refused) = (Duration::MAX, start, 0);
    while let Some(i) = (0..tasks.len()).min_by_key(|&i| tasks[i].0) {
        let (now, held) = tasks[i];
        if let Some(r) = held {
            match o.recheck(now, r) {
                None => {
                    o.sent(now, r);
                    o.on_success(now);
                    first = first.min(now);
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
                first = first.min(now);
                last = last.max(now);
                tasks.swap_remove(i);
            }
            Admission::SlotReserved(d, r) => tasks[i] = (now + d, Some(r)),
            Admission::GateClosed(d)
            | Admission::QuotaHeld(d)
            | Admission::QueueAhead(d)
            | Admission::FirstAnswer(d)
            | Admission::FirstWave(d) => tasks[i] = (now + d.max(ms(1)), None),
            Admission::Refused { .. } => {
                refused += 1;
                tasks.swap_remove(i);
            }
        }
    }
    (first, last, refused)
}

/// Issue 27: one success, then `Retry-After: 30` ten seconds later, learned
/// batches of 1 per 30.6 s, one booked per batch for every queued task at
/// once: the 100th task left after 3,079 s. A pushback after a quiet spell
/// measures what the client asked, not what the origin admits: the pace
/// starts slow and rises.
#[test]
fn a_quiet_period_then_a_long_retry_after_does_not_starve_the_queue() {
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(ON, ms(10_000), LONG), Admission::Now);
    o.on_success(ms(10_000));
    o.on_pushback(ON, ms(20_000), Some(ms(50_000)));
    let (first, last, refused) = drain(&mut o, ms(20_000), 100, ms(3_600_000));
    assert_eq!(refused, 0);
    assert_eq!(first, ms(50_000), "nothing before the server's time");
    // Slow start from one a second, one more a second per success: 6.1 s.
    assert!(last < ms(80_000), "the 100th task left at {last:?}");
}

/// A server that does admit one request per 30 s costs the slow start one
/// rejected request, once: the period that rejection ends was asked at
/// once, and its pace holds (a batch of one per period), not another slow
/// start that would be rejected every period.
#[test]
fn a_slow_start_after_a_quiet_period_learns_the_limit_it_meets() {
    let mut o = OriginState::new(ms(0));
    assert_eq!(o.admit(ON, ms(10_000), LONG), Admission::Now);
    o.on_success(ms(10_000));
    o.on_pushback(ON, ms(20_000), Some(ms(50_000)));
    assert_eq!(o.admit(ON, ms(50_000), LONG), Admission::Reopened);
    assert!(
        matches!(o.pace.mode, Mode::SlowStart { .. }),
        "{:?}",
        o.pace.mode
    );
    o.on_success(ms(50_010));
    // The next slot is a second later (one a second, then two): rejected
    // until the end of the server's 30 s.
    let next = match o.admit(ON, ms(50_010), LONG) {
        Admission::SlotReserved(d, r) => {
            assert_eq!(o.recheck(ms(50_010) + d, r), None);
            o.sent(ms(50_010) + d, r);
            ms(50_010) + d
        }
        other => panic!("expected a slot, got {other:?}"),
    };
    assert!(next >= ms(50_500), "{next:?}");
    o.on_pushback(ON, next + ms(10), Some(ms(80_000)));
    assert_eq!(o.admit(ON, ms(80_000), LONG), Admission::Reopened);
    let Mode::Batches(b) = o.pace.mode else {
        panic!("expected batches, got {:?}", o.pace.mode);
    };
    assert_eq!(b.size, 1);
    // The next request leaves a whole period after the probe.
    assert!(slot_at(&mut o, ms(80_000)) >= ms(80_000) + ms(29_000));
}
