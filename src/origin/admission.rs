//! What a store answers when a task asks to send, and what a reserved slot
//! holds until it is used or given back.

use std::time::Duration;

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
    /// The paced queue is booked further ahead than is worth reserving
    /// while the pace is still rising (slow start): nothing is reserved;
    /// come back after this long and ask again.
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
