//! The first contact: while an origin's first answer is outstanding, the
//! other tasks wait for it (a little, never past their deadline), so that
//! a quota its answer states paces them, where a burst that left beside
//! it would meet a whole wave of `429`s.
//!
//! One wait per origin: when the first contact's answer is late, or never
//! comes (a transport error, a task dropped), the wait ends for everyone
//! at once and the origin counts as answered; nobody becomes a second
//! first contact with a wait of its own.
//!
//! Then the first wave: the tasks that waited leave together when the
//! answer comes, and they are the first test of the limits no header
//! states (GitHub's secondary limit, a cap on requests in flight). Until
//! their answers are in, no other task leaves (a task whose request was
//! answered does not send its next one into the same second): a pushback
//! among them then holds the origin before anything follows. The wave is
//! counted, not named: every admission since the first contact left
//! against every answer heard since, through the shared state, so tasks
//! of other processes count too. It is bounded in time: a task dropped or
//! a transport error (an answer never heard) holds nothing longer than
//! `first_contact` after the wave left.

use std::time::Duration;

use super::admission::{Admission, Within};
use super::tuning::TUNING;
use super::{OriginState, PacingConfig};

/// Whether the first contact is over, when it left, and its wave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct First {
    /// Whether the first contact is over: an answer of the origin was
    /// recorded, or none came within the one wait (the origin is then
    /// treated as answered: its burst goes).
    pub(super) answered: bool,
    /// When the task that is the first contact was admitted.
    pub(super) sent: Option<Duration>,
    /// Whether a task was told to wait for the first answer: only then
    /// does a wave follow it.
    pub(super) waited: bool,
    /// When the first answer released the tasks that waited for it, while
    /// their wave is out.
    pub(super) wave: Option<Duration>,
    /// Tasks admitted since the first contact left (it included), while
    /// it or its wave is out.
    pub(super) out: u32,
    /// Answers heard since the first contact left (its own included),
    /// while it or its wave is out.
    pub(super) heard: u32,
}

impl First {
    /// A task asks at `now` and accepts to wait `latest`; `waited`: it
    /// waited for the first answer. How long it waits before it asks
    /// again, if it does.
    ///
    /// While the first answer is outstanding: the first to ask is the
    /// first contact (it goes, and is remembered). The others ask again
    /// after as long as the contact has been out (within
    /// [`first_poll`](super::tuning::Tuning::first_poll)): soon on a fast
    /// origin, less often on a slow one. A task that cannot wait that long
    /// goes. Once the wait is over with no answer (late, or lost), every
    /// task goes.
    ///
    /// While the first wave is out, the tasks that waited go (they are
    /// the wave); any other waits for the wave's answers, asking again as
    /// often, unless it cannot wait that long.
    pub(super) fn wait(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        latest: Duration,
        waited: bool,
    ) -> Option<Admission> {
        if cfg.first_contact.is_zero() || cfg.declared.is_some() {
            return None;
        }
        if !self.answered {
            let Some(sent) = self.sent else {
                self.sent = Some(now);
                return None;
            };
            let over = sent.saturating_add(cfg.first_contact);
            if now >= over {
                self.answered = true;
                return None;
            }
            let wait = poll(now.saturating_sub(sent)).min(over - now);
            self.waited |= wait <= latest;
            return (wait <= latest).then_some(Admission::FirstAnswer(wait));
        }
        let released = self.wave?;
        let over = released.saturating_add(cfg.first_contact);
        let joined = self.joined(released);
        let all_heard = self.heard >= self.out;
        if now >= over || (all_heard && now >= joined) {
            self.wave = None;
            return None;
        }
        if waited {
            return None;
        }
        let wait = if all_heard {
            joined - now
        } else {
            poll(now.saturating_sub(released))
        }
        .min(over - now);
        (wait <= latest).then_some(Admission::FirstWave(wait))
    }

    /// By when every task that waited for the first answer released at
    /// `released` has asked again: one that asked in another process was
    /// told to come back within as long as the contact had been out
    /// (within [`wave_join`](super::tuning::Tuning::wave_join)).
    fn joined(&self, released: Duration) -> Duration {
        let out = released.saturating_sub(self.sent.unwrap_or(released));
        let (min, max) = TUNING.wave_join;
        released.saturating_add(out.clamp(min, max))
    }

    /// Whether the first contact or its wave is out: admissions and
    /// answers are counted.
    fn counting(&self) -> bool {
        self.sent.is_some() && (!self.answered || self.wave.is_some())
    }

    /// A task was admitted (to send now, or at a slot).
    pub(super) fn left(&mut self) {
        if self.counting() {
            self.out = self.out.saturating_add(1);
        }
    }

    /// An answer was heard at `now`. The first releases the tasks that
    /// waited for it: the wave.
    pub(super) fn heard(&mut self, now: Duration) {
        if self.counting() {
            self.heard = self.heard.saturating_add(1);
        }
        if !self.answered {
            self.answered = true;
            if self.waited && self.sent.is_some() {
                self.wave = Some(now);
            }
        }
    }
}

impl OriginState {
    /// [`admit_cost`](Self::admit_cost) for a task that `waited` for the
    /// origin's first answer (told [`Admission::FirstAnswer`] by any of its
    /// limits, and not sent since): it is of the first wave, which leaves
    /// while the others wait for its answers (see the module docs).
    pub(crate) fn admit_task(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        within: Within,
        cost: crate::Cost,
        waited: bool,
    ) -> Admission {
        let admission = self.admission(cfg, now, within, cost, waited);
        if matches!(
            admission,
            Admission::Now | Admission::Reopened | Admission::SlotReserved(..)
        ) {
            self.first.left();
        }
        admission
    }
}

/// How soon a task waiting for an answer asks again, when the awaited
/// requests have been out this long.
fn poll(out: Duration) -> Duration {
    let (min, max) = TUNING.first_poll;
    out.clamp(min, max)
}
