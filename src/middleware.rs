//! The middleware: clones, sends, sleeps, and asks the planner.

use std::future::Future;
use std::time::{Duration, SystemTime};

use http::header::HeaderName;
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
use crate::store::{LeaseToken, MemoryStore, Outcome, Store, far_future};

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
/// # Redirects
///
/// reqwest follows redirects by default. The gate, pacing, the recorded
/// answer and the logs belong to the origin that answered
/// ([`Response::url`]): a `429` from a redirect's target closes the
/// target's gate, not the gate of the origin the request was sent to. A
/// retry of a redirected request is sent to the request's own URL again
/// (reqwest follows the redirect anew); it leaves no earlier than the
/// server's time all the same, and asks the request's origin for admission.
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
                .checked_add(planner.policy().default_deadline)
                .unwrap_or_else(|| far_future(start)),
        };
        if start >= deadline {
            return Err(Error::DeadlineExhausted.into());
        }

        // The task key: the extension (sent as an `Idempotency-Key` header
        // unless the caller set one), else the caller's own header.
        if let Some(key) = extensions.get::<IdempotencyKey>()
            && !req.headers().contains_key(&IDEMPOTENCY_KEY)
        {
            let value = key.header_value().ok_or(Error::InvalidIdempotencyKey)?;
            req.headers_mut().insert(IDEMPOTENCY_KEY, value);
        }
        let key = match req.headers().get(&IDEMPOTENCY_KEY) {
            Some(value) => Some(
                IdempotencyKey::from_header(value)
                    .ok_or(Error::InvalidIdempotencyKey)?
                    .into_string(),
            ),
            None => None,
        };
        let retry_authorized = is_idempotent(req.method()) || key.is_some();
        // A streaming body cannot be sent twice; known before any send.
        let replayable = req.body().is_none_or(|b| b.as_bytes().is_some());
        let origin = origin_of(req.url());

        let mut task = Task {
            planner,
            store: &self.store,
            origin: &origin,
            state: TaskState::new(deadline),
            waited: Duration::ZERO,
            retry_at: None,
            last: None,
        };
        let _lease = match key {
            Some(key) => {
                let lease_key = format!("{origin} {key}");
                let ttl = deadline.saturating_duration_since(start);
                match task.bounded(self.store.acquire(&lease_key, ttl)).await {
                    Some(Ok(Some(token))) => Some(LeaseGuard {
                        store: &self.store,
                        key: lease_key,
                        token,
                    }),
                    Some(Ok(None)) => return Err(Error::AlreadyActive.into()),
                    Some(Err(e)) => return Err(Error::Store(e).into()),
                    None => return Err(Error::DeadlineExhausted.into()),
                }
            }
            None => None,
        };

        let max_attempts = planner.policy().max_attempts;
        let mut original = Some(req);
        loop {
            // Wait at the origin's gate and for a paced slot: no attempt is
            // spent here.
            if let Err((reason, error)) = task.admit().await {
                return task.stop(reason, error);
            }
            let attempt = match planner.claim(&mut task.state, Instant::now()) {
                Claim::Send { attempt } => attempt,
                Claim::Stop(reason) => return task.stop(reason, Error::DeadlineExhausted),
                // Unreachable with this loop: every wait is followed by a
                // claim at or after its time, and no attempt is in flight.
                Claim::NotYet(_) | Claim::Active | Claim::NothingPlanned => {
                    return task.stop(StopReason::DeadlineExhausted, Error::DeadlineExhausted);
                }
            };
            let Some(pending) = original.take() else {
                return task.stop(StopReason::BodyNotReplayable, Error::DeadlineExhausted);
            };
            // Keep a copy for a retry unless this is the last attempt or the
            // body is a stream (sent once; a pushback then stops with
            // `body_not_replayable`).
            let mut this = match (attempt < max_attempts && replayable)
                .then(|| pending.try_clone())
                .flatten()
            {
                Some(copy) => {
                    original = Some(pending);
                    copy
                }
                None => pending,
            };
            // Trim a timeout the caller set to what is left of the deadline;
            // without one, the deadline bounds the attempt below (and the
            // client's own timeout, if any, still applies).
            let remaining = deadline.saturating_duration_since(Instant::now());
            if let Some(t) = this.timeout_mut() {
                *t = (*t).min(remaining);
            }
            extensions.insert(Attempt::new(attempt));

            // A transport error or timeout has an unknown outcome: it is
            // returned as is, never treated as a pushback.
            let response =
                match tokio::time::timeout_at(deadline, next.clone().run(this, extensions)).await {
                    Ok(result) => result?,
                    Err(_) => return Err(Error::AttemptTimedOut.into()),
                };
            let status = response.status();
            // Gate, pace and logs belong to the origin that answered: after a
            // redirect, that is not the request's.
            let answered = origin_of(response.url());
            if !planner.policy().is_retry_status(status) {
                planner.finish(&mut task.state);
                task.record(&answered, Outcome::Admitted).await;
                return task.finish(response, None);
            }

            let received_at = SystemTime::now();
            let hint = Hint::from_headers(response.headers());
            let pushback = Pushback {
                hint,
                server_now: server_date(response.headers()).unwrap_or(received_at),
                received_at,
                retry_authorized,
                body_replayable: replayable,
                fallback_allowed: status == StatusCode::TOO_MANY_REQUESTS,
            };
            task.retry_at = pushback.retry_at();
            let server_delay = pushback.server_delay();
            task.record(
                &answered,
                Outcome::Pushback {
                    retry_in: server_delay,
                },
            )
            .await;
            let now = Instant::now();
            let mut decision = planner.plan(&mut task.state, &pushback, now, fastrand::u64(..));
            // Retries the server gave no time for spend the client-wide
            // budget; a retry at the server's own time does not.
            if matches!(decision, Decision::Wait { .. }) && server_delay.is_none() {
                let budget = &planner.policy().retry_budget;
                decision = match task.bounded(self.store.withdraw_retry(budget)).await {
                    Some(Ok(true)) => decision,
                    Some(Ok(false)) => Decision::Stop(StopReason::RetryBudgetExhausted),
                    Some(Err(_)) => Decision::Stop(StopReason::StoreUnavailable),
                    None => Decision::Stop(StopReason::DeadlineExhausted),
                };
            }
            log_decision(&answered, &response, attempt, &hint, &decision);
            match decision {
                Decision::Stop(reason) => return task.finish(response, Some(reason)),
                Decision::Wait { until, .. } => {
                    // Keep the pushed-back response: if the retry cannot be
                    // sent after all, the caller gets what the server said.
                    task.last = Some(response);
                    tokio::time::sleep_until(until).await;
                    task.waited += now.elapsed();
                }
            }
        }
    }
}

/// One task: its planner state, what it waited, and its last pushback.
struct Task<'a, S> {
    planner: &'a Planner,
    store: &'a S,
    origin: &'a str,
    state: TaskState,
    /// Time actually spent waiting, for the report.
    waited: Duration,
    /// The server's time from the last pushback.
    retry_at: Option<SystemTime>,
    /// The last pushback, returned if the task stops before its retry.
    last: Option<Response>,
}

impl<S: Store> Task<'_, S> {
    /// `fut`, unless the task's deadline passes first.
    async fn bounded<T>(&self, fut: impl Future<Output = T>) -> Option<T> {
        tokio::time::timeout_at(self.state.deadline(), fut)
            .await
            .ok()
    }

    /// Ends the task before a send: with the last pushback and `reason`,
    /// or, if nothing was sent yet, with `error`.
    fn stop(self, reason: StopReason, error: Error) -> reqwest_middleware::Result<Response> {
        match self.last {
            Some(response) => {
                let retry_at = self.retry_at;
                Self::report(response, &self.state, self.waited, Some(reason), retry_at)
            }
            None => Err(error.into()),
        }
    }

    /// Ends the task with `response`.
    fn finish(
        self,
        response: Response,
        stop_reason: Option<StopReason>,
    ) -> reqwest_middleware::Result<Response> {
        let retry_at = stop_reason.and(self.retry_at);
        Self::report(response, &self.state, self.waited, stop_reason, retry_at)
    }

    fn report(
        mut response: Response,
        state: &TaskState,
        waited: Duration,
        stop_reason: Option<StopReason>,
        retry_at: Option<SystemTime>,
    ) -> reqwest_middleware::Result<Response> {
        response.extensions_mut().insert(RetryReport {
            attempts: state.attempts(),
            waited,
            stop_reason,
            retry_at,
        });
        Ok(response)
    }

    /// Waits until the origin admits this task: its gate is open and its
    /// paced slot has come. Refused when that is later than the task may
    /// wait: its deadline less `send_reserve`, `max_wait`, and what is left
    /// of `max_total_wait` (time at the gate counts). The task's first
    /// send deposits into the retry budget, once however often it asks.
    async fn admit(&mut self) -> Result<(), (StopReason, Error)> {
        let policy = self.planner.policy();
        let pacing = policy.pacing_config();
        let mut deposit = self.state.attempts() == 0;
        loop {
            let limit = self.planner.admission_limit(&self.state, Instant::now());
            let admission = self
                .bounded(self.store.admit(
                    self.origin,
                    pacing,
                    &policy.retry_budget,
                    limit.latest,
                    deposit,
                ))
                .await
                .ok_or((StopReason::DeadlineExhausted, Error::DeadlineExhausted))?
                .map_err(|e| (StopReason::StoreUnavailable, Error::Store(e)))?;
            deposit = false;
            let wait = match admission {
                Admission::Now => return Ok(()),
                Admission::Refused { free_in } => {
                    // Never earlier than the server's time, and a caller who
                    // reschedules then does not rejoin the same queue.
                    let retry_at = SystemTime::now().checked_add(free_in);
                    self.retry_at = self.retry_at.max(retry_at);
                    return Err((limit.reason, Error::OriginGateClosed { retry_at }));
                }
                Admission::GateClosed(d) | Admission::SlotReserved(d) => d,
            };
            // Measured from after the store's answer, never early.
            let slept = Instant::now();
            tokio::time::sleep(wait).await;
            self.state.add_wait(slept.elapsed());
            self.waited += slept.elapsed();
            if let Admission::SlotReserved(_) = admission {
                // A probe rejected while we slept closed the gate again:
                // queue anew instead of following it into the rejection.
                let gate = self
                    .bounded(self.store.gate(self.origin))
                    .await
                    .ok_or((StopReason::DeadlineExhausted, Error::DeadlineExhausted))?
                    .map_err(|e| (StopReason::StoreUnavailable, Error::Store(e)))?;
                if gate.is_none() {
                    return Ok(());
                }
            }
        }
    }

    /// Records what the origin answered. A store that cannot record it
    /// (in time) costs the shared view one observation, never the caller's
    /// response.
    async fn record(&self, origin: &str, outcome: Outcome) {
        let pacing = self.planner.policy().pacing_config();
        let result = self
            .bounded(self.store.record(origin, pacing, outcome))
            .await;
        #[cfg(feature = "tracing")]
        if !matches!(result, Some(Ok(()))) {
            tracing::warn!(
                origin,
                "reqwest-backpressure: could not record an answer in the store"
            );
        }
        #[cfg(not(feature = "tracing"))]
        let _ = result;
    }
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
