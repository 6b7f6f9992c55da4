//! [`Permit`]: what admission reserved for a task's next send, given back
//! when the permit is dropped unused.
//!
//! As tower's concurrency limit holds an `OwnedSemaphorePermit` in its
//! response future: there is no give-back call to forget. A task dropped,
//! stopped or failed while it holds a permit gives back, by the permit's
//! `Drop`, the paced slot it reserved (with the stated-quota unit inside
//! it), what an admission to send at once spent (a unit of a stated
//! quota, cost units) and the retry token the budget granted. [`confirm`](Permit::confirm)
//! settles the slot, [`send`](Permit::send) spends the rest; both consume
//! the permit.

use std::sync::Arc;
use std::time::Duration;

use crate::budget::RetryBudget;
use crate::origin::{Admission, Spent};
use crate::store::steps::{self, Admitted, Slot};
use crate::store::{Store, StoreError};
use crate::util::detach;

/// What a task holds for its next send: a reserved slot of its origin, a
/// retry token, both or neither.
pub(crate) struct Permit<'a, S: Store> {
    store: &'a Arc<S>,
    /// Boxed: a permit holding nothing (the success path's) is two
    /// pointers in the task's future.
    held: Option<Box<Held<'a>>>,
}

/// What a [`Permit`] holds.
#[derive(Default)]
struct Held<'a> {
    /// The origin and the slot reserved there, until it is settled.
    slot: Option<(String, Slot)>,
    /// The budget a retry token was withdrawn from, until the retry leaves.
    token: Option<&'a RetryBudget>,
    /// Per limit (its key), what an admission to send at once spent there,
    /// and on which of the store's states, until the send leaves.
    spent: Vec<(String, Spent, bool)>,
}

impl<'a, S: Store> Permit<'a, S> {
    /// A permit holding nothing.
    pub(crate) fn new(store: &'a Arc<S>) -> Self {
        Permit { store, held: None }
    }

    /// What this permit holds, moved into a new one; this one is left
    /// holding nothing.
    pub(crate) fn take(&mut self) -> Self {
        Permit {
            store: self.store,
            held: self.held.take(),
        }
    }

    fn held(&mut self) -> &mut Held<'a> {
        self.held.get_or_insert_with(Box::default)
    }

    /// Holds a slot `origin` reserved.
    pub(crate) fn with_slot(mut self, origin: &str, slot: Slot) -> Self {
        self.held().slot = Some((origin.to_owned(), slot));
        self
    }

    /// Holds what an admission to send at once spent at the limit `key`
    /// (on the store's stand-in state, with `on_fallback`).
    pub(crate) fn with_spent(mut self, key: &str, spent: Spent, on_fallback: bool) -> Self {
        self.held().spent.push((key.to_owned(), spent, on_fallback));
        self
    }

    /// Gives back what admissions to send at once spent (the task waits
    /// for another of its limits first: it asks them all again after).
    pub(crate) fn give_back_spent(&mut self) {
        let Some(held) = self.held.as_deref_mut() else {
            return;
        };
        for (key, spent, on_fallback) in held.spent.drain(..) {
            give_back(self.store, key, spent, on_fallback);
        }
    }

    /// Holds what `admitted` reserved at `origin`: its slot, or what an
    /// admission to send at once spent.
    pub(crate) fn with_admitted(self, origin: &str, admitted: &Admitted) -> Self {
        let on_fallback = admitted.on_fallback;
        let permit = match admitted.admission {
            Admission::SlotReserved(_, reservation) => self.with_slot(
                origin,
                Slot {
                    reservation,
                    on_fallback,
                },
            ),
            _ => self,
        };
        match admitted.spent {
            Some(spent) => permit.with_spent(origin, spent, on_fallback),
            None => permit,
        }
    }

    /// Holds a retry token withdrawn from `budget`.
    pub(crate) fn with_token(mut self, budget: &'a RetryBudget) -> Self {
        self.held().token = Some(budget);
        self
    }

    /// The slot's time has come: asks the store whether the gate closed
    /// again meanwhile. The permit without the slot (it may hold a retry
    /// token still), and, when the gate closed, how long from now it stays
    /// closed. Either way the slot is settled with the store in the
    /// background (used, or given back when the gate closed: the task then
    /// queues anew). Until the store answers, the slot is still the
    /// permit's to give back: dropped meanwhile, or failed, it gives the
    /// slot back.
    pub(crate) async fn confirm(mut self) -> Result<(Self, Option<Duration>), StoreError> {
        let Some((origin, slot)) = self.held.as_deref().and_then(|h| h.slot.as_ref()) else {
            return Ok((self, None));
        };
        let gate = steps::confirm(&**self.store, origin, *slot).await?;
        if let Some((origin, slot)) = self.held().slot.take() {
            let store = Arc::clone(self.store);
            let closed = gate.is_some();
            detach(Box::pin(async move {
                let _ = steps::settle(&*store, &origin, slot, closed).await;
            }));
        }
        Ok((self, gate))
    }

    /// The attempt leaves: the token is spent, and a slot still held (none
    /// is, after [`confirm`](Self::confirm)) is used.
    pub(crate) fn send(mut self) {
        self.held = None;
    }

    /// What this permit holds is taken over by its task's own permit (the
    /// answer it held is followed as any other): nothing is given back.
    pub(crate) fn hand_over(mut self) {
        self.held = None;
    }
}

impl<S: Store> Drop for Permit<'_, S> {
    fn drop(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        if let Some((origin, slot)) = held.slot {
            let store = Arc::clone(self.store);
            detach(Box::pin(async move {
                let _ = steps::release(&*store, &origin, slot).await;
            }));
        }
        for (key, spent, on_fallback) in held.spent {
            give_back(self.store, key, spent, on_fallback);
        }
        if let Some(budget) = held.token.copied() {
            let store = Arc::clone(self.store);
            detach(Box::pin(async move {
                let _ = steps::refund(&*store, &budget).await;
            }));
        }
    }
}

/// Gives back, in the background, what an admission to send at once
/// spent at the limit `key`.
fn give_back<S: Store>(store: &Arc<S>, key: String, spent: Spent, on_fallback: bool) {
    let store = Arc::clone(store);
    detach(Box::pin(async move {
        let _ = steps::give_back(&*store, &key, spent, on_fallback).await;
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;
    use crate::origin::{Admission, OriginState, Outcome, PacingConfig, Within};

    const PACING: PacingConfig = PacingConfig::DEFAULT;
    const LATEST: Duration = Duration::from_secs(10);
    const O: &str = "http://permit.test:80";

    /// 100 retries, refilled by nothing but deposits.
    const BUDGET: RetryBudget = RetryBudget {
        ratio: 1.0,
        min_per_sec: 0.0,
        enabled: true,
    };

    async fn tokens(store: &MemoryStore) -> f64 {
        let t = store.update_budget(|b, _| b.tokens()).await;
        t.expect("memory store")
    }

    async fn origin(store: &MemoryStore) -> (OriginState, Duration) {
        let (state, now) = store.read_origin(O).await.expect("memory store");
        (state.expect("a known origin"), now)
    }

    /// A store whose origin has a paced queue (a learned batch behind a
    /// reopened gate, on the paused clock), and a budget one retry short.
    async fn paced() -> (MemoryStore, Arc<MemoryStore>) {
        let memory = MemoryStore::new();
        for _ in 0..20 {
            memory
                .record(O, PACING, Outcome::Admitted)
                .await
                .expect("memory store");
        }
        let back = Outcome::Pushback {
            retry_in: Some(Duration::from_millis(100)),
            hold_at_least: None,
        };
        memory.record(O, PACING, back).await.expect("memory store");
        tokio::time::advance(Duration::from_millis(100)).await;
        let (probe, _) = admit(&memory).await;
        assert_eq!(probe, Admission::Reopened);
        assert!(
            steps::withdraw(&memory, &BUDGET)
                .expect("a budget")
                .await
                .expect("memory store")
        );
        (memory.clone(), Arc::new(memory))
    }

    async fn admit(store: &MemoryStore) -> (Admission, bool) {
        let admitted = steps::admit(
            store,
            O,
            PACING,
            Within::both(LATEST),
            (crate::Cost::new(0), false),
        )
        .expect("the gate on")
        .await
        .expect("memory store");
        (admitted.admission, admitted.on_fallback)
    }

    /// Reserves a slot; the origin's state before.
    async fn reserve(store: &MemoryStore) -> (Slot, OriginState) {
        let (slot, before, _) = reserve_for(store).await;
        (slot, before)
    }

    /// Reserves a slot; the origin's state before, and the wait for it.
    async fn reserve_for(store: &MemoryStore) -> (Slot, OriginState, Duration) {
        let (before, _) = origin(store).await;
        match admit(store).await {
            (Admission::SlotReserved(wait, reservation), on_fallback) => {
                let slot = Slot {
                    reservation,
                    on_fallback,
                };
                (slot, before, wait)
            }
            other => panic!("no slot reserved: {other:?}"),
        }
    }

    /// `before` after the admission that reserved `slot` and `then`, at
    /// the paused clock's `now`.
    fn replay(
        before: OriginState,
        now: Duration,
        slot: Slot,
        then: impl FnOnce(&mut OriginState),
    ) -> OriginState {
        let mut state = before;
        match state.admit(PACING, now, LATEST) {
            Admission::SlotReserved(_, r) => assert_eq!(r, slot.reservation),
            other => panic!("replayed as {other:?}"),
        }
        then(&mut state);
        state
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_dropped_holding_nothing_changes_nothing() {
        let (memory, store) = paced().await;
        let (before, _) = origin(&memory).await;
        let full = tokens(&memory).await;
        drop(Permit::new(&store));
        Permit::new(&store).send();
        assert_eq!(origin(&memory).await.0, before);
        assert_eq!(tokens(&memory).await, full);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_token_goes_back_to_the_budget() {
        let (memory, store) = paced().await;
        let left = tokens(&memory).await;
        drop(Permit::new(&store).with_token(&BUDGET));
        assert_eq!(tokens(&memory).await, left + 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_slot_goes_back_to_the_origin() {
        let (memory, store) = paced().await;
        let (slot, before) = reserve(&memory).await;
        let (_, now) = origin(&memory).await;
        let kept = replay(before, now, slot, |_| ());
        let given_back = replay(before, now, slot, |s| s.release(now, slot.reservation));
        assert_ne!(kept, given_back, "a release the state does not show");
        assert_eq!(origin(&memory).await.0, kept);
        drop(Permit::new(&store).with_slot(O, slot));
        assert_eq!(origin(&memory).await.0, given_back);
    }

    #[tokio::test(start_paused = true)]
    async fn a_permit_holding_both_gives_both_back_and_a_taken_one_nothing() {
        let (memory, store) = paced().await;
        let left = tokens(&memory).await;
        let (slot, before) = reserve(&memory).await;
        let (_, now) = origin(&memory).await;
        let mut held = Permit::new(&store).with_token(&BUDGET).with_slot(O, slot);
        let moved = held.take();
        drop(held);
        assert_eq!(tokens(&memory).await, left);
        assert_eq!(origin(&memory).await.0, replay(before, now, slot, |_| ()));
        drop(moved);
        assert_eq!(tokens(&memory).await, left + 1.0);
        let given_back = replay(before, now, slot, |s| s.release(now, slot.reservation));
        assert_eq!(origin(&memory).await.0, given_back);
    }

    #[tokio::test(start_paused = true)]
    async fn a_confirmed_slot_is_settled_and_the_token_still_held() {
        let (memory, store) = paced().await;
        let left = tokens(&memory).await;
        let (slot, before, wait) = reserve_for(&memory).await;
        let (_, then) = origin(&memory).await;
        let permit = Permit::new(&store).with_token(&BUDGET).with_slot(O, slot);
        tokio::time::advance(wait).await;
        let now = then + wait;
        let (rest, gate) = permit.confirm().await.expect("memory store");
        assert_eq!(gate, None);
        let settled = replay(before, then, slot, |s| s.sent(now, slot.reservation));
        assert_eq!(origin(&memory).await.0, settled);
        drop(rest);
        assert_eq!(
            origin(&memory).await.0,
            settled,
            "a settled slot given back"
        );
        assert_eq!(tokens(&memory).await, left + 1.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sent_permit_spends_its_token() {
        let (memory, store) = paced().await;
        let left = tokens(&memory).await;
        let (slot, _) = reserve(&memory).await;
        let permit = Permit::new(&store).with_token(&BUDGET).with_slot(O, slot);
        let (rest, _) = permit.confirm().await.expect("memory store");
        rest.send();
        assert_eq!(tokens(&memory).await, left);
    }

    #[tokio::test(start_paused = true)]
    async fn a_confirmation_dropped_unanswered_gives_the_slot_back() {
        let (memory, store) = paced().await;
        let (slot, before) = reserve(&memory).await;
        let (_, now) = origin(&memory).await;
        let confirming = Permit::new(&store).with_slot(O, slot).confirm();
        drop(confirming);
        let given_back = replay(before, now, slot, |s| s.release(now, slot.reservation));
        assert_eq!(origin(&memory).await.0, given_back);
    }

    #[tokio::test(start_paused = true)]
    async fn a_confirmation_behind_a_gate_closed_again_gives_the_slot_back() {
        let (memory, store) = paced().await;
        let (slot, before) = reserve(&memory).await;
        let (_, now) = origin(&memory).await;
        // The probe is rejected while the task waits: the gate closes again.
        let back = Outcome::Pushback {
            retry_in: Some(Duration::from_secs(3)),
            hold_at_least: None,
        };
        memory.record(O, PACING, back).await.expect("memory store");
        let permit = Permit::new(&store).with_slot(O, slot);
        let (rest, gate) = permit.confirm().await.expect("memory store");
        assert_eq!(gate, Some(Duration::from_secs(3)));
        drop(rest);
        let given_back = replay(before, now, slot, |s| {
            let _ = s.observe(PACING, now, back);
            s.release(now, slot.reservation);
        });
        assert_eq!(origin(&memory).await.0, given_back);
    }
}
