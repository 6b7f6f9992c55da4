//! Pure per-origin and client-wide state: the origin gate, pacing, and the
//! retry budget. Like the rest of the planner, nothing here reads a clock:
//! `now` is a [`Duration`] since an epoch the store chooses (process start
//! for [`MemoryStore`](crate::MemoryStore), the Unix epoch on a shared
//! store's own clock), so several processes can share one timeline.
//!
//! # Why a gate and a pace, not just per-request waits?
//!
//! When a server rejects a burst, every rejected request is told the same
//! time. Clients that each honour `Retry-After` on their own all come back in
//! that same instant, and the server rejects most of them again: the retry
//! storm. The gate holds every request to the origin until the server's time
//! (so requests that were not yet rejected do not add to the burst), and the
//! pace releases the queue no faster than the origin has been seen to admit.
//!
//! The admitted rate is learned, not configured: between one opening of the
//! gate and the next closing, the 2xx answers counted over the time until
//! the server's `Retry-After` give what the server admitted in that period.
//! When the gate reopens, the pace is set to that rate, and the first request
//! released is a probe: it goes alone, the next one no earlier than one
//! interval later, so a probe that is rejected again closes the gate before
//! the queue follows it. While no pushback comes, the pace rises on each
//! success: fast (slow start) when nothing was ever learned, gently (about 5%
//! a second) otherwise. Requests are never released before the server's time
//! and never jittered below it.

use std::time::Duration;

/// What a store answers when a task asks to send to an origin.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send now.
    Now,
    /// A slot is reserved this far from now; send then (after checking that
    /// the gate did not close again meanwhile).
    Wait(Duration),
    /// The gate (or the queue behind it) holds the origin past the latest
    /// time the task accepts; nothing was reserved. `gate` is how long the
    /// gate stays closed from now.
    Refused {
        /// Time from now until the gate opens.
        gate: Duration,
    },
}

/// Settings of the gate and the pace; plain data from the [`Policy`](crate::Policy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PacingConfig {
    /// Hold every request to an origin until its `Retry-After` time.
    pub gate: bool,
    /// Release the queue at the learned rate when the gate reopens.
    pub pace: bool,
}

/// The lowest pace, in requests per second: a server that admitted nothing
/// gets one probe a second.
const MIN_RATE: f64 = 1.0;
/// Pace increase per success after a rate was learned: at rate `r`, about
/// `r` successes arrive per second, so the rate grows by about 5% a second.
const GENTLE_STEP: f64 = 0.05;
/// Pace increase per success before any rate was learned (slow start: the
/// rate about doubles each second).
const SLOW_START_STEP: f64 = 1.0;

/// The state of one origin (`scheme://host:port`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginState {
    /// Requests may not leave before this time.
    gate_until: Duration,
    /// Theoretical time of the next slot (GCRA's TAT) while pacing.
    next_slot: Duration,
    /// Requests per second while pacing; 0 when not pacing.
    rate: f64,
    /// Whether `rate` was learned from a measured period.
    learned: bool,
    /// Start of the current measuring period.
    epoch_start: Duration,
    /// 2xx answers in the current measuring period.
    epoch_successes: u32,
    /// Whether the gate closed in the current period (and the rate must be
    /// learned again when it reopens).
    closed: bool,
    /// Last time a task touched this origin.
    last_seen: Duration,
}

impl OriginState {
    /// The state of an origin first seen at `now`: gate open, not paced.
    #[must_use]
    pub fn new(now: Duration) -> Self {
        OriginState {
            gate_until: Duration::ZERO,
            next_slot: Duration::ZERO,
            rate: 0.0,
            learned: false,
            epoch_start: now,
            epoch_successes: 0,
            closed: false,
            last_seen: now,
        }
    }

    /// Until when the gate is closed, if it is at `now`.
    #[must_use]
    pub fn gate_until(&self, now: Duration) -> Option<Duration> {
        (self.gate_until > now).then_some(self.gate_until)
    }

    /// The current pace in requests per second (0: not pacing).
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Last time a task touched this origin (for expiring idle entries).
    #[must_use]
    pub fn last_seen(&self) -> Duration {
        self.last_seen
    }

    /// Whether the entry carries nothing worth keeping at `now`: the gate is
    /// open, there is no pace, and it has been idle for `idle`.
    #[must_use]
    pub fn is_idle(&self, now: Duration, idle: Duration) -> bool {
        self.gate_until <= now
            && self.next_slot <= now
            && now.saturating_sub(self.last_seen) >= idle
    }

    /// A task asks to send at `now` and will not send later than `latest`
    /// (from now). Reserves its slot unless refused.
    pub fn admit(&mut self, cfg: PacingConfig, now: Duration, latest: Duration) -> Admission {
        self.last_seen = now;
        if !cfg.gate {
            return Admission::Now;
        }
        if self.closed && now >= self.gate_until {
            self.reopen();
        }
        let floor = self.gate_until.max(now);
        let slot = if cfg.pace && self.rate > 0.0 {
            floor.max(self.next_slot)
        } else {
            floor
        };
        let wait = slot.saturating_sub(now);
        if wait > latest {
            return Admission::Refused {
                gate: self.gate_until.saturating_sub(now),
            };
        }
        if cfg.pace && self.rate > 0.0 {
            self.next_slot = slot + interval(self.rate);
        }
        if wait.is_zero() {
            Admission::Now
        } else {
            Admission::Wait(wait)
        }
    }

    /// The gate reopens: learn the rate the origin admitted in the period
    /// that just ended, and start a new one with a probe.
    fn reopen(&mut self) {
        let period = self.gate_until.saturating_sub(self.epoch_start);
        let measured = if period.is_zero() {
            0.0
        } else {
            f64::from(self.epoch_successes) / period.as_secs_f64()
        };
        if measured > 0.0 {
            self.rate = measured.max(MIN_RATE);
            self.learned = true;
        } else if self.rate <= 0.0 {
            self.rate = MIN_RATE;
        }
        self.closed = false;
        self.epoch_start = self.gate_until;
        self.epoch_successes = 0;
        // The first slot is the probe at the gate time; the next comes one
        // interval later.
        self.next_slot = self.gate_until;
    }

    /// A 2xx (or any non-pushback) answer arrived at `now`.
    pub fn on_success(&mut self, now: Duration) {
        self.last_seen = now;
        self.epoch_successes = self.epoch_successes.saturating_add(1);
        if self.rate > 0.0 && !self.closed {
            self.rate += if self.learned {
                GENTLE_STEP
            } else {
                SLOW_START_STEP
            };
        }
    }

    /// A pushback arrived at `now`; `retry_at` is the server's time when it
    /// gave a valid one. Closes the gate until then (keeping a later time
    /// already set), and cuts the pace.
    pub fn on_pushback(&mut self, cfg: PacingConfig, now: Duration, retry_at: Option<Duration>) {
        self.last_seen = now;
        if !cfg.gate {
            return;
        }
        match retry_at {
            Some(at) if at > now => {
                self.gate_until = self.gate_until.max(at);
                self.closed = true;
            }
            _ => {
                // No usable server time: slow down without a gate.
                if self.rate > 0.0 {
                    self.rate = (self.rate * 0.5).max(MIN_RATE);
                }
            }
        }
    }
}

fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::from_secs(1))
}

/// Limits of the client-wide retry budget (in the manner of Finagle's
/// `RetryBudget` and gRPC retry throttling).
///
/// Why a budget and not only max attempts? Max attempts bound one task;
/// under a sustained overload every task still multiplies its traffic by
/// `max_attempts`. A budget bounds retries as a share of recent first sends:
/// each first send deposits `ratio` of a retry, time adds `min_per_sec`
/// retries a second (so a quiet client can still retry), and the balance is
/// capped at `ratio × 10 s` of traffic plus `min_per_sec × 10 s`.
///
/// Only retries the server gave no time for (a `429` without `Retry-After`,
/// retried on the policy's fallback delay) spend the budget. A retry at the
/// time the server named, held by the gate and released at the learned pace,
/// is the server's own schedule, not extra load, and budgeting it would fail
/// tasks a polite client gets through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBudget {
    pub(crate) ratio: f64,
    pub(crate) min_per_sec: f64,
    pub(crate) enabled: bool,
}

impl Default for RetryBudget {
    /// 20% of first sends plus 10 retries a second: reqwest's and Finagle's
    /// numbers.
    fn default() -> Self {
        RetryBudget {
            ratio: 0.2,
            min_per_sec: 10.0,
            enabled: true,
        }
    }
}

impl RetryBudget {
    /// A budget of `ratio` retries per first send (0.0 to 1.0) plus
    /// `min_per_sec` retries a second.
    #[must_use]
    pub fn new(ratio: f64, min_per_sec: f64) -> Self {
        RetryBudget {
            ratio,
            min_per_sec,
            enabled: true,
        }
    }

    /// No budget: every retry the other limits allow is made.
    #[must_use]
    pub fn unlimited() -> Self {
        RetryBudget {
            enabled: false,
            ..RetryBudget::default()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if !self.enabled {
            return Ok(());
        }
        if !(0.0..=1.0).contains(&self.ratio) || self.ratio.is_nan() {
            return Err("retry budget ratio must be within 0.0..=1.0");
        }
        if !(self.min_per_sec >= 0.0 && self.min_per_sec.is_finite()) {
            return Err("retry budget min_per_sec must be finite and not negative");
        }
        if self.ratio == 0.0 && self.min_per_sec == 0.0 {
            return Err(
                "retry budget allows no retry; use RetryBudget::unlimited() or max_attempts(1)",
            );
        }
        Ok(())
    }

    fn capacity(&self) -> f64 {
        // Ten seconds' worth, as Finagle's default TTL; never below one retry.
        (self.min_per_sec * 10.0 + self.ratio * 100.0).max(1.0)
    }
}

/// The balance of a [`RetryBudget`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetState {
    tokens: f64,
    updated: Duration,
}

impl BudgetState {
    /// A full budget at `now`.
    #[must_use]
    pub fn new(budget: &RetryBudget, now: Duration) -> Self {
        BudgetState {
            tokens: budget.capacity(),
            updated: now,
        }
    }

    fn refill(&mut self, budget: &RetryBudget, now: Duration) {
        let elapsed = now.saturating_sub(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * budget.min_per_sec).min(budget.capacity());
        self.updated = self.updated.max(now);
    }

    /// A first send at `now` deposits its share.
    pub fn deposit(&mut self, budget: &RetryBudget, now: Duration) {
        self.refill(budget, now);
        self.tokens = (self.tokens + budget.ratio).min(budget.capacity());
    }

    /// A retry at `now` asks for a token; `false` when the budget is empty.
    #[must_use]
    pub fn withdraw(&mut self, budget: &RetryBudget, now: Duration) -> bool {
        if !budget.enabled {
            return true;
        }
        self.refill(budget, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Retries currently available.
    #[must_use]
    pub fn tokens(&self) -> f64 {
        self.tokens
    }
}
