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
//! - the **stated quota** (`stated.rs`) spends what the server stated it admits
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
mod guessed;
mod held;
mod learn;
mod pace;
mod period;
mod recent;
mod slots;
mod stated;
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
use pace::Pace;
use period::Period;
use recent::Recent;
use stated::StatedQuota;
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
    /// Another limit of the request's set pushed back for a time that holds
    /// this one as well (GitHub's secondary limit, which holds the whole
    /// origin while the answer speaks of the resource's quota): the gate
    /// closes until then, never earlier, but the period is no measure of
    /// this limit's own rate, so its pace learns nothing from it.
    ///
    /// With `stated_here`, the answer's rate-limit statement is this
    /// limit's, and its quota had units left (GitHub's resource, when the
    /// secondary limit rejected): the request's unit comes back, and the
    /// period the hold ends teaches the quota to leave in smaller bursts
    /// (see `Pace::within_quota`).
    Held {
        /// How long from now the server asked to wait.
        retry_in: Duration,
        /// Whether the answer's statement is this limit's own.
        stated_here: bool,
    },
    /// The origin rejected the request, and its headers stated what is
    /// left of its quota in cost units (an LLM API's tokens `429`): the
    /// statement is counted before the rejection (recorded next, as a
    /// [`Pushback`](Self::Pushback)) is judged, so that a rejection the
    /// cost quota explains teaches the pace in requests nothing.
    CostStated {
        /// How long before the answer its request left (zero: unknown).
        sent_ago: Duration,
        /// What the answer stated of the quota in cost units.
        tokens: Statement,
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
    quota: StatedQuota,
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
            quota: StatedQuota::default(),
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
}
