//! The gate: an origin closed until the server's time.
//!
//! The never-early invariant lives here and only here: the gate closes
//! until the server's time (capped at the policy's `max_wait`, after which
//! one probe finds out), a later time is never shortened by an earlier one,
//! and nothing is told to come back before the latest time a server named.
//!
//! A pushback with no time at all (a bare `429` or `503`, as nginx's
//! `limit_req` and HAProxy's stick tables send) closes the gate too, for a
//! hold of our own: a second; while the probe after it is rejected as
//! well, a fifth of a second, growing by 60% each time up to two: a
//! server that says nothing sees one probe per hold, never a retry per
//! rejected task.
//!
//! Under a declared quota, such a pushback isolated among successes (most
//! of the origin's recent answers admitted: an object's lock, not the
//! rate) leaves the gate open: new slots only pause for a few of the
//! pace's intervals ([`Gate::pause`]), and nothing is cut.

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
    /// The hold of the last closing without a server time (zero: none yet).
    pub(super) silent: Duration,
    /// Probes rejected in a row with no time since that hold began.
    pub(super) silent_probes: u32,
    /// No new slot is handed out before this time (slots already handed
    /// out leave at theirs): the pause after a rejection isolated among
    /// successes (see [`pause`](Self::pause)).
    pub(super) paused_until: Duration,
}

/// What a pushback's time did to the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closing {
    /// The gate closed (or stayed closed) until the server's time; the
    /// close counts from this answer time.
    Closed(Duration),
    /// A zero time that is believed (the first within the granularity).
    Zero,
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
    /// naming `retry_at`: the gate closes until then, at most `max_gate`
    /// after the answer, keeping a later time already set. A time already
    /// past when applied closes nothing but still ends the period.
    pub(super) fn close(
        &mut self,
        max_gate: Duration,
        now: Duration,
        answered: Duration,
        retry_at: Duration,
    ) -> Closing {
        if retry_at > answered {
            self.server_until = self.server_until.max(retry_at);
            let at = retry_at.min(answered.saturating_add(max_gate));
            if at > self.until {
                self.until = at;
                self.span = at - answered;
            }
            self.reopen_pending = true;
            return Closing::Closed(answered);
        }
        // A zero time (or a past date). Once is believable; an origin that
        // keeps answering zero is held for the header's granularity, so the
        // tasks it rejected queue at the gate (spending no attempt) and
        // leave at the pace it admitted.
        let granularity = TUNING.zero_granularity;
        if let Some(last) = self.last_zero
            && now.saturating_sub(last) < granularity
        {
            self.last_zero = None;
            let hold = granularity.min(max_gate);
            self.close(max_gate, now, now, now.saturating_add(hold))
        } else {
            self.last_zero = Some(now);
            Closing::Zero
        }
    }

    /// A pushback the origin answered at `answered` with no time at all:
    /// the gate closes for a hold of our own, from the answer. While it is
    /// closed (the rest of the same burst's rejections, or a server's time)
    /// nothing changes. Otherwise the hold is `first` (the pace's: a second,
    /// or less behind a smooth pace), or, when the origin admitted nothing
    /// since the last such hold (`admitted_since` false: its probe was
    /// rejected too), [`silent_probe_hold`](super::tuning::Tuning::silent_probe_hold)
    /// after a whole second, else the last hold grown by 60%; at most
    /// [`silent_hold_max`](super::tuning::Tuning::silent_hold_max) and
    /// `max_gate`. A hold is no server time: nobody is told it as one.
    pub(super) fn close_silent(
        &mut self,
        max_gate: Duration,
        answered: Duration,
        first: Duration,
        admitted_since: bool,
    ) -> Closing {
        self.reopen_pending = true;
        if self.until > answered {
            return Closing::Closed(answered);
        }
        self.silent_probes = if self.silent.is_zero() || admitted_since {
            0
        } else {
            self.silent_probes.saturating_add(1)
        };
        let hold = match self.silent_probes {
            0 => first,
            // The probe after the hold was rejected too: the server's period
            // is longer, or it counts what it denies, or it is down. A
            // probe costs it one request: probe again soon, then less and
            // less often.
            n => TUNING
                .silent_probe_hold
                .mul_f64(
                    TUNING
                        .silent_hold_growth
                        .powi(i32::try_from(n - 1).unwrap_or(i32::MAX)),
                )
                .min(TUNING.silent_hold_max),
        }
        .min(max_gate);
        self.silent = hold;
        self.until = answered.saturating_add(hold);
        self.span = hold;
        Closing::Closed(answered)
    }

    /// A pushback answered at `answered` whose invalid `Retry-After` still
    /// reads as `least` (see [`Outcome::Pushback`](super::Outcome::Pushback)):
    /// the gate, closed by [`close`](Self::close) or
    /// [`close_silent`](Self::close_silent) for this answer, stays closed
    /// until at least `least` after it (at most `max_gate`), keeping a
    /// later time already set. Holding other requests longer is never
    /// early; `least` is no server time, so nobody refused is told it as
    /// one.
    pub(super) fn hold_at_least(
        &mut self,
        max_gate: Duration,
        answered: Duration,
        least: Duration,
    ) {
        let at = answered.saturating_add(least.min(max_gate));
        if at > self.until {
            self.until = at;
            self.span = at - answered;
            self.reopen_pending = true;
        }
    }

    /// A rejection isolated among successes, answered at `answered`: no
    /// new slot for `hold` (at most `max_gate`), so that the rejected
    /// request's retry does not meet at once what refused it (an object
    /// another request holds). The gate stays open: slots handed out
    /// leave at their times, and nothing is learned or cut.
    pub(super) fn pause(&mut self, max_gate: Duration, answered: Duration, hold: Duration) {
        let until = answered.saturating_add(hold.min(max_gate));
        self.paused_until = self.paused_until.max(until);
    }

    /// How long from `now` new slots are paused, if they are.
    pub(super) fn paused_for(&self, now: Duration) -> Option<Duration> {
        (self.paused_until > now).then(|| self.paused_until - now)
    }

    /// How long from `now` a refused task is told to wait: `wait`, never
    /// less than the server's own time.
    pub(super) fn refusal(&self, now: Duration, wait: Duration) -> Duration {
        wait.max(self.server_until.saturating_sub(now))
    }
}
