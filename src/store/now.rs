//! [`Now`]: the time a store applies an update at.

use std::time::Duration;

/// The time a store applies an update at, given to the update's closure.
///
/// `time` is on the store's clock (see [`Store`](super::Store)). A store
/// whose clock is read some time after the update was called (a round trip
/// to a shared store, a queue) says how long after ([`late_by`](Self::late_by)),
/// never more than it was: an answer's times (`Retry-After`, a reset)
/// count from when it was received, not from when it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    time: Duration,
    late: Duration,
    fallback: bool,
}

impl Now {
    /// `time` on the store's clock, read as the update was called.
    #[must_use]
    pub fn new(time: Duration) -> Self {
        Now {
            time,
            late: Duration::ZERO,
            fallback: false,
        }
    }

    /// The same time, read `late` after the update was called (at least
    /// that long: the command that read it was sent then).
    #[must_use]
    pub fn late_by(self, late: Duration) -> Self {
        Now { late, ..self }
    }

    /// The same time, on a stand-in state: a shared store that cannot be
    /// reached applies the update to this process's own state instead.
    /// Slots reserved on one state are not settled on the other (their
    /// times are on different clocks).
    #[must_use]
    pub fn on_fallback(self) -> Self {
        Now {
            fallback: true,
            ..self
        }
    }

    /// The store's time.
    #[must_use]
    pub fn time(&self) -> Duration {
        self.time
    }

    /// How long after the update was called the store read its time.
    #[must_use]
    pub fn late(&self) -> Duration {
        self.late
    }

    /// Whether the update is applied to a stand-in state (see
    /// [`on_fallback`](Self::on_fallback)).
    #[must_use]
    pub fn is_fallback(&self) -> bool {
        self.fallback
    }
}
