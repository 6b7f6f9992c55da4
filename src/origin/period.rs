//! The measuring period: what the origin admitted between one opening of
//! its gate and the next closing, read by the pace when the gate reopens.

use std::time::Duration;

use super::tuning::TUNING;

/// One measuring period of an origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Period {
    /// When it started (the last reopening, or the first contact).
    pub(super) start: Duration,
    /// Its 2xx (non-pushback) answers.
    pub(super) successes: u32,
    /// Its first pushback that closed the gate.
    pub(super) first_pushback: Option<Duration>,
    /// Whether it saw a rejection (not only a quota the server said was
    /// spent).
    pub(super) rejected: bool,
    /// Whether an answer stated the server's quota and its reset.
    pub(super) stated: bool,
    /// Whether the gate closed on a pushback with no time at all: the hold
    /// was ours, not the server's period.
    pub(super) silent: bool,
    /// Its last success read.
    pub(super) last_success: Duration,
    /// Whether a pushback with a time came while the stated quota had
    /// units left: another limit than the quota (GitHub's secondary one)
    /// rejected, after admitting what the period's successes count.
    pub(super) other_limit: bool,
    /// Its successes read before its first pushback: what a burst got
    /// through before a limit answered (later ones may have been admitted
    /// once that limit had room again).
    pub(super) before_pushback: u32,
}

impl Period {
    /// A period starting at `now`.
    pub(super) fn new(now: Duration) -> Self {
        Period {
            start: now,
            successes: 0,
            first_pushback: None,
            rejected: false,
            stated: false,
            silent: false,
            last_success: now,
            other_limit: false,
            before_pushback: 0,
        }
    }

    /// A success at `now`. Before the gate first closes (`measuring`), a
    /// period longer than [`epoch_max`](super::tuning::Tuning::epoch_max)
    /// starts afresh: what an origin admitted long ago says little now.
    pub(super) fn on_success(&mut self, now: Duration, measuring: bool) {
        if measuring && now.saturating_sub(self.start) > TUNING.epoch_max {
            self.start = now;
            self.successes = 0;
            self.before_pushback = 0;
        }
        if self.first_pushback.is_none() {
            self.before_pushback = self.before_pushback.saturating_add(1);
        }
        self.last_success = self.last_success.max(now);
        self.successes = self.successes.saturating_add(1);
    }

    /// The gate closed on an answer at `answered`.
    pub(super) fn closed(&mut self, answered: Duration) {
        self.first_pushback.get_or_insert(answered);
    }

    /// How long the origin had answered no success when its first
    /// pushback came: zero when the pushback came while its successes were
    /// still being read (a burst's answers), long after a quiet spell.
    pub(super) fn quiet_before_pushback(&self) -> Duration {
        self.first_pushback
            .map_or(Duration::ZERO, |p| p.saturating_sub(self.last_success))
    }

    /// How long it sent before its first pushback (or until `gate`).
    pub(super) fn sending(&self, gate: Duration) -> Duration {
        self.first_pushback
            .unwrap_or(gate)
            .saturating_sub(self.start)
    }
}
