//! The pace: how the queue behind an origin leaves once its gate is open.
//!
//! Four modes, chosen when the gate reopens from what the period showed:
//! unpaced (nothing learned yet), slow start (the period admitted nothing
//! countable, e.g. a shared state lost with its store), learned batches,
//! and a smooth pace (batches the server rejected early: it counts what it
//! admitted recently, as HAProxy's request rate does, and refills no batch
//! between two). A batch is cut when a period the origin pushed back in ends,
//! and raised after a long clean run; slots a task does not use are given
//! back ([`Pace::release`]).

use std::time::Duration;

use super::tuning::TUNING;

/// How the queue leaves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Mode {
    /// Every admitted task goes at once.
    Unpaced,
    /// A smooth pace that starts at one request a second and rises by one
    /// on each success, until a period is measured.
    SlowStart {
        /// Requests per second.
        rate: f64,
    },
    /// What the origin admitted per period, released one batch per period.
    Batches(Batches),
    /// The learned rate, one request every `1 / rate`: for a server that
    /// rejected a batch early, after admitting the one before in full.
    Smooth {
        /// Requests per second.
        rate: f64,
        /// How many may leave at once after a quiet spell (1 for a learned
        /// pace; a declared bucket's size): GCRA's burst.
        burst: u32,
    },
}

/// The learned batches of an origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Batches {
    /// How many requests leave per batch.
    pub(super) size: u32,
    /// The least time from a batch's last slot to the next batch (the
    /// server's period plus a margin).
    pub(super) every: Duration,
    /// Slots left in the current batch.
    pub(super) left: u32,
    /// Successes answered since the current batch started: a batch
    /// rejected before half of it got through tells a server that refills
    /// no batch between two (see [`Mode::Smooth`]).
    pub(super) admitted: u32,
    /// When the current batch leaves.
    pub(super) start: Duration,
    /// The span a batch's slots are spread evenly over.
    pub(super) spread: Duration,
}

impl Batches {
    /// When the `i`-th slot of a batch leaves, from the batch's start:
    /// evenly over the spread.
    pub(super) fn offset(&self, i: u32) -> Duration {
        self.spread * i / self.size.max(1)
    }

    /// Slots of the current batch handed out.
    fn taken(&self) -> u32 {
        self.size.saturating_sub(self.left)
    }

    /// The slot a task asking at `now` is given, behind `last` (the latest
    /// slot handed out): whether it opens a new batch, that batch's start,
    /// and the slot. The next in the current batch, or, once it is spent,
    /// the first of a batch `every` after `last`.
    fn free_slot(&self, now: Duration, last: Duration) -> (bool, Duration, Duration) {
        let new_batch = self.left == 0;
        let (start, taken) = if new_batch {
            (now.max(last.saturating_add(self.every)), 0)
        } else {
            (self.start, self.taken())
        };
        (new_batch, start, now.max(start + self.offset(taken)))
    }

    /// Sets the size; the current batch keeps no more slots left than it.
    pub(super) fn resize(&mut self, size: u32) {
        self.size = size;
        self.left = self.left.min(size);
    }
}

/// The pace of one origin and the slots it handed out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Pace {
    pub(super) mode: Mode,
    /// Smooth pace: the theoretical time of the next slot (GCRA's TAT).
    /// Batches: the latest slot handed out.
    pub(super) next_slot: Duration,
    /// Slots handed out and neither confirmed nor given back yet.
    pub(super) reserved: u32,
    /// Slots up to this time are no longer counted in `reserved` (they
    /// had all come when it was last reset): a late confirmation or
    /// release of one of them must not count off a later reservation.
    pub(super) settled: Duration,
    /// When the pace was last set or raised.
    pub(super) raised_at: Duration,
    /// The queue's number, counted up each time it restarts at a reopened
    /// gate: reservations of an earlier queue are void.
    pub(super) queue: u32,
}

/// The pace's answer to a task the gate and the quota let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Send now.
    Go,
    /// A slot is reserved at `slot`, `wait` from now.
    Reserved { wait: Duration, slot: Duration },
    /// Ask again after this long; nothing reserved.
    Ahead(Duration),
    /// The earliest slot is this far away, beyond what the task accepts.
    TooLate(Duration),
}

impl Pace {
    /// Unpaced, first seen at `now`.
    pub(super) fn new(now: Duration) -> Self {
        Pace {
            mode: Mode::Unpaced,
            next_slot: Duration::ZERO,
            reserved: 0,
            settled: Duration::ZERO,
            raised_at: now,
            queue: 0,
        }
    }

    /// Requests per second (0: not pacing).
    pub(super) fn rate(&self) -> f64 {
        match self.mode {
            Mode::Unpaced => 0.0,
            Mode::SlowStart { rate } | Mode::Smooth { rate, .. } => rate,
            Mode::Batches(b) => f64::from(b.size) / b.every.as_secs_f64(),
        }
    }

    /// Whether anything paces the queue.
    pub(super) fn is_paced(&self) -> bool {
        self.mode != Mode::Unpaced
    }

    /// When the slot a task asking at `now` would be given leaves (`now`:
    /// it would go at once), the gate and the quota aside: what
    /// [`take`](Self::take) hands out next.
    pub(super) fn free_slot(&self, now: Duration) -> Duration {
        match self.mode {
            Mode::Unpaced => now,
            Mode::SlowStart { .. } => now.max(self.next_slot),
            Mode::Smooth { rate, burst } => {
                now.max(self.next_slot.saturating_sub(tolerance(rate, burst)))
            }
            Mode::Batches(b) => b.free_slot(now, self.next_slot).2,
        }
    }

    /// Until when what the pace handed out binds: its last slot, and with
    /// batches the earliest start of the next (a state forgotten sooner
    /// would let a whole batch leave at once, inside the window).
    pub(super) fn held_until(&self) -> Duration {
        match self.mode {
            Mode::Batches(b) => self.next_slot.saturating_add(b.every),
            _ => self.next_slot,
        }
    }

    /// At `now`: once every slot handed out has come, none is reserved any
    /// more (a holder that vanished without a word leaks nothing).
    pub(super) fn settle(&mut self, now: Duration) {
        if now >= self.next_slot {
            self.reserved = 0;
            self.settled = self.settled.max(self.next_slot);
        }
    }

    /// A task asks at `now` and accepts to wait `latest`. `probe` when it is
    /// a reopening's probe whose slot the batch already counts; `stated`
    /// when the origin states its quota and reset (a stated reset anchors
    /// each batch, so none is booked ahead of it).
    pub(super) fn take(
        &mut self,
        now: Duration,
        latest: Duration,
        probe: bool,
        stated: bool,
    ) -> Slot {
        let slot = match &mut self.mode {
            Mode::Unpaced => return Slot::Go,
            Mode::Batches(_) if probe => return Slot::Go,
            Mode::Batches(b) => {
                // A slot in the current batch, or, once it is spent, in the
                // next: no earlier than `every` after the last slot handed
                // out. So no span of `every` ever holds more than one
                // batch's requests, whatever the server's shape: a fixed
                // window sees one batch per window, a sliding log never
                // more than it admitted in one period, and a bucket refills
                // a batch between two.
                let (new_batch, start, slot) = b.free_slot(now, self.next_slot);
                let wait = slot - now;
                if wait > latest {
                    return Slot::TooLate(wait);
                }
                if new_batch && wait > Duration::ZERO && stated {
                    // A spent quota closes the origin until the stated reset
                    // the batch before tells: slots booked now would fall
                    // before it and be lost. Ask again then, holding nothing.
                    return Slot::Ahead(wait);
                }
                if new_batch {
                    b.left = b.size;
                    b.start = start;
                    b.admitted = 0;
                }
                b.left -= 1;
                self.next_slot = self.next_slot.max(slot);
                slot
            }
            Mode::SlowStart { rate } => {
                let slot = now.max(self.next_slot);
                let wait = slot - now;
                if wait > latest {
                    // The queue, not the gate, is too long.
                    return Slot::TooLate(wait);
                }
                if wait > TUNING.slow_start_ahead {
                    // A slot booked far ahead at today's slow rate would stay
                    // there when the rate rises: ask again soon instead.
                    return Slot::Ahead(TUNING.slow_start_ahead);
                }
                self.next_slot = slot + interval(*rate);
                slot
            }
            Mode::Smooth { rate, burst } => {
                // GCRA: the next slot is the theoretical arrival time, less
                // the burst's tolerance.
                let due = now.max(self.next_slot.saturating_sub(tolerance(*rate, *burst)));
                // A declared bucket's burst leaves at once; what must wait
                // for a refill leaves a margin after the bucket's own time
                // (its requests reach the server with varying delays: one on
                // a new connection later than one on a pooled one).
                let slot = if *burst > 1 && due > now {
                    due + TUNING.batch_margin
                } else {
                    due
                };
                let wait = slot - now;
                if wait > latest {
                    return Slot::TooLate(wait);
                }
                self.next_slot = self.next_slot.max(due) + interval(*rate);
                slot
            }
        };
        if slot <= now {
            return Slot::Go;
        }
        self.reserved = self.reserved.saturating_add(1);
        Slot::Reserved {
            wait: slot - now,
            slot,
        }
    }

    /// A success at `now`; `reopen_pending` while the gate closed in this
    /// period (the pace is learned again at its reopening).
    pub(super) fn on_success(&mut self, now: Duration, reopen_pending: bool) {
        if let Mode::Batches(b) = &mut self.mode
            && now >= b.start
        {
            b.admitted = b.admitted.saturating_add(1);
        }
        if reopen_pending {
            return;
        }
        match &mut self.mode {
            Mode::SlowStart { rate } => *rate += TUNING.slow_start_step,
            Mode::Batches(_) if now.saturating_sub(self.raised_at) >= TUNING.raise_every => {
                self.raise();
                self.raised_at = now;
            }
            // A learned smooth pace (a burst of 1) rises; a declared
            // bucket's is the caller's, and its tolerance is measured at it.
            Mode::Smooth { rate, burst: 1 }
                if now.saturating_sub(self.raised_at) >= TUNING.smooth_raise_every =>
            {
                *rate *= TUNING.smooth_raise_factor;
                self.raised_at = now;
            }
            _ => {}
        }
    }

    /// A learned pace that ran clean for long rises by a tenth (at least one).
    fn raise(&mut self) {
        if let Mode::Batches(b) = &mut self.mode {
            let more = to_count(f64::from(b.size) * (TUNING.raise_factor - 1.0)).max(1);
            b.resize(b.size.saturating_add(more));
        }
    }

    /// The hold of a gate closed by a pushback with no time, before any
    /// growth: a smooth pace (or a slow start) was only a little too fast
    /// (its rejection is one request over the server's rate), so a few of
    /// its intervals; otherwise
    /// [`silent_hold`](super::tuning::Tuning::silent_hold).
    pub(super) fn silent_hold(&self) -> Duration {
        match self.mode {
            Mode::Smooth { rate, .. } | Mode::SlowStart { rate } => (interval(rate)
                * TUNING.smooth_hold_intervals)
                .clamp(TUNING.smooth_hold_min, TUNING.silent_hold),
            _ => TUNING.silent_hold,
        }
    }

    /// The pause after a rejection isolated among successes: a few of the
    /// pace's intervals (at least
    /// [`smooth_hold_min`](super::tuning::Tuning::smooth_hold_min), at most
    /// [`silent_hold`](super::tuning::Tuning::silent_hold)): long enough
    /// for its retry to leave behind what was sent with it, short beside
    /// a period of the pace.
    pub(super) fn isolated_hold(&self) -> Duration {
        (interval(self.rate()) * TUNING.smooth_hold_intervals)
            .clamp(TUNING.smooth_hold_min, TUNING.silent_hold)
    }

    /// The period that ended saw a rejection: the batch was too large, by
    /// about a tenth (at least one, at most half). Applied once per period,
    /// when the gate reopens.
    pub(super) fn cut(&mut self) {
        match &mut self.mode {
            Mode::Batches(b) => {
                let size = f64::from(b.size);
                b.resize(
                    to_count(size * TUNING.cut_factor)
                        .min(b.size - 1)
                        .max(to_count((size * TUNING.cut_floor).ceil()))
                        .max(1),
                );
            }
            Mode::Smooth { rate, .. } => *rate = (*rate * TUNING.cut_factor).max(TUNING.min_rate),
            _ => {}
        }
    }
}

/// The spacing of batches for a server period `span`: the span plus the
/// margin or its share of the span, whichever is more (saturating: a
/// server's time may be enormous).
pub(super) fn batch_every(span: Duration) -> Duration {
    span.saturating_add(
        TUNING
            .batch_margin
            .max(span.mul_f64(TUNING.batch_margin_share)),
    )
}

/// A non-negative count, rounded down (saturating).
pub(super) fn to_count(x: f64) -> u32 {
    if x.is_finite() && x > 0.0 {
        // Saturating: `as` clamps to the target's range.
        x.floor() as u32
    } else {
        0
    }
}

/// How far ahead of its theoretical time a smooth pace of `rate` with a
/// burst of `burst` lets a slot leave.
pub(super) fn tolerance(rate: f64, burst: u32) -> Duration {
    interval(rate) * burst.saturating_sub(1)
}

/// The spacing of a smooth pace of `rate` requests per second, at most
/// the longest span a quota may be declared over (a year): a rate too low
/// for `1 / rate` to be a `Duration` (or none at all) is as slow as
/// anything a policy declares, never a second.
pub(super) fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).map_or(crate::Quota::LONGEST_SPAN, |d| {
        d.min(crate::Quota::LONGEST_SPAN)
    })
}
