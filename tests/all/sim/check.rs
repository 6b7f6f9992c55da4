//! What must hold after every run: nothing sent before a time the server
//! named, nothing after a deadline, one attempt per key at a time, every
//! task ended with a result the decision table allows, nothing left
//! reserved, no panic. The quota checks are in `check_quota.rs`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::draw::{Family, Method};
use super::run::{Ending, Run};
use super::server::Told;

/// Which rule a run broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Check {
    /// The run, or a task, panicked.
    Panic,
    /// A task never ended.
    Hung,
    /// Sent before a time the server named.
    Early,
    /// Sent after the task's deadline.
    PastDeadline,
    /// Ended after its deadline.
    EndedLate,
    /// Two attempts of one key in flight at once.
    OneAttemptPerKey,
    /// A result the decision table does not allow.
    Result,
    /// Refused (`origin_gate_closed`) though its time was within reach.
    Refused,
    /// A slot or a lease still held after the last task.
    Reserved,
    /// More sent than a declared quota admits.
    DeclaredQuota,
    /// More sent into a stated window than it said remained.
    StatedQuota,
    /// Waited for an origin's first answer past `first_contact`.
    FirstContact,
}

/// One broken rule, and what broke it.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    pub(crate) check: Check,
    pub(crate) detail: String,
}

pub(crate) fn violation(check: Check, detail: String) -> Violation {
    Violation { check, detail }
}

/// The stop codes of the decision table.
const STOP_CODES: &[&str] = &[
    "retry_not_authorized_by_contract",
    "body_not_replayable",
    "server_said_do_not_retry",
    "attempt_budget_exhausted",
    "deadline_exhausted",
    "invalid_retry_after",
    "missing_retry_after",
    "wait_budget_exhausted",
    "retry_budget_exhausted",
    "store_unavailable",
];

const MS: Duration = Duration::from_millis(1);

/// Every rule, over one run.
pub(crate) fn check(run: &Run) -> Vec<Violation> {
    let mut out = Vec::new();
    ended(run, &mut out);
    early(run, &mut out);
    one_per_key(run, &mut out);
    reserved(run, &mut out);
    super::check_quota::declared(run, &mut out);
    super::check_quota::stated(run, &mut out);
    super::check_quota::first_contact(run, &mut out);
    out
}

/// Every task ended, by its deadline, with an allowed result; nothing
/// sent past a deadline.
fn ended(run: &Run, out: &mut Vec<Violation>) {
    let sc = &run.scenario;
    let policy = &sc.policy;
    for s in &run.log.sent {
        if s.at > run.deadlines[s.task] {
            let d = run.deadlines[s.task];
            out.push(violation(
                Check::PastDeadline,
                format!("task {} sent at {:?}, deadline {d:?}", s.task, s.at),
            ));
        }
    }
    for (i, ending) in run.ended.iter().enumerate() {
        let task = &sc.tasks[i];
        let sends = run.log.sent.iter().filter(|s| s.task == i).count();
        let Some((at, ending)) = ending else {
            out.push(violation(Check::Hung, format!("task {i} never ended")));
            continue;
        };
        let deadline = run.deadlines[i];
        if !matches!(ending, Ending::Cancelled | Ending::Panicked) && *at > deadline + MS {
            out.push(violation(
                Check::EndedLate,
                format!("task {i} ended at {at:?} ({ending:?}), deadline {deadline:?}"),
            ));
        }
        if task.method == (Method::Post { keyed: false }) && sends > 1 {
            out.push(violation(
                Check::Result,
                format!("task {i}: a POST without a key sent {sends} times"),
            ));
        }
        let bad = |why: String| violation(Check::Result, format!("task {i}: {why} ({ending:?})"));
        match ending {
            Ending::Panicked => out.push(violation(Check::Panic, format!("task {i} panicked"))),
            Ending::Cancelled => {}
            Ending::Response {
                status,
                attempts,
                stop,
            } => {
                if *attempts == 0 || *attempts > policy.max_attempts {
                    out.push(bad(format!("{attempts} attempts")));
                }
                if usize::try_from(*attempts).unwrap() != sends {
                    out.push(bad(format!(
                        "reported {attempts} attempts, the server saw {sends}"
                    )));
                }
                match (status, stop) {
                    (200, Some(code)) => out.push(bad(format!("a 200 with stop {code}"))),
                    (200, None) => {}
                    (_, None) => out.push(bad("a pushback returned with no stop reason".into())),
                    (_, Some(code)) => {
                        let allowed = STOP_CODES.contains(code)
                            && match *code {
                                "attempt_budget_exhausted" => *attempts == policy.max_attempts,
                                "retry_not_authorized_by_contract" => {
                                    task.method == (Method::Post { keyed: false })
                                }
                                "missing_retry_after" => policy.fallback.is_none(),
                                "store_unavailable" => run.store_failures > 0,
                                "body_not_replayable" => false,
                                _ => true,
                            };
                        if !allowed {
                            out.push(bad(format!("stop code {code}")));
                        }
                    }
                }
            }
            Ending::Error { code, retry_at } => {
                let origin = &sc.origins[task.origin];
                let allowed = match code.as_str() {
                    "already_active" => task.key.is_some(),
                    "deadline_exhausted" | "invalid_policy" => true,
                    "store_unavailable" => run.store_failures > 0,
                    "attempt_timed_out" => *at + MS >= deadline,
                    "transport" => origin.transport_errors > 0,
                    "origin_gate_closed" => {
                        if let Some(r) = retry_at {
                            refused(run, i, *at, *r, out);
                        }
                        true
                    }
                    _ => false,
                };
                if !allowed {
                    out.push(bad(format!("error {code}")));
                }
            }
        }
    }
}

/// A refusal (`origin_gate_closed` at `at`, to send at `retry_at`) is
/// right when the time is past the deadline, or past `max_wait` for a
/// time the server named; a declared quota is the caller's own
/// knowledge, and its slot is waited for while the deadline allows.
fn refused(run: &Run, i: usize, at: Duration, retry_at: Duration, out: &mut Vec<Violation>) {
    let sc = &run.scenario;
    let task = &sc.tasks[i];
    let deadline = run.deadlines[i];
    let reserve = Duration::from_millis(100) + sc.policy.jitter;
    if retry_at + reserve + MS >= deadline {
        return;
    }
    let max_wait = sc.policy.max_wait;
    let declared = sc.policy.quotas.iter().any(|q| q.origin == task.origin);
    let server_far = run.log.told.iter().any(|t| {
        t.origin == task.origin && t.received <= at && t.not_before - t.decided + MS >= max_wait
    });
    let far = retry_at.saturating_sub(at) + MS >= max_wait;
    if server_far || (far && !declared) {
        return;
    }
    out.push(violation(
        Check::Refused,
        format!(
            "task {i} refused with origin_gate_closed at {at:?}: retry_at {retry_at:?}, deadline \
             {deadline:?}, max_wait {max_wait:?}, declared quota: {declared}"
        ),
    ));
}

/// Whether the shared view surely knows what task `t` was told at
/// `received` by `by`: the store applies every write, and the task lived
/// until its write was applied.
fn known_by(run: &Run, task: usize, by: Duration) -> bool {
    run.store_failures == 0
        && run.ended[task].as_ref().is_some_and(|(at, e)| {
            !matches!(e, Ending::Cancelled) || *at >= by + run.scenario.store.latency
        })
}

/// Nothing sent before a time the server named: by the task it was
/// named to, after it received it; with the gate on, by any task to the
/// origin once the store knows it. A time past `max_wait` holds the gate
/// only that long (then one probe): not checked. A reset is one instant,
/// which the server rounds up in each answer that states it (a fixed
/// window's end; a sliding log's oldest entry expiring, whether the
/// answer said it was spent or not): of the times it named for that
/// instant in answers received before a send, the earliest is the
/// server's time (each is at or after the instant).
fn early(run: &Run, out: &mut Vec<Violation>) {
    let policy = &run.scenario.policy;
    for told in &run.log.told {
        if (told.not_before - told.decided) + Duration::from_secs(1) > policy.max_wait {
            continue;
        }
        let shared = policy.origin_gate
            && (told.pushback || policy.proactive_gate)
            && known_by(run, told.task, told.received);
        let plan = &run.scenario.origins[told.origin];
        // What the answer told is in the store a leg after it arrived; an
        // admission read applied before that answers stale, a leg later.
        // A request under two limits (GitHub's resource, Discord's bucket,
        // and the origin) reads the second with a fresh read of the first
        // beside it, and leaves when both have answered: the first's read
        // may have been applied before the record while the second's
        // answer comes a whole round trip after, so one leg more.
        let scoped = matches!(plan.family, Family::GitHub | Family::Discord);
        let legs = if scoped { 3 } else { 2 };
        let from = told.received + run.scenario.store.latency.saturating_mul(legs);
        // Discord limits per route (its bucket), and a route learns its
        // bucket from its own first answer: a send on a route none of
        // whose answers had arrived cannot know that it shares the bucket
        // a statement, or a `429`, spoke of (discord.js and twilight send
        // it too). A `503` is the origin's, every route's.
        let bucket_only = plan.family == Family::Discord && (!told.pushback || plan.refusal != 503);
        for s in &run.log.sent {
            if s.origin != told.origin || s.at >= named_by(run, told, s.at) {
                continue;
            }
            if bucket_only && s.task != told.task && !route_answered(run, s.task, s.origin, s.at) {
                continue;
            }
            let own = s.task == told.task
                && told.pushback
                && s.at >= told.received
                && s.at > told.decided;
            let other = shared && s.at > from;
            if own || other {
                out.push(violation(
                    Check::Early,
                    format!(
                        "task {} sent at {:?}, before {:?}: {} told task {} at {:?} (decided {:?})",
                        s.task,
                        s.at,
                        told.not_before,
                        told.what,
                        told.task,
                        told.received,
                        told.decided
                    ),
                ));
            }
        }
    }
}

/// Whether an answer to a send on `task`'s route (its method) at `origin`
/// had reached the client by `at`, when `task` sent at `at` (that send's
/// own answer, back at once from a server with no latency, does not
/// count).
fn route_answered(run: &Run, task: usize, origin: usize, at: Duration) -> bool {
    let get = |t: usize| matches!(run.scenario.tasks[t].method, Method::Get);
    run.log.sent.iter().any(|p| {
        !(p.task == task && p.at == at)
            && p.origin == origin
            && p.answered
            && get(p.task) == get(task)
            && p.done.is_some_and(|d| d <= at)
    })
}

/// The earliest time the server named for `told`'s reset in the answers
/// received by `at`: its own, or another statement of the same instant of
/// the same limit.
fn named_by(run: &Run, told: &Told, at: Duration) -> Duration {
    let Some((limit, instant)) = told.reset else {
        return told.not_before;
    };
    run.log
        .resets_told
        .iter()
        .filter(|r| {
            r.origin == told.origin && r.limit == limit && r.at == instant && r.received <= at
        })
        .map(|r| r.named)
        .fold(told.not_before, Duration::min)
}

/// At most one attempt per key (and origin) in flight at a time.
fn one_per_key(run: &Run, out: &mut Vec<Violation>) {
    // (origin, key) -> (sent, done, task) of each attempt.
    type Attempts<'a> = BTreeMap<(usize, &'a str), Vec<(Duration, Duration, usize)>>;
    let mut by_key: Attempts<'_> = BTreeMap::new();
    for s in &run.log.sent {
        if let Some(key) = &run.scenario.tasks[s.task].key {
            let done = s.done.unwrap_or(Duration::MAX);
            by_key
                .entry((s.origin, key))
                .or_default()
                .push((s.at, done, s.task));
        }
    }
    for ((_, key), mut sends) in by_key {
        sends.sort();
        for pair in sends.windows(2) {
            let ((_, done, a), (at, _, b)) = (pair[0], pair[1]);
            if at < done {
                out.push(violation(
                    Check::OneAttemptPerKey,
                    format!("key {key}: task {b} sent at {at:?} while task {a}'s attempt ran until {done:?}"),
                ));
            }
        }
    }
}

/// After the last task: no slot reserved, no lease held (when no store
/// operation failed: a failed give-back is the store's to expire).
fn reserved(run: &Run, out: &mut Vec<Violation>) {
    if run.store_failures > 0 || run.ended.iter().any(Option::is_none) {
        return;
    }
    let mut detail = String::new();
    for (o, status) in run.status.iter().enumerate() {
        if let Some(status) = status
            && status.reserved() > 0
        {
            let _ = write!(detail, "origin {o}: {} slots reserved; ", status.reserved());
        }
    }
    if run.leases > 0 {
        let _ = write!(detail, "{} leases held", run.leases);
    }
    if !detail.is_empty() {
        out.push(violation(
            Check::Reserved,
            format!("after the last task ({:?}): {detail}", run.last_end),
        ));
    }
}
