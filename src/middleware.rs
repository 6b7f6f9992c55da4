//! The middleware: clones, sends, sleeps, and asks the planner.

use std::time::{Duration, SystemTime};

use http::header::{HeaderName, HeaderValue};
use http::{Extensions, Method, StatusCode};
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next};
use tokio::time::Instant;

use crate::error::Error;
use crate::extensions::{Attempt, Deadline, IdempotencyKey, RetryReport};
use crate::pacing::Admission;
use crate::planner::{Claim, Decision, Planner, Pushback, StopReason, TaskState};
use crate::policy::{InvalidPolicy, Policy};
use crate::retry_after::{Hint, server_date};
use crate::store::{LeaseToken, MemoryStore, Outcome, Store, StoreError, far_future};

/// The `Idempotency-Key` request header (IETF httpapi draft).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// A [`reqwest_middleware::Middleware`] that retries pushed-back requests
/// (`429`, and `503` with `Retry-After`) no earlier than the server allows,
/// within bounded budgets and an absolute per-task deadline.
///
/// ```no_run
/// use std::time::Duration;
/// use reqwest_backpressure::{Deadline, IdempotencyKey, Policy, RetryAfterMiddleware, RetryReport};
///
/// # async fn run() -> Result<(), reqwest_middleware::Error> {
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryAfterMiddleware::new(Policy::default()))
///     .build();
///
/// // Idempotent: retried on 429 within the budgets and the deadline.
/// let r = client
///     .get("http://localhost:8080/items")
///     .with_extension(Deadline::after(Duration::from_secs(10)))
///     .send()
///     .await?;
///
/// // Not idempotent: retried only because the caller supplied a key.
/// let r = client
///     .post("http://localhost:8080/orders")
///     .with_extension(IdempotencyKey::new("order-42"))
///     .send()
///     .await?;
/// let report = r.extensions().get::<RetryReport>().expect("always present");
/// println!("{} attempts, stop: {:?}", report.attempts(), report.stop_reason().map(|s| s.code()));
/// # Ok(()) }
/// ```
///
/// Place it *before* `reqwest-tracing`'s middleware (so each attempt gets its
/// own span, with the [`Attempt`] extension to read) and do not combine it
/// with another retry middleware on the same statuses.
#[derive(Debug)]
pub struct RetryAfterMiddleware<S = MemoryStore> {
    planner: Result<Planner, InvalidPolicy>,
    store: S,
}

impl Default for RetryAfterMiddleware<MemoryStore> {
    fn default() -> Self {
        Self::new(Policy::default())
    }
}

impl RetryAfterMiddleware<MemoryStore> {
    /// The middleware with `policy` and an in-memory store.
    ///
    /// An invalid policy never panics: the middleware then refuses every
    /// request with [`Error::InvalidPolicy`] and sends nothing. Use
    /// [`try_new`](Self::try_new) to find out at build time.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        Self::with_store(policy, MemoryStore::new())
    }

    /// The middleware with `policy`, or why the policy is invalid.
    pub fn try_new(policy: Policy) -> Result<Self, InvalidPolicy> {
        Self::try_with_store(policy, MemoryStore::new())
    }
}

impl<S: Store> RetryAfterMiddleware<S> {
    /// The middleware with `policy` and `store` (see [`new`](RetryAfterMiddleware::new)
    /// for an invalid policy).
    #[must_use]
    pub fn with_store(policy: Policy, store: S) -> Self {
        let planner = Planner::new(policy);
        #[cfg(feature = "tracing")]
        if let Err(e) = &planner {
            tracing::error!(error = %e, "reqwest-backpressure: invalid policy; every request will be refused");
        }
        RetryAfterMiddleware { planner, store }
    }

    /// The middleware with `policy` and `store`, or why the policy is invalid.
    pub fn try_with_store(policy: Policy, store: S) -> Result<Self, InvalidPolicy> {
        Ok(RetryAfterMiddleware {
            planner: Ok(Planner::new(policy)?),
            store,
        })
    }

    /// The store holding this middleware's shared state.
    #[must_use]
    pub fn store(&self) -> &S {
        &self.store
    }
}

/// Whether `method` is idempotent (RFC 9110 §9.2.2).
#[must_use]
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

/// Frees a key's lease when the task ends in any way: success, error, or
/// the future being dropped mid-wait.
struct LeaseGuard<'a, S: Store> {
    store: &'a S,
    key: String,
    token: LeaseToken,
}

impl<S: Store> Drop for LeaseGuard<'_, S> {
    fn drop(&mut self) {
        self.store.release(&self.key, self.token);
    }
}

/// `scheme://host:port` of a URL: what logs and store keys may carry
/// (never a path's query, user info or fragment).
pub(crate) fn origin_of(url: &reqwest::Url) -> String {
    // Built by hand: this runs on every request, and `format!` costs more
    // than the rest of the success path's bookkeeping.
    let scheme = url.scheme();
    let host = url.host_str().unwrap_or("");
    let mut port = itoa::Buffer::new();
    let port = port.format(url.port_or_known_default().unwrap_or(0));
    let mut origin = String::with_capacity(scheme.len() + host.len() + 9);
    origin.push_str(scheme);
    origin.push_str("://");
    origin.push_str(host);
    origin.push(':');
    origin.push_str(port);
    origin
}

#[async_trait::async_trait]
impl<S: Store> Middleware for RetryAfterMiddleware<S> {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let planner = match &self.planner {
            Ok(p) => p,
            Err(e) => return Err(Error::InvalidPolicy(e.clone()).into()),
        };
        let start = Instant::now();
        let deadline = match extensions.get::<Deadline>() {
            Some(d) => d.instant(),
            None => start
                .checked_add(planner.policy().get_default_deadline())
                .unwrap_or_else(|| far_future(start)),
        };
        if start >= deadline {
            return Err(Error::DeadlineExhausted.into());
        }

        // The task key: the extension (sent as a header unless one is set),
        // else an `Idempotency-Key` header the caller set themselves.
        if let Some(key) = extensions.get::<IdempotencyKey>()
            && !req.headers().contains_key(&IDEMPOTENCY_KEY)
        {
            let value =
                HeaderValue::from_str(key.as_str()).map_err(|_| Error::InvalidIdempotencyKey)?;
            req.headers_mut().insert(IDEMPOTENCY_KEY, value);
        }
        let key = req
            .headers()
            .get(&IDEMPOTENCY_KEY)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let retry_authorized = is_idempotent(req.method()) || key.is_some();
        let origin = origin_of(req.url());

        let _lease = match key {
            Some(key) => {
                let lease_key = format!("{origin} {key}");
                let ttl = deadline.saturating_duration_since(start);
                match self.store.acquire(&lease_key, ttl).await {
                    Ok(Some(token)) => Some(LeaseGuard {
                        store: &self.store,
                        key: lease_key,
                        token,
                    }),
                    Ok(None) => return Err(Error::AlreadyActive.into()),
                    Err(e) => return Err(Error::Store(e).into()),
                }
            }
            None => None,
        };

        let run = Run {
            policy: planner.policy(),
            store: &self.store,
            origin: &origin,
            deadline,
        };
        let mut task = TaskState::new(deadline);
        let mut waited = Duration::ZERO;
        let mut retry_at = None;
        let mut original = Some(req);
        let mut last: Option<Response> = None;
        loop {
            // Wait at the origin's gate and for a paced slot: no attempt is
            // spent here.
            let gate_wait = Instant::now();
            match run.admit(last.is_none()).await {
                Ok(false) => {}
                Ok(true) => waited += gate_wait.elapsed(),
                Err(Refusal::Gate { retry_at, .. }) if last.is_none() => {
                    return Err(Error::OriginGateClosed { retry_at }.into());
                }
                Err(Refusal::Gate { by_deadline, .. }) => {
                    let reason = if by_deadline {
                        StopReason::DeadlineExhausted
                    } else {
                        StopReason::WaitBudgetExhausted
                    };
                    return finish(last, &task, waited, Some(reason), retry_at);
                }
                // Nothing sent yet: a typed error. After a pushback: the
                // pushback itself, which the caller must not lose.
                Err(Refusal::Store(e)) if last.is_none() => return Err(Error::Store(e).into()),
                Err(Refusal::Store(_)) => {
                    return finish(
                        last,
                        &task,
                        waited,
                        Some(StopReason::StoreUnavailable),
                        retry_at,
                    );
                }
            }

            let attempt = match planner.claim(&mut task, Instant::now()) {
                Claim::Send { attempt } => attempt,
                Claim::Stop(reason) => {
                    return finish(last, &task, waited, Some(reason), retry_at);
                }
                // Unreachable with this loop: every wait is followed by a
                // claim at or after its time, and no attempt is in flight.
                Claim::NotYet(_) | Claim::Active | Claim::NothingPlanned => {
                    return finish(
                        last,
                        &task,
                        waited,
                        Some(StopReason::DeadlineExhausted),
                        retry_at,
                    );
                }
            };
            let Some(pending) = original.take() else {
                return finish(
                    last,
                    &task,
                    waited,
                    Some(StopReason::BodyNotReplayable),
                    retry_at,
                );
            };
            // Keep a copy for a retry unless this is the last attempt. A
            // streaming body cannot be copied: it is sent once, and a
            // pushback then stops with `body_not_replayable`.
            let mut this = if attempt < run.policy.max_attempts {
                match pending.try_clone() {
                    Some(copy) => {
                        original = Some(pending);
                        copy
                    }
                    None => pending,
                }
            } else {
                pending
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            let timeout = this.timeout_mut();
            *timeout = Some(timeout.map_or(remaining, |t| t.min(remaining)));
            extensions.insert(Attempt::new(attempt));

            // A transport error or timeout has an unknown outcome: it is
            // returned as is, never treated as a pushback.
            let response = next.clone().run(this, extensions).await?;
            let status = response.status();
            if !run.policy.is_retry_status(status) {
                planner.finish(&mut task);
                run.record(Outcome::Admitted).await;
                return finish(Some(response), &task, waited, None, None);
            }

            let received_at = SystemTime::now();
            let hint = Hint::from_headers(response.headers());
            let pushback = Pushback {
                hint,
                server_now: server_date(response.headers()).unwrap_or(received_at),
                received_at,
                retry_authorized,
                body_replayable: original.is_some() || attempt >= run.policy.max_attempts,
                fallback_allowed: status == StatusCode::TOO_MANY_REQUESTS,
            };
            retry_at = pushback.retry_at();
            let server_delay = pushback.server_delay();
            run.record(Outcome::Pushback {
                retry_in: server_delay,
            })
            .await;
            let now = Instant::now();
            let mut decision = planner.plan(&mut task, &pushback, now, fastrand::u64(..));
            // Retries the server gave no time for spend the client-wide
            // budget; a retry at the server's own time does not.
            if matches!(decision, Decision::Wait { .. }) && server_delay.is_none() {
                match self.store.withdraw_retry(&run.policy.retry_budget).await {
                    Ok(true) => {}
                    Ok(false) => decision = Decision::Stop(StopReason::RetryBudgetExhausted),
                    Err(_) => decision = Decision::Stop(StopReason::StoreUnavailable),
                }
            }
            log_decision(&origin, &response, attempt, &hint, &decision);
            match decision {
                Decision::Stop(reason) => {
                    return finish(Some(response), &task, waited, Some(reason), retry_at);
                }
                Decision::Wait { until, .. } => {
                    // Keep the pushed-back response: if the retry cannot be
                    // sent after all, the caller gets what the server said.
                    last = Some(response);
                    tokio::time::sleep_until(until).await;
                    waited += now.elapsed();
                }
            }
        }
    }
}

/// Why a task may not send to its origin.
enum Refusal {
    /// The gate holds the origin past the task's limits.
    Gate {
        /// When the gate opens.
        retry_at: Option<SystemTime>,
        /// Whether the deadline (not `max_wait`) was the tighter limit.
        by_deadline: bool,
    },
    Store(StoreError),
}

/// One task's view of its origin's shared state.
struct Run<'a, S> {
    policy: &'a Policy,
    store: &'a S,
    origin: &'a str,
    deadline: Instant,
}

impl<S: Store> Run<'_, S> {
    /// Waits until the origin admits this task: the gate is open and its
    /// paced slot has come. Refused when that is later than the task can
    /// wait (its deadline less `send_reserve`, and `max_wait`).
    /// Returns whether it waited.
    /// `first` (the task's first send) deposits into the retry budget,
    /// once however often the task has to ask.
    async fn admit(&self, first: bool) -> Result<bool, Refusal> {
        let pacing = self.policy.pacing_config();
        let mut slept = false;
        let mut deposit = first;
        loop {
            let now = Instant::now();
            let latest = self
                .deadline
                .saturating_duration_since(now)
                .saturating_sub(self.policy.send_reserve)
                .min(self.policy.max_wait);
            let admission = self
                .store
                .admit(
                    self.origin,
                    pacing,
                    &self.policy.retry_budget,
                    latest,
                    deposit,
                )
                .await
                .map_err(Refusal::Store)?;
            deposit = false;
            match admission {
                Admission::Now => return Ok(slept),
                Admission::Refused { gate } => {
                    return Err(Refusal::Gate {
                        retry_at: SystemTime::now().checked_add(gate),
                        by_deadline: latest < self.policy.max_wait,
                    });
                }
                Admission::Queue(d) => {
                    // The gate is closed: ask again when it opens.
                    tokio::time::sleep(d).await;
                    slept = true;
                }
                Admission::Wait(d) => {
                    // Measured from after the store's answer, never early.
                    tokio::time::sleep(d).await;
                    slept = true;
                    // A probe rejected while we slept closed the gate again:
                    // queue anew instead of following it into the rejection.
                    match self.store.gate(self.origin).await.map_err(Refusal::Store)? {
                        None => return Ok(true),
                        Some(_) => continue,
                    }
                }
            }
        }
    }

    /// Records what the origin answered. A store that cannot record it
    /// costs the shared view one observation, never the caller's response.
    async fn record(&self, outcome: Outcome) {
        let result = self
            .store
            .record(self.origin, self.policy.pacing_config(), outcome)
            .await;
        #[cfg(feature = "tracing")]
        if let Err(e) = result {
            tracing::warn!(origin = self.origin, error = %e, "reqwest-backpressure: could not record an answer");
        }
        #[cfg(not(feature = "tracing"))]
        let _ = result;
    }
}

fn finish(
    response: Option<Response>,
    task: &TaskState,
    waited: Duration,
    stop_reason: Option<StopReason>,
    retry_at: Option<SystemTime>,
) -> reqwest_middleware::Result<Response> {
    // `response` is `None` only if no attempt was ever sent, and the first
    // claim of a task whose deadline is in the future always succeeds.
    let mut response = response.ok_or(Error::DeadlineExhausted)?;
    response.extensions_mut().insert(RetryReport {
        attempts: task.attempts(),
        waited,
        stop_reason,
        retry_at,
    });
    Ok(response)
}

#[cfg(feature = "tracing")]
fn log_decision(origin: &str, response: &Response, attempt: u32, hint: &Hint, decision: &Decision) {
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
    match decision {
        Decision::Wait { until, delay } => tracing::debug!(
            origin,
            status = response.status().as_u16(),
            hint = hint.kind(),
            retry_after = %retry_after,
            attempt,
            decision = "wait",
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            wait_ms = u64::try_from(until.saturating_duration_since(Instant::now()).as_millis()).unwrap_or(u64::MAX),
            "reqwest-backpressure: retry planned"
        ),
        Decision::Stop(reason) => tracing::info!(
            origin,
            status = response.status().as_u16(),
            hint = hint.kind(),
            retry_after = %retry_after,
            attempt,
            decision = "stop",
            code = reason.code(),
            "reqwest-backpressure: not retrying"
        ),
    }
}

#[cfg(not(feature = "tracing"))]
fn log_decision(_: &str, _: &Response, _: u32, _: &Hint, _: &Decision) {}

#[cfg(test)]
mod tests {
    #[test]
    fn origin_is_scheme_host_port_only() {
        let cases = [
            (
                "https://user:secret@example.com/a?token=x#f",
                "https://example.com:443",
            ),
            ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
            ("http://[::1]:1/", "http://[::1]:1"),
            ("http://h:65535", "http://h:65535"),
            ("http://h:0", "http://h:0"),
            ("http://h/", "http://h:80"),
        ];
        for (url, origin) in cases {
            let url = reqwest::Url::parse(url).expect("valid url");
            assert_eq!(super::origin_of(&url), origin);
        }
    }
}
