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
//!   Under a declared quota, a rejection isolated among the origin's
//!   recent answers (`recent.rs`) is the request's, not the pace's: it
//!   neither closes the gate nor cuts the pace.
//!
//! [`OriginState::admit`] composes them; the numbers they are tuned with
//! are in `tuning.rs`, each with its reason. [`OriginState::status`] reads
//! them for display ([`OriginStatus`]). Requests are never released
//! before the server's time and never jittered below it.

use std::time::Duration;

use crate::Quota as Declared;

mod admission;
mod answers;
mod bucket;
mod declared;
mod first;
mod gate;
mod held;
mod learn;
mod pace;
mod period;
mod quota;
mod recent;
mod slots;
mod status;
#[cfg(test)]
mod tests;
mod tokens;
pub(crate) mod tuning;
mod wire;

#[doc(hidden)]
pub use admission::{Admission, Reservation, Within};
use first::First;
use gate::Gate;
pub(crate) use held::Spent;
use pace::{Pace, Slot};
use period::Period;
use quota::{Check, Quota};
use recent::Recent;
pub use status::{OriginStatus, PaceKind};
use tokens::Tokens;
pub use tokens::{OutputStatement, Statement};
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
        /// With no valid time, the least the gate's hold of our own lasts
        /// from now, if anything: what an invalid `Retry-After` still
        /// reads as, a plain decimal number of seconds (Shopify's `2.0`),
        /// as its upper bound (one unit of its last digit later: 2.1 s).
        /// The gate holds the origin for the longer of the two (at most
        /// `max_gate`), so that no other request lands inside the time the
        /// server named; it is no server time (nobody is told it as one),
        /// and the task that met it still stops with `invalid_retry_after`.
        /// `None`: the hold of our own alone.
        hold_at_least: Option<Duration>,
    },
    /// The origin admitted the request, but its rate-limit headers say the
    /// quota is exhausted until `reset_in` from now: the gate closes until
    /// then, before any `429` (the proactive gate).
    Exhausted {
        /// How long from now until the quota resets.
        reset_in: Duration,
        /// The quota's size per window, when the answer stated it.
        limit: Option<u64>,
        /// The quota's window, when the answer stated it.
        window: Option<Duration>,
        /// How long before the answer its request left (zero: unknown). An
        /// answer to a request sent before the quota's current window
        /// opened speaks of an earlier window.
        sent_ago: Duration,
        /// What the answer stated of a quota in cost units (an LLM API's
        /// tokens), if it did.
        tokens: Option<Statement>,
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
        /// The quota's size per window, when the answer stated it
        /// (`RateLimit-Policy`'s `q`, a vendor's limit header): the quota
        /// then renews at each reset, with no probe.
        limit: Option<u64>,
        /// The quota's window, when the answer stated it (`w`); with a
        /// size and no window, the longest reset stated stands in.
        window: Option<Duration>,
        /// How long before the answer its request left (zero: unknown).
        sent_ago: Duration,
        /// What the answer stated of a quota in cost units (an LLM API's
        /// tokens), if it did.
        tokens: Option<Statement>,
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
    /// While an origin's first answer is outstanding, other tasks wait for
    /// it this long at most (zero: they do not).
    pub first_contact: Duration,
    /// The quota the caller declared for the origin: its pace from the
    /// first request, never faster whatever is learned.
    pub declared: Option<Declared>,
    /// The quota in cost units the caller declared for the origin: spent by
    /// each request's cost until the origin states its own.
    pub declared_units: Option<Declared>,
}

impl PacingConfig {
    /// Gate and pace on, a gate's cap of 60 s, no wait for a first answer,
    /// no declared quota: [`Default`], usable in a `const` (`PacingConfig {
    /// max_gate, ..PacingConfig::DEFAULT }`).
    pub const DEFAULT: PacingConfig = PacingConfig {
        gate: true,
        pace: true,
        max_gate: Duration::from_secs(60),
        first_contact: Duration::ZERO,
        declared: None,
        declared_units: None,
    };
}

impl Default for PacingConfig {
    /// [`PacingConfig::DEFAULT`].
    fn default() -> Self {
        PacingConfig::DEFAULT
    }
}

/// The state of one origin (`scheme://host:port`): its gate, quota and
/// pace, the period they learn from, and when it was last used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginState {
    gate: Gate,
    quota: Quota,
    /// The quota in cost units (tokens).
    tokens: Tokens,
    /// A bucket of output tokens apart, when stated (Anthropic's): a
    /// declared cost's output part is reserved from it.
    output: Tokens,
    pace: Pace,
    period: Period,
    /// Which of its last answers were rejections.
    recent: Recent,
    /// The first contact: whether the origin answered yet.
    first: First,
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
            tokens: Tokens::default(),
            output: Tokens::default(),
            pace: Pace::new(now),
            period: Period::new(now),
            recent: Recent::default(),
            first: First::default(),
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

    /// How long from `now` the server holds the origin: its gate (a
    /// pushback's time or a hold of ours), or a quota the server itself
    /// said is spent; `None` when neither does. Unlike
    /// [`gate_in`](Self::gate_in), a quota spent by admissions alone does
    /// not count (an admission that spent its last unit holds the next,
    /// not itself).
    #[must_use]
    pub(crate) fn closed_for(&self, now: Duration) -> Option<Duration> {
        let stated = if self.quota.stated_spent {
            self.quota.held_until(now).unwrap_or_default()
        } else {
            Duration::ZERO
        };
        let held = self.gate.until.max(stated);
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

    /// The latest of the gate, the paced queue, a spent quota's hold and a
    /// declared window: what a store must keep the state for.
    pub(crate) fn held_until(&self, now: Duration) -> Duration {
        self.gate
            .until
            .max(self.pace.held_until())
            .max(self.quota.held_until(now).unwrap_or_default())
            .max(self.tokens.declared_until())
    }

    /// A task asks to send at `now` and will not send later than `latest`
    /// (from now): the gate, then the quota, then the pace. Reserves its
    /// slot (and a unit of a stated quota) unless refused.
    pub fn admit(&mut self, cfg: PacingConfig, now: Duration, latest: Duration) -> Admission {
        self.admit_costing(cfg, now, latest, 0)
    }

    /// [`admit`](Self::admit) for a request that declared a cost of `cost`
    /// units ([`Cost`](crate::Cost); 0: none, the mean learned stands in)
    /// of the origin's quota in cost units: reserved with its slot, given
    /// back with it.
    pub fn admit_costing(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        latest: Duration,
        cost: u64,
    ) -> Admission {
        self.admit_within(cfg, now, Within::both(latest), cost)
    }

    /// [`admit_costing`](Self::admit_costing) for a task that accepts to
    /// wait longer for a declared quota's slot or hold than for the
    /// server's (see [`Within`]).
    pub fn admit_within(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        within: Within,
        cost: u64,
    ) -> Admission {
        self.admit_cost(cfg, now, within, crate::Cost::new(cost))
    }

    /// [`admit_within`](Self::admit_within) for a request's
    /// [`Cost`](crate::Cost): the part of it the origin's token quota
    /// counts (see [`Cost::tokens`](crate::Cost::tokens)) is reserved.
    pub fn admit_cost(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        within: Within,
        cost: crate::Cost,
    ) -> Admission {
        let latest = within.server;
        self.last_seen = now;
        if !cfg.gate {
            return Admission::Now;
        }
        self.pace.settle(now);
        let reopened = self.gate.reopens(now);
        let probe = reopened && self.reopen(now, cfg.declared);
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
        if let Some(wait) = self.gate.paused_for(now) {
            // A rejection isolated among successes: its retry, and any
            // other new slot, waits a moment; nothing is reserved.
            return self.queue(now, wait, latest, Admission::QueueAhead(wait));
        }
        if let Some(wait) = self.first.wait(cfg, now, latest) {
            return Admission::FirstAnswer(wait);
        }
        let declares = cfg.declared.is_some() || cfg.declared_units.is_some();
        // The probe after a stated quota's hold finds out what the server
        // admits, not what the caller declared: a declared quota still binds.
        let mut quota_probe = false;
        let quota = match self.quota.check(now, latest, cfg.max_gate) {
            Check::Free => false,
            Check::Spends => true,
            Check::Held { wait, first: true } => return Admission::QuotaHeld(wait),
            Check::Held { wait, first: false } => return Admission::GateClosed(wait),
            Check::TooLate(wait) => return self.refuse(now, wait),
            Check::Probe if !declares => return Admission::Reopened,
            Check::Probe => {
                quota_probe = true;
                false
            }
        };
        let go = if quota_probe { Admission::Reopened } else { go };
        let cost_of = cost;
        let declared_cost = self.tokens.part(cost) > 0;
        let cost = self.tokens.cost(cost);
        if let Some(declared) = cfg.declared_units {
            self.tokens.declared(now, declared);
        }
        let cost = match self.tokens.check(now, within, cfg.max_gate, cost) {
            Check::Free => 0,
            Check::Spends | Check::Probe => cost,
            Check::Held { wait, first: true } => return Admission::QuotaHeld(wait),
            Check::Held { wait, first: false } => return Admission::GateClosed(wait),
            Check::TooLate(wait) => return self.refuse(now, wait),
        };
        let output = match self
            .output
            .check(now, within, cfg.max_gate, cost_of.output())
        {
            Check::Spends => cost_of.output(),
            Check::Free | Check::Probe => 0,
            Check::Held { wait, first: true } => return Admission::QuotaHeld(wait),
            Check::Held { wait, first: false } => return Admission::GateClosed(wait),
            Check::TooLate(wait) => return self.refuse(now, wait),
        };
        if let Some(declared) = cfg.declared {
            self.pace.bound(now, declared);
        }
        let slot = if cfg.declared.is_some() {
            // Paced no faster than declared: the queue is the caller's
            // own knowledge, waited for while the deadline allows.
            self.pace
                .take(now, within.declared, probe, self.quota.stated())
        } else if cfg.pace && !quota_probe {
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
                    cost,
                    output,
                    queue: self.pace.queue,
                },
            ),
            Slot::Ahead(wait) => return Admission::QueueAhead(wait),
            Slot::TooLate(wait) => return self.refuse(now, wait),
        };
        if quota && self.quota.spend(now, cfg.max_gate) {
            self.quota_spent();
        }
        // Units are spent when their request leaves (a declared window of
        // units closes a window after that, not after the admission).
        let leaves = match admission {
            Admission::SlotReserved(_, r) => r.slot,
            _ => now,
        };
        self.tokens.spend(leaves, cost, declared_cost);
        self.output.spend(leaves, output, output > 0);
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
    /// the first batch. Under a `declared` quota there is no probe: the
    /// slots handed out before still count against it (see
    /// [`Pace::carry_declared`]).
    fn reopen(&mut self, now: Duration, declared: Option<Declared>) -> bool {
        let gate = self.gate.until;
        let before = self.pace;
        // The probe's head start counts from when it leaves: a first task
        // that asks late (a round trip to a shared store, a busy runtime)
        // must not find the batch behind it already due.
        let by_quota = (self.quota.renews() && self.gate.span > self.quota.window)
            || (self.tokens.quota.renews() && !self.period.rejected);
        let probe = if by_quota {
            // A quota of known size governs again after a penalty (a
            // `Retry-After` longer than its window): it, not the rate the
            // penalty let through, is what the origin admits. A shorter
            // pushback is another limit than the quota (GitHub's secondary
            // one within its hourly quota): its pace is learned. And when
            // the period's rejections were all the cost quota's (tokens
            // spent), that quota governs, not a pace in requests.
            self.pace.unpace(gate.max(now));
            false
        } else {
            self.pace
                .reopen(gate.max(now), self.gate.span, &self.period)
        };
        self.gate.reopen_pending = false;
        self.period = Period::new(gate);
        if let Some(quota) = declared {
            self.pace.carry_declared(&before, quota);
            return false;
        }
        probe
    }

    /// A task whose slot has come asks at `now` whether it may send: how
    /// long from now to wait instead, when the gate closed again meanwhile,
    /// or zero when its slot is void and it must ask for a new one: its
    /// queue was restarted since (the gate closed on a rejection and
    /// reopened), or a rejection closed the gate since the last reopening
    /// and its time has passed with no reopening yet (the task that asks
    /// first is then the probe: a slot of the old queue does not leave in
    /// its place, nor follow it). `None`: send.
    #[must_use]
    pub fn recheck(&self, now: Duration, reservation: Reservation) -> Option<Duration> {
        self.gate_in(now).or_else(|| {
            // The gate closed again since the last reopening (its time is
            // later than the period's start): a late rejection whose time
            // had already passed closes nothing, and voids nothing.
            let closed_since = self.gate.reopen_pending
                && self.period.rejected
                && self.gate.until > self.period.start;
            let void = reservation.queue != self.pace.queue || closed_since;
            void.then_some(Duration::ZERO)
        })
    }

    /// A task whose slot has come sent at `now`: its reservation is
    /// settled (whatever the gate did since: the request left).
    pub fn sent(&mut self, now: Duration, reservation: Reservation) {
        if reservation.queue == self.pace.queue {
            self.pace.used(now, reservation.slot);
        }
    }

    /// A task gives back, at `now`, the slot it reserved and will not use
    /// (it was dropped, stopped or errored first): the slot goes to the
    /// next task (see `slots.rs` for when exactly), and so does a unit of
    /// the stated quota it spent.
    pub fn release(&mut self, now: Duration, reservation: Reservation) {
        if reservation.quota {
            self.quota.refund(now);
        }
        self.tokens.refund(now, reservation.cost);
        self.output.refund(now, reservation.output);
        if reservation.queue == self.pace.queue {
            self.pace.release(now, reservation.slot);
        }
    }
}
