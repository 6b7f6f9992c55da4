//! Successes and budget deposits counted in the process and written at
//! most every `FLUSH_EVERY`, or with the next update of the same state: a
//! burst costs a few round trips, not one per request.

use std::time::Duration;

use tokio::time::Instant;

use super::queue::IfAbandoned;
use super::{Coalesced, FLUSH_EVERY, RETRY_FLUSH};
use crate::budget::{BudgetState, RetryBudget};
use crate::origin::PacingConfig;
use crate::store::{Now, Store, StoreError};
use crate::util::lock;

impl<S: Store + Clone> Coalesced<S> {
    /// Takes this process's unwritten 2xx count for `origin`, when the
    /// last of them was counted, and the pacing they were counted under;
    /// `force` takes it however recent the last write.
    pub(super) fn take_successes(
        &self,
        origin: &str,
        force: bool,
    ) -> (u32, Instant, Option<PacingConfig>) {
        let now = Instant::now();
        let mut successes = lock(&self.shared.successes);
        let Some(counted) = successes.get_mut(origin) else {
            return (0, now, None);
        };
        if !force && counted.written.elapsed() < FLUSH_EVERY {
            return (0, now, None);
        }
        counted.written = now;
        (std::mem::take(&mut counted.n), counted.last, counted.pacing)
    }

    /// Counts one 2xx answer from `origin` under `pacing` (its declared
    /// quota still bounds the pace they raise when they are written), and
    /// schedules a write of the count `FLUSH_EVERY` later unless one is
    /// scheduled.
    pub(super) fn count_success(&self, origin: &str, pacing: PacingConfig) {
        let schedule = {
            let mut successes = lock(&self.shared.successes);
            if successes.len() > 1024 {
                successes.retain(|_, counted| counted.n > 0);
            }
            let now = Instant::now();
            let counted = successes
                .entry(origin.to_owned())
                .or_insert_with(|| Unwritten::new(now));
            counted.n = counted.n.saturating_add(1);
            counted.last = now;
            counted.pacing = Some(pacing);
            counted.schedule()
        };
        if schedule {
            self.schedule_flush(Flush::Successes(origin.to_owned()), FLUSH_EVERY);
        }
    }

    /// Counts one budget deposit, and schedules a write of the count
    /// `FLUSH_EVERY` later unless one is scheduled.
    pub(super) fn count_deposit(&self, budget: &RetryBudget) {
        let schedule = {
            let mut deposits = lock(&self.shared.deposits);
            deposits.budget = Some(*budget);
            deposits.counted.n = deposits.counted.n.saturating_add(1);
            deposits.counted.schedule()
        };
        if schedule {
            self.schedule_flush(Flush::Deposits, FLUSH_EVERY);
        }
    }

    /// Writes `what` after `delay` (its `scheduled` flag was set). The flag
    /// is cleared just before the write, so that a count after that
    /// schedules another; a failed write puts its counts back and schedules
    /// it again. Without a runtime the flag is cleared: the counts wait for
    /// the next update of the same state.
    fn schedule_flush(&self, what: Flush, delay: Duration) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.unschedule(&what);
            return;
        };
        let store = self.clone();
        handle.spawn(async move {
            tokio::time::sleep(delay).await;
            store.unschedule(&what);
            let _ = match what {
                Flush::Successes(origin) => {
                    store
                        .queued(&origin, true, IfAbandoned::Apply, |_, _| ())
                        .await
                }
                Flush::Deposits => store.flush_deposits().await,
            };
        });
    }

    fn unschedule(&self, what: &Flush) {
        match what {
            Flush::Successes(origin) => {
                if let Some(counted) = lock(&self.shared.successes).get_mut(origin) {
                    counted.scheduled = false;
                }
            }
            Flush::Deposits => lock(&self.shared.deposits).counted.scheduled = false,
        }
    }

    /// Writes this process's unwritten budget deposits, if there are any.
    async fn flush_deposits(&self) -> Result<(), StoreError> {
        if lock(&self.shared.deposits).counted.n == 0 {
            return Ok(());
        }
        self.write_budget(|_, _| ()).await
    }

    /// Applies `f` to the budget's state, with this process's unwritten
    /// deposits folded in first (put back if the update fails).
    pub(super) async fn write_budget<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let (n, budget) = {
            let mut deposits = lock(&self.shared.deposits);
            deposits.counted.written = Instant::now();
            (std::mem::take(&mut deposits.counted.n), deposits.budget)
        };
        let mut unwritten = PutBack {
            store: self,
            what: Taken::Deposits,
            n,
            refused: false,
        };
        let result = self
            .inner
            .update_budget(move |state, now| {
                if let Some(budget) = &budget {
                    for _ in 0..n {
                        state.deposit(budget, now.time());
                    }
                }
                f(state, now)
            })
            .await;
        match &result {
            Ok(_) => unwritten.n = 0,
            Err(e) => unwritten.refused = e.is_refused(),
        }
        result
    }
}

/// Successes or deposits counted in the process and not written yet.
pub(super) struct Unwritten {
    n: u32,
    /// The last write of them.
    written: Instant,
    /// When the last of them was counted.
    last: Instant,
    /// The pacing the last of an origin's successes was counted under
    /// (`None` for deposits).
    pacing: Option<PacingConfig>,
    /// Whether a write of them is scheduled: one at a time, and always one
    /// while any is left (a count, or a failed write putting its counts
    /// back, schedules one unless this is set).
    scheduled: bool,
}

impl Unwritten {
    pub(super) fn new(now: Instant) -> Self {
        Unwritten {
            n: 0,
            written: now,
            last: now,
            pacing: None,
            scheduled: false,
        }
    }

    /// Marks a write scheduled; whether the caller is to schedule it.
    fn schedule(&mut self) -> bool {
        !std::mem::replace(&mut self.scheduled, true)
    }
}

/// Budget deposits not written yet, and the budget they were counted for.
pub(super) struct Deposits {
    counted: Unwritten,
    budget: Option<RetryBudget>,
}

impl Deposits {
    pub(super) fn new(now: Instant) -> Self {
        Deposits {
            counted: Unwritten::new(now),
            budget: None,
        }
    }
}

/// A scheduled write of unwritten counts.
enum Flush {
    /// An origin's successes.
    Successes(String),
    /// The budget's deposits.
    Deposits,
}

/// Counts a [`PutBack`] took for a write.
pub(super) enum Taken<'a> {
    /// An origin's successes, when the last of them was counted, and the
    /// pacing they were counted under.
    Successes(&'a str, Instant, Option<PacingConfig>),
    Deposits,
}

/// Counts taken for a write, given back unless the write succeeded (also
/// when the caller drops the future mid-write), with a write of them
/// scheduled [`RETRY_FLUSH`] later unless one is, or the store refuses
/// every operation.
pub(super) struct PutBack<'a, S: Store + Clone> {
    pub(super) store: &'a Coalesced<S>,
    pub(super) what: Taken<'a>,
    pub(super) n: u32,
    /// The write failed with an error that refuses every operation.
    pub(super) refused: bool,
}

impl<S: Store + Clone> Drop for PutBack<'_, S> {
    fn drop(&mut self) {
        if self.n == 0 {
            return;
        }
        let shared = &self.store.shared;
        let retry = match self.what {
            Taken::Successes(origin, at, pacing) => {
                let mut successes = lock(&shared.successes);
                let counted = successes
                    .entry(origin.to_owned())
                    .or_insert_with(|| Unwritten::new(at));
                counted.n = counted.n.saturating_add(self.n);
                counted.last = counted.last.max(at);
                counted.pacing = counted.pacing.or(pacing);
                (!self.refused && counted.schedule()).then(|| Flush::Successes(origin.to_owned()))
            }
            Taken::Deposits => {
                let mut deposits = lock(&shared.deposits);
                deposits.counted.n = deposits.counted.n.saturating_add(self.n);
                (!self.refused && deposits.counted.schedule()).then_some(Flush::Deposits)
            }
        };
        if let Some(what) = retry {
            self.store.schedule_flush(what, RETRY_FLUSH);
        }
    }
}
