//! The gate: an origin closed until the server's time.
//!
//! The never-early invariant lives here and only here: the gate closes
//! until the server's time (capped at the policy's `max_wait`, after which
//! one probe finds out), a later time is never shortened by an earlier one,
//! and nothing is told to come back before the latest time a server named.

use std::time::Duration;

use super::tuning::TUNING;

/// The gate of one origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Gate {
    /// Requests may not leave before this time.
    pub(super) until: Duration,
    /// The server's delay that set `until` (its `Retry-After`, capped):
    /// the origin's period when it reopens.
    pub(super) span: Duration,
    /// The latest time a server named, uncapped: nothing refused is told to
    /// come back earlier.
    pub(super) server_until: Duration,
    /// When the origin last answered a pushback with a zero time.
    pub(super) last_zero: Option<Duration>,
    /// Whether the gate closed in the current period, so that its reopening
    /// learns the pace again (and lets a probe through first).
    pub(super) reopen_pending: bool,
}

/// What a pushback's time did to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closing {
    /// The gate closed (or stayed closed) until the server's time; the
    /// close counts from this answer time.
    Closed(Duration),
    /// A zero time that is believed (the first within the granularity).
    Zero,
    /// No usable time at all.
    NoTime,
}

impl Gate {
    /// How long from `now` the gate stays closed, if it is closed.
    pub(super) fn closed_for(&self, now: Duration) -> Option<Duration> {
        (self.until > now).then(|| self.until - now)
    }

    /// Whether the gate closed in this period and its time has come.
    pub(super) fn reopens(&self, now: Duration) -> bool {
        self.reopen_pending && now >= self.until
    }

    /// A pushback the origin answered at `answered` (applied at `now`),
    /// naming `retry_at` when it gave a valid time: the gate closes until
    /// then, at most `max_gate` after the answer, keeping a later time
    /// already set. A time already past when applied closes nothing but
    /// still ends the period.
    pub(super) fn close(
        &mut self,
        max_gate: Duration,
        now: Duration,
        answered: Duration,
        retry_at: Option<Duration>,
    ) -> Closing {
        match retry_at {
            Some(at) if at > answered => {
                self.server_until = self.server_until.max(at);
                let at = at.min(answered.saturating_add(max_gate));
                if at > self.until {
                    self.until = at;
                    self.span = at - answered;
                }
                self.reopen_pending = true;
                Closing::Closed(answered)
            }
            Some(_) => {
                // A zero time (or a past date). Once is believable; an
                // origin that keeps answering zero is held for the header's
                // granularity, so the tasks it rejected queue at the gate
                // (spending no attempt) and leave at the pace it admitted.
                let granularity = TUNING.zero_granularity;
                if let Some(last) = self.last_zero
                    && now.saturating_sub(last) < granularity
                {
                    self.last_zero = None;
                    let hold = granularity.min(max_gate);
                    self.close(max_gate, now, now, Some(now.saturating_add(hold)))
                } else {
                    self.last_zero = Some(now);
                    Closing::Zero
                }
            }
            None => Closing::NoTime,
        }
    }

    /// How long from `now` a refused task is told to wait: `wait`, never
    /// less than the server's own time.
    pub(super) fn refusal(&self, now: Duration, wait: Duration) -> Duration {
        wait.max(self.server_until.saturating_sub(now))
    }
}
