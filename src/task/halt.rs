//! What a task knows before it sends, how it ends early, and the guard
//! that frees its key's lease however it ends.

use std::sync::Arc;
use std::time::SystemTime;

use crate::error::Error;
use crate::planner::{StopReason, StoreFault};
use crate::store::{LeaseToken, Store, StoreError};
use crate::util::detach;

/// What the request's contract allows, known before any send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Contract {
    /// An idempotent method, or an idempotency key.
    pub(crate) retry_authorized: bool,
    /// The body is not a stream.
    pub(crate) replayable: bool,
}

/// Why a task ended before a send.
#[derive(Debug)]
pub(super) enum Halt {
    /// The planner, or a store call that could not answer in time.
    Stop(StopReason),
    /// The store failed, and fails closed.
    Store(StoreError),
    /// The origin (gate or paced queue) cannot take the task in time.
    Refused {
        reason: StopReason,
        retry_at: Option<SystemTime>,
    },
}

impl Halt {
    /// The stop code of a task that holds a pushback.
    pub(super) fn reason(&self) -> StopReason {
        match self {
            Halt::Stop(reason) | Halt::Refused { reason, .. } => *reason,
            Halt::Store(_) => StopReason::StoreUnavailable,
        }
    }

    /// The error of a task that sent nothing yet.
    pub(super) fn into_error(self) -> Error {
        match self {
            Halt::Refused { retry_at, .. } => Error::OriginGateClosed { retry_at },
            Halt::Store(e) => Error::Store(e),
            Halt::Stop(_) => Error::DeadlineExhausted,
        }
    }
}

impl From<StoreFault> for Halt {
    fn from(fault: StoreFault) -> Self {
        Halt::Stop(fault.reason())
    }
}

/// Frees a key's lease when the task ends in any way: success, error, or
/// the future being dropped mid-wait.
pub(super) struct LeaseGuard<'a, S: Store> {
    pub(super) store: &'a Arc<S>,
    /// `None` once handed to the release.
    pub(super) key: Option<String>,
    pub(super) token: LeaseToken,
}

impl<S: Store> Drop for LeaseGuard<'_, S> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else {
            return;
        };
        let (store, token) = (Arc::clone(self.store), self.token);
        detach(Box::pin(async move {
            let _ = store.release(&key, token).await;
        }));
    }
}
