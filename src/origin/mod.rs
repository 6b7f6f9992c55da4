//! Pure per-origin state: whether, and when, a task may send to an origin.
//! Like the rest of the planner, nothing here reads a clock: `now` is a
//! [`Duration`] since an epoch the store chooses (process start for
//! [`MemoryStore`](crate::MemoryStore), the Unix epoch on a shared store's
//! own clock), so several processes can share one timeline.
//!
//! # Why a gate, a quota and a pace, not just per-request waits?
//!
//! When a server rejects a burst, every rejected request is told the same
//! time. Clients that each honour `Retry-After` on their own all come back in
//! that same instant, and the server rejects most of them again: the retry
//! storm. An origin's admission is three parts, one job each:
//!
//! - the **gate** (`gate.rs`) holds every request to the origin until the
//!   server's time, so requests not yet rejected do not add to the burst;
//!   capped at `max_wait`, then one probe. Never earlier than the server.
//! - the **quota** (`quota.rs`) spends what the server stated it admits
//!   before its reset, and holds the origin as the gate does once spent.
//! - the **pace** (`pace.rs`) releases the queue no faster than the origin
//!   was seen to admit: learned, not configured, from the measuring
//!   `period.rs` between one opening of the gate and the next closing.
//!
//! [`OriginState::admit`] composes them; the numbers they are tuned with
//! are in `tuning.rs`, each with its reason. Requests are never released
//! before the server's time and never jittered below it.

use std::time::Duration;

mod admission;
mod gate;
mod pace;
mod period;
mod quota;
mod slots;
#[cfg(test)]
mod tests;
pub(crate) mod tuning;
mod wire;

pub use admission::{Admission, Reservation};
use gate::{Closing, Gate};
use pace::{Cut, Pace, Slot};
use period::Period;
use quota::{Check, Quota};
use tuning::TUNING;

/// An origin whose gate is open, whose queue is empty and that nobody used
/// for this long is forgotten (by a store's sweep, or a shared key's TTL).
pub(crate) const ORIGIN_IDLE: Duration = TUNING.origin_idle;

/// What an answer from an origin means for its shared state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The origin admitted the request (any status that is not pushback).
    Admitted,
    /// The origin pushed back; `retry_in` is the server's time from now,
    /// when it gave a valid one.
    Pushback {
        /// How long from now the server asked to wait.
        retry_in: Option<Duration>,
    },
    /// The origin admitted the request, but its rate-limit headers say the
    /// quota is exhausted until `reset_in` from now: the gate closes until
    /// then, before any `429` (the proactive gate).
    Exhausted {
        /// How long from now until the quota resets.
        reset_in: Duration,
    },
    /// The origin admitted the request, and its rate-limit headers say
    /// `remaining` more are admitted until `reset_in` from now: admissions
    /// spend that quota, and the gate holds the origin once it is spent,
    /// before any `429`.
    Quota {
        /// Requests the server will still admit in its current window.
        remaining: u64,
        /// How long from now until the quota resets.
        reset_in: Duration,
    },
}

/// Settings of the gate and the pace; plain data from the [`Policy`](crate::Policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacingConfig {
    /// Hold every request to an origin until its `Retry-After` time.
    pub gate: bool,
    /// Release the queue at the learned rate when the gate reopens.
    pub pace: bool,
    /// The longest the gate closes for one server time (the policy's
    /// `max_wait`): a task would not wait longer anyway, and one absurd
    /// value must not close an origin for good. After that, one probe finds
    /// out. The server's own time is kept beside it, for refusals.
    pub max_gate: Duration,
}

/// The state of one origin (`scheme://host:port`): its gate, quota and
/// pace, the period they learn from, and when it was last used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginState {
    gate: Gate,
    quota: Quota,
    pace: Pace,
    period: Period,
    /// Last time a task touched this origin.
    last_seen: Duration,
}

impl OriginState {
    /// The state of an origin first seen at `now`: gate open, not paced.
    #[must_use]
    pub fn new(now: Duration) -> Self {
        OriginState {
            gate: Gate::default(),
            quota: Quota::default(),
            pace: Pace::new(now),
            period: Period::new(now),
            last_seen: now,
        }
    }

    /// Until when the gate is closed, if it is at `now`.
    #[must_use]
    pub fn gate_until(&self, now: Duration) -> Option<Duration> {
        (self.gate.until > now).then_some(self.gate.until)
    }

    /// How long from `now` the origin is held, if it is: its gate is
    /// closed, or the quota the server stated is spent (what
    /// [`Store::gate`](crate::Store::gate) answers).
    #[must_use]
    pub fn gate_in(&self, now: Duration) -> Option<Duration> {
        let held = self
            .gate
            .until
            .max(self.quota.held_until(now).unwrap_or_default());
        (held > now).then(|| held - now)
    }

    /// The current pace in requests per second (0: not pacing).
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.pace.rate()
    }

    /// Moves `last_seen` to `now`.
    #[cfg(feature = "redis")]
    pub(crate) fn touch(&mut self, now: Duration) {
        self.last_seen = now;
    }

    /// Last time a task touched this origin (for expiring idle entries).
    #[cfg(feature = "redis")]
    #[must_use]
    pub(crate) fn last_seen(&self) -> Duration {
        self.last_seen
    }

    /// Whether the entry carries nothing worth keeping at `now`: the origin
    /// is not held, there is no queue, and it has been idle for `idle`.
    /// A server time or quota reset far ahead does not keep it: the gate
    /// and a spent quota hold at most their cap, after which a probe would
    /// go anyway (so hostile headers cannot make entries live for ever).
    #[must_use]
    pub(crate) fn is_idle(&self, now: Duration, idle: Duration) -> bool {
        self.held_until(now) <= now && now.saturating_sub(self.last_seen) >= idle
    }

    /// The latest of the gate, the paced queue and a spent quota's hold:
    /// what a store must keep the state for.
    pub(crate) fn held_until(&self, now: Duration) -> Duration {
        self.gate
            .until
            .max(self.pace.next_slot)
            .max(self.quota.held_until(now).unwrap_or_default())
    }

    /// A task asks to send at `now` and will not send later than `latest`
    /// (from now): the gate, then the quota, then the pace. Reserves its
    /// slot (and a unit of a stated quota) unless refused.
    pub fn admit(&mut self, cfg: PacingConfig, now: Duration, latest: Duration) -> Admission {
        self.last_seen = now;
        if !cfg.gate {
            return Admission::Now;
        }
        self.pace.settle(now);
        let reopened = self.gate.reopens(now);
        let probe = reopened && self.reopen();
        let go = if reopened {
            Admission::Reopened
        } else {
            Admission::Now
        };
        if let Some(wait) = self.gate.closed_for(now) {
            // Behind a closed gate nobody gets a time yet: what the origin
            // admits is known only when the period ends, and slots handed
            // out on a partial count would lock in a pace far too slow.
            return self.queue(now, wait, latest, Admission::GateClosed(wait));
        }
        let quota = match self.quota.check(now, latest, cfg.max_gate) {
            Check::Free => false,
            Check::Spends => true,
            Check::Held { wait, first: true } => return Admission::QuotaHeld(wait),
            Check::Held { wait, first: false } => return Admission::GateClosed(wait),
            Check::TooLate(wait) => return self.refuse(now, wait),
            Check::Probe => return Admission::Reopened,
        };
        let slot = if cfg.pace {
            self.pace.take(now, latest, probe, self.quota.stated())
        } else {
            Slot::Go
        };
        let admission = match slot {
            Slot::Go => go,
            Slot::Reserved { wait, slot } => Admission::SlotReserved(
                wait,
                Reservation {
                    slot,
                    quota,
                    shared: false,
                },
            ),
            Slot::Ahead(wait) => return Admission::QueueAhead(wait),
            Slot::TooLate(wait) => return self.refuse(now, wait),
        };
        if quota && self.quota.spend(now, cfg.max_gate) {
            self.quota_spent();
        }
        admission
    }

    /// Waiting `wait` from `now`, within `latest`: `queued`, else refused.
    fn queue(
        &self,
        now: Duration,
        wait: Duration,
        latest: Duration,
        queued: Admission,
    ) -> Admission {
        if wait > latest {
            self.refuse(now, wait)
        } else {
            queued
        }
    }

    /// A refusal: the origin could take the task in `wait`, but never
    /// before the server's own time.
    fn refuse(&self, now: Duration, wait: Duration) -> Admission {
        Admission::Refused {
            free_in: self.gate.refusal(now, wait),
        }
    }

    /// The stated quota is spent: refusals meanwhile name its reset.
    fn quota_spent(&mut self) {
        self.gate.server_until = self.gate.server_until.max(self.quota.until);
    }

    /// The gate reopens: the pace learns from the period that just ended,
    /// and a new one starts with a probe. Whether the probe is counted in
    /// the first batch.
    fn reopen(&mut self) -> bool {
        let gate = self.gate.until;
        let probe = self.pace.reopen(gate, self.gate.span, &self.period);
        self.gate.reopen_pending = false;
        self.period = Period::new(gate);
        probe
    }

    /// A task whose slot has come (`now`) is about to send: its
    /// reservation is settled. When the gate closed again meanwhile (a
    /// probe was rejected), how long from now it stays closed: the task
    /// does not send, and its reservation is given back.
    pub fn confirm(&mut self, now: Duration, reservation: Reservation) -> Option<Duration> {
        if let Some(wait) = self.gate.closed_for(now) {
            self.release(now, reservation);
            return Some(wait);
        }
        self.pace.used(now);
        None
    }

    /// A task gives back, at `now`, the slot it reserved and will not use
    /// (it was dropped, stopped or errored first): the slot goes to the
    /// next task (see `slots.rs` for when exactly), and so does a unit of
    /// the stated quota it spent.
    pub fn release(&mut self, now: Duration, reservation: Reservation) {
        if reservation.quota {
            self.quota.refund(now);
        }
        self.pace.release(now, reservation.slot);
    }

    /// A 2xx (or any non-pushback) answer arrived at `now`.
    pub fn on_success(&mut self, now: Duration) {
        self.last_seen = now;
        let measuring = !self.pace.is_paced() && !self.gate.reopen_pending;
        self.period.on_success(now, measuring);
        self.pace.on_success(now, self.gate.reopen_pending);
    }

    /// Applies what the origin answered at `now`. When this answer closed
    /// an origin that was open (its gate, or its spent quota), how long
    /// from `now` it stays closed.
    pub fn observe(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        outcome: Outcome,
    ) -> Option<Duration> {
        self.observe_late(cfg, now, Duration::ZERO, outcome)
    }

    /// [`observe`](Self::observe) for an answer received `late` before
    /// `now`: its times (`retry_in`, `reset_in`) count from then, not from
    /// when it is applied. A shared store applies an answer after a round
    /// trip or more; a gate set from the time of application would close
    /// later than the server said, and an answer applied after its own
    /// time had passed would close a reopened gate again for a whole
    /// period.
    pub(crate) fn observe_late(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        late: Duration,
        outcome: Outcome,
    ) -> Option<Duration> {
        let was_open = self.gate.until <= now;
        let answered = now.saturating_sub(late);
        match outcome {
            Outcome::Admitted => self.on_success(now),
            Outcome::Pushback { retry_in } => {
                // A time too large to add is an enormous time: the gate
                // closes for its cap, it is not a pushback without a time.
                self.reject(
                    cfg,
                    now,
                    answered,
                    retry_in.map(|d| answered.saturating_add(d)),
                );
            }
            Outcome::Exhausted { reset_in } => self.exhausted(cfg, now, answered, reset_in),
            Outcome::Quota {
                remaining,
                reset_in,
            } => {
                self.on_success(now);
                self.period.stated = true;
                if self
                    .quota
                    .on_stated(now, remaining, now.saturating_add(reset_in))
                {
                    self.quota.spent(now, cfg.max_gate);
                    self.quota_spent();
                }
            }
        }
        if was_open { self.gate_in(now) } else { None }
    }

    /// A success that said the quota is exhausted until `reset_in` after
    /// `answered`: the gate closes until then (capped), before any `429`.
    fn exhausted(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        reset_in: Duration,
    ) {
        self.on_success(now);
        self.period.stated = true;
        // Servers round their reset up to whole seconds: of two answers
        // stating the same window's reset, the earlier bounds it more
        // closely. A spent quota tells no task to wait (it is not a
        // pushback), so the earlier one holds.
        let reset = self
            .quota
            .closest_reset(now, answered.saturating_add(reset_in));
        self.hold(cfg, now, answered, Some(reset));
        // The quota is spent until then. Known here even where the answers
        // that stated it were not (a shared store keeps only the spent
        // one): batches are then not booked ahead of the reset, where they
        // would be lost. (An answer of an earlier window leaves a later
        // one's quota alone.)
        if cfg.gate
            && self
                .quota
                .on_exhausted(reset.min(answered.saturating_add(cfg.max_gate)))
        {
            self.quota.spent(answered, cfg.max_gate);
            self.quota_spent();
        }
    }

    /// A pushback arrived at `now`; `retry_at` is the server's time when it
    /// gave a valid one. Closes the gate until then, at most
    /// [`max_gate`](PacingConfig::max_gate) (keeping a later time already
    /// set), and cuts the pace.
    pub fn on_pushback(&mut self, cfg: PacingConfig, now: Duration, retry_at: Option<Duration>) {
        self.reject(cfg, now, now, retry_at);
    }

    /// [`on_pushback`](Self::on_pushback) for a pushback the origin answered
    /// at `answered`, applied at `now` (see [`hold`](Self::hold)).
    fn reject(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
    ) {
        if cfg.gate {
            self.period.rejected = true;
        }
        self.hold(cfg, now, answered, retry_at);
    }

    /// Closes the gate until `retry_at`, for a rejection or a spent quota
    /// the origin answered at `answered` (at or before `now`, when it is
    /// applied); without a usable time, cuts the pace instead.
    fn hold(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
    ) {
        self.last_seen = now;
        if !cfg.gate {
            return;
        }
        match self.gate.close(cfg.max_gate, now, answered, retry_at) {
            Closing::Closed(at) => self.period.closed(at),
            Closing::Zero => {}
            Closing::NoTime => self.pace.cut(now, Cut::NoTime),
        }
    }
}
