//! The quota: what the origin is known to admit before its reset, as its
//! rate-limit headers stated it, spent by admissions before the send.
//!
//! A spent quota holds the origin as its gate would: until the reset, but
//! never longer than the gate's cap (`max_wait`) at a time, after which one
//! probe finds out whether the reset came early.

use std::time::Duration;

use super::tuning::TUNING;

/// The stated quota of one origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Quota {
    /// Requests the server will still admit until `until`.
    pub(super) left: u64,
    /// When the stated window resets; zero when no quota was ever stated.
    pub(super) until: Duration,
    /// A spent quota holds the origin no longer than this (the gate's cap
    /// after it was spent); then one probe.
    pub(super) probe_at: Duration,
    /// Whether a task was told that the spent quota holds the origin (the
    /// observer hears of it once per hold).
    pub(super) announced: bool,
}

/// What the quota says of a task asking to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// No quota is known now: the task does not spend one.
    Free,
    /// The task spends a unit if it is admitted.
    Spends,
    /// Spent: the origin is held this long; `first` for the first task
    /// told so in this hold.
    Held { wait: Duration, first: bool },
    /// Spent, and held for longer than the task accepts.
    TooLate(Duration),
    /// Spent, but held as long as the gate would be: this task is the
    /// probe.
    Probe,
}

impl Quota {
    /// Whether the origin's answers stated a quota and reset at some time.
    pub(super) fn stated(&self) -> bool {
        self.until > Duration::ZERO
    }

    /// Until when a spent quota holds the origin, if it does at `now`: its
    /// reset, or the probe time if that comes first.
    pub(super) fn held_until(&self, now: Duration) -> Option<Duration> {
        (self.left == 0 && self.until > now).then(|| self.until.min(self.probe_at))
    }

    /// A task asks at `now` and accepts to wait `latest`.
    pub(super) fn check(&mut self, now: Duration, latest: Duration, max_gate: Duration) -> Check {
        if let Some(until) = self.held_until(now) {
            if now < until {
                let wait = until - now;
                if wait > latest {
                    return Check::TooLate(wait);
                }
                let first = !std::mem::replace(&mut self.announced, true);
                return Check::Held { wait, first };
            }
            // The next task waits another cap.
            self.probe_at = now.saturating_add(max_gate);
            self.announced = false;
            return Check::Probe;
        }
        if self.until > now {
            Check::Spends
        } else {
            Check::Free
        }
    }

    /// An admitted task spends a unit at `now`; whether that spent the
    /// quota.
    pub(super) fn spend(&mut self, now: Duration, max_gate: Duration) -> bool {
        self.left = self.left.saturating_sub(1);
        if self.left == 0 {
            self.spent(now, max_gate);
            true
        } else {
            false
        }
    }

    /// The quota was spent at `now`: held from then, at most `max_gate`.
    pub(super) fn spent(&mut self, now: Duration, max_gate: Duration) {
        self.probe_at = now.saturating_add(max_gate);
        self.announced = false;
    }

    /// A unit spent by a task that did not send comes back (within the
    /// window it was spent in; a later statement corrects the count).
    pub(super) fn refund(&mut self, now: Duration) {
        if self.until > now {
            self.left = self.left.saturating_add(1);
        }
    }

    /// Two resets of the same window (servers round theirs to seconds).
    fn same_window(&self, now: Duration, at: Duration) -> bool {
        self.until > now && at.abs_diff(self.until) < TUNING.same_window
    }

    /// A success at `now` said `remaining` requests are admitted until
    /// `until`. Within the same window the smaller count wins, since
    /// admissions already spent part of it that the server has not counted
    /// yet; a later window starts afresh. Whether this left it spent.
    pub(super) fn on_stated(&mut self, now: Duration, remaining: u64, until: Duration) -> bool {
        let left = self.left;
        let same_window = self.same_window(now, until);
        if same_window {
            self.left = self.left.min(remaining);
        } else if until > self.until {
            self.left = remaining;
            self.until = until;
        }
        self.left == 0 && (left > 0 || !same_window)
    }

    /// Of two answers stating the same window's reset, the earlier bounds
    /// it more closely: `reset`, or the known reset when that is earlier.
    pub(super) fn closest_reset(&self, now: Duration, reset: Duration) -> Duration {
        if self.same_window(now, reset) {
            reset.min(self.until)
        } else {
            reset
        }
    }

    /// An answer said the quota is exhausted until `at` (already capped at
    /// the gate's cap): spent until then, unless it is an earlier window's
    /// answer. Whether it applied.
    pub(super) fn on_exhausted(&mut self, at: Duration) -> bool {
        if at >= self.until || at.abs_diff(self.until) < TUNING.same_window {
            self.until = self.until.max(at);
            self.left = 0;
            true
        } else {
            false
        }
    }
}
