//! The pure planner: one decision per pushed-back attempt.
//!
//! Why pure? The questions "may this task retry, and when?" have exact
//! answers that depend only on the policy, the task's state, what the server
//! said and the current time. Keeping them free of I/O, clocks and sleeps
//! makes every row of the decision table testable with fixed times and no
//! runtime, and lets the same rules drive this crate's middleware, a queue
//! consumer, or another HTTP client.
//!
//! Time is always an argument: `now` is a [`tokio::time::Instant`] for
//! waiting, and wall-clock times ([`SystemTime`]) only ever turn an
//! HTTP-date into a delay.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use tokio::time::Instant;
//! use reqwest_backpressure::planner::{Decision, Planner, Pushback, TaskState};
//! use reqwest_backpressure::{Hint, Policy};
//!
//! let planner = Planner::new(Policy::default().jitter(Duration::ZERO)).unwrap();
//! let t0 = Instant::now();
//! let mut task = TaskState::new(t0 + Duration::from_secs(30));
//! assert!(planner.claim(&mut task, t0).is_send());          // first send
//!
//! let wall = SystemTime::now();
//! let pushback = Pushback::new(Hint::Delay(Duration::from_secs(5)), wall);
//! match planner.plan(&mut task, &pushback, t0, 0) {
//!     Decision::Wait { until, .. } => assert_eq!(until, t0 + Duration::from_secs(5)),
//!     Decision::Stop(reason) => panic!("stopped: {}", reason.code()),
//! }
//! assert!(!planner.claim(&mut task, t0 + Duration::from_secs(4)).is_send()); // not before the server's time
//! assert!(planner.claim(&mut task, t0 + Duration::from_secs(5)).is_send());
//! ```

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::hash::Hash;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::origin::Outcome;
use crate::policy::{Fallback, InvalidPolicy, Policy};
use crate::retry_after::Hint;

/// Why a task stopped retrying. The [`code`](StopReason::code) strings are
/// stable: match on them in logs and dashboards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The method is not idempotent (RFC 9110 §9.2.2) and the request has no
    /// idempotency key. Code `retry_not_authorized_by_contract`.
    RetryNotAuthorizedByContract,
    /// The request body is a stream and cannot be sent again. Code
    /// `body_not_replayable`.
    BodyNotReplayable,
    /// `max_attempts` sends were made. Code `attempt_budget_exhausted`.
    AttemptBudgetExhausted,
    /// The task's deadline has passed, or the retry could not be sent before
    /// it. Code `deadline_exhausted`.
    DeadlineExhausted,
    /// `Retry-After` was present but invalid; never guessed at. Code
    /// `invalid_retry_after`.
    InvalidRetryAfter,
    /// `Retry-After` was missing and the policy does not retry without it.
    /// Code `missing_retry_after`.
    MissingRetryAfter,
    /// The server's delay exceeds `max_wait`, or the total wait would exceed
    /// `max_total_wait`. Code `wait_budget_exhausted`.
    WaitBudgetExhausted,
    /// The client-wide retry budget is empty. Code `retry_budget_exhausted`.
    RetryBudgetExhausted,
    /// The shared store could not answer before a retry and fails closed
    /// (see `RedisStore`'s `FailMode`); the pushback is returned. Code
    /// `store_unavailable`.
    StoreUnavailable,
}

impl StopReason {
    /// The stable snake_case code of this reason.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            StopReason::RetryNotAuthorizedByContract => "retry_not_authorized_by_contract",
            StopReason::BodyNotReplayable => "body_not_replayable",
            StopReason::AttemptBudgetExhausted => "attempt_budget_exhausted",
            StopReason::DeadlineExhausted => "deadline_exhausted",
            StopReason::InvalidRetryAfter => "invalid_retry_after",
            StopReason::MissingRetryAfter => "missing_retry_after",
            StopReason::WaitBudgetExhausted => "wait_budget_exhausted",
            StopReason::RetryBudgetExhausted => "retry_budget_exhausted",
            StopReason::StoreUnavailable => "store_unavailable",
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Why a store call made on a task's behalf did not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFault {
    /// The store failed, and fails closed.
    Unavailable,
    /// The task's deadline passed first.
    Deadline,
}

impl StoreFault {
    /// The stop reason of a task whose store call ended this way.
    #[must_use]
    pub const fn reason(self) -> StopReason {
        match self {
            StoreFault::Unavailable => StopReason::StoreUnavailable,
            StoreFault::Deadline => StopReason::DeadlineExhausted,
        }
    }
}

/// The longest a task may wait for its origin, from [`Planner::admission_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionLimit {
    /// How long from now the task accepts to wait at the gate or for a slot.
    pub latest: Duration,
    /// Why the task stops if the origin cannot take it within `latest`.
    pub reason: StopReason,
}

/// Where the time of a planned retry came from. The
/// [`code`](HintSource::code) strings are stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HintSource {
    /// The server's `Retry-After`. Code `retry_after`.
    RetryAfter,
    /// A rate-limit header's reset time (the IETF `RateLimit` field, or a
    /// declared vendor header): the server's time too. Code `ratelimit`.
    RateLimit,
    /// The policy's own fallback delay: the server gave no usable time (no
    /// `Retry-After`, or a zero one repeated). Spends the retry budget.
    /// Code `fallback`.
    Fallback,
}

impl HintSource {
    /// The stable snake_case code of this source.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            HintSource::RetryAfter => "retry_after",
            HintSource::RateLimit => "ratelimit",
            HintSource::Fallback => "fallback",
        }
    }
}

impl fmt::Display for HintSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The planner's answer to a pushed-back attempt.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Retry, not before `until`.
    Wait {
        /// The earliest instant the retry may be sent.
        until: Instant,
        /// The server's delay (or the fallback delay), without jitter.
        delay: Duration,
        /// Where `delay` came from.
        source: HintSource,
    },
    /// Do not retry.
    Stop(StopReason),
}

/// The answer to "may this task send now?".
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Send now; this is attempt number `attempt` (1 for the first send).
    Send {
        /// 1-based number of the attempt being claimed.
        attempt: u32,
    },
    /// Too early: the planned retry is not due before this instant.
    NotYet(Instant),
    /// An attempt of this task is already in flight.
    Active,
    /// The last attempt finished and no retry is planned: the task is over.
    NothingPlanned,
    /// The task must not send again.
    Stop(StopReason),
}

impl Claim {
    /// Whether the claim allows sending now.
    #[must_use]
    pub fn is_send(&self) -> bool {
        matches!(self, Claim::Send { .. })
    }
}

/// What a pushed-back response told the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pushback {
    /// What the response's `Retry-After` said.
    pub hint: Hint,
    /// The time a `Retry-After` date is measured from: the response's valid
    /// `Date` when it has one, else the local wall-clock receive time.
    pub server_now: SystemTime,
    /// The local wall-clock time the response was received; the report's
    /// `retry_at` is this plus the delay.
    pub received_at: SystemTime,
    /// Whether retrying is allowed by the request's contract (an idempotent
    /// method, or an idempotency key).
    pub retry_authorized: bool,
    /// Whether the request can be sent again (its body is not a stream).
    pub body_replayable: bool,
    /// Whether a missing `Retry-After` falls back to the policy's
    /// [`Fallback`] (true for `429`), or stops (other statuses).
    pub fallback_allowed: bool,
    /// The time the response's rate-limit headers give a pushed-back
    /// request ([`RateLimitHint::retry_in`](crate::RateLimitHint::retry_in)),
    /// measured from `received_at`, when one parsed.
    pub rate_limit: Option<Duration>,
}

impl Pushback {
    /// A pushback for an authorised, replayable `429` received at
    /// `received_at`, with no `Date` header.
    #[must_use]
    pub fn new(hint: Hint, received_at: SystemTime) -> Self {
        Pushback {
            hint,
            server_now: received_at,
            received_at,
            retry_authorized: true,
            body_replayable: true,
            fallback_allowed: true,
            rate_limit: None,
        }
    }

    /// A pushback for a response with `status` whose `Retry-After` said
    /// `hint`, and whose rate-limit headers gave `rate_limit`. A missing
    /// `Retry-After` falls back to the policy's [`Fallback`] on a `429`
    /// only: any other status without a server time is an outage or a
    /// refusal, not a rate limit.
    #[must_use]
    pub fn from_response(
        status: http::StatusCode,
        hint: Hint,
        server_now: SystemTime,
        received_at: SystemTime,
        rate_limit: Option<Duration>,
    ) -> Self {
        Pushback {
            hint,
            server_now,
            received_at,
            retry_authorized: true,
            body_replayable: true,
            fallback_allowed: status == http::StatusCode::TOO_MANY_REQUESTS,
            rate_limit,
        }
    }

    /// The delay the server's `Retry-After` asked for, if it gave a valid
    /// one (a past date is zero).
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.hint.value().map(|v| v.delay_from(self.server_now))
    }

    /// The server's time: a valid `Retry-After` above zero wins; a missing
    /// or zero one gives way to a rate-limit reset above zero; a zero one
    /// with no later reset is zero. `None` when the server gave no usable
    /// time.
    #[must_use]
    pub fn server_delay(&self) -> Option<Duration> {
        let later_reset = self.rate_limit.filter(|d| !d.is_zero());
        match self.retry_after() {
            Some(d) if !d.is_zero() => Some(d),
            Some(zero) => Some(later_reset.unwrap_or(zero)),
            None => later_reset,
        }
    }

    /// The server's earliest retry time on the local wall clock, when it
    /// gave one (and it is representable).
    #[must_use]
    pub fn retry_at(&self) -> Option<SystemTime> {
        self.server_delay()
            .and_then(|d| self.received_at.checked_add(d))
    }
}

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
    /// - no `Retry-After` on a `429`: the fallback delay; on another
    ///   status, none.
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
                None if pushback.fallback_allowed => fallback(1),
                None => None,
            },
        }
    }

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

    /// Whether `decision` needs a token from the retry budget.
    #[must_use]
    pub fn needs_budget(&self, decision: &Decision) -> bool {
        matches!(
            decision,
            Decision::Wait {
                source: HintSource::Fallback,
                ..
            }
        ) && self.policy.retry_budget.enabled
    }

    /// What a pushed-back answer tells the origin's shared state: the
    /// server's time (uncapped; the gate caps it at `max_wait`), zero for a
    /// zero `Retry-After` (so an origin that keeps answering zero is held
    /// for a second), or, when a repeated zero made the task fall back, the
    /// fallback delay it waits (so the gate and pacing keep working).
    #[must_use]
    pub fn origin_outcome(&self, pushback: &Pushback, decision: &Decision) -> Outcome {
        let retry_in = match decision {
            Decision::Wait {
                delay,
                source: HintSource::Fallback,
                ..
            } if pushback.retry_after().is_some() => Some(*delay),
            _ => pushback.server_delay(),
        };
        Outcome::Pushback { retry_in }
    }

    /// How long from `now` `task` may wait for its origin (at a closed gate
    /// or for a paced slot) before it sends, and why it stops if the origin
    /// cannot take it by then: the deadline less `send_reserve`
    /// (`deadline_exhausted`), or `max_wait` and what is left of
    /// `max_total_wait` (`wait_budget_exhausted`), whichever is sooner.
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
            }
        } else {
            AdmissionLimit {
                latest: by_budget,
                reason: StopReason::WaitBudgetExhausted,
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

/// A second task with a key that is already running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a task with this key is already active")]
pub struct KeyInUse;

/// Keyed tasks over a [`Planner`]: one state entry per key, which exists
/// only between [`begin`](KeyedPlanner::begin) and
/// [`end`](KeyedPlanner::end). For callers that receive pushback as events
/// (queue consumers, other clients); the middleware keeps its task state on
/// its own stack and its key leases in a [`Store`](crate::store::Store).
#[derive(Debug)]
pub struct KeyedPlanner<K> {
    planner: Planner,
    tasks: HashMap<K, TaskState>,
}

impl<K: Hash + Eq> KeyedPlanner<K> {
    /// An empty set of tasks under `planner`.
    #[must_use]
    pub fn new(planner: Planner) -> Self {
        KeyedPlanner {
            planner,
            tasks: HashMap::new(),
        }
    }

    /// Starts the task `key` with its `deadline`; a key already running is
    /// refused.
    pub fn begin(&mut self, key: K, deadline: Instant) -> Result<(), KeyInUse> {
        match self.tasks.entry(key) {
            Entry::Occupied(_) => Err(KeyInUse),
            Entry::Vacant(v) => {
                v.insert(TaskState::new(deadline));
                Ok(())
            }
        }
    }

    /// [`Planner::claim`] for `key`; `None` if the key is not running.
    pub fn claim(&mut self, key: &K, now: Instant) -> Option<Claim> {
        let task = self.tasks.get_mut(key)?;
        Some(self.planner.claim(task, now))
    }

    /// [`Planner::plan`] for `key`; `None` if the key is not running. A
    /// second pushback for a task with a planned retry keeps the later time.
    pub fn plan(
        &mut self,
        key: &K,
        pushback: &Pushback,
        now: Instant,
        jitter_seed: u64,
    ) -> Option<Decision> {
        let task = self.tasks.get_mut(key)?;
        Some(self.planner.plan(task, pushback, now, jitter_seed))
    }

    /// The state of `key`, if running.
    #[must_use]
    pub fn get(&self, key: &K) -> Option<&TaskState> {
        self.tasks.get(key)
    }

    /// Ends the task `key`, freeing its entry.
    pub fn end(&mut self, key: &K) -> Option<TaskState> {
        let task = self.tasks.remove(key);
        crate::util::shrink_after_burst(&mut self.tasks);
        task
    }

    /// Number of running tasks.
    #[must_use]
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no task is running.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}
