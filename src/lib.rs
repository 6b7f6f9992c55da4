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
//! `store_unavailable` (the table below says when each applies).
//! An `Err` means nothing reached the server, or the outcome is unknown (a
//! transport error, passed through untouched). This crate's own errors are
//! `reqwest_middleware::Error::Middleware` wrapping an [`Error`] (downcast
//! it); its [`code`](Error::code) is one of `already_active`,
//! `deadline_exhausted`, `attempt_timed_out` (the deadline passed while an
//! attempt was in flight: outcome unknown, not retried),
//! `origin_gate_closed`, `invalid_policy`, `invalid_idempotency_key`,
//! `store_unavailable`.
//!
//! # Decisions and stop codes
//!
//! For each answer, in this order; the first row decides whether it is a pushback at all
//! (`Policy::is_pushback_response`), the others apply to pushbacks. The last column says where the
//! wait comes from (`RetryReport::hint_source()`):
//!
//! | condition | outcome | code / hint source |
//! |---|---|---|
//! | no pushback: the status is not one of `Policy::statuses` (`429`, `503` by default), and not a status the rate-limit headers declare with the quota exhausted or, declared with `pushback_status_with_retry_after` (GitHub's `403` and `429`), with a valid `Retry-After` (a plain `403`, a `404`, a `500`) | returned as it is, never retried; the report counts the attempts and has no stop code, retry time or hint source | — |
//! | method not idempotent (RFC 9110 §9.2.2) and no idempotency key | stop | `retry_not_authorized_by_contract` |
//! | request body cannot be cloned (a stream) | stop | `body_not_replayable` |
//! | attempts used ≥ `max_attempts` (counts the first send) | stop | `attempt_budget_exhausted` |
//! | now ≥ deadline | stop | `deadline_exhausted` |
//! | `Retry-After` present but invalid | stop (never guess); with the origin gate on, the pushback still closes the gate as a bare `429` does, for the hold of our own, or, when longer, for what the value still reads as a plain decimal number of seconds, as its upper bound (Shopify's `2.0`: 2.1 s; at most `max_wait`; never told as a server time): other tasks are held longer, never early | `invalid_retry_after` |
//! | `Retry-After` valid and above zero | the server's time | `retry_after` |
//! | `Retry-After` missing or zero, and a rate-limit header gives a later reset | the reset, as the server's time | `ratelimit` |
//! | `Retry-After` zero (or a past date), the first time for this task | retry at once (+ jitter); an origin answering zero twice within a second is held for a second at its gate | `retry_after` |
//! | `Retry-After` zero again for this task | the fallback delay, doubled per further zero, capped at `max_wait`; closes the gate for that long, at most 1 s (a zero means under a second; the task alone backs off further); `Fallback::Stop` stops | `fallback` / `missing_retry_after` |
//! | `Retry-After` missing, no reset (any pushback status: a `429`, a `503`, a declared one) | with the origin gate on (the default): the pushback closes the gate for a hold of its own (1 s; after a rejected probe 0.2 s, growing by 60% per further rejected probe up to 2 s and `max_wait`; behind a smooth pace, four of its intervals; never told as a server time), and the task waits there with no delay of its own, then for its paced slot. With `origin_gate(false)`, or when the answer came from where a redirect led: the `missing_retry_after` fallback delay (+ jitter). `Fallback::Stop` stops | `gate` / `fallback` / `missing_retry_after` |
//! | server delay > `max_wait`, or total waited would exceed `max_total_wait` | stop, **never clamp a server delay down** | `wait_budget_exhausted` |
//! | ready time + `send_reserve` ≥ deadline | stop | `deadline_exhausted` |
//! | a retry at a delay of our own (`fallback`) that no origin gate holds (the gate is off, or the answer came from where a redirect led), and the retry budget is empty | stop | `retry_budget_exhausted` |
//! | a shared store that fails closed cannot answer before the retry | stop (the pushback is returned) | `store_unavailable` |
//! | otherwise | wait until `max(now + delay + jitter, already planned time)`, then queue at the origin's gate | — |
//!
//! Every row is a pure function, tested with fixed times: the first is `Policy::is_pushback_response`,
//! the others the planner's (`planner::Planner::plan`, `admission_limit`, `spend_budget`,
//! `origin_outcome`).
//!
//! Before each send the deadline and the attempt budget are checked again. Waiting at the origin's
//! gate spends no attempt; if the gate (or the paced queue behind it) holds the origin past a
//! task's deadline or `max_wait` (a declared quota's queue: past its deadline only; a wait counts
//! from the store's answer, so a shared store's round trip is part of it), a first send
//! fails at once with `origin_gate_closed`, a retry
//! stops with `deadline_exhausted` or `wait_budget_exhausted`. Either way the caller is told when
//! to come back (`Error::retry_at()`, `RetryReport::retry_at()`): the later of the server's own
//! time and when the gate or queue could take the request, never earlier than the server said.
//! The codes are stable strings (`StopReason::code()`, `Error::code()`).
//!
//! What a waiting task holds, it gives back however it ends (dropped by its caller, e.g. under
//! `tokio::time::timeout`, stopped, or failed): a reserved paced slot goes to the next task (the
//! last slot of the queue exactly; any slot once no other is held, the queue then going on from
//! the last slot used), with the unit of a stated quota it spent; a retry token the budget granted
//! to a retry never sent goes back to the budget. So does what an admission reserved or spent (its
//! `Cost` units too) when the task is dropped while a shared store's answer is on its way: the call
//! runs to its end on its own and gives it back. A slot given back between two still held is not
//! handed out again (the tasks behind it keep the times they were told) until that queue drains.
//!
//! An answer that pushes back with no time at all (a bare `429` or `503`, no `Retry-After`, no
//! rate-limit reset) closes the origin's gate like any other pushback, for a hold of ours: a
//! second, from the first such answer (the rest of the same burst's rejections change nothing). The
//! reopening lets one probe through and learns what the origin admitted in the period that ended,
//! per hold; the queue then leaves *smoothly* at that rate (one request every `1/rate`), not in
//! batches: nothing tells a window or a bucket, which refill a batch between two, from a limiter
//! that counts what it admitted over a sliding span, denials included (HAProxy's `http_req_rate`),
//! which a batch a period outruns, and a smooth pace outruns none. A rejection of the smooth pace
//! holds the gate for four of its intervals and cuts the rate by a tenth; a clean second raises it
//! by 2%. If the probe is rejected too, the next hold is a fifth of a second, growing by 60% per
//! further rejected probe up to 2 s (and `max_wait`): an origin that is down sees one probe per
//! hold (about one every 2 s), never a retry per waiting task, and is found again within 2 s once it
//! is back. A task pushed back with no time waits at the gate 50 ms per attempt behind the others, so
//! the next probe is another task's; one with a single attempt left waits a second more, behind the
//! tasks a pace still rising told to come back (a long outage's probes spend attempts others can
//! spare, not a task's last). A slot booked before a rejection closed the gate does not leave when the
//! gate's time passes: its task asks again, and the first to ask is the probe. A hold is not a server
//! time: refusals (`retry_at`) never quote it as one.
//!
//! Under a declared quota, a bare rejection isolated among successes (more than half of the
//! origin's last 32 answers, itself counted, admitted) is the request's, not the pace's: Stripe's
//! `429` `lock_timeout`, an object another request holds. The gate stays open and the pace is not
//! cut; new slots pause for four of the pace's intervals (50 ms to 1 s), so the retry leaves behind
//! what was sent with it. An overload (most recent answers rejections, an outage after a clean run
//! by its 16th rejection at the latest) is held and cut as above. A pace learned from a silent
//! server is cut by any bare rejection, as ever: nginx's bucket, a little overrun, also rejects one
//! request in many.
//!
//! Where the server does state its times, a batch that it rejects before half of it got through,
//! after the batch before got through whole, says the same (it refills no batch between two): the
//! pace goes on smoothly at the batch's rate, a tenth below. A rejected probe alone cuts no pace
//! ("not yet" is not "too fast"), and a queue restarted at a reopened gate after a rejection voids
//! the slots of the one before: their tasks ask again behind the probe.
//!
//! What spends the retry budget, and why: the budget bounds amplification (how many more requests a
//! pushback turns into), not patience. A retry that waits at the origin's gate adds no load beyond
//! what the origin admits (one probe per hold, then the learned pace), so it spends nothing, however
//! long it waits. A retry at a delay of our own choosing that no gate holds (with `origin_gate(false)`,
//! or after a redirect to another origin) spends a token: nothing else would bound how many of them
//! a rejecting server gets. A retry at the server's own time never spends one.
//!
//! The gate, pacing and logs belong to the origin that *answered* (`Response::url()`): after a
//! redirect, a `429` from the target closes the target's gate. A retry of a redirected request is
//! sent to its own URL again, no earlier than the server's time.
//!
//! `Retry-After` parsing (`parse_retry_after`, public for users of other clients): delay-seconds is
//! ASCII `1*DIGIT` only (leading zeros fine; signs, fractions, exponents, inner spaces, Unicode
//! digits, empty → invalid); a 30-digit value is a valid, enormous delay (→ `wait_budget_exhausted`,
//! and the origin's gate closes for `max_wait`, then one probe), never an overflow; HTTP-dates in IMF-fixdate, RFC 850 and asctime form, nothing else (second
//!
//!
//! # Placing it among other middlewares
//!
//! - **reqwest-tracing**: put `RetryAfterMiddleware` *first* (`.with(RetryAfterMiddleware::new(..)).with(TracingMiddleware::<ResendCountSpanBackend>::new())`)
//!   so each attempt gets its own span. Before each attempt the middleware inserts an `Attempt`
//!   extension; `attempt.resend_count()` is OpenTelemetry's `http.request.resend_count`.
//!   reqwest-tracing does not record that field itself: `ResendCountSpanBackend` (feature
//!   `reqwest-tracing`) is its default span plus that field, on resends (see the `observe` module).
//! - **reqwest-retry**: do not let both retry the same answers. Place this
//!   middleware first and give reqwest-retry `BackpressureStrategy` (feature
//!   `reqwest-retry`), built from the same policy: its docs have the example
//!   and say exactly what each of the two retries.
//! - **reqwest's own retry** (`reqwest::retry`, per-host budgets) covers
//!   protocol-level NACKs and can stay on.
//!
//! # Limits
//!
//! - The pushed-back response is kept (unread) while its task waits, so that a task that cannot
//!   send its retry after all still returns what the server said; over HTTP/1.1 that holds one
//!   connection per waiting task.
//! - A streaming body is sent once: a push-back on it stops with `body_not_replayable`.
//! - A pushback that names no scope holds its whole origin (`scheme://host:port`): an API that
//!   limits per path or per user without saying so in its headers needs its scopes declared
//!   ([`Scope`], [`Policy::scope_rule`]). A `Retry-After` longer than `max_wait` closes the
//!   gate for `max_wait` only: the task that got it stops (`wait_budget_exhausted`), other tasks
//!   that could not wait that long are refused at once, and after `max_wait` one probe finds out
//!   whether the origin is back, so one absurd value never closes an origin for good.
//! - Time spent queued at the gate counts toward `max_total_wait`; the task's deadline bounds the
//!   attempt until its response headers arrive (reading the body afterwards is bounded by the
//!   request's or client's timeout, when set).
//! - The learned batch is raised only after 10 s without push-back (by 10%); an origin whose first
//!   burst understated its capacity is paced below it for that long. A pushback that comes after a
//!   quiet spell (the last success more than a tenth of the server's period, or of a hold of ours,
//!   before it) teaches no pace: what the quiet spell admitted is a floor, not a ceiling, so the
//!   queue leaves in slow start from it (at least one a second, one more per success) until a
//!   pushback measures the origin. A server that does admit that little costs one rejected request,
//!   once.
//! - A batch is spread over the first burst's duration, and the next leaves a period after its last
//!   slot: a token bucket that admitted while it rejected looks like a window to the client, so a
//!   window pays that duration each period (BENCHMARKS.md, the storm). A server that states its quota and
//!   reset (rate-limit headers) is told apart and gets each batch at once.
//! - State is per process unless a shared store (`RedisStore`) is used.
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

/// The README's examples, compiled and run as doctests
/// (`cargo test --all-features --doc`; its Redis example needs `redis`).
#[cfg(all(doctest, feature = "redis"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
