//! The middleware, one file per topic.
//!
//! Two kinds of test. Wire tests run over real HTTP on loopback (wiremock)
//! for what only the wire shows: arrival times taken on the server's thread,
//! headers, reqwest's own timeouts; they use real time, with exact lower
//! bounds (never earlier than the server allowed) and loose upper bounds.
//! Planning tests (`start_paused`) put a socket-less terminal middleware
//! ([`support::Offline`]) after ours and run on tokio's paused clock: waits
//! are exact and cost no real time. Both assert on what the "server" saw
//! and on the `RetryReport` / error the caller got back; steps that must
//! happen in order wait on what the server has seen, never on a sleep.

mod body;
mod budget;
#[cfg(any(feature = "tracing", feature = "reqwest-tracing"))]
mod capture;
#[cfg(any(feature = "tracing", feature = "metrics"))]
mod clean_logs;
mod deadline;
mod errors;
mod future_size;
mod gate;
mod http_date;
mod idempotency;
mod local_key;
#[cfg(feature = "metrics")]
mod metrics;
mod observe;
mod retry;
#[cfg(feature = "reqwest-tracing")]
mod spans;
#[cfg(feature = "reqwest-retry")]
mod stacking;
mod support;
