//! The origin's recent answers: which of its last 32 were rejections, so
//! that a rejection isolated among successes (an object's lock, Stripe's
//! `lock_timeout`) is told from an overload (most requests rejected).
//!
//! 32 answers are about a second of a pace of 25 a second: the pace's
//! period, for the quotas APIs document per second. A rejection is
//! isolated while more than half of them, itself counted, were admitted:
//! the requests around it got through at the same pace, so the pace was
//! not what the server refused. An outage after a clean run is an
//! overload again after at most 16 rejections.

/// The last answers of an origin, newest in the lowest bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Recent {
    /// One bit per answer, the newest lowest: set for a rejection.
    pub(super) rejected: u32,
    /// How many answers the bits hold (at most 32).
    pub(super) seen: u8,
}

impl Recent {
    /// The most answers it holds.
    const ANSWERS: u8 = 32;

    /// The origin admitted a request.
    pub(super) fn admitted(&mut self) {
        self.push(false);
    }

    /// The origin rejected a request.
    pub(super) fn rejected(&mut self) {
        self.push(true);
    }

    /// Counts the newest answer, the oldest of 32 falling out.
    fn push(&mut self, rejected: bool) {
        self.rejected = (self.rejected << 1) | u32::from(rejected);
        self.seen = self.seen.saturating_add(1).min(Self::ANSWERS);
    }

    /// Whether most of the answers held were admissions: a rejection just
    /// counted is then isolated among successes.
    pub(super) fn mostly_admitted(&self) -> bool {
        self.rejected.count_ones() * 2 < u32::from(self.seen)
    }

    /// Read back from a shared store's text form: `None` for bits beyond
    /// the answers it says it holds.
    pub(super) fn from_parts(rejected: u32, seen: u8) -> Option<Self> {
        let held = if seen >= Self::ANSWERS {
            u32::MAX
        } else {
            (1u32 << seen) - 1
        };
        (seen <= Self::ANSWERS && rejected & !held == 0).then_some(Recent { rejected, seen })
    }
}
