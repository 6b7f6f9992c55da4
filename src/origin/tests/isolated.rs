//! Rejections isolated among successes (an object's lock, Stripe's
//! `lock_timeout`) under a declared quota: the pace stands and the gate
//! stays open; an overload (most rejected) is still held and cut. Fixed
//! times, a client of a few workers driven in 1 ms steps.

use super::*;

/// Stripe's documented test-mode quota.
const STRIPE: Declared = Declared::per_second(25);

/// The default settings with `quota` declared.
fn declared(quota: Declared) -> PacingConfig {
    PacingConfig {
        declared: Some(quota),
        ..ON
    }
}

/// What one worker does next.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Asks for admission at this time.
    Ask(Duration),
    /// Sends at its slot, after a recheck.
    Slot(Duration, Reservation),
    /// Its request's answer arrives at this time: admitted or not.
    Answer(Duration, bool),
    /// Done: no task left for it.
    Idle,
}

/// What a run sent and when its tasks were done.
#[derive(Debug, Default)]
struct Run {
    /// Every send: when, and whether it was admitted.
    sends: Vec<(Duration, bool)>,
    /// When the last task's success arrived.
    last: Duration,
}

/// `tasks` tasks, `workers` at a time, under `cfg`; each answer arrives
/// 2 ms after its send, admitted if `admits(n, at)` for the `n`-th send
/// (from 0) at `at`; a rejected task asks again at its answer. Runs for at
/// most `until`; returns what it sent.
fn drive(
    o: &mut OriginState,
    cfg: PacingConfig,
    tasks: usize,
    workers: usize,
    mut admits: impl FnMut(usize, Duration) -> bool,
    until: Duration,
) -> Run {
    let mut run = Run::default();
    let mut left = tasks - workers.min(tasks);
    let mut steps = vec![Step::Ask(ms(0)); workers.min(tasks)];
    let mut now = ms(0);
    let mut send = |run: &mut Run, at: Duration| {
        let ok = admits(run.sends.len(), at);
        run.sends.push((at, ok));
        Step::Answer(at + ms(2), ok)
    };
    while now <= until && steps.iter().any(|s| !matches!(s, Step::Idle)) {
        for step in &mut steps {
            *step = match *step {
                Step::Answer(at, ok) if at <= now => {
                    if ok {
                        let _ = o.observe(cfg, now, Outcome::Admitted);
                        run.last = now;
                        if left == 0 {
                            Step::Idle
                        } else {
                            left -= 1;
                            Step::Ask(now)
                        }
                    } else {
                        let _ = o.observe(
                            cfg,
                            now,
                            Outcome::Pushback {
                                retry_in: None,
                                hold_at_least: None,
                            },
                        );
                        Step::Ask(now)
                    }
                }
                Step::Ask(at) if at <= now => match o.admit(cfg, now, LONG) {
                    Admission::Now | Admission::Reopened => send(&mut run, now),
                    Admission::SlotReserved(wait, r) => Step::Slot(now + wait, r),
                    Admission::GateClosed(w)
                    | Admission::QuotaHeld(w)
                    | Admission::QueueAhead(w)
                    | Admission::FirstAnswer(w)
                    | Admission::FirstWave(w) => Step::Ask(now + w.max(ms(1))),
                    Admission::Refused { free_in } => panic!("refused for {free_in:?}"),
                },
                Step::Slot(at, r) if at <= now => match o.recheck(now, r) {
                    None => {
                        o.sent(now, r);
                        send(&mut run, now)
                    }
                    Some(wait) if wait.is_zero() => Step::Ask(now),
                    Some(wait) => Step::Slot(now + wait, r),
                },
                other => other,
            };
        }
        now += ms(1);
    }
    run
}

/// The least time for `sends` requests at `quota`'s count per span, the
/// first span's at once: the start of the last span they need.
fn ideal(quota: Declared, sends: usize) -> Duration {
    let count = usize::try_from(quota.count()).unwrap_or(usize::MAX);
    let spans = u32::try_from(sends.div_ceil(count)).unwrap_or(u32::MAX);
    quota.per() * spans.saturating_sub(1)
}

#[test]
fn isolated_rejections_do_not_collapse_a_declared_pace() {
    // 300 updates, 32 at a time, under Stripe's 25 a second; one send in
    // 14 (7%) meets a busy object, whatever the pace. Each such rejection
    // used to hold the origin for a second and cut the batch by a tenth:
    // 25 a second fell to a few, and the run took minutes.
    let cfg = declared(STRIPE);
    let mut o = OriginState::new(ms(0));
    let run = drive(&mut o, cfg, 300, 32, |n, _| n % 14 != 13, ms(120_000));
    let admitted = run.sends.iter().filter(|(_, ok)| *ok).count();
    assert_eq!(admitted, 300, "{} sends", run.sends.len());
    let best = ideal(STRIPE, run.sends.len());
    assert!(
        run.last.as_secs_f64() <= best.as_secs_f64() * 1.1,
        "last success at {:?}, ideal {best:?}",
        run.last
    );
    // The pace is still the declared one, and never overspent.
    let every = ms(1000) + TUNING.batch_margin;
    assert!(
        (o.rate() - 25.0 / every.as_secs_f64()).abs() < 1e-9,
        "{o:?}"
    );
    let sent: Vec<Duration> = run.sends.iter().map(|(at, _)| *at).collect();
    assert!(most_in_a_second(&sent) <= 25);
}

#[test]
fn an_isolated_rejection_pauses_new_slots_only_briefly() {
    let cfg = declared(STRIPE);
    let mut o = OriginState::new(ms(0));
    for _ in 0..25 {
        assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    }
    let queued: Vec<Reservation> = (0..7)
        .map(|_| match o.admit(cfg, ms(1), LONG) {
            Admission::SlotReserved(_, r) => r,
            other => panic!("expected a slot, got {other:?}"),
        })
        .collect();
    for _ in 0..20 {
        o.on_success(ms(3));
    }
    // The 21st answer is a bare 429: the gate stays open, and the pace's
    // batch stands.
    assert_eq!(
        o.observe(
            cfg,
            ms(3),
            Outcome::Pushback {
                retry_in: None,
                hold_at_least: None
            }
        ),
        None
    );
    assert_eq!(o.gate_until(ms(3)), None);
    // Its retry waits a few of the pace's intervals, not a second, then
    // takes the slot after those queued before it.
    let hold = (ms(1020) / 25 * 4).max(TUNING.smooth_hold_min);
    assert_eq!(
        o.admit(cfg, ms(4), LONG),
        Admission::QueueAhead(hold - ms(1))
    );
    match o.admit(cfg, ms(3) + hold, LONG) {
        Admission::SlotReserved(_, r) => assert_eq!(r.slot, queued[6].slot),
        other => panic!("expected a slot, got {other:?}"),
    }
    // The slots handed out before still leave at their times.
    assert_eq!(o.recheck(queued[0].slot, queued[0]), None);
    assert!((o.rate() - 25.0 / ms(1020).as_secs_f64()).abs() < 1e-9);
}

#[test]
fn an_overload_under_a_declared_quota_still_closes_the_gate_and_cuts() {
    // The server admits 5 a second where 25 were declared: of a batch's
    // answers, 5 successes, then rejections. Once most of the recent
    // answers are rejections (the 5th), the gate closes for the silent
    // hold, as it did on the first, and the reopening cuts the batch.
    let cfg = declared(STRIPE);
    let mut o = OriginState::new(ms(0));
    for _ in 0..25 {
        let _ = o.admit(cfg, ms(0), LONG);
    }
    for _ in 0..5 {
        o.on_success(ms(3));
    }
    for _ in 0..4 {
        o.on_pushback(cfg, ms(3), None);
        assert_eq!(o.gate_until(ms(3)), None);
    }
    o.on_pushback(cfg, ms(3), None);
    assert_eq!(o.gate_until(ms(3)), Some(ms(3) + TUNING.silent_hold));
    let before = o.rate();
    let _ = o.admit(cfg, ms(1003), LONG);
    assert!(o.rate() < before, "{} then {}", before, o.rate());
}

#[test]
fn a_rejection_first_or_in_an_outage_is_no_isolated_one() {
    let cfg = declared(STRIPE);
    // The first answer a rejection: nothing says the pace got through.
    let mut o = OriginState::new(ms(0));
    let _ = o.admit(cfg, ms(0), LONG);
    o.on_pushback(cfg, ms(2), None);
    assert_eq!(o.gate_until(ms(2)), Some(ms(2) + TUNING.silent_hold));
    // An outage after a clean run: held by the 16th rejection in a row.
    let mut o = OriginState::new(ms(0));
    let _ = o.admit(cfg, ms(0), LONG);
    for _ in 0..100 {
        o.on_success(ms(2));
    }
    let held = (1..=32).find(|_| {
        o.on_pushback(cfg, ms(2), None);
        o.gate_until(ms(2)).is_some()
    });
    assert_eq!(held, Some(16));
}

#[test]
fn a_learned_pace_is_cut_by_a_rejection_among_successes_as_ever() {
    // No quota declared: a silent server's pace was learned (nginx's
    // bucket, a little overrun, rejects one request in many too), and a
    // bare 429 among successes holds the gate and cuts it.
    let mut o = OriginState::new(ms(0));
    for _ in 0..20 {
        o.on_success(ms(0));
    }
    o.on_pushback(ON, ms(0), None);
    let _ = o.admit(ON, ms(1000), LONG);
    let learned = o.rate();
    assert!(learned > 0.0);
    for _ in 0..20 {
        o.on_success(ms(1100));
    }
    o.on_pushback(ON, ms(1100), None);
    assert!(o.gate_until(ms(1100)).is_some());
    let _ = o.admit(ON, ms(3000), LONG);
    assert!(o.rate() < learned, "{learned} then {}", o.rate());
}

/// A rejection among successes whose invalid `Retry-After` still reads as
/// decimal seconds named a throttle: it is the origin's, not one
/// request's, and closes the gate at least that long.
#[test]
fn a_rejection_naming_a_decimal_time_is_no_isolated_one() {
    let cfg = declared(STRIPE);
    let mut o = OriginState::new(ms(0));
    for _ in 0..25 {
        assert_eq!(o.admit(cfg, ms(0), LONG), Admission::Now);
    }
    for _ in 0..20 {
        o.on_success(ms(3));
    }
    let named = Outcome::Pushback {
        retry_in: None,
        hold_at_least: Some(ms(2100)),
    };
    assert_eq!(o.observe(cfg, ms(3), named), Some(ms(2100)));
    assert_eq!(o.gate_until(ms(3)), Some(ms(2103)));
}
