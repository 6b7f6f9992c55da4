//! The pace: learned batches, buckets, slow start, cuts and raises, with fixed times.

use super::*;

#[test]
fn learns_the_admitted_batch_and_releases_one_per_period_after_a_probe() {
    let mut o = after_burst(100);
    // Everyone queued at the closed gate comes back at its time.
    assert_eq!(o.admit(ON, ms(500), LONG), Admission::GateClosed(ms(500)));
    let slots: Vec<Duration> = (0..400).map(|_| slot_at(&mut o, ms(1000))).collect();
    let every = ms(1000) + TUNING.batch_margin;
    assert!((o.rate() - 100.0 / every.as_secs_f64()).abs() < 1e-9);
    // The probe goes alone at the gate time; the rest of its batch a gap
    // later, spread over one interval (the burst itself took no time);
    // each next batch one period after the last slot of the one before.
    let spread = ms(10);
    assert_eq!(slots[0], ms(1000));
    assert_eq!(slots[1], ms(1000) + every / 100 + spread / 100);
    for b in 0..4 {
        let batch = &slots[(100 * b).max(1)..100 * (b + 1)];
        let (first, last) = (batch[0], batch[batch.len() - 1]);
        assert!(last - first <= spread, "batch {b}: {first:?}..{last:?}");
        if b > 0 {
            assert!(first >= slots[100 * b - 1] + every, "batch {b}");
            assert!(
                first <= slots[100 * b - 1] + every + spread / 100,
                "batch {b}"
            );
        }
    }
    // A fixed window of 1 s (starting at the gate time) sees one batch per
    // window; a sliding log never more than the 100 admitted in a second.
    for w in 1..5 {
        let lo = Duration::from_secs(w);
        let hi = lo + Duration::from_secs(1);
        let n = slots.iter().filter(|s| **s >= lo && **s < hi).count();
        assert_eq!(n, 100, "window {w}");
    }
    assert_eq!(most_in_a_second(&slots), 100);
}

#[test]
fn tasks_arriving_during_a_batch_take_its_slots_and_never_make_it_two() {
    let mut o = after_burst(10);
    let mut slots = vec![slot_at(&mut o, ms(1000))];
    // Tasks trickle in one every 150 ms for 6 s: each batch of 10 spans
    // 1.5 s of arrivals, and the next starts a period after its last slot.
    for i in 1..40 {
        slots.push(slot_at(&mut o, ms(1000 + 150 * i)));
    }
    assert!(most_in_a_second(&slots) <= 10, "{slots:?}");
}

#[test]
fn a_drained_bucket_finds_a_token_for_every_slot_of_every_batch() {
    // A token bucket (capacity 100, 100/s), drained by a burst: 100 at once
    // before the first rejection at 2 ms, then one more per 10 ms while it
    // rejects the rest of the burst, until 102 ms: 110 successes, as many
    // as a window admitting 110 would give.
    let mut o = OriginState::new(ms(0));
    for _ in 0..100 {
        o.on_success(ms(1));
    }
    o.on_pushback(ON, ms(2), Some(ms(1002)));
    for i in 1..=10 {
        o.on_success(ms(2 + 10 * i));
    }
    let slots: Vec<Duration> = (0..1000).map(|_| slot_at(&mut o, ms(1002))).collect();
    // Replayed against the bucket, every slot finds a token.
    assert_eq!(short_of_tokens(&slots, 100.0, ms(102)), None);
    // And the same slots against a window admitting 110 a second: one
    // batch per window.
    assert_eq!(most_in_a_second(&slots), 110);
}

/// The first of `slots` (sorted) a token bucket of capacity `cap`,
/// refilling `cap` a second, has no token for, if any; it was empty after
/// its last admission at `drained`.
fn short_of_tokens(slots: &[Duration], cap: f64, drained: Duration) -> Option<(usize, Duration)> {
    let mut tokens = 0.0_f64;
    let mut at = drained;
    for (i, s) in slots.iter().enumerate() {
        tokens = (tokens + (*s - at).as_secs_f64() * cap).min(cap);
        at = *s;
        if tokens < 1.0 - 1e-9 {
            return Some((i, *s));
        }
        tokens -= 1.0;
    }
    None
}

#[test]
fn a_bucket_that_refilled_before_it_rejected_finds_a_token_for_every_slot() {
    // A slow burst (GCRA or a bucket, capacity 100 at 100/s): the arrivals
    // take 80 ms, so the server admits 108 before it first rejects, at
    // 80 ms, and none after. The client reads the answers shuffled: a 429
    // at 50 ms, the last success at 90 ms. No success came long after a
    // rejection, yet the batch of 108 must be spread over the 80 ms the
    // bucket refilled in (it was spread over 69 ms, and its last slot
    // found no token).
    let mut o = OriginState::new(ms(0));
    o.on_success(ms(1));
    o.on_pushback(ON, ms(50), Some(ms(1050)));
    for i in 1..108u64 {
        o.on_success(ms(1 + i * 89 / 107));
    }
    for i in 0..20u64 {
        o.on_pushback(ON, ms(80 + i), Some(ms(1080 + i)));
    }
    let slots: Vec<Duration> = (0..540).map(|_| slot_at(&mut o, ms(1099))).collect();
    assert_eq!(short_of_tokens(&slots, 100.0, ms(80)), None);
    // A window of 108 a second still gets one batch per window.
    assert_eq!(most_in_a_second(&slots), 108);
}

#[test]
fn nothing_admitted_means_one_probe_a_second_then_slow_start() {
    let mut o = after_burst(0);
    // The probe, alone.
    assert_eq!(o.admit(ON, ms(1000), LONG), Admission::Reopened);
    assert_eq!(o.rate(), TUNING.min_rate);
    assert!(matches!(
        o.admit(ON, ms(1000), LONG),
        Admission::SlotReserved(d, _) if d == ms(1000)
    ));
    for _ in 0..3 {
        o.on_success(ms(1100));
    }
    assert_eq!(o.rate(), TUNING.min_rate + 3.0 * TUNING.slow_start_step);
}

#[test]
fn a_pushback_while_pacing_cuts_the_batch_by_a_tenth() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let every = (ms(1000) + TUNING.batch_margin).as_secs_f64();
    // Paced, a pushback at 1.5 s after 50 successes.
    for _ in 0..50 {
        o.on_success(ms(1400));
    }
    o.on_pushback(ON, ms(1500), Some(ms(2500)));
    assert_eq!(o.admit(ON, ms(1600), LONG), Admission::GateClosed(ms(900)));
    assert_eq!(slot_at(&mut o, ms(2500)), ms(2500));
    assert!((o.rate() - 90.0 / every).abs() < 1e-9, "{}", o.rate());
    // The probe rejected at once, alone: "not yet", not "too fast".
    o.on_pushback(ON, ms(2505), Some(ms(3505)));
    let _ = slot_at(&mut o, ms(3505));
    assert!((o.rate() - 90.0 / every).abs() < 1e-9, "{}", o.rate());
    // A period that admitted some and was rejected: a tenth again.
    o.on_success(ms(3600));
    o.on_pushback(ON, ms(3700), Some(ms(4700)));
    let _ = slot_at(&mut o, ms(4700));
    assert!((o.rate() - 81.0 / every).abs() < 1e-9, "{}", o.rate());
    let mut o = after_burst(1);
    for i in 1..5 {
        let _ = slot_at(&mut o, ms(1000 * i));
        o.on_pushback(ON, ms(1000 * i + 1), Some(ms(1000 * (i + 1))));
    }
    let _ = slot_at(&mut o, ms(5000));
    assert!((o.rate() - 1.0 / every).abs() < 1e-9, "{}", o.rate());
}

#[test]
fn a_full_queue_refuses_with_the_time_of_its_first_free_slot() {
    let mut o = after_burst(10);
    let _ = slot_at(&mut o, ms(1000));
    for _ in 0..9 {
        let _ = slot_at(&mut o, ms(1000));
    }
    match o.admit(ON, ms(1000), ms(500)) {
        Admission::Refused { free_in } => assert!(free_in > ms(500), "{free_in:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_clean_learned_pace_is_raised_rarely() {
    let mut o = after_burst(100);
    let _ = slot_at(&mut o, ms(1000));
    let learned = o.rate();
    o.on_success(ms(5000));
    assert_eq!(o.rate(), learned);
    o.on_success(ms(11_000));
    // One batch of 100 a period becomes one of 110.
    assert!((o.rate() - learned * 1.1).abs() < 1e-9);
}

#[test]
fn a_long_sending_period_is_measured_over_its_length() {
    // 50/s for 4 s, then a pushback with a 1 s gate: 200 over 4 s.
    let mut o = OriginState::new(ms(0));
    for i in 0..200 {
        o.on_success(ms(i * 20));
    }
    o.on_pushback(ON, ms(4000), Some(ms(5000)));
    let _ = slot_at(&mut o, ms(5000));
    let every = (ms(1000) + TUNING.batch_margin).as_secs_f64();
    assert!((o.rate() - 50.0 / every).abs() < 1e-9, "{}", o.rate());
}
