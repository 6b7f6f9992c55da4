//! Reserved slots given back: a task that reserved a paced slot and does
//! not send (it was dropped, stopped or failed first) returns it, so that
//! cancellation never leaves a phantom queue.

use std::time::Duration;

use super::pace::{Mode, Pace, interval, tolerance};

impl Pace {
    /// A task whose slot has come (`now`) sends: its reservation is settled.
    pub(super) fn used(&mut self, now: Duration, slot: Duration) {
        if slot <= self.settled {
            // Already counted off when every slot up to it had come.
            return;
        }
        self.reserved = self.reserved.saturating_sub(1);
        if self.reserved == 0 {
            self.rewind(now);
        }
    }

    /// A task gives back, at `now`, the slot at `slot` it will not use.
    ///
    /// It goes to the next task exactly when it is the last slot handed
    /// out, or when no other reservation is left (then the queue is rewound
    /// to `now`). A slot given back between two that are still held is not
    /// handed out again: the tasks behind it keep the times they were told.
    pub(super) fn release(&mut self, now: Duration, slot: Duration) {
        if slot <= self.settled {
            // Already counted off, and its time has come: nothing to give.
            return;
        }
        self.reserved = self.reserved.saturating_sub(1);
        if self.reserved == 0 {
            self.rewind(now);
            return;
        }
        if slot <= now {
            // Its time came: whether or not anything left then, the pace
            // counted it.
            return;
        }
        let next_slot = self.next_slot;
        match &mut self.mode {
            Mode::Batches(b) => {
                let taken = b.size.saturating_sub(b.left);
                if taken > 0 && slot >= b.start && slot == next_slot {
                    // The tail of the current batch.
                    if taken >= 2 {
                        b.left += 1;
                        self.next_slot = b.start + b.offset(taken - 2);
                    } else {
                        // Its first slot: the next batch starts there again.
                        b.left = 0;
                        self.next_slot = slot.saturating_sub(b.every);
                    }
                }
            }
            Mode::SlowStart { rate } | Mode::Smooth { rate, .. } => {
                let step = interval(*rate);
                if (slot + step).abs_diff(next_slot) < step / 2 {
                    self.next_slot = slot;
                }
            }
            Mode::Unpaced => {}
        }
    }

    /// No reservation is left at `now`: slots handed out after `now` are
    /// all free again, and those up to `now` were used. The queue goes on
    /// from the last used slot (smooth pace: no later than one interval
    /// from now, plus a bucket's burst that left at once; batches: the current batch keeps its used slots, or, when
    /// none of it was used, the next batch leaves a period from now).
    fn rewind(&mut self, now: Duration) {
        if self.next_slot <= now {
            return;
        }
        match &mut self.mode {
            Mode::Unpaced => {}
            Mode::SlowStart { rate } => {
                self.next_slot = self.next_slot.min(now + interval(*rate));
            }
            Mode::Smooth { rate, burst } => {
                // A burst that left at once reserved nothing, and is still
                // spent: no further back than the bucket's full tolerance.
                let full = interval(*rate).saturating_add(tolerance(*rate, *burst));
                self.next_slot = self.next_slot.min(now.saturating_add(full));
            }
            Mode::Batches(b) => {
                let taken = b.size.saturating_sub(b.left);
                let used = (0..taken)
                    .take_while(|&i| b.start + b.offset(i) <= now)
                    .count();
                let used = u32::try_from(used).unwrap_or(taken);
                if b.start <= now && used > 0 {
                    b.left = b.size - used;
                    self.next_slot = b.start + b.offset(used - 1);
                } else {
                    b.left = 0;
                    self.next_slot = now;
                }
            }
        }
    }
}
