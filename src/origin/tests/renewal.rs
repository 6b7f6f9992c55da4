//! A stated quota's renewal, with fixed times (issue 27): the renewed
//! window's reset is a guess until an answer of that window states it; a
//! give-back never raises the count past the quota's size; and a spent
//! quota's hold at its cap lets one probe go, paced or not.

use super::*;

/// A success stating `remaining` of `limit`, its reset `reset_in` from
/// the answer, with or without a stated `window`, to a request sent
/// `sent_ago` before.
fn stated(
    remaining: u64,
    reset_in: Duration,
    limit: u64,
    window: Option<Duration>,
    sent_ago: Duration,
) -> Outcome {
    Outcome::Quota {
        remaining,
        reset_in,
        limit: Some(limit),
        window,
        sent_ago,
        tokens: None,
    }
}

fn admitted_now(o: &mut OriginState, cfg: PacingConfig, now: Duration, n: usize) -> usize {
    (0..n)
        .filter(|_| {
            matches!(
                o.admit(cfg, now, LONG),
                Admission::Now | Admission::Reopened
            )
        })
        .count()
}

#[test]
fn a_renewed_windows_first_statement_replaces_the_guessed_reset() {
    // express-rate-limit: 3 a second, `t` rounded up to 1 s, a window
    // opening at the first request after the last one ended.
    let second = Some(ms(1000));
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(2), stated(2, ms(1000), 3, second, ms(2)));
    assert_eq!(admitted_now(&mut o, ON, ms(3), 5), 2);
    // Renewed at the stated reset (1002 ms): its guessed reset is 2002 ms.
    assert_eq!(admitted_now(&mut o, ON, ms(1002), 5), 3);
    // The server's window opened when the first of them arrived (1004
    // ms); their answers state its reset, 1 s from then, rounded up:
    // later than the guess, and it holds.
    o.observe(ON, ms(1005), stated(2, ms(1000), 3, second, ms(3)));
    assert_eq!(o.gate_in(ms(1005)), Some(ms(1000)));
    o.observe(ON, ms(1006), stated(0, ms(1000), 3, second, ms(4)));
    assert_eq!(o.gate_in(ms(1006)), Some(ms(999)));
    // Nothing leaves at the guess ...
    assert_eq!(admitted_now(&mut o, ON, ms(2002), 5), 0);
    // ... and everything at the server's reset.
    assert_eq!(admitted_now(&mut o, ON, ms(2005), 5), 3);
}

#[test]
fn a_renewed_windows_first_exhausted_answer_replaces_the_guessed_reset() {
    // GitHub: 2 per window, its reset an epoch second, the window guessed
    // from the longest reset stated.
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(100), stated(1, ms(6900), 2, None, ms(100)));
    assert_eq!(admitted_now(&mut o, ON, ms(110), 5), 1);
    // Renewed at 7000 ms (guessed: another 7 s) and spent at once.
    assert_eq!(admitted_now(&mut o, ON, ms(7000), 5), 2);
    // The window's last answer states the server's reset, 14 s.
    o.observe(
        ON,
        ms(7010),
        Outcome::Exhausted {
            reset_in: ms(6990),
            limit: Some(2),
            window: None,
            sent_ago: ms(10),
            tokens: None,
        },
    );
    assert_eq!(o.gate_in(ms(7010)), Some(ms(6990)));
    assert_eq!(admitted_now(&mut o, ON, ms(13_999), 5), 0);
    assert_eq!(admitted_now(&mut o, ON, ms(14_000), 5), 2);
}

#[test]
fn the_window_guessed_from_a_reset_is_measured_from_the_send() {
    // The first answer arrives 800 ms after its request left and states a
    // reset 6.2 s away: the window is at least 7 s, never 6.2.
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(800), stated(0, ms(6200), 100, None, ms(800)));
    assert_eq!(o.quota.window, ms(7000));
}

#[test]
fn a_give_back_never_raises_the_count_past_the_quotas_size() {
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(0), stated(3, ms(1000), 3, Some(ms(1000)), ms(0)));
    assert_eq!(admitted_now(&mut o, ON, ms(10), 3), 3);
    // Renewed at the reset: the whole quota, spent by one task.
    assert_eq!(admitted_now(&mut o, ON, ms(1000), 1), 1);
    assert_eq!(o.quota.left, 2);
    // Rejections (another limit's) of the requests the last window
    // admitted come back after the renewal: their units were the last
    // window's, not this one's to give.
    for _ in 0..3 {
        o.observe(
            ON,
            ms(1001),
            Outcome::Pushback {
                retry_in: None,
                hold_at_least: None,
            },
        );
    }
    assert!(o.quota.left <= 3, "{} left of 3", o.quota.left);
}

#[test]
fn a_spent_quotas_hold_at_its_cap_lets_one_probe_go_paced_or_not() {
    let day = Duration::from_secs(86_400);
    for pace in [true, false] {
        let cfg = PacingConfig {
            pace,
            max_gate: Duration::from_secs(2),
            ..PacingConfig::DEFAULT
        };
        let mut o = OriginState::new(ms(0));
        o.observe(
            cfg,
            ms(0),
            Outcome::Quota {
                remaining: 1,
                reset_in: day,
                limit: None,
                window: None,
                sent_ago: Duration::ZERO,
                tokens: None,
            },
        );
        assert_eq!(admitted_now(&mut o, cfg, ms(10), 1), 1);
        assert_eq!(admitted_now(&mut o, cfg, ms(20), 5), 0);
        assert_eq!(admitted_now(&mut o, cfg, ms(2010), 5), 1, "pace: {pace}");
    }
}

#[test]
fn a_rejection_gives_back_no_unit_of_a_spent_quota() {
    // GitHub's primary limit (seed 1461 of the simulation): 10 a window,
    // spent by admissions, then stated spent until 1540 ms by a success;
    // a request the spent quota rejected (its `403` with a `Retry-After`
    // of 1 s) had its unit given back, and its retry left at 1260 ms,
    // 280 ms before the stated reset.
    let mut o = OriginState::new(ms(0));
    o.observe(ON, ms(140), stated(8, ms(1400), 10, None, ms(20)));
    assert_eq!(admitted_now(&mut o, ON, ms(141), 8), 8);
    o.observe(
        ON,
        ms(250),
        Outcome::Exhausted {
            reset_in: ms(1290),
            limit: Some(10),
            window: None,
            sent_ago: ms(60),
            tokens: None,
        },
    );
    o.observe(
        ON,
        ms(260),
        Outcome::Pushback {
            retry_in: Some(ms(1000)),
            hold_at_least: None,
        },
    );
    assert_eq!(o.gate_in(ms(1260)), Some(ms(280)));
    assert_eq!(admitted_now(&mut o, ON, ms(1260), 1), 0);
    assert_eq!(admitted_now(&mut o, ON, ms(1540), 1), 1);
}
