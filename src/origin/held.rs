//! What an admission to send at once spent (a unit of a stated quota,
//! cost units), held for its task until the task sends: a task that does
//! not send after all (it was dropped while the store's answer was on its
//! way, or it stopped) gives it back with [`OriginState::give_back`]. (A
//! slot the pace reserved is held as its [`Reservation`](super::Reservation).)

use std::time::Duration;

use super::{Admission, OriginState, PacingConfig, Within};

/// What an admission to send at once spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Spent {
    /// A unit of a stated quota.
    quota: bool,
    /// Cost units.
    cost: u64,
    /// Output tokens.
    output: u64,
    /// When the windows they were spent in opened (the stated quota's, the
    /// cost units'): given back in a later window, they would be spent
    /// twice there.
    quota_opened: Duration,
    cost_opened: Duration,
}

impl OriginState {
    /// [`admit_within`](Self::admit_within), and, for an admission to
    /// send at once, what it spent (`None`: nothing).
    pub(crate) fn admit_spending(
        &mut self,
        cfg: PacingConfig,
        now: Duration,
        within: Within,
        cost: crate::Cost,
        waited: bool,
    ) -> (Admission, Option<Spent>) {
        let before = *self;
        let admission = self.admit_task(cfg, now, within, cost, waited);
        let spent = match admission {
            Admission::Now | Admission::Reopened => self.spent_since(&before, cfg, now),
            _ => None,
        };
        (admission, spent)
    }

    /// What an admission at `now` spent, from the state `before` it: what
    /// `before` had left once the windows the admission renews were
    /// renewed, less what is left now.
    fn spent_since(&self, before: &OriginState, cfg: PacingConfig, now: Duration) -> Option<Spent> {
        let mut quota = before.quota;
        quota.renew(now);
        let mut tokens = before.tokens;
        if let Some(declared) = cfg.declared_units {
            tokens.declared(now, declared);
        }
        let spent = Spent {
            quota: self.quota.left < quota.left,
            cost: tokens.level(now).saturating_sub(self.tokens.level(now)),
            output: before
                .output
                .level(now)
                .saturating_sub(self.output.level(now)),
            quota_opened: self.quota.opened,
            cost_opened: self.tokens.quota.opened,
        };
        (spent.quota || spent.cost > 0 || spent.output > 0).then_some(spent)
    }

    /// A task that was admitted to send at once gives back, at `now`, what
    /// it spent and did not send (within the windows it was spent in).
    pub(crate) fn give_back(&mut self, now: Duration, spent: Spent) {
        if spent.quota && self.quota.opened == spent.quota_opened {
            self.quota.refund(now);
        }
        if self.tokens.quota.opened == spent.cost_opened {
            self.tokens.refund(now, spent.cost, spent.cost_opened);
        }
        self.output.refund(now, spent.output, Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quota;

    const LATEST: Duration = Duration::from_secs(10);

    fn declared_units() -> PacingConfig {
        PacingConfig {
            declared_units: Some(Quota::per_minute(100).units()),
            ..PacingConfig::DEFAULT
        }
    }

    #[test]
    fn a_send_at_once_holds_its_cost_and_gives_it_back() {
        let cfg = declared_units();
        let t0 = Duration::from_secs(5);
        let mut state = OriginState::new(t0);
        let (admission, spent) =
            state.admit_spending(cfg, t0, Within::both(LATEST), crate::Cost::new(60), false);
        assert_eq!(admission, Admission::Now);
        let held = spent.expect("spent");
        assert_eq!((held.quota, held.cost), (false, 60));
        // Spent and kept: the next 60 do not fit the minute.
        let mut kept = state;
        let (held, _) =
            kept.admit_spending(cfg, t0, Within::both(LATEST), crate::Cost::new(60), false);
        assert!(matches!(held, Admission::Refused { .. }), "kept: {held:?}");
        // Given back: they do.
        let t1 = t0 + Duration::from_millis(500);
        state.give_back(t1, spent.expect("spent"));
        assert_eq!(
            state
                .admit_spending(cfg, t1, Within::both(LATEST), crate::Cost::new(60), false)
                .0,
            Admission::Now
        );
    }

    #[test]
    fn what_was_spent_in_a_window_past_is_not_given_back_to_the_next() {
        let cfg = declared_units();
        let t0 = Duration::from_secs(5);
        let mut state = OriginState::new(t0);
        let (_, spent) =
            state.admit_spending(cfg, t0, Within::both(LATEST), crate::Cost::new(60), false);
        let spent = spent.expect("spent");
        // The next window: 60 more spent, then the first 60 come back late.
        let mut t1 = t0 + Duration::from_secs(60);
        while state
            .admit_spending(cfg, t1, Within::both(LATEST), crate::Cost::new(60), false)
            .0
            != Admission::Now
        {
            t1 += Duration::from_millis(100);
            assert!(t1 < t0 + Duration::from_secs(180), "no next window");
        }
        state.give_back(t1, spent);
        let (next, _) =
            state.admit_spending(cfg, t1, Within::both(LATEST), crate::Cost::new(60), false);
        assert!(
            !matches!(next, Admission::Now),
            "the window's 100 overspent: {next:?}"
        );
    }

    #[test]
    fn an_admission_that_spends_nothing_holds_nothing() {
        let t0 = Duration::from_secs(5);
        let mut state = OriginState::new(t0);
        let cfg = PacingConfig::DEFAULT;
        assert_eq!(
            state
                .admit_spending(cfg, t0, Within::both(LATEST), crate::Cost::new(60), false)
                .1,
            None
        );
        assert_eq!(
            state
                .admit_spending(cfg, t0, Within::both(LATEST), crate::Cost::new(0), false)
                .1,
            None
        );
    }
}
