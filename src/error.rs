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
    /// The task's deadline had passed before its first send; nothing was
    /// sent. Code `deadline_exhausted`.
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
            Error::Store(_) => "store_unavailable",
        }
    }
}

impl From<Error> for reqwest_middleware::Error {
    fn from(e: Error) -> Self {
        reqwest_middleware::Error::middleware(e)
    }
}
