//! The cost quota: what the origin admits in units other than requests
//! (an LLM API's tokens), as its headers state it, spent by each admission
//! at the request's cost before the send and given back by a request that
//! is not sent. Reserve, then reconcile: an answer's stated remaining
//! corrects what admissions spent (the smaller wins within a window).
//!
//! A request's cost is its [`Cost`](crate::Cost) extension; without one,
//! the mean cost per request learned from how the stated remaining falls
//! between answers of one window (none learned yet: the request spends
//! nothing, and only the server's answers hold the origin), with headroom
//! for the stray of costs not known (`guessed.rs`).
//!
//! A stated limit that is a bucket refilled continuously (Anthropic's) is
//! kept in the same state and read as one (`bucket.rs`); an origin has a
//! second one for a bucket of output tokens apart.

use std::time::Duration;

use super::Within;
use super::stated::{Check, Size, StatedQuota};

/// The cost quota of one origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Tokens {
    /// Left until the reset, the reset, the size per window: as for
    /// requests.
    pub(super) quota: StatedQuota,
    /// The mean cost per request learned (0: none yet).
    pub(super) mean: u64,
    /// How many costs the mean was learned from (see `guessed.rs`).
    pub(super) samples: u32,
    /// Requests of the current window that spent the mean (none declared)
    /// and are not yet answered (see `guessed.rs`).
    pub(super) unanswered: u32,
    /// This window's statements: the highest and lowest remaining, and
    /// how many.
    pub(super) high: u64,
    pub(super) low: u64,
    pub(super) seen: u32,
    /// The window of a declared quota spending now, none stated (zero:
    /// none): each spend moves its end to a window after it.
    pub(super) declared: Duration,
    /// The stated limit is a bucket refilled continuously, its reset the
    /// time it is full (Anthropic's): `quota.left` is its level at `at`,
    /// `quota.until` when it is full again.
    pub(super) bucket: bool,
    /// The stated limit counts a message's input tokens only.
    pub(super) input_only: bool,
    /// A bucket's time to refill from empty, at most (zero: unknown): the
    /// shortest of the bounds its statements gave.
    pub(super) period: Duration,
    /// When `quota.left` was a bucket's level.
    pub(super) at: Duration,
    /// Declared costs spent and not yet answered (a bucket's statement
    /// does not count them yet).
    pub(super) in_flight: u64,
    /// Requests that spent the mean (none declared) and are not yet
    /// answered: the mean each, counted likewise.
    pub(super) in_flight_requests: u32,
    /// When the last statement was received, and its count (in `high`):
    /// a bucket's mean cost is learned from how the count fell between
    /// statements, its refill added back.
    pub(super) stated_at: Duration,
}

/// What one answer stated of a cost quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Statement {
    /// Units left in the current window.
    pub remaining: u64,
    /// How long from the answer until the window resets (for a bucket:
    /// until it is full).
    pub reset_in: Duration,
    /// The quota's size per window, when stated.
    pub limit: Option<u64>,
    /// The limit is a bucket refilled continuously, and `reset_in` is
    /// when it is full (Anthropic's).
    pub bucket: bool,
    /// How far `remaining` may be from the true count either way.
    pub slack: u64,
    /// The limit counts a message's input tokens only.
    pub input_only: bool,
    /// What the answered request declared of this limit (its
    /// [`Cost`](crate::Cost)'s part the limit counts; 0: none).
    pub spent: u64,
    /// What it stated of a bucket of output tokens apart (Anthropic's).
    pub output: Option<OutputStatement>,
}

/// What one answer stated of a bucket of output tokens (Anthropic's):
/// `remaining` left (within `slack`), full in `reset_in`, `limit` in all;
/// the answered request declared `spent` of it (its `max_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputStatement {
    /// Units left.
    pub remaining: u64,
    /// Until the bucket is full.
    pub reset_in: Duration,
    /// Its size.
    pub limit: u64,
    /// How far `remaining` may be from the true count either way.
    pub slack: u64,
    /// What the answered request declared of it.
    pub spent: u64,
}

impl From<OutputStatement> for Statement {
    fn from(o: OutputStatement) -> Self {
        Statement {
            remaining: o.remaining,
            reset_in: o.reset_in,
            limit: Some(o.limit),
            bucket: true,
            slack: o.slack,
            input_only: false,
            spent: o.spent,
            output: None,
        }
    }
}

impl Tokens {
    /// What a request declaring `cost` spends: the part the stated limit
    /// counts (a limit of input tokens, the input; else all of it), or
    /// the mean learned when it declared none.
    pub(super) fn cost(&self, cost: crate::Cost) -> u64 {
        let units = self.part(cost);
        if units > 0 { units } else { self.mean }
    }

    /// The part of `cost` the stated limit counts (0: none declared).
    pub(super) fn part(&self, cost: crate::Cost) -> u64 {
        if self.input_only {
            cost.input()
        } else {
            cost.units()
        }
    }

    /// A task asks at `now` to spend `cost` and accepts to wait `within`;
    /// `guessed`: the cost is the mean learned, none declared, and leaves
    /// only with headroom for the stray of the costs not yet counted (see
    /// `guessed.rs`): short of it, the task asks again once answers in
    /// flight may have told more, or with none in flight the window is
    /// spent. Any request goes when the window is whole (one costlier than
    /// it would never fit otherwise, one whose headroom exceeds it never
    /// leave). A stated quota spent holds the origin at most `max_gate` at
    /// a time, then one probe (a server's reset is its word); a declared
    /// one until its window closes, with no probe (it is the caller's own
    /// knowledge: a probe would spend again and push the window's end out,
    /// so it would never renew).
    pub(super) fn check(
        &mut self,
        now: Duration,
        within: Within,
        max_gate: Duration,
        cost: u64,
        guessed: bool,
    ) -> Check {
        if cost > 0 && self.refills() {
            return self.check_bucket(now, within, cost);
        }
        let q = &mut self.quota;
        let until = q.until;
        q.renew(now);
        if q.until != until {
            // A new window: its answers learn the mean afresh (the last
            // window's highest remaining is no part of this one's fall).
            self.renewed();
        }
        let room = guessed && self.declared.is_zero() && !self.bucket;
        let headroom = if room {
            self.headroom(self.unanswered)
        } else {
            0
        };
        let q = &mut self.quota;
        if cost == 0 || q.until <= now {
            return Check::Free;
        }
        if q.limit > 0 && q.left >= q.limit {
            // A whole window: no wait would make it fuller.
            return Check::Spends;
        }
        if q.left >= cost {
            if q.left - cost >= headroom {
                return Check::Spends;
            }
            let wait = self.answers_poll(now);
            if self.unanswered > 0 && wait <= within.server {
                return Check::Answers(wait);
            }
        }
        let q = &mut self.quota;
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
    /// whatever the server's window alignment. A bucket the server stated
    /// is never overridden: it is the server's own count, refilling.
    pub(super) fn declared(&mut self, now: Duration, quota: crate::Quota) {
        let q = &mut self.quota;
        if q.until > now || (q.renews() && self.declared.is_zero()) || self.bucket {
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

    /// An admitted task spends `cost`, its request leaving at `at`. One
    /// that declared none is counted in flight when it spent the mean, or
    /// spent nothing yet under a bucket or a declared quota (no mean is
    /// learned yet): the bucket's first statements do not count it.
    pub(super) fn spend(&mut self, at: Duration, cost: u64, declared: bool) {
        if declared {
            self.in_flight = self.in_flight.saturating_add(cost);
        } else if cost > 0 || self.bucket || !self.declared.is_zero() {
            self.in_flight_requests = self.in_flight_requests.saturating_add(1);
        }
        if !declared && cost > 0 && !self.bucket {
            self.unanswered = self.unanswered.saturating_add(1);
        }
        if self.refills() {
            self.settle(at);
            self.quota.left = self.quota.left.saturating_sub(cost);
            self.settle(self.at);
            return;
        }
        self.quota.left = self.quota.left.saturating_sub(cost);
        if cost > 0 && !self.declared.is_zero() {
            self.quota.until = self.quota.until.max(at.saturating_add(self.declared));
        }
    }

    /// `cost` spent by a task that did not send, its slot at `slot`,
    /// comes back (within the window it was spent in).
    pub(super) fn refund(&mut self, now: Duration, cost: u64, slot: Duration) {
        if self.in_flight >= cost {
            self.in_flight -= cost;
        } else {
            self.in_flight_requests = self.in_flight_requests.saturating_sub(1);
            if cost > 0 && slot >= self.quota.opened {
                self.unanswered = self.unanswered.saturating_sub(1);
            }
        }
        if self.refills() {
            self.settle(now);
            self.quota.left = self.quota.left.saturating_add(cost).min(self.quota.limit);
            self.settle(self.at);
            return;
        }
        let q = &mut self.quota;
        if q.until > now {
            q.left = q.left.saturating_add(cost);
            if q.limit > 0 {
                q.left = q.left.min(q.limit);
            }
        }
    }

    /// Whether a rejection at `now` is the cost quota's: its size is known,
    /// and what is left of its window (the rejection's own statement
    /// counted, see [`on_rejected`](Self::on_rejected)) is less than a
    /// request that declares no cost needs to leave alone: the mean and
    /// its stray (see `guessed.rs`; a rejected request may cost more
    /// than the mean, and its rejection still be the window's). The
    /// quota, which renews at its reset, then governs: the rejection
    /// teaches the pace nothing.
    pub(super) fn explains_rejection(&self, now: Duration) -> bool {
        if self.refills() {
            return self.level(now) < self.mean.max(1);
        }
        let q = &self.quota;
        q.renews() && q.until > now && q.left < self.needed_alone()
    }

    /// A rejection at `now`, of a request sent at `sent`, stated `st`:
    /// its count is the server's, and binds as any answer's, and its
    /// request is no longer out; but it spent nothing, so its count is no
    /// fall the mean is learned from. (A bucket's is left to its
    /// successes' statements.)
    pub(super) fn on_rejected(&mut self, now: Duration, sent: Duration, st: Statement) {
        if st.bucket || self.bucket {
            return;
        }
        self.heard(st);
        let _ = self.answered(sent, st);
        let until = now.saturating_add(st.reset_in);
        self.count(now, sent, st, until);
    }

    /// An answer stating `st` is in: its request is no longer in flight,
    /// and a declared window gives way to the server's statement.
    fn heard(&mut self, st: Statement) {
        self.declared = Duration::ZERO;
        if st.spent > 0 {
            self.in_flight = self.in_flight.saturating_sub(st.spent);
        } else {
            self.in_flight_requests = self.in_flight_requests.saturating_sub(1);
        }
        self.input_only = st.input_only;
    }

    /// The count `st` states, to a request sent at `sent`, of the window
    /// that resets at `until`: the smaller binds within a window, a later
    /// window's governs from its reset (see [`StatedQuota::on_stated`]).
    fn count(&mut self, now: Duration, sent: Duration, st: Statement, until: Duration) {
        let size = st.limit.filter(|&l| l > 0).map(|limit| Size {
            limit,
            window: None,
        });
        let _ = self.quota.on_stated(now, sent, st.remaining, until, size);
    }

    /// An answer at `now`, to a request sent at `sent`, stated `st`: within
    /// the current window the smaller count binds; from its reset on the
    /// server's statement governs (over a declaration).
    pub(super) fn on_stated(&mut self, now: Duration, sent: Duration, st: Statement) {
        self.heard(st);
        self.bucket = st.bucket;
        if let (true, Some(limit)) = (st.bucket, st.limit.filter(|&l| l > 0)) {
            self.on_bucket(now, st, limit);
            return;
        }
        let until = now.saturating_add(st.reset_in);
        let same = self.quota.until > now
            && until.abs_diff(self.quota.until) < super::tuning::TUNING.same_window;
        let out = self.answered(sent, st);
        if sent >= self.quota.opened {
            if same && self.seen > 0 {
                // The remaining fell by this much over this many answers
                // (a mean learned from it where that is sound: see
                // `guessed.rs`).
                self.high = self.high.max(st.remaining);
                self.low = self.low.min(st.remaining);
                self.seen = self.seen.saturating_add(1);
            } else {
                self.learn_window();
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
                    self.samples = u32::from(self.mean > 0);
                }
            }
        }
        self.count(now, sent, st, until);
        self.on_guessed(sent, until, out);
    }
}
