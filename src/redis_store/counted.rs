//! Successes and budget deposits counted in the process and written at most
//! every `FLUSH_EVERY`, or with the next write to the same key: a burst
//! costs a few round trips, not one per request.

use std::time::Duration;

use tokio::time::Instant;

use super::batched::IfAbandoned;
use super::{BUDGET_IDLE, FLUSH_EVERY, RedisStore};
use crate::budget::{BudgetState, RetryBudget};
use crate::store::{StoreError, lock};

impl RedisStore {
    /// Takes this process's unwritten 2xx count for `origin_key`, and when
    /// the last of them was counted; `force` takes it however recent the
    /// last write.
    pub(super) fn take_successes(&self, origin_key: &str, force: bool) -> (u32, Instant) {
        let now = Instant::now();
        let mut successes = lock(&self.shared.successes);
        let Some(counted) = successes.get_mut(origin_key) else {
            return (0, now);
        };
        if !force && counted.written.elapsed() < FLUSH_EVERY {
            return (0, now);
        }
        counted.written = now;
        (std::mem::take(&mut counted.n), counted.last)
    }

    /// Counts one 2xx answer from `origin`, and schedules a write of the
    /// count `FLUSH_EVERY` later unless one is scheduled.
    pub(super) fn count_success(&self, origin: &str) {
        let key = self.origin_key(origin);
        let schedule = {
            let mut successes = lock(&self.shared.successes);
            if successes.len() > 1024 {
                successes.retain(|_, counted| counted.n > 0);
            }
            let now = Instant::now();
            let counted = successes
                .entry(key.clone())
                .or_insert_with(|| Unwritten::new(now));
            counted.n = counted.n.saturating_add(1);
            counted.last = now;
            counted.schedule()
        };
        if schedule {
            self.schedule_flush(Flush::Successes(key), FLUSH_EVERY);
        }
    }

    /// Counts one budget deposit, and schedules a write of the count
    /// `FLUSH_EVERY` later unless one is scheduled.
    pub(super) fn count_deposit(&self, budget: &RetryBudget) {
        let schedule = {
            let mut deposits = lock(&self.shared.deposits);
            deposits.n = deposits.n.saturating_add(1);
            deposits.schedule()
        };
        if schedule {
            self.schedule_flush(Flush::Deposits(*budget), FLUSH_EVERY);
        }
    }

    /// Writes `what` after `delay` (its `scheduled` flag was set). The flag
    /// is cleared just before the write, so that a count after that
    /// schedules another; a failed write puts its counts back and schedules
    /// it again. Without a runtime (or on a Redis Cluster node) the flag is
    /// cleared: the counts wait for the next write to the same key.
    fn schedule_flush(&self, what: Flush, delay: Duration) {
        let handle = match tokio::runtime::Handle::try_current() {
            // On a Redis Cluster node every write is refused: none is tried.
            Ok(handle) if self.refuse_cluster().is_ok() => Ok(handle),
            _ => Err(()),
        };
        let Ok(handle) = handle else {
            self.unschedule(&what);
            return;
        };
        let store = self.clone();
        handle.spawn(async move {
            tokio::time::sleep(delay).await;
            store.unschedule(&what);
            let _ = match what {
                Flush::Successes(key) => {
                    store
                        .update_origin_key(key, true, IfAbandoned::Apply, |_, _, _| ((), false))
                        .await
                }
                Flush::Deposits(budget) => store.flush_deposits(&budget, true).await,
            };
        });
    }

    fn unschedule(&self, what: &Flush) {
        match what {
            Flush::Successes(key) => {
                if let Some(counted) = lock(&self.shared.successes).get_mut(key) {
                    counted.scheduled = false;
                }
            }
            Flush::Deposits(_) => lock(&self.shared.deposits).scheduled = false,
        }
    }

    /// Writes this process's unwritten budget deposits, if due.
    pub(super) async fn flush_deposits(
        &self,
        budget: &RetryBudget,
        force: bool,
    ) -> Result<(), StoreError> {
        let n = {
            let mut deposits = lock(&self.shared.deposits);
            if deposits.n == 0 || (!force && deposits.written.elapsed() < FLUSH_EVERY) {
                return Ok(());
            }
            deposits.written = Instant::now();
            std::mem::take(&mut deposits.n)
        };
        let mut unwritten = PutBack {
            store: self,
            what: Taken::Deposits(*budget),
            n,
        };
        let key = self.budget_key();
        let result = self
            .update(
                &key,
                BudgetState::decode,
                BudgetState::encode,
                |s, now, _| {
                    let state = BudgetState::slot(s, budget, now);
                    for _ in 0..n {
                        state.deposit(budget, now);
                    }
                    ((), Some(BUDGET_IDLE))
                },
            )
            .await;
        if result.is_ok() {
            unwritten.n = 0;
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
            scheduled: false,
        }
    }

    /// Marks a write scheduled; whether the caller is to schedule it.
    fn schedule(&mut self) -> bool {
        !std::mem::replace(&mut self.scheduled, true)
    }
}

/// A scheduled write of unwritten counts.
enum Flush {
    /// An origin key's successes.
    Successes(String),
    /// The budget's deposits.
    Deposits(RetryBudget),
}

/// Counts a [`PutBack`] took for a write.
pub(super) enum Taken<'a> {
    /// An origin key's successes, and when the last of them was counted.
    Successes(&'a str, Instant),
    Deposits(RetryBudget),
}

/// Counts taken for a write, given back unless the write succeeded (also
/// when the caller drops the future mid-write), with a write of them
/// scheduled [`RETRY_FLUSH`] later unless one is.
pub(super) struct PutBack<'a> {
    pub(super) store: &'a RedisStore,
    pub(super) what: Taken<'a>,
    pub(super) n: u32,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        if self.n == 0 {
            return;
        }
        let retry = match self.what {
            Taken::Successes(key, at) => {
                let mut successes = lock(&self.store.shared.successes);
                let counted = successes
                    .entry(key.to_owned())
                    .or_insert_with(|| Unwritten::new(at));
                counted.n = counted.n.saturating_add(self.n);
                counted.last = counted.last.max(at);
                counted.schedule().then(|| Flush::Successes(key.to_owned()))
            }
            Taken::Deposits(budget) => {
                let mut deposits = lock(&self.store.shared.deposits);
                deposits.n = deposits.n.saturating_add(self.n);
                deposits.schedule().then_some(Flush::Deposits(budget))
            }
        };
        if let Some(what) = retry {
            self.store.schedule_flush(what, RETRY_FLUSH);
        }
    }
}

/// How long after a failed write of counted successes or deposits it is
/// tried again.
const RETRY_FLUSH: Duration = Duration::from_millis(500);
