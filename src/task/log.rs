//! The `tracing` event of each decision. Only the origin and the
//! `Retry-After` value (truncated) ever leave as text: never another header
//! value, a path or a query string.

use reqwest::Response;
#[cfg(feature = "tracing")]
use tokio::time::Instant;

use crate::planner::{Decision, TaskState};
use crate::retry_after::Hint;

#[cfg(feature = "tracing")]
pub(super) fn log_decision(
    origin: &str,
    response: &Response,
    attempt: u32,
    hint: &Hint,
    state: &TaskState,
    decision: &Decision,
) {
    use http::header::RETRY_AFTER;
    // Only `Retry-After`, truncated, ever leaves as a header value.
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .map(|v| {
            let v = String::from_utf8_lossy(v.as_bytes());
            v.chars().take(64).collect::<String>()
        })
        .unwrap_or_default();
    let source = state.hint_source().map_or("none", |s| s.code());
    match decision {
        Decision::Wait { until, delay, .. } => tracing::debug!(
            target: "reqwest_backpressure::task",
            origin,
            status = response.status().as_u16(),
            hint = hint.kind(),
            source,
            retry_after = %retry_after,
            attempt,
            decision = "wait",
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            wait_ms = u64::try_from(until.saturating_duration_since(Instant::now()).as_millis()).unwrap_or(u64::MAX),
            "reqwest-backpressure: retry planned"
        ),
        Decision::Stop(reason) => tracing::info!(
            target: "reqwest_backpressure::task",
            origin,
            status = response.status().as_u16(),
            hint = hint.kind(),
            source,
            retry_after = %retry_after,
            attempt,
            decision = "stop",
            code = reason.code(),
            "reqwest-backpressure: not retrying"
        ),
    }
}

#[cfg(not(feature = "tracing"))]
pub(super) fn log_decision(_: &str, _: &Response, _: u32, _: &Hint, _: &TaskState, _: &Decision) {}
