//! What a store answers when a task asks to send, what a reserved slot
//! holds until it is used or given back, and how a limit's state answers:
//! the gate, then the quota, then the pace.

use std::time::Duration;

use super::pace::Slot;
use super::period::Period;
use super::stated::Check;
use super::{OriginState, PacingConfig};
use crate::Quota as Declared;

/// What a store answers when a task asks to send to an origin.
#[must_use]
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send now.
    Now,
    /// Send now: the gate has just reopened, and this task is its probe
    /// (it goes alone; the queue follows at the pace).
    Reopened,
    /// The gate is closed for this long from now, and nothing is reserved:
    /// come back then and ask again (the pace is learned when it reopens).
    GateClosed(Duration),
    /// A paced slot is reserved this far from now: send then, after
    /// reading that the gate did not close again meanwhile
    /// ([`gate_in`](super::OriginState::gate_in)), and settle it
    /// ([`sent`](super::OriginState::sent)). A task that does not send gives
    /// the [`Reservation`] back ([`release`](super::OriginState::release)).
    SlotReserved(Duration, Reservation),
    /// The quota the server stated is spent: the origin is held this long
    /// from now (until the stated reset, at most the gate's cap; a declared
    /// quota in cost units, until its window closes), nothing reserved. Answered to the first task that finds it so, which tells
    /// the observer; the others get [`GateClosed`](Self::GateClosed).
    QuotaHeld(Duration),
    /// The origin's first answer is outstanding (another task's first
    /// contact): nothing is reserved; come back after this long and ask
    /// again. Its answer may state the origin's quota, which then paces
    /// this task.
    FirstAnswer(Duration),
    /// The tasks that waited for the origin's first answer have left (the
    /// first wave), and their answers are not all in: nothing is reserved;
    /// come back after this long and ask again. A pushback among them
    /// (GitHub's secondary limit, a cap on requests in flight: limits no
    /// header states) then holds this task too.
    FirstWave(Duration),
    /// The paced queue is booked further ahead than is worth reserving
    /// while the pace is still rising (slow start), or a quota in cost
    /// units has too little left to call before the answers in flight
    /// state it (a request declaring no [`Cost`](crate::Cost)): nothing is
    /// reserved; come back after this long and ask again.
    QueueAhead(Duration),
    /// The origin cannot take the task within the latest time it accepts;
    /// nothing was reserved.
    Refused {
        /// How long from now a request could usefully be sent: the later of
        /// when the gate or the paced queue could take it, and the time the
        /// server itself named (which may lie beyond the gate, whose closing
        /// is capped at `max_wait`). Never earlier than the server's time.
        free_in: Duration,
    },
}

/// What a [`SlotReserved`](Admission::SlotReserved) admission holds: given
/// back with [`OriginState::release`](super::OriginState::release) by a task that does not send, or
/// settled with [`OriginState::sent`](super::OriginState::sent) once its task sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The slot's time, on the store's clock.
    pub(crate) slot: Duration,
    /// Whether it spent a unit of a stated quota.
    pub(crate) quota: bool,
    /// What it spent of the quota in cost units.
    pub(crate) cost: u64,
    /// What it reserved of a bucket of output tokens.
    pub(crate) output: u64,
    /// The queue it was handed out in: a queue restarted since (its gate
    /// closed on a rejection and reopened) voids it.
    pub(crate) queue: u32,
}

/// How long from now a task accepts to wait for its origin: for what the
/// server set (its gate, a quota it stated, a pace learned from it), and
/// for a slot or hold of a quota the caller declared, which is the
/// caller's own knowledge and not a server delay (its deadline alone
/// bounds it, not `max_wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Within {
    /// For the gate, a stated quota, a learned pace and the first contact.
    pub server: Duration,
    /// For a declared quota's slot or hold.
    pub declared: Duration,
}

impl Within {
    /// The same limit for both.
    #[must_use]
    pub const fn both(latest: Duration) -> Self {
        Within {
            server: latest,
            declared: latest,
        }
    }
}

impl OriginState {
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
        self.admit_task(cfg, now, within, cost, false)
    }

    /// What [`admit_task`](Self::admit_task) answers, before the first
    /// contact counts it.
    pub(super) fn admission(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        within: Within,
        cost: crate::Cost,
        waited: bool,
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
        if let Some(wait) = self.first.wait(cfg, now, latest, waited) {
            return wait;
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
            Check::Answers(wait) => return Admission::QueueAhead(wait),
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
        let cost = match self
            .tokens
            .check(now, within, cfg.max_gate, cost, !declared_cost)
        {
            Check::Free => 0,
            Check::Answers(wait) => return Admission::QueueAhead(wait),
            Check::Spends | Check::Probe => cost,
            Check::Held { wait, first: true } => return Admission::QuotaHeld(wait),
            Check::Held { wait, first: false } => return Admission::GateClosed(wait),
            Check::TooLate(wait) => return self.refuse(now, wait),
        };
        let output = match self
            .output
            .check(now, within, cfg.max_gate, cost_of.output(), false)
        {
            Check::Spends => cost_of.output(),
            Check::Answers(wait) => return Admission::QueueAhead(wait),
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
    pub(super) fn quota_spent(&mut self) {
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
        // Another limit than the stated quota rejected (GitHub's secondary
        // one): its time is a penalty, not its period.
        let other = self.period.other_limit && self.quota.renews();
        let by_quota = !other
            && ((self.quota.renews() && self.gate.span > self.quota.window)
                || (self.tokens.quota.renews() && !self.period.rejected));
        let probe = if other
            && self.pace.within_quota(
                gate.max(now),
                self.gate.span,
                &self.period,
                (self.quota.limit, self.quota.window),
            ) {
            false
        } else if by_quota {
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
        self.tokens.refund(now, reservation.cost, reservation.slot);
        self.output
            .refund(now, reservation.output, reservation.slot);
        if reservation.queue == self.pace.queue {
            self.pace.release(now, reservation.slot);
        }
    }
}
