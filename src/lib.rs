//! A [`reqwest-middleware`](reqwest_middleware) middleware that makes a
//! reqwest client polite and bounded when a server pushes back.
//!
//! [`RetryAfterMiddleware`] intercepts `429 Too Many Requests` and `503
//! Service Unavailable`, asks a pure [planner] whether and when to retry, and
//! waits on [`tokio::time::Instant`] under an absolute per-task
//! [`Deadline`]. It never sends before the server's `Retry-After`, never
//! clamps a long server delay down (it stops instead, with a stable code),
//! never retries a non-idempotent request unless the caller supplied an
//! [`IdempotencyKey`] (sent, or [`local`](IdempotencyKey::local) for APIs
//! that define none), and never retries a transport error or timeout whose
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
//! `server_said_do_not_retry`, `attempt_budget_exhausted`, `deadline_exhausted`, `invalid_retry_after`,
//! `missing_retry_after`, `wait_budget_exhausted`, `retry_budget_exhausted`,
//! `store_unavailable`.
//! Things that never reached the server are an [`Error`] with its own
//! [`code`](Error::code).
//!
//! # Features
//!
//! - `tracing` (default): one `tracing` event per retry decision (see
//!   [Tracing events](#tracing-events)).
//! - `redis` (opt-in): `store::RedisStore`, which shares key leases, origin
//!   gates, pacing and the retry budget between processes through Redis.
//! - `metrics` (opt-in): `metrics::MetricsObserver`, an [`observe::Observer`]
//!   that counts resends, stops and gate closures, and measures waits and
//!   waiting tasks, through the `metrics` facade.
//! - `reqwest-tracing` (opt-in): `ResendCountSpanBackend`, reqwest-tracing's
//!   default span plus OpenTelemetry's `http.request.resend_count`.
//! - `conformance` (opt-in): `store::conformance`, the checks a
//!   [`Store`] of your own must pass, to run in your tests.
//! - `reqwest-retry` (opt-in): `BackpressureStrategy`, a reqwest-retry
//!   `RetryableStrategy` for a `RetryTransientMiddleware` placed after this
//!   middleware: it resends connection errors and `5xx` answers that are no
//!   pushback, and leaves every pushback to this middleware.
//!
//! # Tracing events
//!
//! With feature `tracing`, these events are an interface: their level,
//! target, message and field names change only with a minor version (a
//! test pins them). Filter them with `RUST_LOG=reqwest_backpressure=debug`.
//! They carry the origin (`scheme://host:port`), never a path, a query
//! string, user info, an idempotency key or a header value other than
//! `Retry-After` (a test sends all of these and looks for them).
//!
//! | level | target | message | fields |
//! |---|---|---|---|
//! | `DEBUG` | `reqwest_backpressure::task` | `reqwest-backpressure: retry planned` | `origin`, `status`, `hint`, `source`, `retry_after`, `attempt`, `decision` (`"wait"`), `delay_ms`, `wait_ms` |
//! | `INFO` | `reqwest_backpressure::task` | `reqwest-backpressure: not retrying` | `origin`, `status`, `hint`, `source`, `retry_after`, `attempt`, `decision` (`"stop"`), `code` |
//! | `WARN` | `reqwest_backpressure::task` | `reqwest-backpressure: could not record an answer in the store` | `origin` |
//! | `WARN` | `reqwest_backpressure::redis_store` | `reqwest-backpressure: redis unavailable, using local state` | `operation`, `error` |
//! | `WARN` | `reqwest_backpressure::redis_store` | `reqwest-backpressure: leases this process holds are held by other tasks in Redis (taken while it could not reach Redis)` | `lost` |
//! | `ERROR` | `reqwest_backpressure::redis_store` | `reqwest-backpressure: the server is a Redis Cluster node; every store operation fails (connect with RedisStore::connect_cluster)` | (none) |
//! | `ERROR` | `reqwest_backpressure::redis_store` | `reqwest-backpressure: a key prefix with a brace on a Redis Cluster; every store operation fails` | (none) |
//! | `ERROR` | `reqwest_backpressure::middleware` | `reqwest-backpressure: invalid policy; every request will be refused` | `error` |
//!
//! The fields:
//!
//! - `origin`: the origin that answered (after a redirect, the target's).
//! - `status`: the answer's status code.
//! - `hint`: what `Retry-After` said: `delay`, `date`, `invalid` or
//!   `missing` ([`Hint::kind`]).
//! - `source`: where the task's wait came from ([`HintSource::code`]:
//!   `retry_after`, `ratelimit`, `fallback`), or `none`.
//! - `retry_after`: the raw `Retry-After` value, truncated to 64
//!   characters (empty when absent).
//! - `attempt`: the attempt that was answered (1-based).
//! - `decision`: `wait` or `stop`.
//! - `delay_ms`: the planned delay, jitter included; `wait_ms`: how long
//!   from now the retry may leave (the later of the delay and a time
//!   already planned).
//! - `code`: the stop code ([`StopReason::code`]).
//! - `operation`: the Redis store operation that failed (`acquire`,
//!   `read_origin`, `update_origin`, `update_budget`, `record`); `error`:
//!   the Redis client's error, or the policy's [`InvalidPolicy`] message.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![forbid(unsafe_code)]

mod admission;
pub mod budget;
mod error;
mod extensions;
mod http_origin;
mod in_flight;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
mod middleware;
pub mod observe;
pub mod origin;
pub mod planner;
mod policy;
mod quota;
mod ratelimit;
#[cfg(feature = "redis")]
mod redis_store;
mod retry_after;
#[cfg(feature = "reqwest-retry")]
mod retry_strategy;
mod scope;
#[cfg(feature = "reqwest-tracing")]
mod span_backend;
pub mod store;
mod task;
mod util;

pub use budget::RetryBudget;
pub use error::Error;
pub use extensions::{Attempt, Cost, Deadline, IdempotencyKey, IdempotencyKeyForm, RetryReport};
pub use middleware::RetryAfterMiddleware;
#[doc(hidden)]
pub use middleware::{IDEMPOTENCY_KEY, is_idempotent};
pub use planner::{HintSource, StopReason};
#[doc(hidden)]
pub use policy::Limits;
pub use policy::{DEFAULT_MAX_SCOPES, Fallback, InvalidPolicy, Policy};
pub use quota::Quota;
#[doc(hidden)]
pub use ratelimit::MAX_RATELIMIT_LEN;
pub use ratelimit::{RateLimitHeaders, RateLimitHint, ResetFormat, TokenLimit, parse_reset};
pub use retry_after::{Hint, InvalidReason, InvalidRetryAfter, RetryAfter, parse_retry_after};
pub use scope::{MAX_SCOPE_LEN, Scope};

/// Test-only hooks for a deterministic simulation; not API.
#[doc(hidden)]
pub mod __sim {
    use std::time::SystemTime;

    /// Makes the crate's wall-clock readings on this thread (turning an
    /// HTTP-date or an epoch reset into a duration) follow tokio's paused
    /// clock: `base` now, then `base` plus the tokio time elapsed. Call it
    /// inside the runtime of a simulation; [`stop_following`] undoes it.
    pub fn follow_paused_clock(base: SystemTime) {
        crate::util::set_paused_wall(Some(base));
    }

    /// Wall-clock readings on this thread are `SystemTime::now()` again.
    pub fn stop_following() {
        crate::util::set_paused_wall(None);
    }
}
#[doc(hidden)]
pub use retry_after::{MAX_RETRY_AFTER_LEN, server_date};
#[cfg(feature = "reqwest-retry")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-retry")))]
pub use retry_strategy::BackpressureStrategy;
#[cfg(feature = "reqwest-tracing")]
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-tracing")))]
pub use span_backend::{HTTP_REQUEST_RESEND_COUNT, ResendCountSpanBackend};
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub use store::conformance;
pub use store::{MemoryStore, Store};
