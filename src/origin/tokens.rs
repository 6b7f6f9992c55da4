//! The cost quota: what the origin admits in units other than requests
//! (an LLM API's tokens), as its headers state it, spent by each admission
//! at the request's cost before the send and given back by a request that
//! is not sent. Reserve, then reconcile: an answer's stated remaining
//! corrects what admissions spent (the smaller wins within a window).
//!
//! A request's cost is its [`Cost`](crate::Cost) extension; without one,
//! the mean cost per request learned from how the stated remaining falls
//! between answers of one window (none learned yet: the request spends
//! nothing, and only the server's answers hold the origin).

use std::time::Duration;

use super::Within;
use super::quota::{Check, Quota, Size};

/// The cost quota of one origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Tokens {
    /// Left until the reset, the reset, the size per window: as for
    /// requests.
    pub(super) quota: Quota,
    /// The mean cost per request learned (0: none yet).
    pub(super) mean: u64,
    /// This window's statements: the highest and lowest remaining, and
    /// how many.
    pub(super) high: u64,
    pub(super) low: u64,
    pub(super) seen: u32,
    /// The window of a declared quota spending now, none stated (zero:
    /// none): each spend moves its end to a window after it.
    pub(super) declared: Duration,
}

/// What one answer stated of a cost quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statement {
    /// Units left in the current window.
    pub remaining: u64,
    /// How long from the answer until the window resets (for a bucket:
    /// until it is full).
    pub reset_in: Duration,
    /// The quota's size per window, when stated.
    pub limit: Option<u64>,
}

impl Tokens {
    /// What a request declaring `cost` (0: none) spends.
    pub(super) fn cost(&self, cost: u64) -> u64 {
        if cost > 0 { cost } else { self.mean }
    }

    /// A task asks at `now` to spend `cost` and accepts to wait `within`.
    /// A request costlier than a whole window goes when the window is
    /// whole (it would never fit otherwise). A stated quota spent holds the
    /// origin at most `max_gate` at a time, then one probe (a server's
    /// reset is its word); a declared one until its window closes, with no
    /// probe (it is the caller's own knowledge: a probe would spend again
    /// and push the window's end out, so it would never renew).
    pub(super) fn check(
        &mut self,
        now: Duration,
        within: Within,
        max_gate: Duration,
        cost: u64,
    ) -> Check {
        let q = &mut self.quota;
        let until = q.until;
        q.renew(now);
        if q.until != until {
            // A new window: its answers learn the mean afresh (the last
            // window's highest remaining is no part of this one's fall).
            self.seen = 0;
        }
        let q = &mut self.quota;
        if cost == 0 || q.until <= now {
            return Check::Free;
        }
        if q.left >= cost || (q.limit > 0 && q.left >= q.limit) {
            return Check::Spends;
        }
        if !self.declared.is_zero() {
            let wait = q.until.saturating_sub(now);
            if wait > within.declared {
                return Check::TooLate(wait);
            }
            let first = !std::mem::replace(&mut q.announced, true);
            return Check::Held { wait, first };
        }
        let latest = within.server;
        if !q.announced {
            q.probe_at = now.saturating_add(max_gate);
        }
        let until = q.until.min(q.probe_at);
        if until <= now {
            // Held as long as the gate would be: one request finds out.
            q.probe_at = now.saturating_add(max_gate);
            return Check::Probe;
        }
        let wait = until - now;
        if wait > latest {
            return Check::TooLate(wait);
        }
        let first = !std::mem::replace(&mut q.announced, true);
        Check::Held { wait, first }
    }

    /// Before the origin stated a quota in cost units (or after it was
    /// forgotten), a declared one governs at `now`: a window of its count
    /// opens, and closes a window (plus the batches' margin) after its last
    /// spend, so no span of the declared length spends more than its count,
    /// whatever the server's window alignment.
    pub(super) fn declared(&mut self, now: Duration, quota: crate::Quota) {
        let q = &mut self.quota;
        if q.until > now || (q.renews() && self.declared.is_zero()) {
            return;
        }
        let window = super::pace::batch_every(quota.per());
        q.left = u64::from(quota.count());
        q.limit = u64::from(quota.count());
        q.opened = now;
        q.until = now.saturating_add(window);
        q.announced = false;
        self.declared = window;
    }

    /// When the window of a declared quota spending now closes (zero: none
    /// is): a state forgotten sooner would open a whole window again.
    pub(super) fn declared_until(&self) -> Duration {
        if self.declared.is_zero() {
            Duration::ZERO
        } else {
            self.quota.until
        }
    }

    /// An admitted task spends `cost`, its request leaving at `at`.
    pub(super) fn spend(&mut self, at: Duration, cost: u64) {
        self.quota.left = self.quota.left.saturating_sub(cost);
        if cost > 0 && !self.declared.is_zero() {
            self.quota.until = self.quota.until.max(at.saturating_add(self.declared));
        }
    }

    /// `cost` spent by a task that did not send comes back (within the
    /// window it was spent in).
    pub(super) fn refund(&mut self, now: Duration, cost: u64) {
        let q = &mut self.quota;
        if q.until > now {
            q.left = q.left.saturating_add(cost);
            if q.limit > 0 {
                q.left = q.left.min(q.limit);
            }
        }
    }

    /// Whether a rejection at `now` is the cost quota's: its size is known,
    /// and what is left of its window is less than a request costs (on
    /// average). The quota, which renews at its reset, then governs: the
    /// rejection teaches the pace nothing.
    pub(super) fn explains_rejection(&self, now: Duration) -> bool {
        let q = &self.quota;
        q.renews() && q.until > now && q.left < self.mean.max(1)
    }

    /// An answer at `now`, to a request sent at `sent`, stated `st`: within
    /// the current window the smaller count binds; from its reset on the
    /// server's statement governs (over a declaration).
    pub(super) fn on_stated(&mut self, now: Duration, sent: Duration, st: Statement) {
        self.declared = Duration::ZERO;
        let until = now.saturating_add(st.reset_in);
        let same = self.quota.until > now
            && until.abs_diff(self.quota.until) < super::tuning::TUNING.same_window;
        if sent >= self.quota.opened {
            if same && self.seen > 0 {
                self.high = self.high.max(st.remaining);
                self.low = self.low.min(st.remaining);
                self.seen = self.seen.saturating_add(1);
                // The remaining fell by this much over this many answers.
                if self.high > self.low {
                    self.mean = (self.high - self.low) / u64::from(self.seen - 1);
                }
            } else {
                (self.high, self.low, self.seen) = (st.remaining, st.remaining, 1);
                if self.mean == 0
                    && let Some(limit) = st.limit
                {
                    // No mean yet: the first answer of a window is one
                    // request's cost below its whole size (more, if others
                    // spent from the window too: a mean too high holds a
                    // window's requests back, never sends too many). The
                    // first contact's answer so paces the first burst.
                    self.mean = limit.saturating_sub(st.remaining);
                }
            }
        }
        let size = st.limit.filter(|&l| l > 0).map(|limit| Size {
            limit,
            window: None,
        });
        let _ = self.quota.on_stated(now, sent, st.remaining, until, size);
    }
}
