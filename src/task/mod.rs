//! One task: a request from its first send to the answer it returns.
//!
//! The loop the README describes, and nothing else: take the key's lease,
//! then until the task ends: wait for the origin (gate, pace), claim an
//! attempt, send it, and on a pushback ask the planner when to retry. Every
//! store call goes through this file, bounded by the task's deadline; every
//! decision is the planner's.

use std::future::Future;
use std::task::Poll;
use std::time::SystemTime;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::Next;
use tokio::time::Instant;

use crate::error::Error;
use crate::extensions::{Attempt, IdempotencyKey, RetryReport};
use crate::middleware::{origin_of, same_origin};
use crate::observe::{self, Observer, WaitReason, wall_in};
use crate::origin::{Admission, Outcome};
use crate::planner::{Claim, Decision, Planner, Pushback, StopReason, StoreFault, TaskState};
use crate::ratelimit::RateLimitHint;
use crate::retry_after::{Hint, server_date};
use crate::store::{Store, StoreError};

mod halt;
mod log;

pub(crate) use halt::Contract;
use halt::{Halt, LeaseGuard, SlotGuard};
use log::log_decision;

/// One task: its planner state, its origin and its last pushback.
pub(crate) struct Task<'a, S: Store> {
    planner: &'a Planner,
    store: &'a S,
    observer: Option<&'a dyn Observer>,
    /// The origin the request is sent to (`scheme://host:port`).
    origin: String,
    state: TaskState,
    /// When the caller may usefully send again, from the last pushback.
    retry_at: Option<SystemTime>,
    /// The last pushback, returned if the task stops before its retry
    /// (boxed: a task that meets none keeps a pointer, not a response, in
    /// its future).
    last: Option<Box<Response>>,
    /// The origin and reason of the wait the observer was told of and not
    /// yet told the end of (only with an observer).
    pending_wait: Option<(String, WaitReason)>,
    /// A retry token the budget granted to a retry not sent yet: given
    /// back if the task ends first.
    retry_token: bool,
}

/// A task dropped while it waits still ends its wait for the observer, and
/// gives back a retry token it was granted and did not use.
impl<S: Store> Drop for Task<'_, S> {
    fn drop(&mut self) {
        self.end_wait(true);
        if self.retry_token {
            self.store.refund_retry(&self.planner.policy().retry_budget);
        }
    }
}

impl<S: Store> Task<'_, S> {
    /// Tells the observer that the wait it was told of ended (`dropped`:
    /// the task's future was dropped during it).
    fn end_wait(&mut self, dropped: bool) {
        if let (Some(o), Some((origin, reason))) = (self.observer, self.pending_wait.take()) {
            o.on_wait_end(&observe::WaitEnd {
                origin: &origin,
                reason,
                dropped,
            });
        }
    }
}

impl<'a, S: Store> Task<'a, S> {
    pub(crate) fn new(
        planner: &'a Planner,
        store: &'a S,
        observer: Option<&'a dyn Observer>,
        origin: String,
        deadline: Instant,
    ) -> Self {
        Task {
            planner,
            store,
            observer,
            origin,
            state: TaskState::new(deadline),
            retry_at: None,
            last: None,
            pending_wait: None,
            retry_token: false,
        }
    }

    /// Runs the task to its end; `started` is when the middleware took
    /// the request (the clock reading of its first admission).
    ///
    /// A function returning an `async move` block rather than an `async
    /// fn`: an `async fn` keeps its arguments twice in its state (as
    /// captured and as locals), and this future is allocated and moved on
    /// every request. The paths a request that meets no pushback does not
    /// take (a key's lease, a pushback, every wait) are boxed, for the same
    /// reason.
    ///
    /// Its size is kept at most 1 KiB (a test checks it): glibc's malloc
    /// serves blocks of up to 1,032 bytes from a per-thread cache, and
    /// anything larger from the arena's bins, under its lock. Measured on
    /// loopback, the allocation of the 1,184 bytes this future had took
    /// about 0.5 µs more (and its free 0.1 µs more) right after the thread's
    /// wake-up. Hence no local here lives across more awaits than it must:
    /// a local kept across several suspension points gets a slot of its own
    /// beside every other state's, where one kept across a single await
    /// shares its space with the other states.
    #[allow(clippy::manual_async_fn)] // written out on purpose, see above
    pub(crate) fn run<'e>(
        mut self,
        mut started: Option<Instant>,
        mut original: Option<Request>,
        key: Option<IdempotencyKey>,
        contract: Contract,
        extensions: &'e mut Extensions,
        next: Next<'e>,
    ) -> impl Future<Output = reqwest_middleware::Result<Response>> + Send + use<'a, 'e, S> {
        async move {
            let _lease = match key {
                Some(key) => {
                    let acquire = Box::pin(self.acquire(key));
                    match acquire.await {
                        Ok(lease) => Some(lease),
                        Err(e) => {
                            self.stopped(e.code());
                            return Err(e.into());
                        }
                    }
                }
                None => None,
            };
            loop {
                // Wait at the origin's gate and for a paced slot: no attempt
                // is spent here.
                let now = match self.admit(started.take()).await {
                    Ok(now) => now,
                    Err(halt) => return self.halt(halt),
                };
                let attempt = match self.planner.claim(&mut self.state, now) {
                    Claim::Send { attempt } => attempt,
                    Claim::Stop(reason) => return self.halt(Halt::Stop(reason)),
                    // Unreachable with this loop: every wait is followed by
                    // a claim at or after its time, and no attempt is in
                    // flight.
                    Claim::NotYet(_) | Claim::Active | Claim::NothingPlanned => {
                        return self.halt(Halt::Stop(StopReason::DeadlineExhausted));
                    }
                };
                // Keep the request for a retry and send a copy, unless this
                // is the last attempt or the body is a stream (sent once; a
                // pushback then stops with `body_not_replayable`).
                let copy = if attempt < self.planner.policy().max_attempts && contract.replayable {
                    original.as_ref().and_then(Request::try_clone)
                } else {
                    None
                };
                let Some(this) = copy.or_else(|| original.take()) else {
                    return self.halt(Halt::Stop(StopReason::BodyNotReplayable));
                };
                // The retry a token was granted for is sent.
                self.retry_token = false;
                extensions.insert(Attempt::new(attempt));
                if let Some(o) = self.observer {
                    o.on_send(&observe::Send {
                        origin: &self.origin,
                        attempt,
                    });
                }
                // The answer's scope ends before the wait for a retry: the
                // task's future then keeps neither the response nor the
                // pushback's result beside the wait's own state.
                let until = {
                    // Settled in a block of its own: the binding it borrows
                    // ends there, and the response is then kept only across
                    // the success path's one await.
                    let (response, settled) = {
                        let response = match self.send(this, extensions, next.clone()).await {
                            Ok(result) => result?,
                            Err(_) => return Err(Error::AttemptTimedOut.into()),
                        };
                        let settled = self.settle(&response);
                        (response, settled)
                    };
                    let (rate_limit, received_at) = match settled {
                        Ok(outcome) => {
                            // Gate, pace and logs belong to the origin that
                            // answered: after a redirect, that is not the
                            // request's.
                            let answered = answered_by(&self.origin, response.url());
                            self.record(&answered, outcome).await;
                            return Ok(self.report(response, None, None));
                        }
                        Err(pushback) => pushback,
                    };
                    let pushed_back = Box::pin(self.pushed_back(
                        response,
                        rate_limit,
                        received_at,
                        attempt,
                        contract,
                    ));
                    match pushed_back.await {
                        Ok(done) => return done,
                        Err(until) => until,
                    }
                };
                let sleep = Box::pin(tokio::time::sleep_until(until));
                sleep.await;
                self.end_wait(false);
            }
        }
    }

    /// Sends one attempt, bounded by the deadline (elapsed: the caller
    /// ends the task with [`Error::AttemptTimedOut`]). A transport error or
    /// timeout has an unknown outcome: it is returned as is, never treated
    /// as a pushback.
    fn send<'n>(
        &self,
        mut request: Request,
        extensions: &'n mut Extensions,
        next: Next<'n>,
    ) -> tokio::time::Timeout<impl Future<Output = reqwest_middleware::Result<Response>> + 'n> {
        let deadline = self.state.deadline();
        // Trim a timeout the caller set to what is left of the deadline;
        // without one, the deadline bounds the attempt below (and the
        // client's own timeout, if any, still applies).
        if let Some(t) = request.timeout_mut() {
            *t = (*t).min(deadline.saturating_duration_since(Instant::now()));
        }
        tokio::time::timeout_at(deadline, next.run(request, extensions))
    }

    /// Settles an answer that is not a pushback: the attempt is over, and
    /// what the origin's shared state learns from it. A pushback: what its
    /// rate-limit headers say, and when it was received.
    fn settle(&mut self, response: &Response) -> Result<Outcome, (RateLimitHint, SystemTime)> {
        let policy = self.planner.policy();
        // The clock is read only if a header or a pushback needs it.
        let mut received_at = None;
        let rate_limit = self.rate_limit(response, || {
            *received_at.get_or_insert_with(SystemTime::now)
        });
        if policy.is_pushback_response(response.status(), &rate_limit, response.headers()) {
            return Err((rate_limit, received_at.unwrap_or_else(SystemTime::now)));
        }
        self.planner.finish(&mut self.state);
        Ok(match (rate_limit.remaining(), rate_limit.reset()) {
            (_, Some(reset_in)) if policy.proactive_gate && rate_limit.exhausted() => {
                Outcome::Exhausted { reset_in }
            }
            (Some(remaining), Some(reset_in)) if policy.proactive_gate => Outcome::Quota {
                remaining,
                reset_in,
            },
            _ => Outcome::Admitted,
        })
    }

    /// What to do with a pushback received at `received_at`: the task's
    /// result, or when to retry.
    async fn pushed_back(
        &mut self,
        response: Response,
        rate_limit: RateLimitHint,
        received_at: SystemTime,
        attempt: u32,
        contract: Contract,
    ) -> Result<reqwest_middleware::Result<Response>, Instant> {
        let policy = self.planner.policy();
        let status = response.status();
        let answered = answered_by(&self.origin, response.url());
        let headers = response.headers();
        let hint = Hint::from_headers(headers);
        let pushback = Pushback {
            retry_authorized: contract.retry_authorized,
            body_replayable: contract.replayable,
            ..Pushback::from_response(
                status,
                hint,
                server_date(headers).unwrap_or(received_at),
                received_at,
                rate_limit.retry_in(),
            )
        };
        self.retry_at = pushback.retry_at();
        let now = Instant::now();
        let mut decision = self
            .planner
            .plan(&mut self.state, &pushback, now, fastrand::u64(..));
        self.record(&answered, self.planner.origin_outcome(&pushback, &decision))
            .await;
        if self.planner.needs_budget(&decision) {
            let budget = &policy.retry_budget;
            let granted = self.bounded(self.store.withdraw_retry(budget)).await;
            let token = matches!(granted, Ok(true));
            decision = self
                .planner
                .spend_budget(&mut self.state, decision, granted);
            // Held until the retry is sent; a stop gives it back at once.
            self.retry_token = token && matches!(decision, Decision::Wait { .. });
            if token && !self.retry_token {
                self.store.refund_retry(budget);
            }
        }
        log_decision(&answered, &response, attempt, &hint, &self.state, &decision);
        match decision {
            Decision::Stop(reason) => Ok(self.finish(response, Some(reason))),
            Decision::Wait { until, source, .. } => {
                // Owned: the wait outlives this borrow of the task (a
                // pushback's cost, not the success path's).
                let answered = answered.into_owned();
                self.waiting(Some(&answered), WaitReason::Retry(source), until - now);
                // Keep the pushed-back response: if the retry cannot be
                // sent after all, the caller gets what the server said.
                self.last = Some(Box::new(response));
                Err(until)
            }
        }
    }

    /// What the response's rate-limit headers say, when the policy reads
    /// them and the answer could use them (a pushback, a status they
    /// declare, or any answer when the proactive gate is on).
    fn rate_limit(
        &self,
        response: &Response,
        received_at: impl FnOnce() -> SystemTime,
    ) -> RateLimitHint {
        let policy = self.planner.policy();
        let headers = &policy.rate_limit_headers;
        let status = response.status();
        let useful = (policy.proactive_gate && policy.origin_gate)
            || policy.is_retry_status(status)
            || headers.pushback_statuses().contains(&status);
        if !useful || headers.is_empty() {
            return RateLimitHint::default();
        }
        headers.read_with(response.headers(), || {
            server_date(response.headers()).unwrap_or_else(received_at)
        })
    }

    /// Takes the lease of `key` (scoped to the origin, so one key against
    /// two APIs does not collide).
    async fn acquire(&self, key: IdempotencyKey) -> Result<LeaseGuard<'a, S>, Error> {
        let lease_key = format!("{} {}", self.origin, key.as_str());
        let ttl = self
            .state
            .deadline()
            .saturating_duration_since(Instant::now());
        match self.bounded_raw(self.store.acquire(&lease_key, ttl)).await {
            Some(Ok(Some(token))) => Ok(LeaseGuard {
                store: self.store,
                key: lease_key,
                token,
            }),
            Some(Ok(None)) => Err(Error::AlreadyActive),
            Some(Err(e)) => Err(Error::Store(e)),
            None => Err(Error::DeadlineExhausted),
        }
    }

    /// Waits until the origin admits this task: its gate is open and its
    /// paced slot has come, within the planner's
    /// [admission limit](Planner::admission_limit). The task's first send
    /// deposits into the retry budget, once however often it asks.
    ///
    /// `now`, if given, is a clock reading taken just before (the
    /// middleware's): it is used instead of reading the clock again, and
    /// returned as the time of admission when the store answered at once.
    /// Otherwise the time of admission is read when it comes.
    async fn admit(&mut self, now: Option<Instant>) -> Result<Instant, Halt> {
        let policy = self.planner.policy();
        let pacing = policy.pacing_config();
        let mut deposit = self.state.attempts() == 0;
        let mut now = now;
        loop {
            let asked = now.take().unwrap_or_else(Instant::now);
            let limit = self.planner.admission_limit(&self.state, asked);
            let (admission, at_once) = self
                .bounded_ready(self.store.admit(
                    &self.origin,
                    pacing,
                    &policy.retry_budget,
                    limit.latest,
                    deposit,
                ))
                .await;
            let admission = admission
                .ok_or(Halt::Stop(StopReason::DeadlineExhausted))?
                .map_err(Halt::Store)?;
            deposit = false;
            let admitted = || if at_once { asked } else { Instant::now() };
            let wait = match admission {
                Admission::Now => return Ok(admitted()),
                Admission::Reopened => {
                    if let Some(o) = self.observer {
                        o.on_gate_reopened(&observe::GateReopened {
                            origin: &self.origin,
                        });
                    }
                    return Ok(admitted());
                }
                Admission::Refused { free_in } => {
                    // Never earlier than the server's time, and a caller who
                    // reschedules then does not rejoin the same queue.
                    let retry_at = SystemTime::now().checked_add(free_in);
                    self.retry_at = self.retry_at.max(retry_at);
                    return Err(Halt::Refused {
                        reason: limit.reason,
                        retry_at,
                    });
                }
                Admission::QuotaHeld(d) => {
                    self.gate_closed(&self.origin, d);
                    self.waiting(None, WaitReason::Gate, d);
                    d
                }
                Admission::GateClosed(d) => {
                    self.waiting(None, WaitReason::Gate, d);
                    d
                }
                Admission::QueueAhead(d) => {
                    self.waiting(None, WaitReason::Pace, d);
                    d
                }
                Admission::SlotReserved(d, reservation) => {
                    // Given back unless the slot is confirmed: the task may
                    // be dropped, or stop, while it waits.
                    let mut slot = SlotGuard {
                        store: self.store,
                        origin: self.origin.clone(),
                        reservation: Some(reservation),
                    };
                    self.waiting(None, WaitReason::Pace, d);
                    let slept = Instant::now();
                    let sleep = Box::pin(tokio::time::sleep(d));
                    sleep.await;
                    self.end_wait(false);
                    self.state.add_wait(slept.elapsed());
                    // A probe rejected while we slept closed the gate again:
                    // queue anew instead of following it into the rejection
                    // (the store then takes the slot back).
                    // Until the store answers, the slot is still ours to
                    // give back.
                    let gate = self
                        .bounded_raw(self.store.confirm_slot(&self.origin, reservation))
                        .await
                        .ok_or(Halt::Stop(StopReason::DeadlineExhausted))?
                        .map_err(Halt::Store)?;
                    slot.reservation = None;
                    if gate.is_none() {
                        return Ok(Instant::now());
                    }
                    continue;
                }
            };
            // Measured from after the store's answer, never early.
            let slept = Instant::now();
            let sleep = Box::pin(tokio::time::sleep(wait));
            sleep.await;
            self.end_wait(false);
            self.state.add_wait(slept.elapsed());
        }
    }

    /// Records what `origin` answered. A store that cannot record it (in
    /// time) costs the shared view one observation, never the caller's
    /// response.
    async fn record(&self, origin: &str, outcome: Outcome) {
        let pacing = self.planner.policy().pacing_config();
        let result = self
            .bounded_raw(self.store.record(origin, pacing, outcome))
            .await;
        if let Some(Ok(Some(closed))) = &result {
            self.gate_closed(origin, *closed);
        }
        #[cfg(feature = "tracing")]
        if !matches!(result, Some(Ok(_))) {
            tracing::warn!(
                target: "reqwest_backpressure::task",
                origin,
                "reqwest-backpressure: could not record an answer in the store"
            );
        }
        #[cfg(not(feature = "tracing"))]
        let _ = result;
    }

    /// Tells the observer that `origin`'s gate closed for `d`.
    fn gate_closed(&self, origin: &str, d: std::time::Duration) {
        if let Some(o) = self.observer {
            o.on_gate_closed(&observe::GateClosed {
                origin,
                duration: d,
                until_wall: wall_in(d),
            });
        }
    }

    /// `fut`, unless the task's deadline passes first.
    async fn bounded_raw<T>(&self, fut: impl Future<Output = T>) -> Option<T> {
        self.bounded_ready(fut).await.0
    }

    /// `fut`, unless the task's deadline passes first, and whether it
    /// answered at once.
    async fn bounded_ready<T>(&self, fut: impl Future<Output = T>) -> (Option<T>, bool) {
        let mut fut = std::pin::pin!(fut);
        // A call answered at once (the in-memory store's always are) needs
        // no timer; only a pending one is raced with the deadline.
        match std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
            Poll::Ready(v) => (Some(v), true),
            Poll::Pending => {
                let bounded = Box::pin(tokio::time::timeout_at(self.state.deadline(), fut));
                (bounded.await.ok(), false)
            }
        }
    }

    /// A store call's answer, or why it gave none.
    async fn bounded<T>(
        &self,
        fut: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreFault> {
        match self.bounded_raw(fut).await {
            Some(Ok(v)) => Ok(v),
            Some(Err(_)) => Err(StoreFault::Unavailable),
            None => Err(StoreFault::Deadline),
        }
    }

    /// Tells the observer that the task waits `d` for `reason`, for the
    /// origin that `answered` (or, without one, its own).
    fn waiting(&mut self, answered: Option<&str>, reason: WaitReason, d: std::time::Duration) {
        let Some(o) = self.observer else {
            return;
        };
        let origin = answered.unwrap_or(&self.origin);
        let now = Instant::now();
        o.on_wait(&observe::Wait {
            origin,
            attempt: self.state.attempts() + 1,
            reason,
            duration: d,
            until: now.checked_add(d).unwrap_or(now),
            until_wall: wall_in(d),
        });
        let origin = origin.to_owned();
        self.pending_wait = Some((origin, reason));
    }

    /// Tells the observer that the task stopped with `code`.
    fn stopped(&self, code: &'static str) {
        if let Some(o) = self.observer {
            o.on_stop(&observe::Stop {
                origin: &self.origin,
                attempts: self.state.attempts(),
                code,
            });
        }
    }

    /// Ends the task before a send: with the last pushback and the halt's
    /// stop code, or, if nothing was answered yet, with the halt's error.
    fn halt(mut self, halt: Halt) -> reqwest_middleware::Result<Response> {
        match self.last.take() {
            Some(response) => {
                let retry_at = self.retry_at;
                let reason = halt.reason();
                self.stopped(reason.code());
                Ok(self.report(*response, Some(reason), retry_at))
            }
            None => {
                let error = halt.into_error();
                self.stopped(error.code());
                Err(error.into())
            }
        }
    }

    /// Ends the task with `response`.
    fn finish(
        &self,
        response: Response,
        stop_reason: Option<StopReason>,
    ) -> reqwest_middleware::Result<Response> {
        if let Some(reason) = stop_reason {
            self.stopped(reason.code());
        }
        Ok(self.report(response, stop_reason, stop_reason.and(self.retry_at)))
    }

    fn report(
        &self,
        mut response: Response,
        stop_reason: Option<StopReason>,
        retry_at: Option<SystemTime>,
    ) -> Response {
        response.extensions_mut().insert(RetryReport {
            attempts: self.state.attempts(),
            waited: self.state.waited(),
            stop_reason,
            retry_at,
            hint_source: self.state.hint_source(),
        });
        response
    }
}

/// The origin that answered `url`: the request's own `origin` unless a
/// redirect led elsewhere (built only then).
fn answered_by<'o>(origin: &'o str, url: &reqwest::Url) -> std::borrow::Cow<'o, str> {
    if same_origin(origin, url) {
        std::borrow::Cow::Borrowed(origin)
    } else {
        std::borrow::Cow::Owned(origin_of(url))
    }
}
