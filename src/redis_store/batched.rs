//! Successes and budget deposits counted in the process and written at most
//! every `FLUSH_EVERY`, or with the next write to the same key: a burst
//! costs a few round trips, not one per request.

use std::time::Duration;

use tokio::time::Instant;

use super::{BUDGET_IDLE, FLUSH_EVERY, RedisStore};
use crate::budget::{BudgetState, RetryBudget};
use crate::origin::{ORIGIN_IDLE, OriginState};
use crate::store::{StoreError, lock};

impl RedisStore {
    /// Takes this process's unwritten 2xx count for `origin_key`; `force`
    /// takes it however recent the last write.
    pub(super) fn take_successes(&self, origin_key: &str, force: bool) -> u32 {
        let mut successes = lock(&self.shared.successes);
        let Some((count, written)) = successes.get_mut(origin_key) else {
            return 0;
        };
        if !force && written.elapsed() < FLUSH_EVERY {
            return 0;
        }
        *written = Instant::now();
        std::mem::take(count)
    }

    /// Applies `f` to the origin's shared state, folding in this process's
    /// unwritten 2xx answers first (they are put back if the write fails
    /// or the caller goes away; a write that timed out but was applied
    /// after all counts them twice, which only makes the learned pace a
    /// little faster until the next pushback cuts it).
    pub(super) async fn update_origin<T>(
        &self,
        origin: &str,
        force_flush: bool,
        mut f: impl FnMut(&mut OriginState, Duration) -> (T, bool),
    ) -> Result<T, StoreError> {
        let key = self.origin_key(origin);
        let pending = self.take_successes(&key, force_flush);
        let mut unwritten = PutBack {
            store: self,
            what: Unwritten::Successes(&key),
            n: pending,
        };
        let result = self
            .update(&key, OriginState::decode, OriginState::encode, |s, now| {
                let fresh = s.is_none();
                let state = s.get_or_insert_with(|| OriginState::new(now));
                let before = *state;
                for _ in 0..pending {
                    state.on_success(now);
                }
                let (out, changed) = f(state, now);
                let write = fresh
                    || pending > 0
                    || changed
                    || !state.differs_only_in_last_seen(&before, now);
                (out, write.then(|| state.keep_for(now, ORIGIN_IDLE)))
            })
            .await;
        if result.is_ok() {
            unwritten.n = 0;
        }
        result
    }

    /// Counts one 2xx answer from `origin`; the first one counted since the
    /// last write schedules a write `FLUSH_EVERY` later.
    pub(super) fn count_success(&self, origin: &str) {
        let key = self.origin_key(origin);
        let first = {
            let mut successes = lock(&self.shared.successes);
            if successes.len() > 1024 {
                successes.retain(|_, (n, _)| *n > 0);
            }
            let (count, _) = successes.entry(key).or_insert_with(|| (0, Instant::now()));
            *count = count.saturating_add(1);
            *count == 1
        };
        if first && let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            let origin = origin.to_owned();
            handle.spawn(async move {
                tokio::time::sleep(FLUSH_EVERY).await;
                let _ = store.update_origin(&origin, true, |_, _| ((), false)).await;
            });
        }
    }

    /// Counts one budget deposit; the first one counted since the last
    /// write schedules a write `FLUSH_EVERY` later.
    pub(super) fn count_deposit(&self, budget: &RetryBudget) {
        let first = {
            let mut deposits = lock(&self.shared.deposits);
            deposits.0 = deposits.0.saturating_add(1);
            deposits.0 == 1
        };
        if first && let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            let budget = *budget;
            handle.spawn(async move {
                tokio::time::sleep(FLUSH_EVERY).await;
                let _ = store.flush_deposits(&budget, true).await;
            });
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
            if deposits.0 == 0 || (!force && deposits.1.elapsed() < FLUSH_EVERY) {
                return Ok(());
            }
            deposits.1 = Instant::now();
            std::mem::take(&mut deposits.0)
        };
        let mut unwritten = PutBack {
            store: self,
            what: Unwritten::Deposits,
            n,
        };
        let key = self.budget_key();
        let result = self
            .update(&key, BudgetState::decode, BudgetState::encode, |s, now| {
                let state = BudgetState::slot(s, budget, now);
                for _ in 0..n {
                    state.deposit(budget, now);
                }
                ((), Some(BUDGET_IDLE))
            })
            .await;
        if result.is_ok() {
            unwritten.n = 0;
        }
        result
    }
}

/// What a [`PutBack`] gives back.
enum Unwritten<'a> {
    Successes(&'a str),
    Deposits,
}

/// Counts taken for a write, given back unless the write succeeded (also
/// when the caller drops the future mid-write).
struct PutBack<'a> {
    store: &'a RedisStore,
    what: Unwritten<'a>,
    n: u32,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        if self.n == 0 {
            return;
        }
        match self.what {
            Unwritten::Successes(key) => {
                let mut successes = lock(&self.store.shared.successes);
                let (count, _) = successes
                    .entry(key.to_owned())
                    .or_insert_with(|| (0, Instant::now()));
                *count = count.saturating_add(self.n);
            }
            Unwritten::Deposits => {
                let mut deposits = lock(&self.store.shared.deposits);
                deposits.0 = deposits.0.saturating_add(self.n);
            }
        }
    }
}

impl OriginState {
    /// Whether `self` is `before` with only `last_seen` moved, recently
    /// enough that the shared copy need not be rewritten for it.
    pub(super) fn differs_only_in_last_seen(&self, before: &OriginState, now: Duration) -> bool {
        let mut same = *before;
        same.touch(self.last_seen());
        same == *self && now.saturating_sub(before.last_seen()) < Duration::from_secs(60)
    }
}
