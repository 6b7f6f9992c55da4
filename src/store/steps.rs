//! What admitting, confirming, giving back and recording mean for an
//! origin's state and the retry budget: the core's steps, each run inside
//! one atomic update of a [`Store`].
//!
//! The store only makes an update atomic; every step here is a call of the
//! pure [`OriginState`] and [`BudgetState`](crate::budget::BudgetState)
//! methods, and nothing else decides. So every backend runs the same
//! decisions, and one that only stores (see [`Store`]) is enough.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::budget::{BudgetState, RetryBudget};
use crate::origin::{Admission, OriginState, Outcome, PacingConfig, Reservation, Spent, Within};
use crate::store::{Now, Store, StoreError};

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

/// What a store answered a task asking to send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admitted {
    pub(crate) admission: Admission,
    /// What an admission to send at once spent, given back unless the task
    /// sends (a reserved slot is in the admission).
    pub(crate) spent: Option<Spent>,
    /// Whether the store's stand-in state gave it (see [`Slot`]).
    pub(crate) on_fallback: bool,
}

/// A task asks to send to `origin` (spending `cost` of its quota in cost
/// units) and accepts to wait at most `within`; `waited`: it waited for the
/// first answer of one of its limits. What the store answered. `None` with
/// the gate off: the task sends at once.
pub(crate) fn admit<'s, S: Store>(
    store: &'s S,
    origin: &'s str,
    pacing: PacingConfig,
    within: Within,
    (cost, waited): (crate::Cost, bool),
) -> Option<impl Future<Output = Result<Admitted, StoreError>> + Send + 's> {
    pacing
        .gate
        .then(|| store.update_origin(origin, admit_step(pacing, within, (cost, waited), None)))
}

/// The update an admission applies. With `abandoned`, set once nobody is
/// left to take the answer (the task was dropped, or its deadline passed,
/// while the update was on its way), it reserves nothing: applied before,
/// what it reserved is given back by whoever awaits the answer then.
pub(crate) fn admit_step(
    pacing: PacingConfig,
    within: Within,
    (cost, waited): (crate::Cost, bool),
    abandoned: Option<Arc<AtomicBool>>,
) -> impl FnMut(&mut OriginState, Now) -> Admitted + Send + 'static {
    move |state, now| {
        let on_fallback = now.is_fallback();
        if abandoned
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Acquire))
        {
            return Admitted {
                admission: Admission::GateClosed(Duration::ZERO),
                spent: None,
                on_fallback,
            };
        }
        let (admission, spent) = state.admit_spending(pacing, now.time(), within, cost, waited);
        Admitted {
            admission,
            spent,
            on_fallback,
        }
    }
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

/// Gives back what an admission to send at once spent, its task gone
/// before it sent, on the state that holds it.
pub(crate) async fn give_back<S: Store>(
    store: &S,
    origin: &str,
    spent: Spent,
    on_fallback: bool,
) -> Result<(), StoreError> {
    store
        .update_origin(origin, move |state, now| {
            if now.is_fallback() == on_fallback {
                state.give_back(now.time(), spent);
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
    budget
        .enabled
        .then(|| store.update_budget(withdraw_step(budget, None)))
}

/// The update a withdrawal applies; with `abandoned` set (see
/// [`admit_step`]), it takes nothing.
pub(crate) fn withdraw_step(
    budget: &RetryBudget,
    abandoned: Option<Arc<AtomicBool>>,
) -> impl FnMut(&mut BudgetState, Now) -> bool + Send + 'static {
    let budget = *budget;
    move |state, now| {
        let left = abandoned
            .as_ref()
            .is_some_and(|a| a.load(Ordering::Acquire));
        !left && state.withdraw(&budget, now.time())
    }
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
