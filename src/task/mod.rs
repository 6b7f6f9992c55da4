//! One task: a request from its first send to the answer it returns.
//!
//! The loop the README describes, and nothing else: take the key's lease,
//! then until the task ends: wait for the origin (gate, pace), claim an
//! attempt, send it, and on a pushback ask the planner when to retry. Every
//! store call goes through this module, bounded by the task's deadline;
//! every decision is the planner's, and every update the core's
//! ([`store::steps`](crate::store::steps)).
//!
//! `mod.rs` is the loop; `admit.rs` the lease and the wait at every limit (`ask.rs`: one limit),
//! `answer.rs` what an answer means, `report.rs` what the task tells the
//! observer and the caller, `permit.rs` what admission reserved,
//! `halt.rs` how a task ends early, `log.rs` its `tracing` event.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::SystemTime;

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::Next;
use tokio::time::Instant;

use crate::error::Error;
use crate::extensions::{Attempt, IdempotencyKey};
use crate::in_flight::{InFlight, InFlightPermit};
use crate::observe::{self, Observer, WaitReason};
use crate::planner::{Claim, Planner, StopReason, StoreFault, TaskState};
use crate::scope::{Route, ScopeMap};
use crate::store::{Store, StoreError};

mod admit;
mod answer;
mod ask;
mod halt;
mod log;
mod permit;
mod report;
mod reserving;

use answer::answered_by;
pub(crate) use halt::Contract;
use halt::Halt;
use permit::Permit;

/// One task: its planner state, its origin and its last pushback.
pub(crate) struct Task<'a, S: Store> {
    planner: &'a Planner,
    store: &'a Arc<S>,
    /// The middleware's observer and caps on requests in flight.
    shared: &'a Shared,
    /// The origin the request is sent to (`scheme://host:port`): the key
    /// of its origin's limit.
    origin: String,
    /// What decides the request's scope, when one may apply (boxed: most
    /// requests have none).
    route: Option<Box<Route>>,
    /// The key of its scope's limit, when it falls under one (see
    /// [`rescope`](Self::rescope)).
    scope_key: Option<String>,
    /// What it spends of the origin's quota in cost units ([`Cost`](crate::Cost);
    /// 0: none declared).
    cost: crate::Cost,
    state: TaskState,
    /// When the caller may usefully send again, from the last pushback.
    retry_at: Option<SystemTime>,
    /// The last pushback, returned if the task stops before its retry
    /// (boxed: a task that meets none keeps a pointer, not a response, in
    /// its future).
    last: Option<Box<Response>>,
    /// The limit's key (origin, or `origin#scope`) and reason of the wait
    /// the observer was told of and not yet told the end of (only with an
    /// observer).
    /// (Boxed: the task's future keeps a pointer, not the origin's name.)
    pending_wait: Option<Box<(String, WaitReason)>>,
    /// Whether the task waited for a limit's first answer and has not sent
    /// since: it is of that limit's first wave (see `origin/first.rs`).
    waited: bool,
    /// What the next send holds (a retry token granted to it): given back
    /// if the task ends first.
    permit: Permit<'a, S>,
}

/// What a middleware's tasks share besides the planner and the store: its
/// observer, and its caps on requests in flight (one pointer in a task).
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) in_flight: InFlight,
    /// Tasks waiting for an origin's first answer are woken by any answer
    /// recorded in this process (they ask again: a spurious wake costs an
    /// admission), so a fast origin's first answer is waited for one round
    /// trip, not a poll.
    first_answer: tokio::sync::Notify,
    /// How many wait so (an answer wakes nobody, at no cost, when none).
    waiting_first: std::sync::atomic::AtomicUsize,
    /// The scopes this process learned of each origin.
    pub(crate) scopes: ScopeMap,
}

impl Shared {
    /// Waits up to `d` for an answer to be recorded in this process.
    pub(crate) async fn first_answer(&self, d: std::time::Duration) {
        use std::sync::atomic::Ordering;
        let notified = self.first_answer.notified();
        self.waiting_first.fetch_add(1, Ordering::SeqCst);
        let _ = tokio::time::timeout(d, notified).await;
        self.waiting_first.fetch_sub(1, Ordering::SeqCst);
    }

    /// An answer was recorded: tasks waiting for a first answer ask again.
    pub(crate) fn answered(&self) {
        if self.waiting_first.load(std::sync::atomic::Ordering::SeqCst) > 0 {
            self.first_answer.notify_waiters();
        }
    }
}

/// A task dropped while it waits still ends its wait for the observer (and
/// its permit, dropped after this, gives back what it holds).
impl<S: Store> Drop for Task<'_, S> {
    fn drop(&mut self) {
        self.end_wait(true);
    }
}

impl<'a, S: Store> Task<'a, S> {
    pub(crate) fn new(
        planner: &'a Planner,
        store: &'a Arc<S>,
        shared: &'a Shared,
        origin: String,
        route: Option<Box<Route>>,
        cost: crate::Cost,
        deadline: Instant,
    ) -> Self {
        Task {
            planner,
            store,
            shared,
            origin,
            route,
            scope_key: None,
            cost,
            state: TaskState::new(deadline),
            retry_at: None,
            last: None,
            pending_wait: None,
            waited: false,
            permit: Permit::new(store),
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
                // A cap on requests in flight: a permit held until the
                // answer arrives (boxed: most origins have none).
                let in_flight = {
                    let acquire = self.in_flight_permit().map(Box::pin);
                    match acquire {
                        None => Some(None),
                        Some(acquire) => acquire.await,
                    }
                };
                let Some(in_flight) = in_flight else {
                    return self.halt(Halt::Stop(StopReason::DeadlineExhausted));
                };
                if in_flight.is_some() {
                    started = None;
                }
                // Wait at the origin's gate and for a paced slot: no attempt
                // is spent here.
                let now = match self.admit(started.take(), original.as_ref()).await {
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
                // The attempt leaves: what its permit holds is spent.
                self.permit.take().send();
                self.waited = false;
                extensions.insert(Attempt::new(attempt));
                if let Some(o) = self.observer() {
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
                        // The answer is in: the request is no longer in
                        // flight. What the origin learns is recorded by a
                        // future of its own (boxed: the outcome is large,
                        // and the task's future keeps a pointer to it).
                        // Gate, pace and logs belong to the origin that
                        // answered: after a redirect, that is not the
                        // request's.
                        let settled = self.settle(&response, now).map(|(outcome, scope)| {
                            let answered = answered_by(&self.origin, response.url());
                            Box::pin(self.record_answer(answered, scope, outcome))
                        });
                        drop(in_flight);
                        (response, settled)
                    };
                    // Moved into the match whole: nothing borrowing the
                    // task is dropped after it.
                    #[allow(clippy::blocks_in_conditions)]
                    let pushback = match { settled } {
                        Ok(record) => {
                            record.await;
                            return Ok(self.report(response, None, None));
                        }
                        Err(pushback) => pushback,
                    };
                    let (rate_limit, received_at, sent_ago) = *pushback;
                    let pushed_back = Box::pin(self.pushed_back(
                        response,
                        rate_limit,
                        received_at,
                        sent_ago,
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

    /// Finds the scope the request falls under now (an answer may have
    /// taught its route another); whether it changed.
    fn rescope(&mut self) -> bool {
        let Some(route) = &self.route else {
            return false;
        };
        let max = self.planner.policy().scopes.max;
        let key = route
            .scope(&self.shared.scopes, &self.origin, max)
            .map(|scope| crate::scope::key::limit_key(&self.origin, Some(&scope)));
        let changed = key != self.scope_key;
        self.scope_key = key;
        changed
    }

    /// Whether the request counts against its API's documented global
    /// limit.
    fn under_global(&self) -> bool {
        self.route.as_ref().is_none_or(|r| r.under_global_limit())
    }

    /// The middleware's observer, if it has one.
    fn observer(&self) -> Option<&'a dyn Observer> {
        self.shared.observer.as_deref()
    }

    /// A permit for one request in flight to the origin, once one is free,
    /// when it has a cap (declared, or stated by the server); `None` when
    /// it has none, with nothing to await.
    ///
    /// The future answers `None` when the deadline passed first, else the
    /// permit (`None` inside: the origin has no cap after all).
    #[allow(clippy::type_complexity)]
    fn in_flight_permit(
        &self,
    ) -> Option<impl Future<Output = Option<Option<Box<InFlightPermit>>>> + Send + '_> {
        let declared = self.planner.policy().declared_in_flight(&self.origin);
        self.shared
            .in_flight
            .applies(declared)
            .then_some(async move {
                self.bounded_raw(self.shared.in_flight.acquire(&self.origin, declared))
                    .await
                    .map(|permit| permit.map(Box::new))
            })
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
}
