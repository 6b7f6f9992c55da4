//! A stated bucket of cost units (Anthropic's token limits): refilled
//! continuously at its limit per minute, its reset the time it is full
//! again, never a window that opens all at once.
//!
//! Its state is the cost quota's ([`Tokens`]): the level `quota.left` at
//! `at`, the time to refill from empty at most (`period`, the shortest of
//! the bounds the statements gave), and `quota.until` when it is full.
//! A request waits for the share of the refill it lacks, at that slowest
//! rate; each statement sets the level from the server's count (its lower
//! bound, less what is unanswered). Nothing is ever read as more than the
//! server could hold: a count within its rounding, a reset measured from a
//! `Date` in whole seconds, a rate from the slowest bound.

use std::time::Duration;

use super::Within;
use super::stated::Check;
use super::tokens::{Statement, Tokens};

/// The longest a bucket is read to take to refill.
const LONGEST: Duration = Duration::from_secs(86_400);

impl Tokens {
    /// Whether a stated bucket governs, refilling at a known rate.
    pub(super) fn refills(&self) -> bool {
        self.bucket && !self.period.is_zero() && self.quota.limit > 0 && self.declared.is_zero()
    }

    /// What is left at `now`: a bucket's level, refilled since `at`; else
    /// the quota's count.
    pub(super) fn level(&self, now: Duration) -> u64 {
        let q = &self.quota;
        if !self.refills() {
            return q.left;
        }
        q.left
            .saturating_add(self.refilled_in(now.saturating_sub(self.at)))
            .min(q.limit)
    }

    /// What a bucket refills in `span`, at the slowest rate known
    /// (saturating).
    fn refilled_in(&self, span: Duration) -> u64 {
        let units = span.as_nanos().saturating_mul(u128::from(self.quota.limit))
            / self.period.as_nanos().max(1);
        u64::try_from(units).unwrap_or(u64::MAX)
    }

    /// How long a bucket takes to refill `units`, rounded up.
    pub(super) fn refill(&self, units: u64) -> Duration {
        let nanos = (self.period.as_nanos().saturating_mul(u128::from(units)))
            .div_ceil(u128::from(self.quota.limit.max(1)));
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// A bucket's level brought to `t` (never back in time); when it is
    /// full again follows.
    pub(super) fn settle(&mut self, t: Duration) {
        let t = t.max(self.at);
        self.quota.left = self.level(t);
        self.at = t;
        let missing = self.quota.limit.saturating_sub(self.quota.left);
        self.quota.until = t.saturating_add(self.refill(missing));
    }

    /// A bucket's check: spends when its level at `now` holds `cost` (or it
    /// is full, for a request costlier than it), else held until the
    /// refill brings it there, at the slowest rate its statements allow.
    pub(super) fn check_bucket(&mut self, now: Duration, within: Within, cost: u64) -> Check {
        let level = self.level(now);
        let q = &mut self.quota;
        if level >= cost || level >= q.limit {
            q.announced = false;
            return Check::Spends;
        }
        let wait = self.refill(cost.min(self.quota.limit) - level);
        if wait > within.server {
            return Check::TooLate(wait);
        }
        let first = !std::mem::replace(&mut self.quota.announced, true);
        Check::Held { wait, first }
    }

    /// A bucket's statement at `now`: `st.remaining` left (within
    /// `st.slack`), full in `st.reset_in`, `limit` in all.
    ///
    /// - Its refill: it fills the `limit - remaining` it lacks in
    ///   `reset_in`, so it refills from empty in at most
    ///   `reset_in × limit / (limit - remaining - slack)` (a `reset_in`
    ///   measured from a `Date` in whole seconds is only longer); the
    ///   shortest such bound is kept.
    /// - Its level: the count less its slack, less the declared costs
    ///   spent since that the server has not counted yet (the reservation
    ///   of `max_tokens` reconciled: the server counts what was used),
    ///   the mean for each request that declared none.
    /// - The mean cost per request: how far the count fell since the last
    ///   statement, its refill meanwhile added back, averaged.
    pub(super) fn on_bucket(&mut self, now: Duration, mut st: Statement, limit: u64) {
        // No bucket refills over more than a day (Anthropic's: a minute);
        // a longer time is hostile or garbage, read as a day.
        st.reset_in = st.reset_in.min(LONGEST);
        self.quota.limit = limit;
        let high = st.remaining.saturating_add(st.slack);
        if limit > high {
            let factor = limit as f64 / (limit - high) as f64;
            // A reset too long for a `Duration` bounds nothing.
            if let Ok(bound) = Duration::try_from_secs_f64(st.reset_in.as_secs_f64() * factor)
                && (self.period.is_zero() || bound < self.period)
            {
                self.period = bound.min(LONGEST);
            }
        }
        self.quota.window = self.period;
        if !self.period.is_zero() {
            if self.seen == 0 {
                if self.mean == 0 {
                    self.mean = limit.saturating_sub(st.remaining);
                }
            } else {
                let refilled = self.refilled_in(now.saturating_sub(self.stated_at));
                let expected = self.high.saturating_add(refilled).min(limit);
                let fall = expected.saturating_sub(st.remaining);
                let n = u64::from(self.seen.min(16));
                self.mean = self.mean.saturating_mul(n).saturating_add(fall) / (n + 1);
            }
            self.seen = self.seen.saturating_add(1);
        }
        (self.high, self.stated_at) = (st.remaining, now);
        let unanswered = self
            .in_flight
            .saturating_add(self.mean.saturating_mul(u64::from(self.in_flight_requests)));
        self.quota.left = st
            .remaining
            .min(limit)
            .saturating_sub(st.slack)
            .saturating_sub(unanswered);
        self.at = now;
        self.quota.until = now.saturating_add(st.reset_in);
        if self.refills() {
            self.settle(now);
        }
        self.quota.guessed = false;
        self.quota.stated_spent = false;
        self.quota.announced = false;
    }
}
