//! The quota: what the origin is known to admit before its reset, as its
//! rate-limit headers stated it, spent by admissions before the send.
//!
//! A spent quota holds the origin as its gate would: until the reset, but
//! never longer than the gate's cap (`max_wait`) at a time, after which one
//! probe finds out whether the reset came early.
//!
//! A server that also states the quota's size (`RateLimit-Policy`'s `q`,
//! a vendor's limit header) and its window (`w`, or the longest reset it
//! named) has it renewed at the reset, with no probe: the next window's
//! requests leave at its start, as many as it admits. An answer to a
//! request sent before the current window opened speaks of an earlier one
//! and changes nothing.
//!
//! The renewed window's reset is a guess (the last reset plus the window)
//! until an answer of that window states it: many limiters open a window at
//! its first request after the last one ended (express-rate-limit's memory
//! store, GitHub's primary limit), so the server's reset comes later than
//! the guess by at least the way there. The window's first statement
//! replaces the guess, later or earlier; only then do two statements of the
//! window bound it together (the earlier wins, when it can name the same
//! instant: not before the later one's instant counted from its send).

use std::time::Duration;

use super::tuning::TUNING;

/// The stated quota of one origin.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct StatedQuota {
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
    /// The quota's size per window, as stated (0: unknown).
    pub(super) limit: u64,
    /// Its window, as stated, or else the longest reset stated, counted
    /// from its request's send (zero: unknown). With
    /// [`limit`](Self::limit), the quota renews at `until`.
    pub(super) window: Duration,
    /// When the current window opened, as far as we know: its renewal, or
    /// the send of the request whose answer first stated it. An answer to
    /// a request sent before speaks of an earlier window.
    pub(super) opened: Duration,
    /// Whether [`until`](Self::until) is the renewal's guess, which no
    /// answer of the current window has stated yet: the first that does
    /// replaces it.
    pub(super) guessed: bool,
    /// Whether an answer stated the quota spent until
    /// [`until`](Self::until): a unit an admission spent before comes back
    /// to no one (the server's count holds none for it), or a request would
    /// leave before the server's reset.
    pub(super) stated_spent: bool,
}

/// The size of a stated quota: how many per window, and the window when
/// stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Size {
    pub(super) limit: u64,
    pub(super) window: Option<Duration>,
}

/// A reset an answer stated: where it names the server's instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StatedReset {
    /// Counted from the answer's receipt (perhaps capped): at or after the
    /// server's instant.
    pub(super) at: Duration,
    /// Counted from its request's send: the server decided no earlier, so
    /// its instant is no earlier than this less its rounding.
    pub(super) from_send: Duration,
    /// The time the answer stated, as the header gave it.
    pub(super) reset_in: Duration,
}

impl StatedReset {
    /// The earliest the server's instant can be, for the precision the
    /// reset was given in (whole seconds, or a finer unit: a server rounds
    /// up by less than its unit). A value in no round unit was counted
    /// from our clock (an absolute reset): taken as exact, which only
    /// keeps more resets apart.
    pub(super) fn earliest(&self) -> Duration {
        let unit = [1_000, 100, 10, 1]
            .into_iter()
            .map(Duration::from_millis)
            .find(|unit| self.reset_in.as_nanos().is_multiple_of(unit.as_nanos()))
            .unwrap_or(Duration::ZERO);
        self.from_send.saturating_sub(unit)
    }

    /// The earliest the server's instant can be for a server rounding to
    /// whole seconds, whatever unit the value seems to be in.
    pub(super) fn earliest_whole_seconds(&self) -> Duration {
        self.from_send.saturating_sub(Duration::from_secs(1))
    }
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
    /// Not spent, but what is left is too close to call before the
    /// answers in flight state it: ask again after this long.
    Answers(Duration),
}

impl StatedQuota {
    /// Whether the origin's answers stated a quota and reset at some time.
    pub(super) fn stated(&self) -> bool {
        self.until > Duration::ZERO
    }

    /// Whether the quota's size and window are known: it renews at each
    /// reset, and governs the origin's pace.
    pub(super) fn renews(&self) -> bool {
        self.limit > 0 && !self.window.is_zero() && self.stated()
    }

    /// At `now`, past the reset of a quota that renews: the next window
    /// opens with the whole quota. Right after the reset it keeps the
    /// server's phase (it opened at the reset); after a window or more of
    /// silence that phase is a guess, so it opens now, and closes a whole
    /// window later (later than the server's, never earlier).
    pub(super) fn renew(&mut self, now: Duration) {
        if !self.renews() || now < self.until {
            return;
        }
        if now - self.until < self.window {
            self.opened = self.until;
            self.until = self.until.saturating_add(self.window);
        } else {
            self.opened = now;
            self.until = now.saturating_add(self.window);
        }
        self.left = self.limit;
        self.announced = false;
        self.guessed = true;
        self.stated_spent = false;
    }

    /// Until when a spent quota holds the origin, if it does at `now`: its
    /// reset, or the probe time if that comes first.
    pub(super) fn held_until(&self, now: Duration) -> Option<Duration> {
        (self.left == 0 && self.until > now).then(|| self.until.min(self.probe_at))
    }

    /// A task asks at `now` and accepts to wait `latest`.
    pub(super) fn check(&mut self, now: Duration, latest: Duration, max_gate: Duration) -> Check {
        self.renew(now);
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

    /// An answer stated the quota's `size`, its reset `reset_in` after its
    /// request left (a window opened by that request's arrival is no
    /// longer): kept for renewals.
    pub(super) fn sized(&mut self, reset_in: Duration, size: Option<Size>) {
        if let Some(size) = size {
            self.limit = size.limit;
            self.window = size.window.unwrap_or_else(|| self.window.max(reset_in));
        }
    }

    /// A unit spent by a task that did not send comes back (within the
    /// window it was spent in; a later statement corrects the count), never
    /// beyond the quota's size when it is known: a unit spent in a window
    /// before a renewal is not the new window's to give. Nor to a quota an
    /// answer stated spent: the server counted nothing for it.
    pub(super) fn refund(&mut self, now: Duration) {
        if self.until > now && !self.stated_spent {
            self.left = self.left.saturating_add(1);
            if self.limit > 0 {
                self.left = self.left.min(self.limit);
            }
        }
    }

    /// Two resets of the same window (servers round theirs to seconds).
    /// A guessed reset is no statement to compare with.
    fn same_window(&self, now: Duration, at: Duration) -> bool {
        !self.guessed && self.until > now && at.abs_diff(self.until) < TUNING.same_window
    }

    /// A success at `now`, to a request sent at `sent`, said `remaining`
    /// requests are admitted until `until` (and, when it said so, that
    /// the quota is `size` per window). Within the same window the smaller
    /// count wins, since admissions already spent part of it that the
    /// server has not counted yet, and so does the earlier reset (servers
    /// round theirs up); a later window starts afresh. An answer to a
    /// request sent before the current window opened changes nothing.
    /// Whether this left it spent.
    pub(super) fn on_stated(
        &mut self,
        now: Duration,
        sent: Duration,
        remaining: u64,
        until: Duration,
        size: Option<Size>,
    ) -> bool {
        self.sized(until.saturating_sub(sent), size);
        if sent < self.opened {
            return false;
        }
        let left = self.left;
        if self.guessed {
            // The renewed window's first statement: the server's reset,
            // not ours. What admissions spent since the renewal still
            // counts.
            self.guessed = false;
            self.left = self.left.min(remaining);
            self.until = until;
            self.stated_spent = remaining == 0;
            return self.left == 0;
        }
        let same_window = self.same_window(now, until);
        if same_window {
            self.left = self.left.min(remaining);
            self.until = self.until.min(until);
            self.stated_spent |= remaining == 0;
        } else if until > self.until && !self.spent_until(now) {
            self.left = remaining;
            self.until = until;
            self.opened = sent;
            self.guessed = false;
            self.stated_spent = remaining == 0;
        }
        self.left == 0 && (left > 0 || !same_window)
    }

    /// Whether the server stated this window spent and its reset is still
    /// to come at `now`: an answer naming a later reset then cannot reopen
    /// it. Its request left before the spent answer was heard (nothing
    /// leaves a spent window), so its count is older news, however late it
    /// is applied (a shared store applies each answer after its own round
    /// trip; a bucket names the next unit once spent, and the time it is
    /// full while units remain).
    fn spent_until(&self, now: Duration) -> bool {
        self.stated_spent && self.left == 0 && self.until > now
    }

    /// Whether an answer to a request sent at `sent` that states `reset`
    /// speaks of an earlier window: its request left before the current
    /// window opened, and it states another reset than the current
    /// window's. Answers to requests that left at nearly the same time may
    /// be applied in another order than they left (a shared store applies
    /// each after its own round trip): one stating the current window's
    /// reset is of that window. Nor is an answer an earlier window's when
    /// the instant it names, counted from its request's send, comes after
    /// the renewal that opened the current window (a bucket modelled as a
    /// window: its spent answer names the next unit, after the renewal,
    /// however late it arrives): an earlier window ended by then.
    pub(super) fn earlier_window(&self, sent: Duration, reset: StatedReset) -> bool {
        let after_renewal = self.guessed && reset.earliest_whole_seconds() > self.opened;
        sent < self.opened
            && !after_renewal
            && (self.guessed || reset.at.abs_diff(self.until) >= TUNING.same_window)
    }

    /// Of two answers stating the same window's reset, the earlier bounds
    /// it more closely: `reset`, or the known reset when that is earlier.
    /// Two resets less than [`same_window`](TUNING) apart are different
    /// instants all the same when the known one comes before the earliest
    /// the new answer's instant can be (a bucket refilling every 125 ms
    /// names a new instant each unit, in milliseconds).
    pub(super) fn closest_reset(&self, now: Duration, reset: StatedReset) -> Duration {
        if self.same_window(now, reset.at) && self.until >= reset.earliest() {
            reset.at.min(self.until)
        } else {
            reset.at
        }
    }

    /// An answer to a request sent at `sent` said the quota is exhausted
    /// until `at` (already capped at the gate's cap): spent until then,
    /// unless it is an earlier window's answer. Whether it applied.
    ///
    /// A reset earlier than the one known, in an answer to a request sent
    /// since the window opened, is no earlier window's: a bucket states the
    /// time until it is full while units remain, and the time until the
    /// next unit once spent. It is the server's time for the next request.
    /// Answers to requests sent before this one are older news: a count
    /// left in them was spent since.
    pub(super) fn on_exhausted(&mut self, sent: Duration, reset: StatedReset) -> bool {
        let at = reset.at;
        if self.earlier_window(sent, reset) {
            return false;
        }
        if std::mem::take(&mut self.guessed) {
            // The renewed window's first statement replaces the guess.
            self.until = at;
        } else if at >= self.until || at.abs_diff(self.until) < TUNING.same_window {
            self.until = self.until.max(at);
        } else {
            self.until = at;
        }
        self.opened = self.opened.max(sent);
        self.left = 0;
        self.stated_spent = true;
        true
    }
}
