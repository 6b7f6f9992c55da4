//! The pure planner: one table test per row of the decision table (in
//! order), jitter bounds, claims, keyed tasks, policy validation, and
//! property tests of the invariants. Fixed times only: no sleeps, no
//! runtime.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use proptest::prelude::*;
use reqwest_backpressure::planner::{
    Claim, Decision, HintSource, KeyInUse, KeyedPlanner, Planner, Pushback, TaskState,
};
use reqwest_backpressure::{
    Fallback, Hint, InvalidPolicy, Policy, RetryAfterMiddleware, StopReason, parse_retry_after,
};
use tokio::time::Instant;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

fn wall(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(s)
}

/// The wall-clock time every pushback below is received at.
const RECEIVED: u64 = 1_700_000_000;

/// Default limits without jitter, so every `until` is exact.
fn policy() -> Policy {
    Policy::default().jitter(Duration::ZERO)
}

fn planner(p: Policy) -> Planner {
    Planner::new(p).expect("a valid policy")
}

fn pushback(hint: Hint) -> Pushback {
    Pushback::new(hint, wall(RECEIVED))
}

fn delay(s: u64) -> Pushback {
    pushback(Hint::Delay(secs(s)))
}

fn invalid() -> Hint {
    Hint::Invalid(parse_retry_after("1.5").unwrap_err())
}

/// A task with `deadline` whose first send was claimed at `now`.
fn sent(planner: &Planner, deadline: Instant, now: Instant) -> TaskState {
    let mut task = TaskState::new(deadline);
    assert_eq!(planner.claim(&mut task, now), Claim::Send { attempt: 1 });
    task
}

fn code(decision: Decision) -> &'static str {
    match decision {
        Decision::Stop(reason) => reason.code(),
        Decision::Wait { until, delay, .. } => {
            panic!("expected a stop, got Wait {{ until: {until:?}, delay: {delay:?} }}")
        }
    }
}

fn until(decision: Decision) -> Instant {
    match decision {
        Decision::Wait { until, .. } => until,
        Decision::Stop(reason) => panic!("expected a wait, got stop {}", reason.code()),
    }
}

/// Asserts a stop with `expected`, and that nothing is left planned.
fn assert_stop(task: &TaskState, decision: Decision, expected: &str) {
    assert_eq!(code(decision), expected);
    assert_eq!(task.ready_at(), None, "a stopped task has no planned retry");
    assert!(!task.is_active());
}

// ------------------------------------------- the decision table, in order ----

#[test]
fn row_1_not_authorized_by_contract() {
    let p = planner(policy());
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = Pushback {
        retry_authorized: false,
        ..delay(1)
    };
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "retry_not_authorized_by_contract");
    assert_eq!(d, Decision::Stop(StopReason::RetryNotAuthorizedByContract));
}

#[test]
fn row_2_body_not_replayable() {
    let p = planner(policy());
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = Pushback {
        body_replayable: false,
        ..delay(1)
    };
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "body_not_replayable");
}

#[test]
fn row_3_attempt_budget_exhausted() {
    // max_attempts counts the first send: 1 means no retry at all.
    let p = planner(policy().max_attempts(1));
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &delay(1), t0, 0);
    assert_stop(&task, d, "attempt_budget_exhausted");
    assert_eq!(task.attempts(), 1);

    // max_attempts 2: one retry, then stop.
    let p = planner(policy().max_attempts(2));
    let mut task = sent(&p, t0 + secs(60), t0);
    let ready = until(p.plan(&mut task, &delay(1), t0, 0));
    assert_eq!(p.claim(&mut task, ready), Claim::Send { attempt: 2 });
    let d = p.plan(&mut task, &delay(1), ready, 0);
    assert_stop(&task, d, "attempt_budget_exhausted");
    assert_eq!(task.attempts(), 2);
}

#[test]
fn row_4_deadline_passed() {
    let p = planner(policy());
    let t0 = Instant::now();
    for late in [secs(10), secs(11), secs(1_000)] {
        let mut task = sent(&p, t0 + secs(10), t0);
        let d = p.plan(&mut task, &delay(0), t0 + late, 0);
        assert_stop(&task, d, "deadline_exhausted");
    }
}

#[test]
fn row_5_invalid_retry_after() {
    let p = planner(policy());
    let t0 = Instant::now();
    for value in [
        "1.5",
        "-1",
        "",
        "soon",
        "120, 120",
        "Sun, 06 Nov 1994 08:49:37 UTC",
    ] {
        let mut task = sent(&p, t0 + secs(60), t0);
        let hint = Hint::Invalid(parse_retry_after(value).unwrap_err());
        let d = p.plan(&mut task, &pushback(hint), t0, 0);
        assert_stop(&task, d, "invalid_retry_after");
    }
    // Also when the fallback would have allowed a retry without a header:
    // an invalid value is never treated as a missing one.
    let p = planner(policy().missing_retry_after(Fallback::Delay(secs(1))));
    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &pushback(invalid()), t0, 0);
    assert_stop(&task, d, "invalid_retry_after");
}

#[test]
fn the_server_saying_do_not_retry_stops_whatever_it_asked_for() {
    let p = planner(policy());
    let t0 = Instant::now();
    for hint in [Hint::Missing, Hint::Delay(secs(1)), invalid()] {
        let mut task = sent(&p, t0 + secs(60), t0);
        let pb = Pushback {
            server_said_do_not_retry: true,
            ..pushback(hint)
        };
        let d = p.plan(&mut task, &pb, t0, 0);
        assert_stop(&task, d, "server_said_do_not_retry");
    }
    // After the contract's own rows: an unauthorised POST is that.
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = Pushback {
        server_said_do_not_retry: true,
        retry_authorized: false,
        ..delay(1)
    };
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "retry_not_authorized_by_contract");
}

#[test]
fn row_6_missing_retry_after_with_fallback_stop() {
    let p = planner(policy().missing_retry_after(Fallback::Stop));
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &pushback(Hint::Missing), t0, 0);
    assert_stop(&task, d, "missing_retry_after");
}

#[test]
fn row_6_missing_retry_after_on_a_503_stops_even_with_a_fallback_delay() {
    let p = planner(policy().missing_retry_after(Fallback::Delay(secs(2))));
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = Pushback {
        fallback_allowed: false,
        ..pushback(Hint::Missing)
    };
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "missing_retry_after");
    // fallback_allowed only matters when the header is missing.
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = Pushback {
        fallback_allowed: false,
        ..delay(3)
    };
    assert_eq!(until(p.plan(&mut task, &pb, t0, 0)), t0 + secs(3));
}

#[test]
fn row_6_missing_retry_after_behind_the_origins_gate_waits_there() {
    // The gate on (the default): the pushback closes it, and the task has
    // no delay of its own; the gate and the pace decide when it leaves.
    let p = planner(policy().missing_retry_after(Fallback::Delay(secs(2))));
    let t0 = Instant::now();
    let now = t0 + ms(1_500);
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = pushback(Hint::Missing);
    let d = p.plan(&mut task, &pb, now, 0);
    assert_eq!(
        d,
        Decision::Wait {
            until: now,
            delay: Duration::ZERO,
            source: HintSource::Gate,
        }
    );
    assert_eq!(task.hint_source(), Some(HintSource::Gate));
    assert!(!p.needs_budget(&pb, &d), "a gated retry spends no budget");
    // The origin is told of a pushback with no time: its gate closes for a
    // hold of its own.
    assert_eq!(
        p.origin_outcome(&pb, &d),
        reqwest_backpressure::origin::Outcome::Pushback {
            retry_in: None,
            hold_at_least: None
        }
    );
    // Where a redirect led elsewhere, this origin's gate does not hold
    // the retry: the fallback delay, from the budget.
    let mut task = sent(&p, t0 + secs(60), t0);
    let elsewhere = Pushback { gated: false, ..pb };
    let d = p.plan(&mut task, &elsewhere, now, 0);
    assert_eq!(until(d), now + secs(2));
    assert!(p.needs_budget(&elsewhere, &d));
    // Fallback::Stop stops, gate or not.
    let p = planner(policy().missing_retry_after(Fallback::Stop));
    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &pb, now, 0);
    assert_stop(&task, d, "missing_retry_after");
}

#[test]
fn row_6_missing_retry_after_with_fallback_delay_waits() {
    let p = planner(
        policy()
            .origin_gate(false)
            .missing_retry_after(Fallback::Delay(secs(2))),
    );
    let t0 = Instant::now();
    let now = t0 + ms(1_500);
    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &pushback(Hint::Missing), now, 0);
    assert_eq!(
        d,
        Decision::Wait {
            until: now + secs(2),
            delay: secs(2),
            source: HintSource::Fallback,
        }
    );
    assert_eq!(task.ready_at(), Some(now + secs(2)));
    assert_eq!(task.waited(), secs(2));
    // There is no server time to report.
    assert_eq!(pushback(Hint::Missing).retry_at(), None);
    assert_eq!(pushback(Hint::Missing).server_delay(), None);
}

#[test]
fn row_7_server_delay_over_max_wait_stops_and_is_never_clamped() {
    let p = planner(policy().max_wait(secs(60)));
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(600), t0);
    let d = p.plan(&mut task, &delay(61), t0, 0);
    // No Wait at all (in particular not a Wait of 60 s).
    assert!(!matches!(d, Decision::Wait { .. }), "{d:?}");
    assert_stop(&task, d, "wait_budget_exhausted");
    assert_eq!(task.waited(), Duration::ZERO);
    assert_eq!(p.claim(&mut task, t0 + secs(60)), Claim::NothingPlanned);

    // Exactly max_wait is fine.
    let mut task = sent(&p, t0 + secs(600), t0);
    assert_eq!(until(p.plan(&mut task, &delay(60), t0, 0)), t0 + secs(60));

    // A date too far ahead, measured from the server's Date.
    let mut task = sent(&p, t0 + secs(600), t0);
    let pb = pushback(Hint::At(wall(RECEIVED + 61)));
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "wait_budget_exhausted");

    // An enormous delay (30 digits) is a budget stop, not an overflow.
    let hint = match parse_retry_after(&"9".repeat(30)).unwrap() {
        reqwest_backpressure::RetryAfter::Delay(d) => Hint::Delay(d),
        other => panic!("{other:?}"),
    };
    let mut task = sent(&p, t0 + secs(600), t0);
    let d = p.plan(&mut task, &pushback(hint), t0, 0);
    assert_stop(&task, d, "wait_budget_exhausted");
    let mut task = sent(&p, t0 + secs(600), t0);
    let d = p.plan(&mut task, &pushback(Hint::Delay(Duration::MAX)), t0, 0);
    assert_stop(&task, d, "wait_budget_exhausted");
}

#[test]
fn row_7_max_total_wait_across_two_waits() {
    let p = planner(
        policy()
            .max_attempts(5)
            .max_wait(secs(50))
            .max_total_wait(secs(60)),
    );
    let t0 = Instant::now();
    let deadline = t0 + secs(600);

    // 40 + 30 > 60: the second wait is refused.
    let mut task = sent(&p, deadline, t0);
    let r1 = until(p.plan(&mut task, &delay(40), t0, 0));
    assert_eq!(r1, t0 + secs(40));
    assert_eq!(p.claim(&mut task, r1), Claim::Send { attempt: 2 });
    let d = p.plan(&mut task, &delay(30), r1, 0);
    assert_stop(&task, d, "wait_budget_exhausted");
    assert_eq!(task.waited(), secs(40));

    // 40 + 20 == 60: exactly the budget is fine.
    let mut task = sent(&p, deadline, t0);
    let r1 = until(p.plan(&mut task, &delay(40), t0, 0));
    assert_eq!(p.claim(&mut task, r1), Claim::Send { attempt: 2 });
    assert_eq!(until(p.plan(&mut task, &delay(20), r1, 0)), r1 + secs(20));
    assert_eq!(task.waited(), secs(60));
    // With the budget spent, a zero delay still fits; any positive one
    // does not.
    let r2 = r1 + secs(20);
    assert_eq!(p.claim(&mut task, r2), Claim::Send { attempt: 3 });
    assert_eq!(until(p.plan(&mut task, &delay(0), r2, 0)), r2);
    assert_eq!(p.claim(&mut task, r2), Claim::Send { attempt: 4 });
    let d = p.plan(&mut task, &delay(1), r2, 0);
    assert_stop(&task, d, "wait_budget_exhausted");
    assert_eq!(task.waited(), secs(60));
}

#[test]
fn row_8_ready_plus_send_reserve_at_or_after_deadline() {
    let p = planner(policy().send_reserve(ms(100)));
    let t0 = Instant::now();
    let deadline = t0 + secs(10);
    for d in [secs(10), ms(9_900), secs(20)] {
        let mut task = sent(&p, deadline, t0);
        let decision = p.plan(&mut task, &pushback(Hint::Delay(d)), t0, 0);
        assert_stop(&task, decision, "deadline_exhausted");
    }
    // Just inside: ready + reserve < deadline.
    let mut task = sent(&p, deadline, t0);
    let decision = p.plan(&mut task, &pushback(Hint::Delay(ms(9_899))), t0, 0);
    assert_eq!(until(decision), t0 + ms(9_899));

    // With a zero reserve the bound is the deadline itself.
    let p = planner(policy().send_reserve(Duration::ZERO));
    let mut task = sent(&p, deadline, t0);
    let decision = p.plan(&mut task, &delay(10), t0, 0);
    assert_stop(&task, decision, "deadline_exhausted");
    let mut task = sent(&p, deadline, t0);
    let decision = p.plan(&mut task, &pushback(Hint::Delay(ms(9_999))), t0, 0);
    assert_eq!(until(decision), t0 + ms(9_999));
}

#[test]
fn row_10_otherwise_wait_until_now_plus_delay() {
    let p = planner(policy());
    let t0 = Instant::now();
    let now = t0 + ms(250);
    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &delay(5), now, 0);
    assert_eq!(
        d,
        Decision::Wait {
            until: now + secs(5),
            delay: secs(5),
            source: HintSource::RetryAfter,
        }
    );
    assert_eq!(task.ready_at(), Some(now + secs(5)));
    assert_eq!(task.waited(), secs(5));
    assert!(!task.is_active());

    // A date hint: measured from the server's Date, not our clock.
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = Pushback {
        server_now: wall(RECEIVED - 3_600),
        ..pushback(Hint::At(wall(RECEIVED - 3_600 + 7)))
    };
    assert_eq!(
        p.plan(&mut task, &pb, now, 0),
        Decision::Wait {
            until: now + secs(7),
            delay: secs(7),
            source: HintSource::RetryAfter,
        }
    );

    // A zero delay, and a date in the past: ready now.
    let mut task = sent(&p, t0 + secs(60), t0);
    assert_eq!(until(p.plan(&mut task, &delay(0), now, 0)), now);
    let mut task = sent(&p, t0 + secs(60), t0);
    let pb = pushback(Hint::At(wall(RECEIVED - 100)));
    assert_eq!(
        p.plan(&mut task, &pb, now, 0),
        Decision::Wait {
            until: now,
            delay: Duration::ZERO,
            source: HintSource::RetryAfter,
        }
    );
}

#[test]
fn earlier_rows_win_over_later_ones() {
    let t0 = Instant::now();
    let late = t0 + secs(100);
    struct Case {
        name: &'static str,
        policy: Policy,
        pushback: Pushback,
        now: Instant,
        expected: &'static str,
    }
    let not_authorized = |hint| Pushback {
        retry_authorized: false,
        ..pushback(hint)
    };
    let cases = [
        Case {
            name: "unauthorized + invalid",
            policy: policy(),
            pushback: not_authorized(invalid()),
            now: t0,
            expected: "retry_not_authorized_by_contract",
        },
        Case {
            name: "unauthorized + not replayable + attempts + deadline",
            policy: policy().max_attempts(1),
            pushback: Pushback {
                body_replayable: false,
                ..not_authorized(Hint::Missing)
            },
            now: late,
            expected: "retry_not_authorized_by_contract",
        },
        Case {
            name: "not replayable + attempts exhausted",
            policy: policy().max_attempts(1),
            pushback: Pushback {
                body_replayable: false,
                ..delay(1)
            },
            now: t0,
            expected: "body_not_replayable",
        },
        Case {
            name: "attempts exhausted + invalid",
            policy: policy().max_attempts(1),
            pushback: pushback(invalid()),
            now: t0,
            expected: "attempt_budget_exhausted",
        },
        Case {
            name: "attempts exhausted + deadline passed",
            policy: policy().max_attempts(1),
            pushback: delay(1),
            now: late,
            expected: "attempt_budget_exhausted",
        },
        Case {
            name: "deadline passed + invalid",
            policy: policy(),
            pushback: pushback(invalid()),
            now: late,
            expected: "deadline_exhausted",
        },
        Case {
            name: "deadline passed + missing (fallback stop)",
            policy: policy().missing_retry_after(Fallback::Stop),
            pushback: pushback(Hint::Missing),
            now: late,
            expected: "deadline_exhausted",
        },
        Case {
            name: "deadline passed + delay over max_wait",
            policy: policy(),
            pushback: delay(1_000),
            now: late,
            expected: "deadline_exhausted",
        },
        Case {
            name: "missing (fallback stop) on a 503",
            policy: policy().missing_retry_after(Fallback::Stop),
            pushback: Pushback {
                fallback_allowed: false,
                ..pushback(Hint::Missing)
            },
            now: t0,
            expected: "missing_retry_after",
        },
        Case {
            name: "delay over max_wait + ready after deadline",
            policy: policy(),
            pushback: delay(61),
            now: t0 + secs(5),
            expected: "wait_budget_exhausted",
        },
    ];
    for case in cases {
        let p = planner(case.policy);
        let mut task = sent(&p, t0 + secs(10), t0);
        let d = p.plan(&mut task, &case.pushback, case.now, 0);
        assert_eq!(code(d), case.expected, "{}", case.name);
        assert_eq!(task.ready_at(), None, "{}", case.name);
    }
}

#[test]
fn stop_reason_codes_are_stable() {
    let all = [
        (
            StopReason::RetryNotAuthorizedByContract,
            "retry_not_authorized_by_contract",
        ),
        (StopReason::BodyNotReplayable, "body_not_replayable"),
        (StopReason::ServerSaidDoNotRetry, "server_said_do_not_retry"),
        (
            StopReason::AttemptBudgetExhausted,
            "attempt_budget_exhausted",
        ),
        (StopReason::DeadlineExhausted, "deadline_exhausted"),
        (StopReason::InvalidRetryAfter, "invalid_retry_after"),
        (StopReason::MissingRetryAfter, "missing_retry_after"),
        (StopReason::WaitBudgetExhausted, "wait_budget_exhausted"),
        (StopReason::RetryBudgetExhausted, "retry_budget_exhausted"),
    ];
    for (reason, code) in all {
        assert_eq!(reason.code(), code);
        assert_eq!(reason.to_string(), code);
    }
}

// ------------------------------------------------------------- jitter ----

#[test]
fn jitter_bounds() {
    let j = secs(1);
    let p = planner(Policy::default().jitter(j));
    let t0 = Instant::now();
    let base = t0 + secs(5);

    let mut task = sent(&p, t0 + secs(60), t0);
    let hi = until(p.plan(&mut task, &delay(5), t0, u64::MAX));
    assert!(hi > base && hi <= base + j, "{:?}", hi - base);
    assert_eq!(hi, base + j - Duration::from_nanos(1));
    assert_eq!(task.waited(), hi - t0);

    let mut task = sent(&p, t0 + secs(60), t0);
    let d = p.plan(&mut task, &delay(5), t0, 0);
    assert_eq!(
        d,
        Decision::Wait {
            until: base,
            delay: secs(5),
            source: HintSource::RetryAfter,
        }
    );

    // About half for a seed of half the range.
    let mut task = sent(&p, t0 + secs(60), t0);
    let mid = until(p.plan(&mut task, &delay(5), t0, u64::MAX / 2));
    assert!(
        mid - base >= ms(499) && mid - base <= ms(500),
        "{:?}",
        mid - base
    );
}

#[test]
fn jitter_is_never_earlier_than_the_server_time() {
    let p = planner(Policy::default().jitter(ms(250)));
    let t0 = Instant::now();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    for i in 0..1_000u64 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        let mut task = sent(&p, t0 + secs(60), t0);
        let Decision::Wait { until, delay, .. } = p.plan(&mut task, &delay(3), t0, seed) else {
            panic!("stopped");
        };
        assert_eq!(
            delay,
            secs(3),
            "the reported delay is the server's, without jitter"
        );
        assert!(until >= t0 + secs(3));
        assert!(until <= t0 + secs(3) + ms(250));
    }
    // The fallback delay is jittered the same way, only upwards.
    let p = planner(
        Policy::default()
            .jitter(ms(250))
            .origin_gate(false)
            .missing_retry_after(Fallback::Delay(secs(2))),
    );
    let mut task = sent(&p, t0 + secs(60), t0);
    let u = until(p.plan(&mut task, &pushback(Hint::Missing), t0, u64::MAX));
    assert!(u > t0 + secs(2) && u <= t0 + secs(2) + ms(250));
}

#[test]
fn jitter_never_pushes_past_deadline_minus_send_reserve() {
    let p = planner(Policy::default().jitter(secs(5)).send_reserve(ms(100)));
    let t0 = Instant::now();
    let deadline = t0 + secs(10);
    let latest = deadline - ms(100);
    let mut task = sent(&p, deadline, t0);
    let u = until(p.plan(&mut task, &pushback(Hint::Delay(ms(9_500))), t0, u64::MAX));
    assert!(u >= t0 + ms(9_500));
    assert!(u < latest, "{:?} past the latest send time", u - t0);
    assert!(u + ms(100) < deadline);
    assert_eq!(u, latest - Duration::from_nanos(1));
}

#[test]
fn jitter_never_pushes_past_max_total_wait() {
    let p = planner(
        Policy::default()
            .jitter(secs(1))
            .max_wait(secs(10))
            .max_total_wait(secs(10)),
    );
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let u = until(p.plan(&mut task, &delay(10), t0, u64::MAX));
    assert_eq!(u, t0 + secs(10));
    assert_eq!(task.waited(), secs(10));
}

// -------------------------------------------------------------- claims ----

#[test]
fn claim_sequence() {
    let p = planner(policy());
    let t0 = Instant::now();
    let deadline = t0 + secs(60);
    let mut task = TaskState::new(deadline);
    assert_eq!(task.attempts(), 0);
    assert_eq!(task.deadline(), deadline);

    assert_eq!(p.claim(&mut task, t0), Claim::Send { attempt: 1 });
    assert!(task.is_active());
    assert_eq!(task.attempts(), 1);
    // A second claim while the first attempt is in flight.
    assert_eq!(p.claim(&mut task, t0), Claim::Active);
    assert_eq!(p.claim(&mut task, t0 + secs(30)), Claim::Active);
    assert_eq!(task.attempts(), 1);

    let ready = until(p.plan(&mut task, &delay(5), t0 + secs(1), 0));
    assert_eq!(ready, t0 + secs(6));
    assert!(!task.is_active());
    assert_eq!(p.claim(&mut task, t0 + secs(1)), Claim::NotYet(ready));
    assert_eq!(
        p.claim(&mut task, ready - Duration::from_nanos(1)),
        Claim::NotYet(ready)
    );
    assert_eq!(p.claim(&mut task, ready), Claim::Send { attempt: 2 });
    assert_eq!(task.ready_at(), None);
    assert_eq!(p.claim(&mut task, ready), Claim::Active);

    // A success: the task is over.
    p.finish(&mut task);
    assert!(!task.is_active());
    assert_eq!(p.claim(&mut task, ready + secs(1)), Claim::NothingPlanned);
    assert_eq!(task.attempts(), 2);
}

#[test]
fn claim_after_a_stop_is_nothing_planned() {
    let p = planner(policy());
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let _ = code(p.plan(&mut task, &pushback(invalid()), t0, 0));
    assert_eq!(p.claim(&mut task, t0 + secs(1)), Claim::NothingPlanned);
}

#[test]
fn claim_after_the_deadline_stops() {
    let p = planner(policy());
    let t0 = Instant::now();
    let deadline = t0 + secs(10);

    // A first send after the deadline.
    let mut task = TaskState::new(deadline);
    assert_eq!(
        p.claim(&mut task, deadline),
        Claim::Stop(StopReason::DeadlineExhausted)
    );
    assert_eq!(task.attempts(), 0);

    // A planned retry claimed too late (the caller overslept).
    let mut task = sent(&p, deadline, t0);
    let ready = until(p.plan(&mut task, &delay(5), t0, 0));
    let c = p.claim(&mut task, deadline + secs(1));
    assert_eq!(c, Claim::Stop(StopReason::DeadlineExhausted));
    let Claim::Stop(reason) = c else {
        unreachable!()
    };
    assert_eq!(reason.code(), "deadline_exhausted");
    assert_eq!(task.attempts(), 1);
    assert_eq!(task.ready_at(), None);
    assert!(!task.is_active());
    assert!(ready < deadline);
    // And at exactly the deadline.
    let mut task = sent(&p, deadline, t0);
    let _ = until(p.plan(&mut task, &delay(5), t0, 0));
    assert_eq!(
        p.claim(&mut task, deadline),
        Claim::Stop(StopReason::DeadlineExhausted)
    );
}

#[test]
fn attempts_never_exceed_max_attempts() {
    for max in 1..=5u32 {
        let p = planner(policy().max_attempts(max));
        let t0 = Instant::now();
        let mut task = TaskState::new(t0 + secs(60));
        let mut now = t0;
        let mut sends = 0;
        loop {
            match p.claim(&mut task, now) {
                Claim::Send { attempt } => {
                    sends += 1;
                    assert_eq!(attempt, sends);
                }
                Claim::NothingPlanned => break,
                other => panic!("{other:?}"),
            }
            match p.plan(&mut task, &delay(1), now, 0) {
                Decision::Wait { until, .. } => now = until,
                Decision::Stop(r) => {
                    assert_eq!(r.code(), "attempt_budget_exhausted");
                }
            }
        }
        assert_eq!(sends, max);
        assert_eq!(task.attempts(), max);
    }
}

// -------------------------------------------------------- keyed tasks ----

#[test]
fn keyed_begin_twice_is_already_active() {
    let mut k = KeyedPlanner::new(planner(policy()));
    let t0 = Instant::now();
    assert!(k.is_empty());
    assert_eq!(k.begin("order-42", t0 + secs(60)), Ok(()));
    assert_eq!(k.begin("order-42", t0 + secs(99)), Err(KeyInUse));
    // The refused begin did not touch the running task.
    assert_eq!(k.get(&"order-42").unwrap().deadline(), t0 + secs(60));
    // Independent keys are fine.
    assert_eq!(k.begin("order-43", t0 + secs(60)), Ok(()));
    assert_eq!(k.len(), 2);
    assert_eq!(k.claim(&"order-42", t0), Some(Claim::Send { attempt: 1 }));
    assert_eq!(k.claim(&"order-43", t0), Some(Claim::Send { attempt: 1 }));
    assert_eq!(k.claim(&"order-42", t0), Some(Claim::Active));
    // Unknown keys.
    assert_eq!(k.claim(&"nope", t0), None);
    assert_eq!(k.plan(&"nope", &delay(1), t0, 0), None);
    assert!(k.get(&"nope").is_none());
    assert!(k.end(&"nope").is_none());
}

#[test]
fn keyed_second_event_keeps_the_later_ready_time() {
    let t0 = Instant::now();
    // 10 then 3: stays at +10.
    let mut k = KeyedPlanner::new(planner(policy()));
    k.begin(1u32, t0 + secs(60)).unwrap();
    assert!(k.claim(&1, t0).unwrap().is_send());
    assert_eq!(until(k.plan(&1, &delay(10), t0, 0).unwrap()), t0 + secs(10));
    assert_eq!(until(k.plan(&1, &delay(3), t0, 0).unwrap()), t0 + secs(10));
    assert_eq!(k.get(&1).unwrap().ready_at(), Some(t0 + secs(10)));
    // A later event with a shorter delay that ends earlier: still +10.
    assert_eq!(
        until(k.plan(&1, &delay(3), t0 + secs(2), 0).unwrap()),
        t0 + secs(10)
    );
    assert_eq!(
        k.claim(&1, t0 + secs(9)),
        Some(Claim::NotYet(t0 + secs(10)))
    );

    // 3 then 10: moves to +10.
    let mut k = KeyedPlanner::new(planner(policy()));
    k.begin(1u32, t0 + secs(60)).unwrap();
    assert!(k.claim(&1, t0).unwrap().is_send());
    assert_eq!(until(k.plan(&1, &delay(3), t0, 0).unwrap()), t0 + secs(3));
    assert_eq!(until(k.plan(&1, &delay(10), t0, 0).unwrap()), t0 + secs(10));
    assert_eq!(k.get(&1).unwrap().ready_at(), Some(t0 + secs(10)));
    assert_eq!(
        k.claim(&1, t0 + secs(3)),
        Some(Claim::NotYet(t0 + secs(10)))
    );
    assert_eq!(k.claim(&1, t0 + secs(10)), Some(Claim::Send { attempt: 2 }));
}

#[test]
fn keyed_second_event_does_not_count_the_same_wait_twice() {
    let t0 = Instant::now();
    let mut k = KeyedPlanner::new(planner(policy()));
    k.begin(1u32, t0 + secs(60)).unwrap();
    assert!(k.claim(&1, t0).unwrap().is_send());
    let _ = until(k.plan(&1, &delay(10), t0, 0).unwrap());
    let _ = until(k.plan(&1, &delay(3), t0, 0).unwrap());
    // One wait until t0 + 10 is planned: 10 s of waiting, not 20.
    assert_eq!(k.get(&1).unwrap().waited(), secs(10));
}

#[test]
fn keyed_second_event_within_total_wait_keeps_the_retry() {
    let t0 = Instant::now();
    let p = planner(policy().max_wait(secs(15)).max_total_wait(secs(15)));
    let mut k = KeyedPlanner::new(p);
    k.begin(1u32, t0 + secs(60)).unwrap();
    assert!(k.claim(&1, t0).unwrap().is_send());
    assert_eq!(until(k.plan(&1, &delay(10), t0, 0).unwrap()), t0 + secs(10));
    // The same (or a shorter) wait reported again: the plan is unchanged,
    // still 10 s of waiting in a 15 s budget.
    let second = k.plan(&1, &delay(10), t0, 0).unwrap();
    assert_eq!(until(second), t0 + secs(10));
}

#[test]
fn keyed_end_frees_the_entry() {
    let t0 = Instant::now();
    let mut k = KeyedPlanner::new(planner(policy()));
    k.begin("a", t0 + secs(60)).unwrap();
    k.begin("b", t0 + secs(60)).unwrap();
    assert!(k.claim(&"a", t0).unwrap().is_send());
    let _ = until(k.plan(&"a", &delay(1), t0, 0).unwrap());
    let state = k.end(&"a").expect("was running");
    assert_eq!(state.attempts(), 1);
    assert_eq!(k.len(), 1);
    assert!(k.end(&"b").is_some());
    assert_eq!(k.len(), 0);
    assert!(k.is_empty());
    assert!(k.end(&"a").is_none());
    // The key can run again, from scratch.
    k.begin("a", t0 + secs(60)).unwrap();
    assert_eq!(k.claim(&"a", t0), Some(Claim::Send { attempt: 1 }));
}

// ------------------------------------------------------ report retry_at ----

#[test]
fn retry_at_is_kept_when_stopping() {
    let p = planner(policy());
    let t0 = Instant::now();
    let pb = delay(61);
    let mut task = sent(&p, t0 + secs(600), t0);
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "wait_budget_exhausted");
    assert_eq!(pb.server_delay(), Some(secs(61)));
    assert_eq!(pb.retry_at(), Some(wall(RECEIVED + 61)));

    // A date, with skew: reported on our clock.
    let pb = Pushback {
        server_now: wall(RECEIVED - 3_600),
        ..pushback(Hint::At(wall(RECEIVED - 3_600 + 3_000)))
    };
    let mut task = sent(&p, t0 + secs(600), t0);
    let d = p.plan(&mut task, &pb, t0, 0);
    assert_stop(&task, d, "wait_budget_exhausted");
    assert_eq!(pb.retry_at(), Some(wall(RECEIVED + 3_000)));

    // An unrepresentable time is None, not a panic.
    assert_eq!(pushback(Hint::Delay(Duration::MAX)).retry_at(), None);
    // Invalid: nothing to report.
    assert_eq!(pushback(invalid()).retry_at(), None);
}

// ---------------------------------------------------- policy validation ----

#[test]
fn default_policy_is_valid() {
    assert_eq!(Policy::default().validate(), Ok(()));
    assert!(Planner::new(Policy::default()).is_ok());
    assert!(RetryAfterMiddleware::try_new(Policy::default()).is_ok());
    let p = Policy::default();
    assert_eq!(p.limits().max_attempts, 3);
    assert_eq!(p.limits().default_deadline, secs(120));
    assert!(p.is_retry_status(StatusCode::TOO_MANY_REQUESTS));
    assert!(p.is_retry_status(StatusCode::SERVICE_UNAVAILABLE));
    assert!(!p.is_retry_status(StatusCode::INTERNAL_SERVER_ERROR));
}

/// Whether a validation error is the one a row expects.
type IsExpected = fn(&InvalidPolicy) -> bool;

#[test]
fn every_invalid_policy_variant_is_reachable() {
    let none: Vec<StatusCode> = Vec::new();
    let table: Vec<(&str, Policy, IsExpected)> = vec![
        ("max_attempts 0", Policy::default().max_attempts(0), |e| {
            matches!(e, InvalidPolicy::ZeroAttempts)
        }),
        (
            "max_wait 0",
            Policy::default().max_wait(Duration::ZERO),
            |e| matches!(e, InvalidPolicy::ZeroBudget("max_wait")),
        ),
        (
            "max_total_wait 0",
            Policy::default().max_total_wait(Duration::ZERO),
            |e| matches!(e, InvalidPolicy::ZeroBudget("max_total_wait")),
        ),
        (
            "default_deadline 0",
            Policy::default().default_deadline(Duration::ZERO),
            |e| matches!(e, InvalidPolicy::ZeroBudget("default_deadline")),
        ),
        (
            "max_wait > max_total_wait",
            Policy::default()
                .max_wait(secs(121))
                .max_total_wait(secs(120)),
            |e| matches!(e, InvalidPolicy::Inconsistent(m) if m.contains("max_total_wait")),
        ),
        (
            "send_reserve == default_deadline",
            Policy::default()
                .default_deadline(secs(1))
                .send_reserve(secs(1)),
            |e| matches!(e, InvalidPolicy::Inconsistent(m) if m.contains("send_reserve")),
        ),
        (
            "send_reserve > default_deadline",
            Policy::default()
                .default_deadline(secs(1))
                .send_reserve(secs(2)),
            |e| matches!(e, InvalidPolicy::Inconsistent(m) if m.contains("send_reserve")),
        ),
        ("no statuses", Policy::default().statuses(none), |e| {
            matches!(e, InvalidPolicy::NoStatuses)
        }),
        (
            "a 200 status",
            Policy::default().statuses([StatusCode::TOO_MANY_REQUESTS, StatusCode::OK]),
            |e| matches!(e, InvalidPolicy::NotAnErrorStatus(200)),
        ),
        (
            "a 302 status",
            Policy::default().statuses([StatusCode::FOUND]),
            |e| matches!(e, InvalidPolicy::NotAnErrorStatus(302)),
        ),
    ];
    for (name, policy, expected) in table {
        let err = policy.validate().expect_err(name);
        assert!(expected(&err), "{name}: {err:?}");
        assert!(!err.to_string().is_empty());
        assert_eq!(Planner::new(policy.clone()).unwrap_err(), err, "{name}");
        assert!(
            RetryAfterMiddleware::try_new(policy).is_err(),
            "{name}: try_new accepted an invalid policy"
        );
    }
}

#[test]
fn boundary_policies_are_valid() {
    for policy in [
        Policy::default().max_attempts(1),
        Policy::default()
            .max_wait(secs(120))
            .max_total_wait(secs(120)),
        Policy::default()
            .default_deadline(secs(1))
            .send_reserve(ms(999)),
        Policy::default().send_reserve(Duration::ZERO),
        Policy::default()
            .max_wait(secs(2))
            .missing_retry_after(Fallback::Delay(secs(2))),
        Policy::default()
            .max_wait(ms(1))
            .missing_retry_after(Fallback::Stop),
        // The default 2 s fallback over a 1 s max_wait: capped, not invalid.
        Policy::default().max_wait(secs(1)),
        Policy::default().missing_retry_after(Fallback::Delay(Duration::ZERO)),
        Policy::default().jitter(Duration::ZERO),
        Policy::default().jitter(Duration::MAX),
        Policy::default().statuses([StatusCode::TOO_MANY_REQUESTS]),
        Policy::default().statuses([StatusCode::BAD_GATEWAY, StatusCode::BAD_GATEWAY]),
    ] {
        assert_eq!(policy.validate(), Ok(()), "{policy:?}");
        assert!(RetryAfterMiddleware::try_new(policy).is_ok());
    }
}

// ---------------------------------------------------------- properties ----

/// A valid policy and the limits it was built with (`Policy` has no
/// getters for most of them).
#[derive(Debug, Clone)]
struct Limits {
    policy: Policy,
    max_attempts: u32,
    max_total_wait: Duration,
    send_reserve: Duration,
    jitter: Duration,
}

fn valid_limits() -> impl Strategy<Value = Limits> {
    (
        1..6u32,                        // max_attempts
        1..120_000u64,                  // max_wait, ms
        0..200_000u64,                  // max_total_wait - max_wait, ms
        1..300_000u64,                  // default_deadline, ms
        0..2_000u64,                    // send_reserve, ms (kept below the deadline)
        prop::option::of(0..=1_000u64), // fallback delay, per mille of max_wait
        0..3_000u64,                    // jitter, ms
    )
        .prop_map(
            |(max_attempts, wait, extra, deadline, reserve, fallback, jitter)| {
                let fallback = match fallback {
                    Some(permille) => Fallback::Delay(ms(wait * permille / 1_000)),
                    None => Fallback::Stop,
                };
                let send_reserve = ms(reserve.min(deadline - 1));
                let max_total_wait = ms(wait + extra);
                let policy = Policy::default()
                    .max_attempts(max_attempts)
                    .max_wait(ms(wait))
                    .max_total_wait(max_total_wait)
                    .default_deadline(ms(deadline))
                    .send_reserve(send_reserve)
                    .missing_retry_after(fallback)
                    .jitter(ms(jitter));
                Limits {
                    policy,
                    max_attempts,
                    max_total_wait,
                    send_reserve,
                    jitter: ms(jitter),
                }
            },
        )
}

#[derive(Debug, Clone)]
enum HintKind {
    Missing,
    DelayMs(u64),
    /// A date this many seconds after the server's `Date` (may be past).
    AtSecs(i64),
    Invalid,
}

#[derive(Debug, Clone)]
enum Op {
    Claim,
    Push {
        hint: HintKind,
        /// The server's clock minus ours, in seconds.
        skew: i64,
        seed: u64,
        authorized: bool,
        replayable: bool,
        fallback_allowed: bool,
    },
    Finish,
}

fn hint_kind() -> impl Strategy<Value = HintKind> {
    prop_oneof![
        Just(HintKind::Missing),
        (0..120_000u64).prop_map(HintKind::DelayMs),
        (0..120u64).prop_map(|s| HintKind::DelayMs(s * 1_000)),
        (-60..120i64).prop_map(HintKind::AtSecs),
        Just(HintKind::Invalid),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Claim),
        4 => (
            hint_kind(),
            -7_200..7_200i64,
            any::<u64>(),
            prop::bool::weighted(0.95),
            prop::bool::weighted(0.95),
            any::<bool>(),
        )
            .prop_map(|(hint, skew, seed, authorized, replayable, fallback_allowed)| {
                Op::Push {
                    hint,
                    skew,
                    seed,
                    authorized,
                    replayable,
                    fallback_allowed,
                }
            }),
        1 => Just(Op::Finish),
    ]
}

/// Time between two steps, ms: mostly short, sometimes long.
fn step_ms() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0..3_000u64, 1 => 0..30_000u64]
}

fn at_offset(base: SystemTime, secs: i64) -> SystemTime {
    let d = Duration::from_secs(secs.unsigned_abs());
    if secs >= 0 { base + d } else { base - d }
}

fn make_pushback(
    hint: &HintKind,
    skew: i64,
    authorized: bool,
    replayable: bool,
    fallback_allowed: bool,
) -> Pushback {
    let received_at = wall(RECEIVED);
    let server_now = at_offset(received_at, skew);
    let hint = match hint {
        HintKind::Missing => Hint::Missing,
        HintKind::DelayMs(m) => Hint::Delay(ms(*m)),
        HintKind::AtSecs(s) => Hint::At(at_offset(server_now, *s)),
        HintKind::Invalid => invalid(),
    };
    Pushback {
        hint,
        server_now,
        received_at,
        retry_authorized: authorized,
        body_replayable: replayable,
        server_said_do_not_retry: false,
        fallback_allowed,
        // The model plans the fallback delay: no gate holds these retries
        // (the gate's row has tests of its own).
        gated: false,
        rate_limit: None,
    }
}

/// What the test believes about one task.
#[derive(Debug, Default, Clone, Copy)]
struct Model {
    active: bool,
    last_attempt: u32,
    /// Pushbacks planned so far (each may add jitter once).
    plans: u32,
}

enum Outcome {
    Claim(Claim),
    Plan(Pushback, Decision),
    Finish,
}

/// Checks one step of one task against the invariants.
fn check_step(
    limits: &Limits,
    model: &mut Model,
    before: &TaskState,
    after: &TaskState,
    outcome: Outcome,
    now: Instant,
) -> Result<(), TestCaseError> {
    match outcome {
        Outcome::Claim(c) => {
            if let Claim::Send { attempt } = c {
                prop_assert!(!model.active, "Send while an attempt is active");
                prop_assert!(!before.is_active());
                prop_assert_eq!(attempt, model.last_attempt + 1);
                model.last_attempt = attempt;
                prop_assert!(now < after.deadline(), "sent at or after the deadline");
                if let Some(ready) = before.ready_at() {
                    prop_assert!(now >= ready, "sent before the planned time");
                }
                prop_assert_eq!(after.ready_at(), None);
                model.active = true;
            } else {
                prop_assert_eq!(after.attempts(), before.attempts());
                if model.active {
                    prop_assert_eq!(c, Claim::Active);
                }
            }
            if let Claim::NotYet(ready) = c {
                prop_assert_eq!(before.ready_at(), Some(ready));
                prop_assert!(now < ready);
            }
        }
        Outcome::Plan(pb, decision) => {
            model.active = false;
            model.plans += 1;
            prop_assert_eq!(after.attempts(), before.attempts(), "plan sends nothing");
            match decision {
                Decision::Wait {
                    until,
                    delay,
                    source,
                } => {
                    // Never before the server's time (or the fallback delay):
                    // exactly the server's time, or, on a zero the task met
                    // again, the fallback delay above it.
                    match (pb.server_delay(), source) {
                        (Some(server), HintSource::Fallback) => {
                            prop_assert_eq!(server, Duration::ZERO);
                            prop_assert!(delay >= server);
                        }
                        (Some(server), _) => prop_assert_eq!(delay, server),
                        (None, _) => {
                            prop_assert_eq!(pb.hint, Hint::Missing);
                            prop_assert_eq!(source, HintSource::Fallback);
                        }
                    }
                    prop_assert!(until >= now + delay, "until before now + delay");
                    // Never at or after deadline - send_reserve.
                    prop_assert!(
                        until + limits.send_reserve < after.deadline(),
                        "until + send_reserve >= deadline"
                    );
                    // A planned retry is never moved earlier.
                    if let Some(prev) = before.ready_at() {
                        prop_assert!(until >= prev, "moved an existing plan earlier");
                    }
                    prop_assert_eq!(after.ready_at(), Some(until));
                    prop_assert!(pb.retry_authorized && pb.body_replayable);
                    prop_assert!(!matches!(pb.hint, Hint::Invalid(_)));
                    prop_assert!(now < after.deadline());
                    prop_assert!(before.attempts() < limits.max_attempts);
                }
                Decision::Stop(_) => {
                    prop_assert_eq!(after.ready_at(), None);
                    prop_assert_eq!(after.waited(), before.waited(), "a stop plans no wait");
                }
            }
        }
        Outcome::Finish => {
            model.active = false;
            prop_assert_eq!(after.ready_at(), None);
        }
    }
    prop_assert!(after.attempts() <= limits.max_attempts);
    // Jitter never counts toward max_total_wait; it is added only within
    // what is left of it, so only jitter already spent lies beyond it.
    prop_assert!(after.budgeted_wait() <= limits.max_total_wait);
    prop_assert!(
        after.waited() <= limits.max_total_wait + limits.jitter * model.plans,
        "{:?} waited",
        after.waited()
    );
    prop_assert_eq!(after.is_active(), model.active);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn planner_invariants(
        limits in valid_limits(),
        deadline_ms in 0..300_000u64,
        steps in prop::collection::vec((step_ms(), op()), 1..40),
    ) {
        let p = Planner::new(limits.policy.clone()).expect("valid_limits yields valid policies");
        let t0 = Instant::now();
        let mut task = TaskState::new(t0 + ms(deadline_ms));
        let mut model = Model::default();
        let mut now = t0;
        for (dt, op) in steps {
            now += ms(dt);
            let before = task;
            let outcome = match op {
                Op::Claim => Outcome::Claim(p.claim(&mut task, now)),
                Op::Push { hint, skew, seed, authorized, replayable, fallback_allowed } => {
                    let pb = make_pushback(&hint, skew, authorized, replayable, fallback_allowed);
                    Outcome::Plan(pb, p.plan(&mut task, &pb, now, seed))
                }
                Op::Finish => {
                    p.finish(&mut task);
                    Outcome::Finish
                }
            };
            check_step(&limits, &mut model, &before, &task, outcome, now)?;
        }
    }

    #[test]
    fn keyed_planner_invariants(
        limits in valid_limits(),
        deadlines_ms in prop::collection::vec(0..300_000u64, 3),
        steps in prop::collection::vec((0..3u8, step_ms(), op()), 1..80),
    ) {
        let p = Planner::new(limits.policy.clone()).expect("valid_limits yields valid policies");
        let mut k = KeyedPlanner::new(p);
        let t0 = Instant::now();
        for (key, d) in (0u8..).zip(&deadlines_ms) {
            prop_assert_eq!(k.begin(key, t0 + ms(*d)), Ok(()));
            prop_assert_eq!(k.begin(key, t0), Err(KeyInUse));
        }
        let mut models = [Model::default(); 3];
        let mut now = t0;
        for (key, dt, op) in steps {
            now += ms(dt);
            let before = *k.get(&key).unwrap();
            let outcome = match op {
                Op::Claim => Outcome::Claim(k.claim(&key, now).unwrap()),
                Op::Push { hint, skew, seed, authorized, replayable, fallback_allowed } => {
                    let pb = make_pushback(&hint, skew, authorized, replayable, fallback_allowed);
                    Outcome::Plan(pb, k.plan(&key, &pb, now, seed).unwrap())
                }
                // A keyed task only ends through `end`: model a finished
                // attempt as the end of the task and a fresh begin.
                Op::Finish => {
                    let ended = k.end(&key).unwrap();
                    prop_assert_eq!(k.len(), 2);
                    prop_assert_eq!(k.begin(key, ended.deadline()), Ok(()));
                    models[usize::from(key)] = Model::default();
                    continue;
                }
            };
            let after = *k.get(&key).unwrap();
            check_step(&limits, &mut models[usize::from(key)], &before, &after, outcome, now)?;
            // The other keys are untouched.
            prop_assert_eq!(k.len(), 3);
            for other in (0u8..3).filter(|o| *o != key) {
                prop_assert_eq!(k.get(&other).unwrap().is_active(), models[usize::from(other)].active);
            }
        }
        for key in 0u8..3 {
            prop_assert!(k.end(&key).is_some());
        }
        prop_assert!(k.is_empty());
    }
}

#[test]
fn a_fallback_delay_over_max_wait_is_capped_not_refused() {
    // The fallback is local policy, not a server's time: capping it is not
    // clamping the server.
    let planner = Planner::new(
        Policy::default()
            .jitter(Duration::ZERO)
            .max_wait(secs(1))
            .origin_gate(false)
            .missing_retry_after(Fallback::Delay(secs(5))),
    )
    .unwrap();
    let t0 = Instant::now();
    let mut task = TaskState::new(t0 + secs(30));
    assert!(planner.claim(&mut task, t0).is_send());
    let pb = Pushback::new(Hint::Missing, UNIX_EPOCH + secs(1_000));
    assert_eq!(
        planner.plan(&mut task, &pb, t0, u64::MAX),
        Decision::Wait {
            until: t0 + secs(1),
            delay: secs(1),
            source: HintSource::Fallback,
        }
    );
}

#[test]
fn a_repeated_zero_holds_the_origin_for_the_header_granularity_not_the_task_backoff() {
    use reqwest_backpressure::origin::Outcome;
    let p = planner(policy());
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    // The first zero: believed, and the origin is told zero.
    let first = p.plan(&mut task, &delay(0), t0, 0);
    assert_eq!(until(first), t0);
    assert_eq!(
        p.origin_outcome(&delay(0), &first),
        Outcome::Pushback {
            retry_in: Some(Duration::ZERO),
            hold_at_least: None,
        }
    );
    assert_eq!(p.claim(&mut task, t0), Claim::Send { attempt: 2 });
    // The second: the task falls back for 2 s itself, but the origin, shared
    // by every task, is held only for what a zero can mean, under a second
    // (it held the origin for the task's 2 s, and a GCRA server's 429 in a
    // batch closed it twice as long as the server asked).
    let second = p.plan(&mut task, &delay(0), t0, 0);
    assert_eq!(
        second,
        Decision::Wait {
            until: t0 + secs(2),
            delay: secs(2),
            source: HintSource::Fallback,
        }
    );
    assert_eq!(
        p.origin_outcome(&delay(0), &second),
        Outcome::Pushback {
            retry_in: Some(secs(1)),
            hold_at_least: None,
        }
    );
    // A fallback shorter than a second is passed on as it is.
    let p = planner(policy().missing_retry_after(Fallback::Delay(ms(300))));
    let mut task = sent(&p, t0 + secs(60), t0);
    let _ = p.plan(&mut task, &delay(0), t0, 0);
    assert_eq!(p.claim(&mut task, t0), Claim::Send { attempt: 2 });
    let second = p.plan(&mut task, &delay(0), t0, 0);
    assert_eq!(
        p.origin_outcome(&delay(0), &second),
        Outcome::Pushback {
            retry_in: Some(ms(300)),
            hold_at_least: None,
        }
    );
}

/// An invalid `Retry-After` stops its task, and what it still reads as,
/// decimal seconds (as its upper bound), is the least the origin's gate
/// holds; anything else invalid is our own hold alone.
#[test]
fn an_invalid_decimal_retry_after_stops_its_task_and_floors_the_origin_hold() {
    use reqwest_backpressure::origin::Outcome;
    let p = planner(policy());
    let t0 = Instant::now();
    let mut task = sent(&p, t0 + secs(60), t0);
    let two = pushback(Hint::Invalid(parse_retry_after("2.0").unwrap_err()));
    let decision = p.plan(&mut task, &two, t0, 0);
    assert_eq!(decision, Decision::Stop(StopReason::InvalidRetryAfter));
    assert_eq!(
        p.origin_outcome(&two, &decision),
        Outcome::Pushback {
            retry_in: None,
            hold_at_least: Some(ms(2100)),
        }
    );
    for garbage in ["-1", "1e3", "soon", "2.0s"] {
        let mut task = sent(&p, t0 + secs(60), t0);
        let bad = pushback(Hint::Invalid(parse_retry_after(garbage).unwrap_err()));
        let decision = p.plan(&mut task, &bad, t0, 0);
        assert_eq!(decision, Decision::Stop(StopReason::InvalidRetryAfter));
        assert_eq!(
            p.origin_outcome(&bad, &decision),
            Outcome::Pushback {
                retry_in: None,
                hold_at_least: None,
            },
            "{garbage}"
        );
    }
}
