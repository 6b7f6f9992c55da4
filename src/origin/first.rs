//! The first contact: while an origin's first answer is outstanding, the
//! other tasks wait for it (a little, never past their deadline), so that
//! a quota its answer states paces them, where a burst that left beside
//! it would meet a whole wave of `429`s.
//!
//! One wait per origin: when the first contact's answer is late, or never
//! comes (a transport error, a task dropped), the wait ends for everyone
//! at once and the origin counts as answered; nobody becomes a second
//! first contact with a wait of its own.

use std::time::Duration;

use super::PacingConfig;
use super::tuning::TUNING;

/// Whether the first contact is over, and when it left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct First {
    /// Whether the first contact is over: an answer of the origin was
    /// recorded, or none came within the one wait (the origin is then
    /// treated as answered: its burst goes).
    pub(super) answered: bool,
    /// When the task that is the first contact was admitted.
    pub(super) sent: Option<Duration>,
}

impl First {
    /// A task asks at `now` and accepts to wait `latest`: how long it
    /// waits for the first answer before it asks again, if it does. The
    /// first to ask is the first contact (it goes, and is remembered). The
    /// others ask again after as long as the contact has been out (within
    /// [`first_poll`](super::tuning::Tuning::first_poll)): soon on a fast
    /// origin, less often on a slow one. A task that cannot wait that long
    /// goes. Once the wait is over with no answer (late, or lost), every
    /// task goes.
    pub(super) fn wait(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        latest: Duration,
    ) -> Option<Duration> {
        if self.answered || cfg.first_contact.is_zero() || cfg.declared.is_some() {
            return None;
        }
        let Some(sent) = self.sent else {
            self.sent = Some(now);
            return None;
        };
        let over = sent.saturating_add(cfg.first_contact);
        if now >= over {
            self.answered = true;
            return None;
        }
        let (min, max) = TUNING.first_poll;
        let wait = now.saturating_sub(sent).clamp(min, max).min(over - now);
        (wait <= latest).then_some(wait)
    }
}
