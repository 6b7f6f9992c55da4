//! [`Store`] for [`RedisStore`](super::RedisStore): leases, admissions, gates, records and
//! the budget, each one script or compare-and-set over the pure steps.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::batched::IfAbandoned;
use super::heartbeat::{FREED_FOR, freed_key};
use super::{BUDGET_IDLE, FailMode, RedisStore, millis};
use crate::budget::{BudgetState, RetryBudget};
use crate::origin::{Admission, OriginState, PacingConfig, Reservation};
use crate::store::{LeaseToken, Outcome, Store, StoreError, lock};

/// A lease taken locally (and maybe in Redis) whose acquisition is not
/// settled yet: if the caller goes away meanwhile, or Redis failed and the
/// store fails closed, it is released everywhere.
struct Acquiring<'a> {
    store: &'a RedisStore,
    key: &'a str,
    token: LeaseToken,
    armed: bool,
}

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.store.release(self.key, self.token);
        }
    }
}

impl Store for RedisStore {
    async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
        self.refuse_cluster()?;
        // This process's own lease first: it keeps exclusion within the
        // process while Redis is away, and its token is the Redis value.
        let Some(token) = self.local.acquire_now(key, ttl) else {
            return Ok(None);
        };
        let mut pending = Acquiring {
            store: self,
            key,
            token,
            armed: true,
        };
        let redis_key = self.lease_key(key);
        let stale = lock(&self.shared.releasing)
            .remove(&redis_key)
            .map(|(t, _)| t);
        // Failing closed, the grace in ms (0: no check).
        let grace = match self.fail_mode {
            FailMode::Closed if !self.restart_grace.is_zero() => millis(self.restart_grace),
            _ => 0,
        };
        let give_up = Instant::now() + ttl;
        let taken: Result<i64, StoreError> = loop {
            let mut conn = self.conn.clone();
            let mut acquire = self.shared.acquire.prepare_invoke();
            acquire
                .key(&redis_key)
                .arg(token.0)
                .arg(millis(give_up.saturating_duration_since(Instant::now())))
                .arg(stale.map_or_else(String::new, |t| t.to_string()))
                .arg(grace);
            match self
                .round_trip(acquire.invoke_async::<i64>(&mut conn))
                .await
            {
                // Redis started less than the restart grace ago: wait for
                // the rest of it (holders re-assert their leases meanwhile),
                // unless the task's deadline comes first.
                Ok(young @ ..0) => {
                    let wait = Duration::from_millis(young.unsigned_abs());
                    if Instant::now() + wait >= give_up {
                        break Err(StoreError::new(
                            "redis: restarted less than the restart grace ago; no lease given out yet",
                        ));
                    }
                    tokio::time::sleep(wait).await;
                }
                other => break other,
            }
        };
        match taken {
            Ok(1) => {
                pending.armed = false;
                self.hold(redis_key, token.0, give_up);
                Ok(Some(token))
            }
            Ok(_) => {
                // Held by another task; ours is not in Redis.
                pending.armed = false;
                self.local.release(key, token);
                Ok(None)
            }
            Err(e) => {
                // Our own stale lease may still be there: try again later.
                if let Some(stale) = stale {
                    lock(&self.shared.releasing)
                        .entry(redis_key.clone())
                        .or_insert((stale, Instant::now() + ttl));
                }
                let result = self
                    .guarded("acquire", Err(e), || std::future::ready(Ok(Some(token))))
                    .await;
                if result.is_ok() {
                    // Held locally; the heartbeat shares it once Redis
                    // answers again.
                    self.hold(redis_key, token.0, give_up);
                }
                // Failing open keeps the local lease; failing closed
                // releases it, and the Redis one in case the ACQUIRE was
                // applied after we stopped waiting.
                pending.armed = result.is_err();
                result
            }
        }
    }

    fn release(&self, key: &str, token: LeaseToken) {
        let redis_key = self.lease_key(key);
        // Remembered until Redis confirms (or the lease has expired anyway),
        // so that this process taking the same key again at once frees it
        // first instead of finding it held. Noted before the local lease
        // goes, so that no task of ours can slip in between.
        {
            let mut releasing = lock(&self.shared.releasing);
            if releasing.len() > 1024 {
                let now = Instant::now();
                releasing.retain(|_, (_, expires)| *expires > now);
            }
            let expires = self.local.lease_expiry(key).unwrap_or_else(Instant::now);
            releasing.insert(redis_key.clone(), (token.0, expires));
        }
        self.unhold(&redis_key, token.0);
        self.local.release(key, token);
        // Called from `Drop`: the compare-and-delete runs as its own task.
        // Without a runtime (or if it fails) the lease's TTL frees it.
        if self.refuse_cluster().is_ok()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let mut conn = self.conn.clone();
            let shared = Arc::clone(&self.shared);
            let timeout = self.op_timeout;
            handle.spawn(async move {
                let mut release = shared.release.prepare_invoke();
                release
                    .key(&redis_key)
                    .key(freed_key(&redis_key, token.0))
                    .arg(token.0)
                    .arg(millis(FREED_FOR));
                let done =
                    tokio::time::timeout(timeout, release.invoke_async::<i64>(&mut conn)).await;
                if matches!(done, Ok(Ok(_))) {
                    let mut releasing = lock(&shared.releasing);
                    if releasing
                        .get(&redis_key)
                        .is_some_and(|(t, _)| *t == token.0)
                    {
                        releasing.remove(&redis_key);
                    }
                }
            });
        }
    }

    async fn admit(
        &self,
        origin: &str,
        pacing: PacingConfig,
        budget: &RetryBudget,
        latest: Duration,
        first: bool,
    ) -> Result<Admission, StoreError> {
        self.refuse_cluster()?;
        if first && budget.enabled {
            // Written within `FLUSH_EVERY`, or with the next withdrawal.
            self.count_deposit(budget);
        }
        if !pacing.gate {
            return Ok(Admission::Now);
        }
        let result = self
            .update_origin(origin, false, IfAbandoned::Skip, move |state, now, _| {
                (state.admit(pacing, now, latest), false)
            })
            .await
            .map(|admission| match admission {
                Admission::SlotReserved(wait, r) => {
                    Admission::SlotReserved(wait, Reservation { shared: true, ..r })
                }
                other => other,
            });
        self.guarded("admit", result, || {
            std::future::ready(Ok(self
                .local
                .admit_now(origin, pacing, budget, latest, first)))
        })
        .await
    }

    async fn confirm_slot(
        &self,
        origin: &str,
        reservation: Reservation,
    ) -> Result<Option<Duration>, StoreError> {
        if !reservation.shared {
            return self.local.confirm_slot(origin, reservation).await;
        }
        self.refuse_cluster()?;
        let result = self
            .update_origin(origin, false, IfAbandoned::Skip, move |state, now, _| {
                (state.confirm(now, reservation), true)
            })
            .await;
        // Redis holds the slot; this process's state knows nothing of it.
        self.guarded("confirm_slot", result, || self.local.gate(origin))
            .await
    }

    fn release_slot(&self, origin: &str, reservation: Reservation) {
        if !reservation.shared {
            self.local.release_slot(origin, reservation);
            return;
        }
        // Called from `Drop`: the update runs as its own task. Without a
        // runtime (or if Redis fails) the slot passes unused.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            let origin = origin.to_owned();
            handle.spawn(async move {
                let _ = store
                    .update_origin(&origin, false, IfAbandoned::Apply, move |state, now, _| {
                        state.release(now, reservation);
                        ((), true)
                    })
                    .await;
            });
        }
    }

    fn refund_retry(&self, budget: &RetryBudget) {
        if !budget.enabled {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            let budget = *budget;
            handle.spawn(async move {
                let key = store.budget_key();
                let _ = store
                    .update(
                        &key,
                        BudgetState::decode,
                        BudgetState::encode,
                        |s, now, _| {
                            BudgetState::slot(s, &budget, now).refund(&budget, now);
                            ((), Some(BUDGET_IDLE))
                        },
                    )
                    .await;
            });
        }
    }

    async fn gate(&self, origin: &str) -> Result<Option<Duration>, StoreError> {
        self.refuse_cluster()?;
        let key = self.origin_key(origin);
        let result = self
            .update(
                &key,
                OriginState::decode,
                OriginState::encode,
                |s, now, _| {
                    let gate = s.as_ref().and_then(|s| s.gate_in(now));
                    (gate, None)
                },
            )
            .await;
        self.guarded("gate", result, || self.local.gate(origin))
            .await
    }

    async fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> Result<Option<Duration>, StoreError> {
        self.refuse_cluster()?;
        if !pacing.gate {
            return Ok(None);
        }
        if let Outcome::Admitted | Outcome::Quota { .. } = outcome {
            // Counted here; written within `FLUSH_EVERY`, or with this
            // process's next write to the origin. A stated quota is not
            // kept in Redis (a write per answer would cost a round trip per
            // success); an exhausted one (`Exhausted`) is shared all the same.
            self.count_success(origin);
            return Ok(None);
        }
        let result = self
            .update_origin(origin, true, IfAbandoned::Apply, move |state, now, late| {
                // Any outcome but a plain success (counted above) changes
                // the gate: a pushback, or an exhausted quota. Its times
                // count from the answer, not from when it is applied.
                (state.observe_late(pacing, now, late, outcome), true)
            })
            .await;
        self.guarded("record", result, || {
            self.local.record(origin, pacing, outcome)
        })
        .await
    }

    async fn withdraw_retry(&self, budget: &RetryBudget) -> Result<bool, StoreError> {
        self.refuse_cluster()?;
        if !budget.enabled {
            return Ok(true);
        }
        let _ = self.flush_deposits(budget, true).await;
        let key = self.budget_key();
        let result = self
            .update(
                &key,
                BudgetState::decode,
                BudgetState::encode,
                |s, now, _| {
                    let ok = BudgetState::slot(s, budget, now).withdraw(budget, now);
                    (ok, Some(BUDGET_IDLE))
                },
            )
            .await;
        self.guarded("withdraw_retry", result, || {
            self.local.withdraw_retry(budget)
        })
        .await
    }
}
