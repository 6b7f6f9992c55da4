//! Request and response extensions: what a caller attaches to a request,
//! and what the middleware attaches to the response.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::planner::StopReason;
use crate::store::far_future;

/// Request extension: the absolute deadline of the whole task, retries and
/// waits included. Without one, the policy's `default_deadline` applies from
/// when the middleware first sees the request.
///
/// ```
/// use std::time::Duration;
/// use reqwest_backpressure::Deadline;
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// let response = client
///     .get("http://localhost/")
///     .with_extension(Deadline::after(Duration::from_secs(10)))
///     .send()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline `budget` from now (saturating far in the future).
    #[must_use]
    pub fn after(budget: Duration) -> Self {
        let now = Instant::now();
        Deadline(now.checked_add(budget).unwrap_or_else(|| far_future(now)))
    }

    /// The deadline at `instant`.
    #[must_use]
    pub fn at(instant: Instant) -> Self {
        Deadline(instant)
    }

    /// The deadline as an instant.
    #[must_use]
    pub fn instant(&self) -> Instant {
        self.0
    }
}

/// Request extension: the task's idempotency key.
///
/// It authorises retrying a non-idempotent method (the server promised, by
/// supporting the key, that a repeat is applied once), it is sent on every
/// attempt as an `Idempotency-Key` header in the IETF httpapi draft's form,
/// a Structured Field string (`Idempotency-Key: "order-42"`), unless the
/// request already has that header, and it identifies the task: a second
/// concurrent send with the same key to the same origin fails with
/// `already_active` and sends nothing. A key that an sf-string cannot carry
/// (control or non-ASCII characters) fails with `invalid_idempotency_key`.
///
/// A request with an `Idempotency-Key` header and no extension is treated
/// the same way, keyed by the header's value (quoted or bare).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(Arc<str>);

impl IdempotencyKey {
    /// A key; its value should be unique per logical operation.
    #[must_use]
    pub fn new(key: impl Into<String>) -> Self {
        IdempotencyKey(Arc::from(key.into()))
    }

    /// The key's value.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for IdempotencyKey {
    /// Keys may be guessable secrets; debug output shows only their length.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey(<{} bytes>)", self.0.len())
    }
}

/// Placed in the request's extensions before each attempt, so a middleware
/// after this one (tracing, metrics) can tell a first send from a resend,
/// e.g. to record OpenTelemetry's `http.request.resend_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempt {
    number: u32,
}

impl Attempt {
    pub(crate) fn new(number: u32) -> Self {
        Attempt { number }
    }

    /// 1-based number of this attempt.
    #[must_use]
    pub fn number(&self) -> u32 {
        self.number
    }

    /// How many times this request was sent before (`number - 1`): the value
    /// of OpenTelemetry's `http.request.resend_count`.
    #[must_use]
    pub fn resend_count(&self) -> u32 {
        self.number.saturating_sub(1)
    }
}

/// Inserted into the extensions of every response the middleware returns:
/// what happened to the task.
///
/// ```
/// # async fn run(client: reqwest_middleware::ClientWithMiddleware) -> reqwest_middleware::Result<()> {
/// use reqwest_backpressure::RetryReport;
/// let response = client.get("http://localhost/").send().await?;
/// if let Some(report) = response.extensions().get::<RetryReport>() {
///     println!("{} attempts, waited {:?}", report.attempts(), report.waited());
///     if let Some(reason) = report.stop_reason() {
///         println!("stopped: {}", reason.code());
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryReport {
    pub(crate) attempts: u32,
    pub(crate) waited: Duration,
    pub(crate) stop_reason: Option<StopReason>,
    pub(crate) retry_at: Option<SystemTime>,
}

impl RetryReport {
    /// Sends made, counting the first.
    #[must_use]
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Time the task spent waiting: for the server's time (and jitter)
    /// between attempts, and at the origin's gate or for a paced slot,
    /// including any time queued there before the first send.
    #[must_use]
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Why the task stopped retrying a pushed-back response; `None` when the
    /// returned response is not a push-back status (e.g. a success).
    #[must_use]
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop_reason
    }

    /// When the caller may usefully send this request again (on the local
    /// wall clock), set only when the task stopped on a pushback:
    ///
    /// - the server's earliest retry time from the last pushed-back
    ///   response, when it gave a valid one;
    /// - or later, when the origin's gate or the paced queue behind it
    ///   refused the retry: the time the origin could take it. A caller who
    ///   reschedules then neither sends before the server's time nor joins
    ///   the same queue again.
    ///
    /// `None` when the task did not stop on a pushback (a success, also
    /// after a retry: the server's earlier time no longer matters), or when
    /// the server gave no valid time.
    #[must_use]
    pub fn retry_at(&self) -> Option<SystemTime> {
        self.retry_at
    }
}
