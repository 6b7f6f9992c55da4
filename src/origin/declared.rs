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
        match &mut self.mode {
            Mode::Unpaced | Mode::SlowStart { .. } => {
                self.mode = own;
                self.next_slot = self.next_slot.min(now);
            }
            Mode::Batches(b) => {
                // A batch leaves at once (or spread over less than a
                // span): no more than the quota's count, and no sooner
                // than a declared span after the batch before, whatever
                // the average rate (a learned 2 per 1.02 s is slower than
                // a declared 1 per 500 ms, and sends 2 within it).
                b.every = b.every.max(batch_every(quota.per()));
                b.resize(quota.count().min(b.size));
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

    /// The queue restarted (a reopening, or a stated quota standing the
    /// pace down) from the pace `before`: the slots it handed out may have
    /// left, and they still count against the declared `quota`. So the
    /// declared pace goes on where it was (its batch, its bucket's time);
    /// a learned pace slower than the quota keeps its mode, its first slot
    /// no earlier than the declared pace's next free one.
    pub(super) fn carry_declared(&mut self, before: &Pace, quota: Quota) {
        // The queue's number voids the reservations of the one before;
        // `settled` (moved to its last slot by the restart) must not void
        // the new ones, handed out again at times up to that slot.
        self.settled = before.settled;
        if !before.is_paced() {
            return;
        }
        let own = Pace {
            mode: own_mode(Duration::ZERO, quota),
            ..*self
        };
        let governs = match self.mode {
            Mode::Unpaced | Mode::SlowStart { .. } => true,
            _ => !own.rate_above(self.rate()),
        };
        if governs {
            self.mode = before.mode;
            self.next_slot = before.next_slot;
            return;
        }
        let floor = before.held_until();
        match &mut self.mode {
            Mode::Batches(b) => {
                b.start = b.start.max(floor);
                self.next_slot = self.next_slot.max(floor);
            }
            _ => self.next_slot = self.next_slot.max(floor),
        }
    }

    /// A smooth pace raised above `quota`'s rate comes back down to it.
    pub(super) fn keep_within(&mut self, quota: Quota) {
        if let Mode::Smooth { rate, .. } = &mut self.mode {
            *rate = rate.min(quota.rate());
        }
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
