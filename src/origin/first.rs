//! The first contact: while an origin's first answer is outstanding, the
//! other tasks wait for it (a little, never past their deadline), so that
//! a quota its answer states paces them, where a burst that left beside
//! it would meet a whole wave of `429`s.

use std::time::Duration;

use super::PacingConfig;
use super::tuning::TUNING;

/// Whether an origin answered yet, and when its first contact left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct First {
    /// Whether any answer of the origin was recorded.
    pub(super) answered: bool,
    /// When the task that is the first contact was admitted.
    pub(super) sent: Option<Duration>,
}

impl First {
    /// A task asks at `now` and accepts to wait `latest`: how long it
    /// waits for the first answer before it asks again, if it does. The
    /// first to ask is the first contact (it goes, and is remembered); so
    /// is the first to ask after the wait is over (the contact's answer is
    /// late, or it was lost). The others ask again after as long as the
    /// contact has been out (within [`first_poll`](super::tuning::Tuning::first_poll)):
    /// soon on a fast origin, less often on a slow one. A task that cannot
    /// wait that long goes.
    pub(super) fn wait(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        latest: Duration,
    ) -> Option<Duration> {
        if self.answered || cfg.first_contact.is_zero() || cfg.declared.is_some() {
            return None;
        }
        match self.sent {
            Some(sent) if now < sent.saturating_add(cfg.first_contact) => {
                let left = sent.saturating_add(cfg.first_contact) - now;
                let (min, max) = TUNING.first_poll;
                let wait = now.saturating_sub(sent).clamp(min, max).min(left);
                (wait <= latest).then_some(wait)
            }
            _ => {
                self.sent = Some(now);
                None
            }
        }
    }
}
