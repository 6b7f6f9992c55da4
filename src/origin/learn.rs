//! What a reopening gate teaches the pace: the batch the period that just
//! ended admitted, and where the queue starts again.

use std::time::Duration;

use super::pace::{Batches, Mode, Pace, batch_every, to_count};
use super::period::Period;
use super::tuning::TUNING;

impl Pace {
    /// The gate reopens at `gate` after a period whose server time was
    /// `span`: learn what the origin admitted in `period`, and start anew.
    /// Whether the probe that goes now is counted in the first batch.
    ///
    /// The first time, the period is typically a burst answered by "come
    /// back in W": the server admitted that many per W (or, if sending went
    /// on for longer than W before the first pushback, proportionally
    /// fewer). From then on the queue leaves in batches of that many, one
    /// batch per W plus a margin, the first right after the probe: a
    /// fixed-window server is used to the full from the start of each
    /// window, where a smooth pace would spread each window's requests over
    /// it and finish a window late.
    ///
    /// A token bucket drained by a burst admits its capacity and then what
    /// it refilled while the burst arrived (before its first rejection as
    /// well as after it), and nothing the client sees tells it from a window
    /// that admitted as many: the answers of a burst reach the client late
    /// and in any order. So every batch is spread over X, the time from the
    /// period's start to its last success read (an upper bound of the span
    /// the server admitted over), plus one slot; the next batch leaves W
    /// plus a margin after the last slot of the one before, and the first
    /// waits, after the probe, until a whole W has passed since the
    /// period's last success. The bucket then refills, during a batch, what
    /// it admitted beyond its capacity, and in between, its capacity. A
    /// window pays X a period for it. When X is over half of W, the batch is
    /// what a bucket refilling over W held, spread over W / 2. A server
    /// whose answers state its quota and reset (rate-limit headers) is told
    /// apart: its batch leaves at once, and each stated reset re-anchors the
    /// next.
    ///
    /// A period whose first pushback came after a quiet spell (its last
    /// success more than a tenth of W before) measured what the client
    /// asked, not what the origin admits: its pace is a slow start from
    /// that count, rising with each success until a pushback measures it.
    ///
    /// Later, while pacing, a pushback says the batch was too large: it is
    /// cut ([`Pace::cut`]).
    pub(super) fn reopen(&mut self, gate: Duration, span: Duration, period: &Period) -> bool {
        // Batches booked beyond the gate (the gate closed on a spent quota
        // while they waited) stand: the queue goes on as booked.
        let mut restart = true;
        match self.mode {
            Mode::Batches(b)
                if period.rejected && b.admitted < b.size.div_ceil(2) && b.admitted > 0 =>
            {
                // The batch was rejected before half of it got through,
                // after the one before got through whole: the server refills
                // no batch between two (it counts what it admitted over a
                // sliding span, as HAProxy's request rate does). The same
                // rate, spread evenly, is what it takes.
                // The batch's own rate was at the server's limit (the one
                // before was admitted right at it): a little below.
                self.mode = Mode::Smooth {
                    rate: (f64::from(b.size) / b.every.as_secs_f64() * TUNING.cut_factor)
                        .max(TUNING.min_rate),
                    burst: 1,
                };
            }
            Mode::SlowStart { rate }
                if period.rejected && period.silent && period.successes > 0 =>
            {
                // Rising, it met the server's rate, which named no time: the
                // hold was a few of its intervals, no period to learn a batch
                // from. Slow start doubles its rate each second, and a
                // server with a burst hides its rate until the burst is
                // spent: it overshot by up to twice. Half the rate it had
                // (as TCP halves its window on a loss), rising from there.
                self.mode = Mode::Smooth {
                    rate: (rate * TUNING.cut_floor).max(TUNING.min_rate),
                    burst: 1,
                };
            }
            Mode::Batches(_) | Mode::Smooth { .. } => {
                // A rejected probe alone (the period admitted nothing) says
                // "not yet", not "too fast": the pace stands.
                if period.rejected && period.successes > 0 {
                    self.cut();
                } else if !period.rejected {
                    // The gate closed on a spent quota while the queue
                    // waited: slots booked beyond it stand.
                    restart = self.next_slot <= gate;
                }
            }
            _ => self.learn(gate, span, period),
        }
        let probe_counted = restart && matches!(self.mode, Mode::Batches(_));
        if restart {
            // A new queue behind the probe: the slots of the one before are
            // void (their tasks find so when their time comes, and ask
            // again), so none of them leaves without a probe ahead.
            // Nothing of the new queue is counted off yet (the old one's
            // confirmations carry its number and are void): a settled time
            // kept from it would swallow the new queue's, left reserved.
            self.settled = Duration::ZERO;
            self.reserved = 0;
            self.queue = self.queue.wrapping_add(1);
            self.next_slot = gate;
        }
        if let Mode::Batches(b) = &mut self.mode
            && probe_counted
        {
            // The probe leaves at the gate time (one slot of the batch);
            // the rest after its head start.
            let gap = (b.every / b.size).clamp(TUNING.probe_gap_min, TUNING.probe_gap_max);
            b.left = b.size - 1;
            // A bucket has refilled for a whole span since the last success
            // of the period (its last admission came no later). A server
            // that stated its reset has reset by the gate.
            b.start = if period.stated {
                gate + gap
            } else {
                (gate + gap).max(period.last_success + span)
            };
            if b.left > 0 {
                self.next_slot = b.start;
            }
        }
        self.raised_at = gate;
        probe_counted
    }

    /// The gate reopens at `at` after a period in which another limit than
    /// the stated quota (`limit` per `window`) pushed back for `span`
    /// (GitHub's secondary limit, within the resource's quota): whether
    /// the pace was set here. Such a time is a penalty, not the other
    /// limit's period (GitHub's secondary limit answers `retry-after: 60`
    /// for a limit per minute, a scaled server 3 s for one per second), so
    /// read as a window it may teach a rate far below what that limit
    /// admits. What the period does show is a burst the other limit
    /// admitted (its successes): the quota is spread over its window in
    /// equal batches no larger than that burst less a tenth (`k` batches
    /// for `k = ceil(limit / burst)`, one each `window / k`), the first at
    /// once. GitHub documents its secondary limits as bursts (concurrent
    /// requests, points per minute): a burst the size of one it admitted,
    /// spread out, meets none of them again.
    ///
    /// The burst is what got through before the other limit first answered
    /// (later successes may have found it with room again: a concurrency
    /// limit frees as answers leave): smaller bursts cost nothing of the
    /// quota's rate, only where in its window its last ones leave. When
    /// the other limit pushes back again, the batches are derived anew
    /// from what the last one got through.
    ///
    /// Chosen first only when faster than the batches the period would
    /// teach read as a window (what it admitted per `span`): a server whose
    /// penalty is the limit's own period (GitHub's per-minute limits with
    /// a minute's `retry-after`, under an hourly quota) keeps that pace,
    /// cut as ever when pushed back again ([`reopen`](Self::reopen)).
    pub(super) fn within_quota(
        &mut self,
        at: Duration,
        span: Duration,
        period: &Period,
        (limit, window): (u64, Duration),
    ) -> bool {
        // What got through: before the other limit first answered, or, in
        // sub-batches already, what the last one got through.
        let admitted = match self.mode {
            Mode::Unpaced | Mode::SlowStart { .. } => period.before_pushback,
            Mode::Batches(b) if b.spread.is_zero() && b.admitted < b.size => b.admitted,
            _ => 0,
        };
        if admitted == 0 || window.is_zero() {
            return false;
        }
        let burst = to_count(f64::from(admitted) * TUNING.cut_factor).max(1);
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let parts = limit.div_ceil(burst).max(1);
        let size = limit.div_ceil(parts);
        let every = window / parts;
        let spread = f64::from(size) / every.as_secs_f64().max(f64::MIN_POSITIVE);
        let as_window = f64::from(period.successes) / batch_every(span).as_secs_f64();
        if matches!(self.mode, Mode::Unpaced | Mode::SlowStart { .. }) && spread <= as_window {
            return false;
        }
        self.mode = Mode::Batches(Batches {
            size,
            every,
            left: size,
            admitted: 0,
            start: at,
            spread: Duration::ZERO,
        });
        // A new queue (the slots of the one before are void), its first
        // batch free at once.
        self.settled = Duration::ZERO;
        self.reserved = 0;
        self.queue = self.queue.wrapping_add(1);
        self.next_slot = at;
        self.raised_at = at;
        true
    }

    /// The batch a first measured period shows (see [`reopen`](Self::reopen)),
    /// or slow start when it admitted nothing countable or was quiet when
    /// it was pushed back.
    fn learn(&mut self, gate: Duration, span: Duration, period: &Period) {
        let sending = period.sending(gate);
        let length = sending.max(span).as_secs_f64();
        let share = if length > 0.0 {
            span.as_secs_f64() / length
        } else {
            0.0
        };
        let mut size = to_count(f64::from(period.successes) * share);
        // A server that states its quota and reset resets it then: its
        // batch leaves at once. Otherwise the batch is spread over the time
        // from the period's start to its last success read: an upper bound
        // of the span the server admitted it over, which a bucket spent
        // refilling what it admitted beyond its capacity (successes over a
        // long period came at a pace the server kept up with).
        let mut spread = if sending <= span && !period.stated {
            let admitting = period.last_success.saturating_sub(period.start);
            // The batch's last slot leaves one slot short of the spread
            // (slot i at spread * i / size): one interval more.
            admitting + (span / size.max(1)).min(span / 10)
        } else {
            Duration::ZERO
        };
        if spread > span / 2 {
            // Too long to spread a batch over within a window: the batch is
            // what a bucket refilling over the span held.
            let stretched = span.as_secs_f64() / (span + spread).as_secs_f64();
            size = to_count(f64::from(size) * stretched).max(size.min(1));
            spread = span / 2;
        }
        if size >= 1
            && !period.stated
            && period.quiet_before_pushback() > span.mul_f64(TUNING.quiet_share)
        {
            // The origin was pushing back after a quiet spell, not while a
            // burst met its limit: the few it admitted before say what the
            // client asked, not what the origin admits. A floor to rise
            // from, not a ceiling to queue behind.
            self.mode = Mode::SlowStart {
                rate: (f64::from(size) / batch_every(span).as_secs_f64()).max(TUNING.min_rate),
            };
        } else if size >= 1 && period.silent && !period.stated {
            // The server named no time: the hold was ours, and nothing tells
            // whether it refills a batch between two (a window, a bucket) or
            // counts what it admitted over a sliding span, denials included
            // (HAProxy's request rate): a batch a period then outruns it.
            // What it admitted per hold, spread evenly, outruns none.
            self.mode = Mode::Smooth {
                rate: f64::from(size) / batch_every(span).as_secs_f64(),
                burst: 1,
            };
        } else if size >= 1 {
            self.mode = Mode::Batches(Batches {
                size,
                every: batch_every(span),
                left: 0,
                admitted: 0,
                start: Duration::ZERO,
                spread,
            });
        } else {
            let rate = self.rate().max(TUNING.min_rate);
            self.mode = Mode::SlowStart { rate };
        }
    }
}
