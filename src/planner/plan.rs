//! The decision table: a task's state and the planner's rows over it.

use std::time::Duration;

use tokio::time::Instant;

use super::{AdmissionLimit, Claim, Decision, HintSource, Pushback, StopReason, StoreFault};
use crate::origin::Outcome;
use crate::policy::{Fallback, InvalidPolicy, Policy};
use crate::retry_after::Hint;

/// The granularity of `Retry-After` (one idea with the origin's hold of a
/// repeated zero: see [`Tuning::zero_granularity`](crate::origin::tuning::Tuning)).
const ZERO_GRANULARITY: Duration = crate::origin::tuning::TUNING.zero_granularity;

/// The state of one task: attempts made, time waited, its deadline and its
/// planned retry. Plain data; the planner's methods update it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskState {
    deadline: Instant,
    attempts: u32,
    waited: Duration,
    /// The part of `waited` that is our own jitter: it never counts toward
    /// `max_total_wait`, so it never turns a wait the budgets allow into a
    /// stop.
    jitter: Duration,
    /// Pushbacks of this task that gave a zero time (and no later reset).
    zeros: u32,
    /// Where the time of the last planned retry came from.
    source: Option<HintSource>,
    ready_at: Option<Instant>,
    active: bool,
}

impl TaskState {
    /// A task that has sent nothing yet and must finish before `deadline`.
    #[must_use]
    pub fn new(deadline: Instant) -> Self {
        TaskState {
            deadline,
            attempts: 0,
            waited: Duration::ZERO,
            jitter: Duration::ZERO,
            zeros: 0,
            source: None,
            ready_at: None,
            active: false,
        }
    }

    /// Sends claimed so far (the first send counts).
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Total waiting planned so far (server delays, fallback delays, time
    /// at the origin's gate, and jitter).
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// The part of [`waited`](Self::waited) that counts toward
    /// `max_total_wait`: everything but jitter, which is our own choice.
    #[must_use]
    pub fn budgeted_wait(&self) -> Duration {
        self.waited.saturating_sub(self.jitter)
    }

    /// Counts `d` spent waiting outside the planner (at an origin's gate,
    /// in a paced queue) toward `max_total_wait`.
    pub fn add_wait(&mut self, d: Duration) {
        self.waited = self.waited.saturating_add(d);
    }

    /// Where the time the last pushback asked for came from (also when the
    /// task then stopped, e.g. on a reset past `max_wait`).
    #[must_use]
    pub fn hint_source(&self) -> Option<HintSource> {
        self.source
    }

    /// The absolute deadline of the task.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The planned retry time, if a retry is planned and not yet claimed.
    #[must_use]
    pub fn ready_at(&self) -> Option<Instant> {
        self.ready_at
    }

    /// Whether an attempt is in flight.
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.active
    }
}

/// The decision table over a validated [`Policy`].
#[derive(Debug, Clone)]
pub struct Planner {
    policy: Policy,
}

impl Planner {
    /// A planner for `policy`, which must be valid.
    pub fn new(policy: Policy) -> Result<Self, InvalidPolicy> {
        policy.validate()?;
        Ok(Planner { policy })
    }

    /// The policy this planner applies.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Decides what to do after an attempt of `task` was pushed back at
    /// `now`. The rows of the decision table, in order:
    ///
    /// | condition | outcome |
    /// |---|---|
    /// | not authorised by contract | `retry_not_authorized_by_contract` |
    /// | body not replayable | `body_not_replayable` |
    /// | the server said not to retry | `server_said_do_not_retry` |
    /// | attempts ≥ `max_attempts` | `attempt_budget_exhausted` |
    /// | `now` ≥ deadline | `deadline_exhausted` |
    /// | `Retry-After` invalid | `invalid_retry_after` |
    /// | `Retry-After` missing | fallback delay, or `missing_retry_after` |
    /// | delay > `max_wait`, or total > `max_total_wait` | `wait_budget_exhausted` |
    /// | ready (+ `send_reserve`) ≥ deadline | `deadline_exhausted` |
    /// | otherwise | wait until `max(now + delay + jitter, planned ready)` |
    ///
    /// `jitter_seed` is a uniformly random `u64` chosen by the caller; the
    /// jitter added is `seed / 2^64 × policy.jitter`, trimmed so it never
    /// pushes a retry that fits past the deadline. Jitter only ever adds.
    /// The client-wide retry budget (`retry_budget_exhausted`) is checked
    /// by the caller after a `Wait`, since it lives in shared state.
    pub fn plan(
        &self,
        task: &mut TaskState,
        pushback: &Pushback,
        now: Instant,
        jitter_seed: u64,
    ) -> Decision {
        let p = &self.policy;
        // The pushed-back attempt is over.
        task.active = false;
        let stop = |task: &mut TaskState, reason| {
            task.ready_at = None;
            Decision::Stop(reason)
        };
        if !pushback.retry_authorized {
            return stop(task, StopReason::RetryNotAuthorizedByContract);
        }
        if !pushback.body_replayable {
            return stop(task, StopReason::BodyNotReplayable);
        }
        if pushback.server_said_do_not_retry {
            return stop(task, StopReason::ServerSaidDoNotRetry);
        }
        if task.attempts >= p.max_attempts {
            return stop(task, StopReason::AttemptBudgetExhausted);
        }
        if now >= task.deadline {
            return stop(task, StopReason::DeadlineExhausted);
        }
        if let Hint::Invalid(_) = pushback.hint {
            return stop(task, StopReason::InvalidRetryAfter);
        }
        let Some((delay, source)) = self.delay(task, pushback) else {
            return stop(task, StopReason::MissingRetryAfter);
        };
        task.source = Some(source);
        if delay > p.max_wait {
            return stop(task, StopReason::WaitBudgetExhausted);
        }
        let Some(base) = now.checked_add(delay) else {
            return stop(task, StopReason::WaitBudgetExhausted);
        };
        // A second event for a task with a planned retry keeps the later
        // time; the wait up to the planned time is already counted.
        let planned = task.ready_at.filter(|r| *r > now);
        if let Some(planned) = planned
            && planned >= base
        {
            return Decision::Wait {
                until: planned,
                delay,
                source,
            };
        }
        let counted_to = planned.unwrap_or(now);
        let Some(latest) = task.deadline.checked_sub(p.send_reserve) else {
            return stop(task, StopReason::DeadlineExhausted);
        };
        // Jitter never counts toward `max_total_wait`: a wait the budgets
        // allow is never stopped because of our own randomness.
        let budgeted = task
            .budgeted_wait()
            .saturating_add(base.saturating_duration_since(counted_to));
        if budgeted > p.max_total_wait {
            return stop(task, StopReason::WaitBudgetExhausted);
        }
        if base >= latest {
            return stop(task, StopReason::DeadlineExhausted);
        }
        // Jitter is trimmed to what is left before the latest send time and
        // of `max_total_wait`, so the total wait still stays within it.
        let jitter = scale(p.jitter, jitter_seed)
            .min(
                latest
                    .saturating_duration_since(base)
                    .saturating_sub(Duration::from_nanos(1)),
            )
            .min(
                p.max_total_wait
                    .saturating_sub(budgeted.saturating_add(task.jitter)),
            );
        let until = base + jitter;
        task.jitter = task.jitter.saturating_add(jitter);
        task.waited = budgeted.saturating_add(task.jitter);
        task.ready_at = Some(until);
        Decision::Wait {
            until,
            delay,
            source,
        }
    }

    /// The delay of a retry and where it comes from, or `None` when the
    /// policy does not retry without a server time. The rows:
    ///
    /// - a valid `Retry-After` above zero: the server's time;
    /// - else a rate-limit reset above zero: the server's time too;
    /// - a zero `Retry-After` (or a past date) the task meets for the
    ///   first time: retry at once (plus jitter). The origin's gate holds
    ///   every task for a second if the origin keeps answering zero (see
    ///   [`OriginState::on_pushback`]);
    /// - a zero the task meets again: the fallback delay, doubled for each
    ///   zero after the second, capped at `max_wait` (a truncating server
    ///   says 0 for "under a second", and a retry at once lands in the same
    ///   closed window);
    /// - no time at all: with the origin's gate on (and holding this
    ///   retry), none of the task's own: the pushback closed the gate, and
    ///   the task waits there ([`HintSource::Gate`]); otherwise the
    ///   fallback delay. With [`Fallback::Stop`], none.
    ///
    /// An invalid `Retry-After` is stopped on by the caller before this.
    fn delay(&self, task: &mut TaskState, pushback: &Pushback) -> Option<(Duration, HintSource)> {
        let p = &self.policy;
        let fallback = |factor: u32| match p.missing_retry_after {
            Fallback::Delay(d) => Some((
                d.saturating_mul(factor).min(p.max_wait),
                HintSource::Fallback,
            )),
            Fallback::Stop => None,
        };
        let later_reset = pushback.rate_limit.filter(|d| !d.is_zero());
        match pushback.retry_after() {
            Some(d) if !d.is_zero() => Some((d, HintSource::RetryAfter)),
            Some(zero) => {
                if let Some(reset) = later_reset {
                    return Some((reset, HintSource::RateLimit));
                }
                task.zeros = task.zeros.saturating_add(1);
                match task.zeros {
                    1 => Some((zero, HintSource::RetryAfter)),
                    n => fallback(1u32 << (n - 2).min(16)),
                }
            }
            None => match later_reset {
                Some(reset) => Some((reset, HintSource::RateLimit)),
                None if !pushback.fallback_allowed => None,
                None if p.origin_gate
                    && pushback.gated
                    && matches!(p.missing_retry_after, Fallback::Delay(_)) =>
                {
                    Some((Duration::ZERO, HintSource::Gate))
                }
                None => fallback(1),
            },
        }
    }

    #[doc(hidden)]
    /// The retry-budget row: a retry the server gave no time for
    /// ([`HintSource::Fallback`]) needs a token from the client-wide
    /// budget; `granted` is the store's answer to that withdrawal. A retry
    /// at the server's own time spends nothing and is returned unchanged.
    pub fn spend_budget(
        &self,
        task: &mut TaskState,
        decision: Decision,
        granted: Result<bool, StoreFault>,
    ) -> Decision {
        let reason = match granted {
            Ok(true) => return decision,
            Ok(false) => StopReason::RetryBudgetExhausted,
            Err(fault) => fault.reason(),
        };
        task.ready_at = None;
        Decision::Stop(reason)
    }

    #[doc(hidden)]
    /// Whether `decision`, planned for `pushback`, needs a token from the
    /// retry budget: a retry at a delay of the policy's own choosing
    /// ([`HintSource::Fallback`]) that no origin gate holds (the gate is
    /// off, or the answer came from where a redirect led). The budget
    /// bounds amplification: a retry that waits at the gate leaves at the
    /// pace the origin admits, one probe per hold while it admits nothing,
    /// and adds no load beyond that.
    #[must_use]
    pub fn needs_budget(&self, pushback: &Pushback, decision: &Decision) -> bool {
        matches!(
            decision,
            Decision::Wait {
                source: HintSource::Fallback,
                ..
            }
        ) && self.policy.retry_budget.enabled
            && !(self.policy.origin_gate && pushback.gated)
    }

    #[doc(hidden)]
    /// What a pushed-back answer tells the origin's shared state: the
    /// server's time (uncapped; the gate caps it at `max_wait`), zero for a
    /// zero `Retry-After` (so an origin that keeps answering zero is held
    /// for a second), or, when a repeated zero made the task fall back, the
    /// header's granularity, one second, or less if the task waits less
    /// (so the gate and pacing keep working). A zero says "under a second":
    /// the task that met it twice backs off further itself, but one task's
    /// backoff must not hold the whole origin for longer than the server
    /// named. An invalid `Retry-After` that still reads as a plain decimal
    /// number of seconds (`2.0`) holds the gate at least that long
    /// (`hold_at_least`), though the task itself stops.
    #[must_use]
    pub fn origin_outcome(&self, pushback: &Pushback, decision: &Decision) -> Outcome {
        let retry_in = match decision {
            Decision::Wait {
                delay,
                source: HintSource::Fallback,
                ..
            } if pushback.retry_after().is_some() => Some((*delay).min(ZERO_GRANULARITY)),
            _ => pushback.server_delay(),
        };
        let hold_at_least = match pushback.hint {
            Hint::Invalid(invalid) => invalid.decimal_seconds(),
            _ => None,
        };
        Outcome::Pushback {
            retry_in,
            hold_at_least,
        }
    }

    #[doc(hidden)]
    /// How long from `now` `task` may wait for its origin (at a closed gate
    /// or for a paced slot) before it sends, and why it stops if the origin
    /// cannot take it by then: the deadline less `send_reserve`
    /// (`deadline_exhausted`), or `max_wait` and what is left of
    /// `max_total_wait` (`wait_budget_exhausted`), whichever is sooner;
    /// for a slot of a declared quota, the deadline alone.
    #[must_use]
    pub fn admission_limit(&self, task: &TaskState, now: Instant) -> AdmissionLimit {
        let p = &self.policy;
        let by_deadline = task
            .deadline
            .saturating_duration_since(now)
            .saturating_sub(p.send_reserve);
        let by_budget = p
            .max_wait
            .min(p.max_total_wait.saturating_sub(task.budgeted_wait()));
        if by_deadline <= by_budget {
            AdmissionLimit {
                latest: by_deadline,
                reason: StopReason::DeadlineExhausted,
                declared: by_deadline,
            }
        } else {
            AdmissionLimit {
                latest: by_budget,
                reason: StopReason::WaitBudgetExhausted,
                declared: by_deadline,
            }
        }
    }

    /// Claims the right to send an attempt of `task` at `now`: the first
    /// send, or a planned retry that is due. Checks the deadline and the
    /// attempt budget again, just before sending.
    pub fn claim(&self, task: &mut TaskState, now: Instant) -> Claim {
        if task.active {
            return Claim::Active;
        }
        if let Some(ready) = task.ready_at {
            if now < ready {
                return Claim::NotYet(ready);
            }
        } else if task.attempts > 0 {
            return Claim::NothingPlanned;
        }
        if now >= task.deadline {
            task.ready_at = None;
            return Claim::Stop(StopReason::DeadlineExhausted);
        }
        if task.attempts >= self.policy.max_attempts {
            task.ready_at = None;
            return Claim::Stop(StopReason::AttemptBudgetExhausted);
        }
        task.ready_at = None;
        task.active = true;
        task.attempts += 1;
        Claim::Send {
            attempt: task.attempts,
        }
    }

    /// Marks the in-flight attempt of `task` as finished without a
    /// pushback (a success, another status, or a transport error).
    pub fn finish(&self, task: &mut TaskState) {
        task.active = false;
        task.ready_at = None;
    }
}

/// `d × seed / 2^64`, exact in integer arithmetic.
fn scale(d: Duration, seed: u64) -> Duration {
    let nanos = (d.as_nanos().min(u128::from(u64::MAX)) * u128::from(seed)) >> 64;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}
