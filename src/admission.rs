//! What admitting, confirming, giving back and recording mean for an
//! origin's state and the retry budget: the core's steps, each run inside
//! one atomic update of a [`Store`].
//!
//! The store only makes an update atomic; every step here is a call of the
//! pure [`OriginState`] and [`BudgetState`](crate::budget::BudgetState)
//! methods, and nothing else decides. So every backend runs the same
//! decisions, and one that only stores (see [`Store`]) is enough.

use std::future::Future;
use std::time::Duration;

use crate::budget::RetryBudget;
use crate::origin::{Admission, Outcome, PacingConfig, Reservation, Within};
use crate::store::{Store, StoreError};

/// A paced slot an admission reserved, and on which of the store's states
/// (a store failing over reserves on its stand-in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) reservation: Reservation,
    pub(crate) on_fallback: bool,
}

/// A first send deposits its share into the retry budget; `None` with the
/// budget off.
///
/// This and the other calls a task makes on the success path ([`admit`],
/// [`record`]) return the store's own future, not one wrapping it: a
/// task's future keeps each in its state, twice (see `Task::run`).
pub(crate) fn deposit<'s, S: Store>(
    store: &'s S,
    budget: &'s RetryBudget,
) -> Option<impl Future<Output = Result<(), StoreError>> + Send + 's> {
    budget.enabled.then(|| store.deposit(budget))
}

/// A task asks to send to `origin` (spending `cost` of its quota in cost
/// units) and accepts to wait at most `within`:
/// the admission, and whether the store's stand-in state gave it (see
/// [`Slot`]). `None` with the gate off: the task sends at once.
pub(crate) fn admit<'s, S: Store>(
    store: &'s S,
    origin: &'s str,
    pacing: PacingConfig,
    within: Within,
    cost: u64,
) -> Option<impl Future<Output = Result<(Admission, bool), StoreError>> + Send + 's> {
    pacing.gate.then(|| {
        store.update_origin(origin, move |state, now| {
            (
                state.admit_within(pacing, now.time(), within, cost),
                now.is_fallback(),
            )
        })
    })
}

/// A task whose reserved slot has come is about to send: how long from
/// now to wait instead, when the origin's gate closed again meanwhile (a
/// probe was rejected), or zero when the queue restarted since and the
/// slot is void (the task asks for a new one). Only read: a read is one
/// round trip however many tasks confirm at once, where updates of a
/// shared state wait their turn, and a send that leaves late crowds the
/// next batch (a sliding log counts it there). The reservation is settled
/// afterwards ([`settle`]).
pub(crate) async fn confirm<S: Store>(
    store: &S,
    origin: &str,
    slot: Slot,
) -> Result<Option<Duration>, StoreError> {
    let (state, now) = store.read_origin(origin).await?;
    Ok(state.and_then(|s| s.recheck(now, slot.reservation)))
}

/// Settles a reserved slot whose task sent (or, with `gate_closed`, will
/// not send: the gate closed again, and the slot is given back), on the
/// state that holds it. A slot held on another state than the one the
/// store now applies updates to (a store failing over, or back) is not
/// settled there.
pub(crate) async fn settle<S: Store>(
    store: &S,
    origin: &str,
    slot: Slot,
    gate_closed: bool,
) -> Result<(), StoreError> {
    store
        .update_origin(origin, move |state, now| {
            if now.is_fallback() != slot.on_fallback {
                return;
            }
            if gate_closed {
                state.release(now.time(), slot.reservation);
            } else {
                state.sent(now.time(), slot.reservation);
            }
        })
        .await
}

/// Gives back a reserved slot its task will not use (with the stated-quota
/// unit it spent), on the state that holds it.
pub(crate) async fn release<S: Store>(
    store: &S,
    origin: &str,
    slot: Slot,
) -> Result<(), StoreError> {
    store
        .update_origin(origin, move |state, now| {
            if now.is_fallback() == slot.on_fallback {
                state.release(now.time(), slot.reservation);
            }
        })
        .await
}

/// Records what `origin` answered. When this answer closed the origin's
/// gate, how long from now it stays closed. `None` with the gate off:
/// nothing is recorded.
pub(crate) fn record<'s, S: Store>(
    store: &'s S,
    origin: &'s str,
    pacing: PacingConfig,
    outcome: Outcome,
) -> Option<impl Future<Output = Result<Option<Duration>, StoreError>> + Send + 's> {
    pacing.gate.then(|| store.record(origin, pacing, outcome))
}

/// Takes one retry from the client-wide budget; `false` when it is empty.
/// `None` with the budget off: every retry is granted.
pub(crate) fn withdraw<'s, S: Store>(
    store: &'s S,
    budget: &RetryBudget,
) -> Option<impl Future<Output = Result<bool, StoreError>> + Send + 's> {
    let budget = *budget;
    budget
        .enabled
        .then(|| store.update_budget(move |state, now| state.withdraw(&budget, now.time())))
}

/// Gives back a retry token [`withdraw`] granted to a retry never sent.
pub(crate) async fn refund<S: Store>(store: &S, budget: &RetryBudget) -> Result<(), StoreError> {
    if !budget.enabled {
        return Ok(());
    }
    let budget = *budget;
    store
        .update_budget(move |state, now| state.refund(&budget, now.time()))
        .await
}
