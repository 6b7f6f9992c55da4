//! What an origin's state says, for display: a read-only view that hides
//! the gate, the quota and the pace behind it.
//!
//! Why a view, and not the observer's events? The events say what each
//! task does; what the origin itself holds (slots handed out, the next free
//! one, the learned pace) is decided inside the store's atomic updates,
//! over every process sharing it. A progress line would otherwise rebuild
//! it from each task's `Wait::until`. Every time in the view counts from
//! the `now` it was taken at, so it reads the same whichever clock the
//! store keeps.

use std::fmt;
use std::time::Duration;

use super::OriginState;
use super::pace::Mode;

/// What an origin's state says at one time, for display: whether the
/// origin is held, the paced slots handed out and the next free one, the
/// learned pace and a stated quota. Read with
/// [`Store::origin_status`](crate::Store::origin_status), with
/// [`Store::scope_status`](crate::Store::scope_status) for the limit of
/// one scope of an origin (a GitHub resource, a Discord bucket, an IETF
/// partition, a declared scope: each is a state of its own), or
/// [`OriginState::status`] for a state at hand.
///
/// Times count from when the view was taken. Tasks waiting at a closed
/// gate hold no slot and are not counted here (the observer's
/// [`on_wait`](crate::observe::Observer::on_wait) counts them).
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::origin::{OriginState, PaceKind};
///
/// let status = OriginState::new(Duration::ZERO).status(Duration::from_secs(1));
/// assert_eq!(status.gate_closed_for(), None);
/// assert_eq!(status.reserved(), 0);
/// assert_eq!(status.next_slot_in(), None);
/// assert_eq!(status.pace(), PaceKind::Unpaced);
/// assert_eq!(status.quota_left(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginStatus {
    gate_closed_for: Option<Duration>,
    reserved: u32,
    next_slot_in: Option<Duration>,
    pace: PaceKind,
    quota: Option<(u64, Duration)>,
}

/// How an origin's queue leaves once its gate is open: the pace learned
/// from what the origin admitted (the queue keeps to it unless the policy
/// turned pacing off, [`Policy::pacing`](crate::Policy::pacing)).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PaceKind {
    /// Nothing paces the queue: every admitted task goes at once (no
    /// pushback yet, or the pace is off).
    Unpaced,
    /// A smooth pace rising with each success, until what the origin
    /// admits is measured (after a period that admitted nothing countable).
    SlowStart {
        /// Requests per second now.
        per_second: f64,
    },
    /// A smooth pace of what the origin admitted, one request every
    /// `1 / per_second` (a server that named no time, or that rejected a
    /// batch early).
    Smooth {
        /// Requests per second.
        per_second: f64,
    },
    /// What the origin admitted per period, released one batch per period.
    Batches {
        /// Requests per batch.
        size: u32,
        /// The least time from one batch to the next (the server's period
        /// plus a margin).
        every: Duration,
    },
}

impl PaceKind {
    /// Requests per second at this pace; `None` when unpaced.
    #[must_use]
    pub fn per_second(&self) -> Option<f64> {
        match *self {
            PaceKind::Unpaced => None,
            PaceKind::SlowStart { per_second } | PaceKind::Smooth { per_second } => {
                Some(per_second)
            }
            PaceKind::Batches { size, every } => {
                Some(f64::from(size) / every.as_secs_f64().max(f64::MIN_POSITIVE))
            }
        }
    }

    fn of(mode: Mode) -> Self {
        match mode {
            Mode::Unpaced => PaceKind::Unpaced,
            Mode::SlowStart { rate } => PaceKind::SlowStart { per_second: rate },
            Mode::Smooth { rate, .. } => PaceKind::Smooth { per_second: rate },
            Mode::Batches(b) => PaceKind::Batches {
                size: b.size,
                every: b.every,
            },
        }
    }
}

/// `unpaced`, `slow start 3.0/s`, `50 per 1.02 s`: for display, not to
/// parse.
impl fmt::Display for PaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PaceKind::Unpaced => f.write_str("unpaced"),
            PaceKind::SlowStart { per_second } => write!(f, "slow start {per_second:.1}/s"),
            PaceKind::Smooth { per_second } => write!(f, "{per_second:.1}/s"),
            PaceKind::Batches { size, every } => {
                write!(f, "{size} per {:.2} s", every.as_secs_f64())
            }
        }
    }
}

impl OriginStatus {
    /// How long from then the origin is held, if it is: its gate is closed,
    /// or the quota the server stated is spent (what
    /// [`Store::gate`](crate::Store::gate) answers). Tasks wait for it
    /// holding nothing; the pace may be learned anew when it reopens.
    #[must_use]
    pub fn gate_closed_for(&self) -> Option<Duration> {
        self.gate_closed_for
    }

    /// Paced slots handed out whose tasks have not sent yet (or whose send
    /// is not recorded yet): the tasks waiting for a slot. Zero once every
    /// slot handed out has come.
    #[must_use]
    pub fn reserved(&self) -> u32 {
        self.reserved
    }

    /// How long from then the next free paced slot leaves: what a task
    /// asking then would wait for, behind the [`reserved`](Self::reserved)
    /// ones, once the gate lets it through. `None` when it would go at once
    /// (also when unpaced).
    #[must_use]
    pub fn next_slot_in(&self) -> Option<Duration> {
        self.next_slot_in
    }

    /// The learned pace.
    #[must_use]
    pub fn pace(&self) -> PaceKind {
        self.pace
    }

    /// Requests the server stated it still admits before its reset, while
    /// such a quota is being counted (its reset is still ahead). `Some(0)`:
    /// spent, the origin is held (see
    /// [`gate_closed_for`](Self::gate_closed_for)). A store that folds
    /// successes in later (such as [`Coalesced`](crate::store::Coalesced))
    /// does not keep a stated quota.
    #[must_use]
    pub fn quota_left(&self) -> Option<u64> {
        self.quota.map(|(left, _)| left)
    }

    /// How long from then the stated quota resets, while it is counted.
    #[must_use]
    pub fn quota_resets_in(&self) -> Option<Duration> {
        self.quota.map(|(_, resets_in)| resets_in)
    }
}

impl OriginState {
    /// What this state says at `now` (on the clock of the store that keeps
    /// it), for display. Changes nothing.
    #[must_use]
    pub fn status(&self, now: Duration) -> OriginStatus {
        let mut pace = self.pace;
        // What the next admission would find: slots that have all come are
        // no longer reserved.
        pace.settle(now);
        let next_slot = pace.free_slot(now);
        OriginStatus {
            gate_closed_for: self.gate_in(now),
            reserved: pace.reserved,
            next_slot_in: (next_slot > now).then(|| next_slot - now),
            pace: PaceKind::of(pace.mode),
            quota: (self.quota.until > now).then(|| (self.quota.left, self.quota.until - now)),
        }
    }
}
