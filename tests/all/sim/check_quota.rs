//! The checks of what a quota admits: a declared quota never overspent
//! (every one of an origin binds), a stated window never overspent once
//! its statement arrived, and an origin's first answer waited for no
//! longer than `first_contact`.

use std::time::Duration;

use super::check::{Check, Violation, violation};
use super::draw::{DeclaredPlan, Family};
use super::run::Run;

/// The quotas the caller declared that bind: for each origin, the last
/// declared in requests and the last in units.
fn binding(run: &Run) -> Vec<DeclaredPlan> {
    let mut out: Vec<DeclaredPlan> = Vec::new();
    for q in &run.scenario.policy.quotas {
        out.retain(|p| !(p.origin == q.origin && p.units == q.units));
        out.push(*q);
    }
    out
}

/// No declared quota overspent: a window admits `count` in any span of
/// `per`, a bucket a burst of `count` then one every `per / count`; a
/// quota in units counts each send's cost (unless the server states its
/// own units, which then govern).
pub(super) fn declared(run: &Run, out: &mut Vec<Violation>) {
    if !run.scenario.policy.origin_gate {
        return;
    }
    for q in binding(run) {
        let origin = &run.scenario.origins[q.origin];
        if q.units && origin.family == Family::OpenAi {
            continue;
        }
        let sends: Vec<(Duration, u64)> = run
            .log
            .sent
            .iter()
            .filter(|s| s.origin == q.origin)
            .map(|s| (s.at, if q.units { s.cost } else { 1 }))
            .collect();
        let count = u64::from(q.count);
        if q.refilled {
            let every = q.per / q.count;
            let mut tat = Duration::ZERO;
            for &(at, n) in &sends {
                tat = tat
                    .max(at)
                    .saturating_add(every.saturating_mul(u32::try_from(n).unwrap_or(u32::MAX)));
                if tat - at > q.per.saturating_add(Duration::from_millis(1)) {
                    out.push(violation(
                        Check::DeclaredQuota,
                        format!(
                            "origin {}: a send at {at:?} overspends the bucket {q:?}",
                            q.origin
                        ),
                    ));
                    break;
                }
            }
            continue;
        }
        let mut sum = 0;
        let mut first = 0;
        for (i, &(at, n)) in sends.iter().enumerate() {
            sum += n;
            while sends[first].0.saturating_add(q.per) <= at {
                sum -= sends[first].1;
                first += 1;
            }
            if sum > count {
                out.push(violation(
                    Check::DeclaredQuota,
                    format!(
                        "origin {}: {sum} {} sent from {:?} to {at:?} (sends {first}..={i}), declared {q:?}",
                        q.origin,
                        if q.units { "units" } else { "requests" },
                        sends[first].0
                    ),
                ));
                break;
            }
        }
    }
}

/// Once the client received what a fixed window had left, no more than
/// that went into the window (a request limit the family states; over a
/// store that keeps a stated quota and applies every write at once).
pub(super) fn stated(run: &Run, out: &mut Vec<Violation>) {
    let sc = &run.scenario;
    let p = &sc.policy;
    if !(sc.store.is_clean() && !sc.store.coalesced && p.origin_gate && p.proactive_gate) {
        return;
    }
    for told in &run.log.window_told {
        let shape = sc.origins[told.origin].limits[told.limit].shape;
        let super::draw::Shape::FixedWindow { window, .. } = shape else {
            continue;
        };
        if window + Duration::from_secs(1) > p.max_wait {
            continue;
        }
        let into: Vec<(usize, Duration)> = run
            .log
            .sent
            .iter()
            .zip(&run.log.windows)
            .filter(|(s, windows)| {
                s.origin == told.origin
                    && s.at >= told.received
                    && s.at > told.decided
                    && windows.contains(&(told.limit, told.window_id))
            })
            .map(|(s, _)| (s.task, s.at))
            .collect();
        if u64::try_from(into.len()).unwrap() > told.remaining {
            out.push(violation(
                Check::StatedQuota,
                format!(
                    "origin {} limit {} window {}: told {} left at {:?}, then sent {} into it (last at {:?})",
                    told.origin,
                    told.limit,
                    told.window_id,
                    told.remaining,
                    told.received,
                    into.len(),
                    into.last().map(|s| s.1)
                ),
            ));
            return;
        }
    }
}

/// While an origin's first answer is outstanding, the others wait for it
/// `first_contact` at most: every task that arrived before it leaves by
/// then (one wait per origin, not one after another).
pub(super) fn first_contact(run: &Run, out: &mut Vec<Violation>) {
    let sc = &run.scenario;
    let p = &sc.policy;
    if !p.origin_gate || p.first_contact.is_zero() || !sc.store.is_clean() {
        return;
    }
    let slack = Duration::from_millis(20);
    for o in 0..sc.origins.len() {
        if p.quotas.iter().any(|q| q.origin == o) || p.in_flight.is_some_and(|(i, _)| i == o) {
            continue;
        }
        let sends: Vec<_> = run.log.sent.iter().filter(|s| s.origin == o).collect();
        let Some(first) = sends.first().map(|s| s.at) else {
            continue;
        };
        let answered = sends
            .iter()
            .filter(|s| s.answered)
            .filter_map(|s| s.done)
            .min()
            .unwrap_or(Duration::MAX);
        for (i, t) in sc.tasks.iter().enumerate() {
            if t.origin != o || t.key.as_deref().is_some_and(|k| k.starts_with("shared")) {
                continue;
            }
            let by = t.arrives.max(first) + p.first_contact + slack;
            if t.arrives >= answered || by >= answered || by >= run.deadlines[i] {
                continue;
            }
            let alive = run.ended[i].as_ref().is_none_or(|(at, _)| *at > by);
            let sent = sends.iter().find(|s| s.task == i).map(|s| s.at);
            if alive && sent.is_none_or(|at| at > by) {
                out.push(violation(
                    Check::FirstContact,
                    format!(
                        "origin {o}: task {i} arrived at {:?}, first send at {first:?}, first answer at \
                         {answered:?}, and it sent at {sent:?} (due by {by:?})",
                        t.arrives
                    ),
                ));
                return;
            }
        }
    }
}
