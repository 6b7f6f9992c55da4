//! A window of cost units spent by requests that declare no cost (an LLM
//! API's tokens, no [`Cost`](crate::Cost)): each spends the mean cost
//! learned, and the server's answers say what the window really holds.
//!
//! What is left is the server's lowest count stated in the window (the
//! latest arrival answered), less the mean for each request of the window
//! not yet answered ([`unanswered`](Tokens::unanswered)): those among them
//! the server already counted are counted twice, never too few. So a
//! window whose requests cost less than the mean is topped up once its
//! answers are back, rather than left short.
//!
//! The unknown costs of the requests not yet counted stray from as many
//! means: a request leaves only while what is left, less its cost, covers
//! that stray ([`headroom`](Tokens::headroom)); short of it, it asks again
//! once answers in flight may have told more, and with none in flight the
//! window is spent. A window so fills in rounds, each smaller than the
//! last, each sized to overshoot rarely.
//!
//! The mean is learned from how the stated remaining falls over a window's
//! answers, but only where that fall spans the answers counted: once the
//! window is over, or while none of its requests is out. Answers cross in
//! flight: part way through a burst, the fall between the highest and the
//! lowest count covers more arrivals than answers, and a mean read there
//! is too high (a window held back) or, a few answers in, one request's
//! cost (a window overrun by as many requests as are then out).

use std::time::Duration;

use super::tokens::{Statement, Tokens};
use super::tuning::TUNING;

impl Tokens {
    /// What a request spending the mean must leave of the window, at the
    /// least, for the stray of the costs not yet counted: its own and
    /// those of the `unanswered` requests of the window still out. The
    /// sum of `n` costs strays from `n` true means by σ·√n, and `n` times
    /// a mean learned from `m` costs strays by n·σ/√m more; σ is taken as
    /// [`cost_spread`](super::tuning::Tuning::cost_spread) of the mean.
    pub(super) fn headroom(&self, unanswered: u32) -> u64 {
        let n = f64::from(unanswered.saturating_add(1));
        let m = f64::from(self.samples.max(1));
        let spread = TUNING.cost_spread * self.mean as f64;
        // A u64 of a float: saturating (`as` clamps), rounded down.
        (spread * (n + n * n / m).sqrt()) as u64
    }

    /// What a request that declares no cost needs left of the window to
    /// leave alone (none unanswered): less, and a rejection is the cost
    /// quota's ([`explains_rejection`](Self::explains_rejection)).
    pub(super) fn needed_alone(&self) -> u64 {
        self.mean.saturating_add(self.headroom(0)).max(1)
    }

    /// How long a task that the headroom holds waits before it asks
    /// again, at `now`: as soon as the answers in flight may be back, as
    /// the first contact's polling does (soon in a fresh window, at most
    /// its cap later on).
    pub(super) fn answers_poll(&self, now: Duration) -> Duration {
        let (min, max) = TUNING.first_poll;
        now.saturating_sub(self.quota.opened).clamp(min, max)
    }

    /// The window's falls so far, as a mean and how many costs it rests
    /// on, when there are any.
    fn window_mean(&self) -> Option<(u64, u32)> {
        let falls = self.seen.saturating_sub(1);
        (falls > 0 && self.high > self.low)
            .then(|| ((self.high - self.low) / u64::from(falls), falls))
    }

    /// The window is over (renewed, or another one stated): its whole
    /// fall is a mean over as many answers, adopted unless it rests on
    /// fewer than half the costs of the one in force (a quiet window's two
    /// answers are no better a mean than a busy one's sixty).
    pub(super) fn learn_window(&mut self) {
        if let Some((mean, falls)) = self.window_mean()
            && falls.saturating_mul(2) >= self.samples
        {
            (self.mean, self.samples) = (mean, falls);
        }
    }

    /// The window renews: learned from, then counted afresh. An answer to
    /// a request sent before it opened is not of it (see
    /// [`answered`](Self::answered)): what was out of the last window is
    /// not out of this one, and a request never answered (timed out,
    /// dropped) holds no window past its own.
    pub(super) fn renewed(&mut self) {
        self.learn_window();
        self.seen = 0;
        self.unanswered = 0;
    }

    /// An answer (admitted or rejected) to a request sent at `sent` that
    /// declared no cost: it is no longer out, when it was of the current
    /// window. Whether it was one of the window's requests out.
    pub(super) fn answered(&mut self, sent: Duration, st: Statement) -> bool {
        let out = st.spent == 0 && sent >= self.quota.opened && self.unanswered > 0;
        if out {
            self.unanswered -= 1;
        }
        out
    }

    /// After an answer of the current window, to a request sent at `sent`
    /// that stated a reset at `until` (`out`: it was one of the window's
    /// requests out, see [`answered`](Self::answered)). With the window's
    /// requests all answered, its fall is a mean free of crossings,
    /// adopted when it rests on more costs than the one in force (a first
    /// window's, the first contact's alone before it). And where requests
    /// spent the mean in the window, what is left is the server's lowest
    /// count less the mean for each still out (and the declared costs in
    /// flight); elsewhere admissions counted declared costs exactly, and
    /// the smaller count binds as ever.
    pub(super) fn on_guessed(&mut self, sent: Duration, until: Duration, out: bool) {
        let current = sent >= self.quota.opened
            && self.seen > 0
            && until.abs_diff(self.quota.until) < TUNING.same_window;
        if !current {
            return;
        }
        if self.unanswered == 0
            && let Some((mean, falls)) = self.window_mean()
            && falls > self.samples
        {
            (self.mean, self.samples) = (mean, falls);
        }
        if !out && self.unanswered == 0 {
            return;
        }
        let out = self
            .mean
            .saturating_mul(u64::from(self.unanswered))
            .saturating_add(self.in_flight);
        self.quota.left = self.low.saturating_sub(out);
    }
}
