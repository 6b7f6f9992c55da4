//! [`Store`] for [`Redis`]: leases, and each read or update of a state one
//! script or compare-and-set, at Redis's time. No fail mode here: Redis
//! answers or the call fails (the [`RedisStore`](super::RedisStore) in
//! front decides what then).

use std::time::Duration;

use tokio::time::Instant;

use super::{BUDGET_IDLE, Redis};
use crate::budget::BudgetState;
use crate::origin::{ORIGIN_IDLE, OriginState};
use crate::store::{LeaseToken, Now, Store, StoreError};

impl Store for Redis {
    async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
        self.acquire_lease(key, ttl).await
    }

    async fn release(&self, key: &str, token: LeaseToken) -> Result<(), StoreError> {
        self.release_lease(key, token);
        Ok(())
    }

    async fn read_origin(
        &self,
        origin: &str,
    ) -> Result<(Option<OriginState>, Duration), StoreError> {
        self.refuse_cluster()?;
        let key = self.origin_key(origin);
        self.update(
            &key,
            OriginState::decode,
            OriginState::encode,
            |state, now, _| ((*state, now), None),
        )
        .await
    }

    /// Written only when the update changed more than the time the origin
    /// was last seen (or that is a minute old): an admission that sends at
    /// once costs a read, not a write.
    async fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        self.refuse_cluster()?;
        let key = self.origin_key(origin);
        let called = Instant::now();
        self.update(
            &key,
            OriginState::decode,
            OriginState::encode,
            |state, now, sent| {
                let fresh = state.is_none();
                let state = state.get_or_insert_with(|| OriginState::new(now));
                let before = *state;
                let out = f(state, at(now, called, sent));
                let write = fresh || !state.differs_only_in_last_seen(&before, now);
                (out, write.then(|| state.keep_for(now, ORIGIN_IDLE)))
            },
        )
        .await
    }

    async fn update_budget<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&mut BudgetState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        self.refuse_cluster()?;
        let key = self.budget_key();
        let called = Instant::now();
        self.update(
            &key,
            BudgetState::decode,
            BudgetState::encode,
            |state, now, sent| {
                let fresh = state.is_none();
                let state = state.get_or_insert_with(|| BudgetState::new(now));
                let before = *state;
                let out = f(state, at(now, called, sent));
                (out, (fresh || *state != before).then_some(BUDGET_IDLE))
            },
        )
        .await
    }
}

/// Redis's time `now`, read by a command sent at `sent` for an update
/// called at `called`: Redis read its clock no earlier than that.
fn at(now: Duration, called: Instant, sent: Instant) -> Now {
    Now::new(now).late_by(sent.saturating_duration_since(called))
}

impl OriginState {
    /// Whether `self` is `before` with only `last_seen` moved, recently
    /// enough that the shared copy need not be rewritten for it.
    fn differs_only_in_last_seen(&self, before: &OriginState, now: Duration) -> bool {
        let mut same = *before;
        same.touch(self.last_seen());
        same == *self && now.saturating_sub(before.last_seen()) < Duration::from_secs(60)
    }
}
