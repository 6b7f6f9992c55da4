//! [`Reserving`]: a store call that reserves (an admission, a retry
//! token), owned by its task from the moment it is issued.
//!
//! A task dropped while such a call is on its way (or whose deadline
//! passes first) is gone before the store answers; the store may apply
//! the update all the same (a shared store's write is already under way).
//! So the call is not dropped with the task: it runs to its end on its
//! own, and what it reserved is given back. Its update, should it be
//! applied only after that, reserves nothing (it is told it was
//! abandoned).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use super::Task;
use super::permit::Permit;
use crate::budget::RetryBudget;
use crate::origin::{PacingConfig, Within};
use crate::planner::StoreFault;
use crate::store::steps::{self, Admitted};
use crate::store::{Store, StoreError};
use crate::util::detach;

/// A store call answering `T`, boxed.
type Call<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send>>;

/// A store call answering `T`, and what gives back what `T` reserved
/// when nobody is left to take it (a [`Permit`] holding it, dropped).
pub(super) struct Reserving<T, G>
where
    T: Send + 'static,
    G: FnOnce(T) + Send + 'static,
{
    call: Option<Call<T>>,
    give_back: Option<G>,
    /// Set when the call is dropped unanswered: its update reserves
    /// nothing from then on.
    abandoned: Arc<AtomicBool>,
}

impl<T, G> Reserving<T, G>
where
    T: Send + 'static,
    G: FnOnce(T) + Send + 'static,
{
    /// `call`, whose update reads `abandoned`; `give_back` is handed its
    /// answer if it comes when nobody is left to take it.
    pub(super) fn new(
        call: impl Future<Output = Result<T, StoreError>> + Send + 'static,
        abandoned: Arc<AtomicBool>,
        give_back: G,
    ) -> Self {
        Reserving {
            call: Some(Box::pin(call)),
            give_back: Some(give_back),
            abandoned,
        }
    }
}

// Nothing is pinned in place: the call is boxed.
impl<T, G> Unpin for Reserving<T, G>
where
    T: Send + 'static,
    G: FnOnce(T) + Send + 'static,
{
}

impl<T, G> Future for Reserving<T, G>
where
    T: Send + 'static,
    G: FnOnce(T) + Send + 'static,
{
    type Output = Result<T, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(call) = self.call.as_mut() else {
            return Poll::Ready(Err(StoreError::new("store: call polled after its answer")));
        };
        let answer = std::task::ready!(call.as_mut().poll(cx));
        self.call = None;
        Poll::Ready(answer)
    }
}

impl<T, G> Drop for Reserving<T, G>
where
    T: Send + 'static,
    G: FnOnce(T) + Send + 'static,
{
    fn drop(&mut self) {
        let (Some(call), Some(give_back)) = (self.call.take(), self.give_back.take()) else {
            return;
        };
        self.abandoned.store(true, Ordering::Release);
        detach(Box::pin(async move {
            if let Ok(answer) = call.await {
                give_back(answer);
            }
        }));
    }
}

impl<S: Store> Task<'_, S> {
    /// [`steps::admit`] at the limit `key`, owned (see [`Reserving`]): a slot or units it
    /// reserved for a task gone meanwhile are given back. `None` with the
    /// gate off.
    pub(super) fn admit_owned(
        &self,
        key: &str,
        pacing: PacingConfig,
        within: Within,
    ) -> Option<Reserving<Admitted, impl FnOnce(Admitted) + Send + 'static>> {
        if !pacing.gate {
            return None;
        }
        let abandoned = Arc::new(AtomicBool::new(false));
        let step = steps::admit_step(
            pacing,
            within,
            (self.cost, self.waited),
            Some(Arc::clone(&abandoned)),
        );
        let (store, origin) = (Arc::clone(self.store), key.to_owned());
        let call = {
            let (store, origin) = (Arc::clone(&store), origin.clone());
            async move { store.update_origin(&origin, step).await }
        };
        // What it reserved is held by a permit, dropped at once: the
        // permit's `Drop` gives it back.
        let give_back = move |admitted: Admitted| {
            drop(Permit::new(&store).with_admitted(&origin, &admitted));
        };
        Some(Reserving::new(call, abandoned, give_back))
    }
}

impl<'a, S: Store> Task<'a, S> {
    /// One retry from the client-wide budget (see [`steps::withdraw`]):
    /// on a store whose calls may wait, owned (see [`Reserving`]), so a
    /// token granted to a task gone meanwhile goes back. Granted at once
    /// with the budget off.
    pub(super) async fn withdraw(&self, budget: &'a RetryBudget) -> Result<bool, StoreFault> {
        if self.store.answers_at_once() {
            return match steps::withdraw(&**self.store, budget) {
                Some(withdraw) => self.bounded(withdraw).await,
                None => Ok(true),
            };
        }
        if !budget.enabled {
            return Ok(true);
        }
        let abandoned = Arc::new(AtomicBool::new(false));
        let step = steps::withdraw_step(budget, Some(Arc::clone(&abandoned)));
        let store = Arc::clone(self.store);
        let call = {
            let store = Arc::clone(&store);
            async move { store.update_budget(step).await }
        };
        let budget = *budget;
        let give_back = move |granted: bool| {
            if granted {
                drop(Permit::new(&store).with_token(&budget));
            }
        };
        self.bounded(Reserving::new(call, abandoned, give_back))
            .await
    }
}
