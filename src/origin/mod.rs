//! Pure per-origin state: the origin gate and pacing. Like the rest of the
//! planner, nothing here reads a clock:
//! `now` is a [`Duration`] since an epoch the store chooses (process start
//! for [`MemoryStore`](crate::MemoryStore), the Unix epoch on a shared
//! store's own clock), so several processes can share one timeline.
//!
//! # Why a gate and a pace, not just per-request waits?
//!
//! When a server rejects a burst, every rejected request is told the same
//! time. Clients that each honour `Retry-After` on their own all come back in
//! that same instant, and the server rejects most of them again: the retry
//! storm. The gate holds every request to the origin until the server's time
//! (so requests that were not yet rejected do not add to the burst), and the
//! pace releases the queue no faster than the origin has been seen to admit.
//!
//! What the origin admits is learned, not configured: between one opening
//! of the gate and the next closing, the 2xx answers counted over the time
//! until the server's `Retry-After` give how many it admitted per period.
//! When the gate reopens, the first request released is a probe: it goes
//! alone, the rest of the queue a short gap later, so a probe that is
//! rejected again closes the gate before the queue follows it. The queue
//! then leaves in batches of what was admitted, one batch per period (see
//! `reopen` for how a batch is spread so that a token bucket, which a
//! client cannot tell from a window, never sees more than it refills). A
//! batch is cut by a tenth on each pushback and raised by a tenth after
//! ten seconds without one. When nothing was ever measured (a shared state
//! lost with its store), a smooth pace starts at one request a second and
//! rises on each success (slow start). Requests are never released before
//! the server's time and never jittered below it.

use std::time::Duration;

#[cfg(test)]
mod tests;
mod wire;

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
    /// [`confirm`](OriginState::confirm)ing it (the gate may have closed
    /// again meanwhile). A task that does not send gives the
    /// [`Reservation`] back ([`release`](OriginState::release)).
    SlotReserved(Duration, Reservation),
    /// The quota the server stated is spent: the origin is held this long
    /// from now (until the stated reset, at most the gate's cap), nothing
    /// reserved. Answered to the first task that finds it so, which tells
    /// the observer; the others get [`GateClosed`](Self::GateClosed).
    QuotaHeld(Duration),
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
/// back with [`OriginState::release`] by a task that does not send, or
/// settled with [`OriginState::confirm`] when its time has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The slot's time, on the store's clock.
    pub(crate) slot: Duration,
    /// Whether it spent a unit of a stated quota.
    pub(crate) quota: bool,
    /// Whether a shared store's state holds it (not this process's own,
    /// which a shared store falls back to): the two clocks differ.
    pub(crate) shared: bool,
}

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
    },
    /// The origin admitted the request, but its rate-limit headers say the
    /// quota is exhausted until `reset_in` from now: the gate closes until
    /// then, before any `429` (the proactive gate).
    Exhausted {
        /// How long from now until the quota resets.
        reset_in: Duration,
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
}

/// The lowest pace, in requests per second: a server that admitted nothing
/// gets one probe a second.
const MIN_RATE: f64 = 1.0;
/// Pace increase per success before any rate was learned (slow start: the
/// rate about doubles each second).
const SLOW_START_STEP: f64 = 1.0;
/// After a learned rate ran this long without a pushback, it is raised by
/// [`RAISE_FACTOR`]. Rarely, because with whole-second `Retry-After` values
/// one rejection late in a server's window closes the gate for nearly a
/// whole window: probing upward costs far more than it finds.
const RAISE_EVERY: Duration = Duration::from_secs(10);
/// See [`RAISE_EVERY`].
const RAISE_FACTOR: f64 = 1.1;
/// Multiplicative cut of a learned pace on a pushback while pacing.
const CUT_FACTOR: f64 = 0.9;
/// The deepest single cut of a learned pace.
const CUT_FLOOR: f64 = 0.5;
/// An origin whose gate is open, whose queue is empty and that nobody used
/// for this long is forgotten (by a store's sweep, or a shared key's TTL).
pub(crate) const ORIGIN_IDLE: Duration = Duration::from_secs(300);

/// Spacing of batches beyond the server's own period: at least this, so
/// that timer and network lateness never puts two batches into one of its
/// windows, and a bucket refills fully between them.
const BATCH_MARGIN: Duration = Duration::from_millis(20);
/// [`BATCH_MARGIN`] as a share of the period, when that is more.
const BATCH_MARGIN_SHARE: f64 = 0.02;
/// The probe's head start over the rest of the first batch after a
/// reopening, at least: its answer closes the gate again before the batch
/// follows it into a rejection.
const PROBE_GAP_MIN: Duration = Duration::from_millis(10);
/// And at most.
const PROBE_GAP_MAX: Duration = Duration::from_millis(50);

/// How far ahead a slot is booked while the pace is still in slow start.
const SLOW_START_AHEAD: Duration = Duration::from_secs(1);

/// How long the gate holds an origin that keeps answering `Retry-After: 0`
/// (two zero answers within this span): the header's granularity. A server
/// that truncates its time (Flask-Limiter, tower-governor) says 0 for
/// "under a second", and a retry at once lands in the same closed window.
const ZERO_HOLD: Duration = Duration::from_secs(1);
/// Two stated resets less than this apart are the same window's (servers
/// round their reset to whole seconds).
const SAME_WINDOW: Duration = Duration::from_millis(500);
/// Longest measuring period before the gate first closes: what an origin
/// admitted long ago says little about its limit now.
const EPOCH_MAX: Duration = Duration::from_secs(60);

/// The state of one origin (`scheme://host:port`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginState {
    /// Requests may not leave before this time.
    gate_until: Duration,
    /// The server's delay that set `gate_until` (its `Retry-After`).
    gate_span: Duration,
    /// The latest time a server named, uncapped: nothing refused is told to
    /// come back earlier.
    server_until: Duration,
    /// When the origin last answered a pushback with a zero time.
    last_zero: Option<Duration>,
    /// Smooth pacing: theoretical time of the next slot (GCRA's TAT).
    /// Batches: the latest slot handed out.
    next_slot: Duration,
    /// Requests per second while pacing; 0 when not pacing.
    rate: f64,
    /// Batches: how many requests leave per batch (0: smooth pacing).
    batch: u32,
    /// Batches: the least time from a batch's last slot to the next
    /// batch (the server's period plus a margin).
    batch_every: Duration,
    /// Batches: slots left in the current batch.
    batch_left: u32,
    /// Batches: when the current batch leaves.
    batch_start: Duration,
    /// Batches: the span a batch's slots are spread evenly over.
    batch_spread: Duration,
    /// Whether `rate` was learned from a measured period.
    learned: bool,
    /// Start of the current measuring period.
    epoch_start: Duration,
    /// 2xx answers in the current measuring period.
    epoch_successes: u32,
    /// Whether the gate closed in the current period (and the rate must be
    /// learned again when it reopens).
    relearn_at_reopen: bool,
    /// The first pushback of the current period.
    first_pushback: Option<Duration>,
    /// Whether the current period saw a rejection (not only a quota the
    /// server said was spent).
    rejected: bool,
    /// Whether an answer of the current period stated the server's quota
    /// and its reset (rate-limit headers).
    stated: bool,
    /// The last success of the current period.
    last_success: Duration,
    /// When the pace was last set or raised.
    raised_at: Duration,
    /// Last time a task touched this origin.
    last_seen: Duration,
    /// A quota the server stated (remaining count, until when), spent by
    /// admissions; `quota_until` zero when none is known.
    quota_left: u64,
    quota_until: Duration,
    /// A spent quota holds the origin until its reset, but no longer than
    /// this (the gate's cap after the quota was spent); then one probe.
    quota_probe_at: Duration,
    /// Whether a task was told the spent quota holds the origin (the
    /// observer hears of it once per hold).
    quota_announced: bool,
    /// Paced slots handed out and neither confirmed nor given back yet.
    reserved: u32,
    /// When an answer without a server time last cut the pace (at most
    /// once per period of the origin).
    last_cut: Option<Duration>,
}

impl OriginState {
    /// The state of an origin first seen at `now`: gate open, not paced.
    #[must_use]
    pub fn new(now: Duration) -> Self {
        OriginState {
            gate_until: Duration::ZERO,
            gate_span: Duration::ZERO,
            server_until: Duration::ZERO,
            last_zero: None,
            next_slot: Duration::ZERO,
            rate: 0.0,
            batch: 0,
            batch_every: Duration::ZERO,
            batch_left: 0,
            batch_start: Duration::ZERO,
            batch_spread: Duration::ZERO,
            learned: false,
            epoch_start: now,
            epoch_successes: 0,
            relearn_at_reopen: false,
            first_pushback: None,
            rejected: false,
            stated: false,
            last_success: now,
            raised_at: now,
            last_seen: now,
            quota_left: 0,
            quota_until: Duration::ZERO,
            quota_probe_at: Duration::ZERO,
            quota_announced: false,
            reserved: 0,
            last_cut: None,
        }
    }

    /// Until when the gate is closed, if it is at `now`.
    #[must_use]
    pub fn gate_until(&self, now: Duration) -> Option<Duration> {
        (self.gate_until > now).then_some(self.gate_until)
    }

    /// How long from `now` the origin is held, if it is: its gate is
    /// closed, or the quota the server stated is spent (what
    /// [`Store::gate`](crate::Store::gate) answers).
    #[must_use]
    pub fn gate_in(&self, now: Duration) -> Option<Duration> {
        let held = self
            .gate_until
            .max(self.quota_held_until(now).unwrap_or_default());
        (held > now).then(|| held - now)
    }

    /// Until when a spent stated quota holds the origin, if it does at
    /// `now`: its reset, or the probe time if that comes first.
    fn quota_held_until(&self, now: Duration) -> Option<Duration> {
        (self.quota_left == 0 && self.quota_until > now)
            .then(|| self.quota_until.min(self.quota_probe_at))
    }

    /// The current pace in requests per second (0: not pacing).
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.rate
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

    /// The latest of the gate, the paced queue and a spent quota's hold:
    /// what a store must keep the state for.
    pub(crate) fn held_until(&self, now: Duration) -> Duration {
        self.gate_until
            .max(self.next_slot)
            .max(self.quota_held_until(now).unwrap_or_default())
    }

    /// A task asks to send at `now` and will not send later than `latest`
    /// (from now). Reserves its slot unless refused.
    pub fn admit(&mut self, cfg: PacingConfig, now: Duration, latest: Duration) -> Admission {
        self.last_seen = now;
        if !cfg.gate {
            return Admission::Now;
        }
        if now >= self.next_slot {
            // Every slot handed out has come: none is still reserved (a
            // holder that vanished without a word leaks nothing).
            self.reserved = 0;
        }
        let reopened = self.relearn_at_reopen && now >= self.gate_until;
        let probe_counted = reopened && self.reopen();
        let now_or_probe = if reopened {
            Admission::Reopened
        } else {
            Admission::Now
        };
        if self.gate_until > now {
            // Behind a closed gate nobody gets a time yet: what the origin
            // admits is known only when the period ends, and slots handed
            // out on a partial count would lock in a pace far too slow.
            let wait = self.gate_until - now;
            return if wait > latest {
                self.refuse(now, wait)
            } else {
                Admission::GateClosed(wait)
            };
        }
        let mut quota = false;
        if let Some(until) = self.quota_held_until(now) {
            if now < until {
                // The stated quota is spent: the origin is held as by its
                // gate (nothing reserved), until the reset or the cap.
                let wait = until - now;
                if wait > latest {
                    return self.refuse(now, wait);
                }
                if std::mem::replace(&mut self.quota_announced, true) {
                    return Admission::GateClosed(wait);
                }
                return Admission::QuotaHeld(wait);
            }
            // Held as long as the gate would be: one probe finds out
            // whether the reset came early; the next waits another cap.
            self.quota_probe_at = now.saturating_add(cfg.max_gate);
            self.quota_announced = false;
            return Admission::Reopened;
        } else if self.quota_until > now {
            quota = true;
        }
        let admission = self.pace(cfg, now, latest, probe_counted, now_or_probe, quota);
        if quota
            && matches!(
                admission,
                Admission::Now | Admission::Reopened | Admission::SlotReserved(..)
            )
        {
            self.quota_left -= 1;
            if self.quota_left == 0 {
                self.quota_spent(cfg, now);
            }
        }
        admission
    }

    /// The stated quota was spent at `now`: the origin is held until its
    /// reset, no longer than the gate would be, and refusals meanwhile
    /// name the reset (never earlier than the server's time).
    fn quota_spent(&mut self, cfg: PacingConfig, now: Duration) {
        self.quota_probe_at = now.saturating_add(cfg.max_gate);
        self.quota_announced = false;
        self.server_until = self.server_until.max(self.quota_until);
    }

    /// The pace's part of [`admit`](Self::admit), once the gate and the
    /// quota let the task through: now, or a reserved slot.
    fn pace(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        latest: Duration,
        probe_counted: bool,
        now_or_probe: Admission,
        quota: bool,
    ) -> Admission {
        if !(cfg.pace && self.rate > 0.0) {
            return now_or_probe;
        }
        if self.batch > 0 {
            if probe_counted {
                // The probe: its slot was counted when the batch was set.
                return now_or_probe;
            }
            return self.take_batch_slot(now, latest, now_or_probe, quota);
        }
        let slot = now.max(self.next_slot);
        let wait = slot - now;
        if wait > latest {
            // The queue, not the gate, is too long: the earliest free slot.
            return self.refuse(now, wait);
        }
        if !self.learned && wait > SLOW_START_AHEAD {
            // While the pace is still rising (nothing was measured, e.g. an
            // origin whose shared state was lost), a slot booked far ahead
            // at today's slow rate would stay there when the rate rises:
            // ask again soon instead, nothing reserved.
            return Admission::QueueAhead(SLOW_START_AHEAD);
        }
        self.next_slot = slot + interval(self.rate);
        if wait.is_zero() {
            now_or_probe
        } else {
            self.reserve(wait, slot, quota)
        }
    }

    /// Hands out the paced slot at `slot`, `wait` from now.
    fn reserve(&mut self, wait: Duration, slot: Duration, quota: bool) -> Admission {
        self.reserved = self.reserved.saturating_add(1);
        Admission::SlotReserved(
            wait,
            Reservation {
                slot,
                quota,
                shared: false,
            },
        )
    }

    /// A task whose slot has come (`now`) is about to send: its
    /// reservation is settled. When the gate closed again meanwhile (a
    /// probe was rejected), how long from now it stays closed: the task
    /// does not send, and its reservation is given back.
    pub fn confirm(&mut self, now: Duration, reservation: Reservation) -> Option<Duration> {
        if self.gate_until > now {
            self.release(now, reservation);
            return Some(self.gate_until - now);
        }
        self.reserved = self.reserved.saturating_sub(1);
        if self.reserved == 0 {
            self.rewind(now);
        }
        None
    }

    /// A task gives back, at `now`, the slot it reserved and will not use
    /// (it was dropped, stopped or errored first): the slot goes to the
    /// next task, and so does a unit of the stated quota it spent.
    ///
    /// Exactly when it is the last slot handed out, or when no other
    /// reservation is left (then the queue is rewound to `now`). A slot
    /// given back between two that are still held is not handed out again:
    /// the tasks behind it keep the times they were told.
    pub fn release(&mut self, now: Duration, reservation: Reservation) {
        self.reserved = self.reserved.saturating_sub(1);
        if reservation.quota && self.quota_until > now {
            self.quota_left = self.quota_left.saturating_add(1);
        }
        if self.reserved == 0 {
            self.rewind(now);
            return;
        }
        if reservation.slot <= now {
            // Its time came: whether or not anything left then, the pace
            // counted it.
            return;
        }
        if self.batch > 0 {
            let taken = self.batch.saturating_sub(self.batch_left);
            if taken > 0
                && reservation.slot >= self.batch_start
                && reservation.slot == self.next_slot
            {
                // The tail of the current batch.
                if taken >= 2 {
                    self.batch_left += 1;
                    self.next_slot = self.batch_start + self.slot_offset(taken - 2);
                } else {
                    // Its first slot: the next batch starts there again.
                    self.batch_left = 0;
                    self.next_slot = reservation.slot.saturating_sub(self.batch_every);
                }
            }
        } else if self.rate > 0.0 {
            let step = interval(self.rate);
            if (reservation.slot + step).abs_diff(self.next_slot) < step / 2 {
                self.next_slot = reservation.slot;
            }
        }
    }

    /// No reservation is left at `now`: slots handed out after `now` are
    /// all free again, and those up to `now` were used. The queue goes on
    /// from the last used slot (smooth pace: no later than one interval
    /// from now; batches: the current batch keeps its used slots, or, when
    /// none of it was used, the next batch leaves a period from now).
    fn rewind(&mut self, now: Duration) {
        if self.next_slot <= now || self.rate <= 0.0 {
            return;
        }
        if self.batch == 0 {
            self.next_slot = self.next_slot.min(now + interval(self.rate));
            return;
        }
        let taken = self.batch.saturating_sub(self.batch_left);
        let used = (0..taken)
            .take_while(|&i| self.batch_start + self.slot_offset(i) <= now)
            .count();
        let used = u32::try_from(used).unwrap_or(taken);
        if self.batch_start <= now && used > 0 {
            self.batch_left = self.batch - used;
            self.next_slot = self.batch_start + self.slot_offset(used - 1);
        } else {
            self.batch_left = 0;
            self.next_slot = now;
        }
    }

    /// A slot in the current batch, or, once it is spent, in the next: no
    /// earlier than [`batch_every`](Self::batch_every) after the last slot
    /// handed out. So no span of `batch_every` ever holds more than one
    /// batch's requests, whatever the server's shape: a fixed window sees
    /// one batch per window, a sliding log never more than it admitted in
    /// one period, and a bucket refills a batch between two.
    fn take_batch_slot(
        &mut self,
        now: Duration,
        latest: Duration,
        go: Admission,
        quota: bool,
    ) -> Admission {
        let new_batch = self.batch_left == 0;
        let (start, taken) = if new_batch {
            (now.max(self.next_slot.saturating_add(self.batch_every)), 0)
        } else {
            (self.batch_start, self.batch.saturating_sub(self.batch_left))
        };
        let offset = self.slot_offset(taken);
        let slot = now.max(start + offset);
        let wait = slot - now;
        if wait > latest {
            return self.refuse(now, wait);
        }
        if new_batch && wait > Duration::ZERO && self.states_quota() {
            // A server that states its quota re-anchors every batch at its
            // stated reset, which the answers of the batch before tell: a
            // spent quota closes the gate until then. Slots booked now would
            // fall before that reset and be lost, so the task asks again
            // when the next batch could leave, holding nothing.
            return Admission::QueueAhead(wait);
        }
        if new_batch {
            self.batch_left = self.batch;
            self.batch_start = start;
        }
        self.batch_left -= 1;
        self.next_slot = self.next_slot.max(slot);
        if wait.is_zero() {
            go
        } else {
            self.reserve(wait, slot, quota)
        }
    }

    /// Whether the origin's answers stated its quota and reset (rate-limit
    /// headers) at some time: a stated reset re-anchors its batches.
    fn states_quota(&self) -> bool {
        self.quota_until > Duration::ZERO
    }

    /// When the `i`-th slot of a batch leaves, from the batch's start:
    /// evenly over the spread.
    fn slot_offset(&self, i: u32) -> Duration {
        self.batch_spread * i / self.batch.max(1)
    }

    /// A refusal: the origin could take the task in `wait`, but never
    /// before the server's own time.
    fn refuse(&self, now: Duration, wait: Duration) -> Admission {
        Admission::Refused {
            free_in: wait.max(self.server_until.saturating_sub(now)),
        }
    }

    /// The gate reopens: learn what the origin admitted in the period that
    /// just ended, and start a new one with a probe.
    ///
    /// The first time, the period is typically a burst answered by "come
    /// back in W": the server admitted that many per W (or, if sending went
    /// on for longer than W before the first pushback, proportionally
    /// fewer). From then on the queue leaves in batches of that many, one
    /// batch per W plus a margin ([`take_batch_slot`](Self::take_batch_slot)),
    /// the first right after the probe: a fixed-window server is used to
    /// the full from the start of each window, where a smooth pace would
    /// spread each window's requests over it and finish a window late.
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
    /// Later, while pacing, a pushback says the batch was too large: it is
    /// cut by a tenth (at least one, at most half).
    fn reopen(&mut self) -> bool {
        let gate = self.gate_until;
        let span = self.gate_span;
        // Batches booked beyond the gate (the gate closed on a spent quota
        // while they waited) stand: the queue goes on as booked.
        let mut restart = true;
        if self.learned && self.batch > 0 {
            if self.rejected {
                let b = f64::from(self.batch);
                self.set_batch(
                    to_count(b * CUT_FACTOR)
                        .min(self.batch - 1)
                        .max(to_count((b * CUT_FLOOR).ceil()))
                        .max(1),
                );
            }
            restart = self.next_slot <= gate;
        } else {
            let sending = self
                .first_pushback
                .unwrap_or(gate)
                .saturating_sub(self.epoch_start);
            let period = sending.max(span).as_secs_f64();
            let share = if period > 0.0 {
                span.as_secs_f64() / period
            } else {
                0.0
            };
            let mut batch = to_count(f64::from(self.epoch_successes) * share);
            // A server that states its quota and reset resets it then: its
            // batch leaves at once. Otherwise the batch is spread over the
            // time from the period's start to its last success read: an
            // upper bound of the span the server admitted it over, which a
            // bucket spent refilling what it admitted beyond its capacity
            // (successes over a long period came at a pace the server kept
            // up with).
            let mut spread = if sending <= span && !self.stated {
                let admitting = self.last_success.saturating_sub(self.epoch_start);
                // The batch's last slot leaves one slot short of the spread
                // (slot i at spread * i / batch): one interval more.
                admitting + (span / batch.max(1)).min(span / 10)
            } else {
                Duration::ZERO
            };
            if spread > span / 2 {
                // Too long to spread a batch over within a window: the
                // batch is what a bucket refilling over the span held.
                let stretched = span.as_secs_f64() / (span + spread).as_secs_f64();
                batch = to_count(f64::from(batch) * stretched).max(batch.min(1));
                spread = span / 2;
            }
            if batch >= 1 {
                self.batch_spread = spread;
                self.batch_every = batch_every(span);
                self.set_batch(batch);
                self.learned = true;
            } else {
                self.rate = self.rate.max(MIN_RATE);
            }
        }
        let probe_counted = restart && self.batch > 0;
        if restart {
            self.next_slot = gate;
        }
        if probe_counted {
            // The probe leaves at the gate time (one slot of the batch);
            // the rest after its head start.
            let gap = (self.batch_every / self.batch).clamp(PROBE_GAP_MIN, PROBE_GAP_MAX);
            self.batch_left = self.batch - 1;
            // A bucket has refilled for a whole span since the last success
            // of the period (its last admission came no later). A server
            // that stated its reset has reset by the gate.
            self.batch_start = if self.stated {
                gate + gap
            } else {
                (gate + gap).max(self.last_success + span)
            };
            if self.batch_left > 0 {
                self.next_slot = self.batch_start;
            }
        }
        self.relearn_at_reopen = false;
        self.first_pushback = None;
        self.rejected = false;
        self.stated = false;
        self.last_success = gate;
        self.epoch_start = gate;
        self.epoch_successes = 0;
        self.raised_at = gate;
        probe_counted
    }

    /// A 2xx (or any non-pushback) answer arrived at `now`.
    pub fn on_success(&mut self, now: Duration) {
        self.last_seen = now;
        if self.rate <= 0.0
            && !self.relearn_at_reopen
            && now.saturating_sub(self.epoch_start) > EPOCH_MAX
        {
            self.epoch_start = now;
            self.epoch_successes = 0;
        }
        self.last_success = self.last_success.max(now);
        self.epoch_successes = self.epoch_successes.saturating_add(1);
        if self.rate > 0.0 && !self.relearn_at_reopen {
            if !self.learned {
                self.rate += SLOW_START_STEP;
            } else if now.saturating_sub(self.raised_at) >= RAISE_EVERY {
                self.raise();
                self.raised_at = now;
            }
        }
    }

    /// Sets the batch size, with the pace it makes over `batch_every`; a
    /// current batch keeps no more slots left than the new size.
    fn set_batch(&mut self, batch: u32) {
        self.batch = batch;
        self.batch_left = self.batch_left.min(batch);
        self.rate = f64::from(batch) / self.batch_every.as_secs_f64();
    }

    /// A learned pace that ran [`RAISE_EVERY`] without a pushback rises.
    fn raise(&mut self) {
        if self.batch > 0 {
            self.set_batch(
                self.batch
                    .saturating_add(to_count(f64::from(self.batch) * (RAISE_FACTOR - 1.0)).max(1)),
            );
        } else {
            self.rate *= RAISE_FACTOR;
        }
    }

    /// Applies what the origin answered at `now`. When this answer closed
    /// a gate that was open, how long from `now` it stays closed.
    pub fn observe(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        outcome: Outcome,
    ) -> Option<Duration> {
        self.observe_late(cfg, now, Duration::ZERO, outcome)
    }

    /// [`observe`](Self::observe) for an answer received `late` before
    /// `now`: its times (`retry_in`, `reset_in`) count from then, not from
    /// when it is applied. A shared store applies an answer after a round
    /// trip or more; a gate set from the time of application would close
    /// later than the server said, and an answer applied after its own
    /// time had passed would close a reopened gate again for a whole
    /// period.
    pub(crate) fn observe_late(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        late: Duration,
        outcome: Outcome,
    ) -> Option<Duration> {
        let was_open = self.gate_in(now).is_none();
        let answered = now.saturating_sub(late);
        match outcome {
            Outcome::Admitted => self.on_success(now),
            Outcome::Pushback { retry_in } => {
                // A time too large to add is an enormous time: the gate
                // closes for its cap, it is not a pushback without a time.
                self.reject(
                    cfg,
                    now,
                    answered,
                    retry_in.map(|d| answered.saturating_add(d)),
                );
            }
            Outcome::Exhausted { reset_in } => {
                self.on_success(now);
                self.stated = true;
                let mut reset = Some(answered.saturating_add(reset_in));
                // Servers round their reset up to whole seconds: of two
                // answers stating the same window's reset, the earlier
                // bounds it more closely. A spent quota tells no task to
                // wait (it is not a pushback), so the earlier one holds.
                if let Some(at) = reset
                    && self.quota_until > now
                    && at.abs_diff(self.quota_until) < SAME_WINDOW
                {
                    reset = Some(at.min(self.quota_until));
                }
                self.hold(cfg, now, answered, reset);
                if cfg.gate
                    && let Some(at) = reset
                {
                    // The quota is spent until then. Known here even where
                    // the answers that stated it were not (a shared store
                    // keeps only the spent one): batches are then not
                    // booked ahead of the reset, where they would be lost.
                    // (An answer of an earlier window leaves a later one's
                    // quota alone.)
                    let at = at.min(answered.saturating_add(cfg.max_gate));
                    if at >= self.quota_until || at.abs_diff(self.quota_until) < SAME_WINDOW {
                        self.quota_until = self.quota_until.max(at);
                        self.quota_left = 0;
                        self.quota_spent(cfg, answered);
                    }
                }
            }
            Outcome::Quota {
                remaining,
                reset_in,
            } => {
                self.on_success(now);
                self.on_quota(cfg, now, remaining, reset_in);
            }
        }
        if was_open { self.gate_in(now) } else { None }
    }

    /// A success at `now` said `remaining` requests are admitted until
    /// `reset_in` from now. Within the same window (a reset within half a
    /// second of the one known: servers round their `t` to whole seconds)
    /// the smaller count wins, since admissions already spent part of it
    /// that the server has not counted yet; a later window starts afresh.
    ///
    /// A quota that this leaves spent holds the origin as
    /// [`admit`](Self::admit) spending its last unit does.
    fn on_quota(&mut self, cfg: PacingConfig, now: Duration, remaining: u64, reset_in: Duration) {
        self.stated = true;
        let until = now.saturating_add(reset_in);
        let left = self.quota_left;
        let same_window = self.quota_until > now && until.abs_diff(self.quota_until) < SAME_WINDOW;
        if same_window {
            self.quota_left = self.quota_left.min(remaining);
        } else if until > self.quota_until {
            self.quota_left = remaining;
            self.quota_until = until;
        }
        if self.quota_left == 0 && (left > 0 || !same_window) {
            self.quota_spent(cfg, now);
        }
    }

    /// A pushback arrived at `now`; `retry_at` is the server's time when it
    /// gave a valid one. Closes the gate until then, at most
    /// [`max_gate`](PacingConfig::max_gate) (keeping a later time already
    /// set), and cuts the pace.
    pub fn on_pushback(&mut self, cfg: PacingConfig, now: Duration, retry_at: Option<Duration>) {
        self.reject(cfg, now, now, retry_at);
    }

    /// [`on_pushback`](Self::on_pushback) for a pushback the origin answered
    /// at `answered`, applied at `now` (see [`hold`](Self::hold)).
    fn reject(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
    ) {
        if cfg.gate {
            self.rejected = true;
        }
        self.hold(cfg, now, answered, retry_at);
    }

    /// Closes the gate until `retry_at` (see [`on_pushback`](Self::on_pushback)),
    /// for a rejection or a spent quota the origin answered at `answered`
    /// (at or before `now`, when it is applied). The server's time counts
    /// from the answer: one applied after that time has passed closes
    /// nothing, but still ends the period (the origin rejected in it).
    fn hold(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
    ) {
        self.last_seen = now;
        if !cfg.gate {
            return;
        }
        match retry_at {
            Some(at) if at > answered => {
                self.server_until = self.server_until.max(at);
                let at = at.min(answered.saturating_add(cfg.max_gate));
                if at > self.gate_until {
                    self.gate_until = at;
                    self.gate_span = at - answered;
                }
                self.relearn_at_reopen = true;
                self.first_pushback.get_or_insert(answered);
            }
            Some(_) => {
                // A zero time (or a past date). Once is believable; an
                // origin that keeps answering zero is held for the header's
                // granularity, so the tasks it rejected queue at the gate
                // (spending no attempt) and leave at the pace it admitted.
                if let Some(last) = self.last_zero
                    && now.saturating_sub(last) < ZERO_HOLD
                {
                    self.last_zero = None;
                    let hold = ZERO_HOLD.min(cfg.max_gate);
                    self.hold(cfg, now, now, now.checked_add(hold));
                } else {
                    self.last_zero = Some(now);
                }
            }
            None => {
                // No usable server time: slow down without a gate, once
                // per period of the origin however many answers say so
                // (a burst's answers all tell of the same overload).
                if self
                    .last_cut
                    .is_some_and(|cut| now.saturating_sub(cut) < self.period())
                {
                    return;
                }
                if self.batch > 0 {
                    self.set_batch((self.batch / 2).max(1));
                    self.last_cut = Some(now);
                } else if self.rate > 0.0 {
                    self.rate = (self.rate * 0.5).max(MIN_RATE);
                    self.last_cut = Some(now);
                }
            }
        }
    }
}

impl OriginState {
    /// The origin's period: the spacing of its batches, or, for a smooth
    /// pace, a second (the granularity of servers' windows).
    fn period(&self) -> Duration {
        if self.batch > 0 {
            self.batch_every.max(Duration::from_secs(1))
        } else {
            Duration::from_secs(1)
        }
    }
}

/// The spacing of batches for a server period `span`: the span plus
/// [`BATCH_MARGIN`] or [`BATCH_MARGIN_SHARE`] of it, whichever is more.
fn batch_every(span: Duration) -> Duration {
    span + BATCH_MARGIN.max(span.mul_f64(BATCH_MARGIN_SHARE))
}

/// A non-negative count, rounded down (saturating).
fn to_count(x: f64) -> u32 {
    if x.is_finite() && x > 0.0 {
        // Saturating: `as` clamps to the target's range.
        x.floor() as u32
    } else {
        0
    }
}

fn interval(rate: f64) -> Duration {
    Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::from_secs(1))
}
