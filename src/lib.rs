//! A [`reqwest-middleware`](reqwest_middleware) middleware that makes a
//! reqwest client polite and bounded when a server pushes back.
//!
//! [`RetryAfterMiddleware`] intercepts `429 Too Many Requests` (and `503`
//! with `Retry-After`), asks a pure [planner] whether and when to retry, and
//! waits on [`tokio::time::Instant`] under an absolute per-task
//! [`Deadline`]. It never sends before the server's `Retry-After`, never
//! clamps a long server delay down (it stops instead, with a stable code),
//! never retries a non-idempotent request unless the caller supplied an
//! [`IdempotencyKey`], and never retries a transport error or timeout whose
//! outcome is unknown.
//!
//! ```no_run
//! use std::time::Duration;
//! use reqwest_backpressure::{Deadline, Policy, RetryAfterMiddleware, RetryReport};
//!
//! # async fn run() -> Result<(), reqwest_middleware::Error> {
//! let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
//!     .with(RetryAfterMiddleware::new(Policy::default()))
//!     .build();
//! let r = client
//!     .get("http://localhost:8080/")
//!     .with_extension(Deadline::after(Duration::from_secs(10)))
//!     .send()
//!     .await?;
//! if let Some(reason) = r.extensions().get::<RetryReport>().and_then(|r| r.stop_reason()) {
//!     eprintln!("gave up: {}", reason.code());
//! }
//! # Ok(()) }
//! ```
//!
//! # Stop codes
//!
//! A task that stops retrying returns the last real response (the `429`
//! itself) with a [`RetryReport`] whose [`StopReason::code`] is one of these
//! stable strings: `retry_not_authorized_by_contract`, `body_not_replayable`,
//! `attempt_budget_exhausted`, `deadline_exhausted`, `invalid_retry_after`,
//! `missing_retry_after`, `wait_budget_exhausted`, `retry_budget_exhausted`,
//! `store_unavailable`.
//! Things that never reached the server are an [`Error`] with its own
//! [`code`](Error::code).
//!
//! # Features
//!
//! - `tracing` (default): one `tracing` event per retry decision. Events
//!   carry the origin (`scheme://host:port`), status, attempt, decision and
//!   code, and the `Retry-After` value truncated to 64 characters; never
//!   another header value, a path or a query string.
//! - `redis` (opt-in): `store::RedisStore`, which shares key leases, origin
//!   gates, pacing and the retry budget between processes through Redis.
//! - `metrics` (opt-in): [`metrics::MetricsObserver`], an [`observe::Observer`]
//!   that counts resends, stops and gate closures, and measures waits and
//!   waiting tasks, through the `metrics` facade.
//! - `reqwest-tracing` (opt-in): `ResendCountSpanBackend`, reqwest-tracing's
//!   default span plus OpenTelemetry's `http.request.resend_count`.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![forbid(unsafe_code)]

pub mod budget;
mod error;
mod extensions;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
mod middleware;
pub mod observe;
pub mod origin;
pub mod planner;
mod policy;
mod ratelimit;
#[cfg(feature = "redis")]
mod redis_store;
mod retry_after;
#[cfg(feature = "reqwest-tracing")]
mod span_backend;
pub mod store;
mod task;
mod util;

pub use budget::RetryBudget;
pub use error::Error;
pub use extensions::{Attempt, Deadline, IdempotencyKey, RetryReport};
pub use middleware::{IDEMPOTENCY_KEY, RetryAfterMiddleware, is_idempotent};
pub use planner::{HintSource, StopReason};
pub use policy::{Fallback, InvalidPolicy, Limits, Policy};
pub use ratelimit::{MAX_RATELIMIT_LEN, RateLimitHeaders, RateLimitHint, ResetFormat, parse_reset};
pub use retry_after::{
    Hint, InvalidReason, InvalidRetryAfter, MAX_RETRY_AFTER_LEN, RetryAfter, parse_retry_after,
    server_date,
};
#[cfg(feature = "reqwest-tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-tracing")))]
pub use span_backend::{HTTP_REQUEST_RESEND_COUNT, ResendCountSpanBackend};
pub use store::{MemoryStore, Store};
