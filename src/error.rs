use std::time::SystemTime;

use crate::policy::InvalidPolicy;
use crate::store::StoreError;

/// What the middleware returns when it sends nothing itself.
///
/// It reaches the caller as `reqwest_middleware::Error::Middleware` and can be
/// downcast:
///
/// ```
/// # fn check(err: reqwest_middleware::Error) {
/// if let reqwest_middleware::Error::Middleware(e) = &err {
///     if let Some(e) = e.downcast_ref::<reqwest_backpressure::Error>() {
///         println!("stopped before sending: {}", e.code());
///     }
/// }
/// # }
/// ```
///
/// Messages never carry URLs, header values or keys.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another task with the same idempotency key is running or waiting;
    /// nothing was sent. Code `already_active`.
    #[error("a task with this idempotency key is already active")]
    AlreadyActive,
    /// The task's deadline passed before its first send (or while waiting
    /// for the store); nothing was sent. Code `deadline_exhausted`.
    #[error("the deadline passed before the request could be sent")]
    DeadlineExhausted,
    /// The middleware was built with an invalid policy; nothing was sent.
    /// Code `invalid_policy`.
    #[error(transparent)]
    InvalidPolicy(#[from] InvalidPolicy),
    /// The idempotency key cannot be sent as a header value; nothing was
    /// sent. Code `invalid_idempotency_key`.
    #[error("the idempotency key is not a valid header value")]
    InvalidIdempotencyKey,
    /// The task's deadline passed while an attempt was in flight: its
    /// outcome is unknown (the server may have acted on it), so it is not
    /// retried. Code `attempt_timed_out`.
    #[error("the deadline passed while the request was in flight; its outcome is unknown")]
    AttemptTimedOut,
    /// The origin's gate (a `Retry-After` another task received, or the
    /// paced queue behind it) holds the origin past this task's deadline or
    /// `max_wait`; nothing was sent. Code `origin_gate_closed`.
    #[error("the origin asked clients to wait past this request's deadline")]
    OriginGateClosed {
        /// See [`Error::retry_at`].
        retry_at: Option<SystemTime>,
    },
    /// The store could not answer and the policy fails closed; nothing was
    /// sent. Code `store_unavailable`.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Error {
    /// The stable snake_case code of this error.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Error::AlreadyActive => "already_active",
            Error::DeadlineExhausted => "deadline_exhausted",
            Error::InvalidPolicy(_) => "invalid_policy",
            Error::InvalidIdempotencyKey => "invalid_idempotency_key",
            Error::OriginGateClosed { .. } => "origin_gate_closed",
            Error::AttemptTimedOut => "attempt_timed_out",
            Error::Store(_) => "store_unavailable",
        }
    }

    /// For [`OriginGateClosed`](Error::OriginGateClosed): when this request
    /// may usefully be sent, on the local wall clock. That is the later of
    /// when the origin's gate (or the paced queue behind it) could take it
    /// and the latest time the server named. It is never earlier than the
    /// server's time, even where the gate itself opens sooner (the gate is
    /// held at most `max_wait`, then one probe finds out). `None` for other
    /// errors, or if the time is not representable.
    #[must_use]
    pub fn retry_at(&self) -> Option<SystemTime> {
        match self {
            Error::OriginGateClosed { retry_at } => *retry_at,
            _ => None,
        }
    }
}

impl From<Error> for reqwest_middleware::Error {
    fn from(e: Error) -> Self {
        reqwest_middleware::Error::middleware(e)
    }
}
