//! A declared quota bounds the pace: from the first request the queue
//! leaves no faster than the caller declared, whatever the pace learns
//! from the origin's answers (it may learn slower, never faster).

use std::time::Duration;

use super::pace::{Batches, Mode, Pace, batch_every};
use crate::Quota;

impl Pace {
    /// Keeps the pace at `now` within `quota`: a pace not yet learned takes
    /// the quota's own (batches of its count a span apart, or its bucket's
    /// burst and rate); a learned one faster than it is brought down to it.
    pub(super) fn bound(&mut self, now: Duration, quota: Quota) {
        let own = own_mode(now, quota);
        let rate = quota.rate();
        let above = self.rate_above(rate);
        match &mut self.mode {
            Mode::Unpaced | Mode::SlowStart { .. } => {
                self.mode = own;
                self.next_slot = self.next_slot.min(now);
            }
            Mode::Batches(b) if above => {
                let every = batch_every(quota.per());
                if b.every == every {
                    b.resize(quota.count().min(b.size));
                } else if b.every < every {
                    b.every = every;
                    b.resize(quota.count().min(b.size));
                } else {
                    // A longer period than the quota's: as many per period
                    // as the quota's rate allows.
                    let allowed = (rate * b.every.as_secs_f64()).floor();
                    b.resize(super::pace::to_count(allowed).max(1));
                }
            }
            Mode::Smooth { rate: r, .. } if *r > rate => *r = rate,
            _ => {}
        }
    }

    /// A quota of known size governs the origin from `at`: the pace stands
    /// down, and the queue restarts (slots of the one before are void).
    pub(super) fn unpace(&mut self, at: Duration) {
        self.mode = Mode::Unpaced;
        // Nothing of the new queue is counted off yet (the old one's
        // confirmations carry its number and are void): a settled time
        // kept from it would swallow the new queue's, left reserved.
        self.settled = Duration::ZERO;
        self.reserved = 0;
        self.queue = self.queue.wrapping_add(1);
        self.next_slot = at;
        self.raised_at = at;
    }

    fn rate_above(&self, rate: f64) -> bool {
        self.rate() > rate * (1.0 + 1e-9)
    }
}

/// The pace a declared quota keeps on its own, a batch (or a burst)
/// available at `now`.
fn own_mode(now: Duration, quota: Quota) -> Mode {
    if quota.is_refilled() {
        Mode::Smooth {
            rate: quota.rate(),
            burst: quota.count(),
        }
    } else {
        Mode::Batches(Batches {
            size: quota.count(),
            every: batch_every(quota.per()),
            left: quota.count(),
            admitted: 0,
            start: now,
            spread: Duration::ZERO,
        })
    }
}
