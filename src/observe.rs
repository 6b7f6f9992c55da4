//! The observer hook: what the middleware is doing, as it happens.
//!
//! Why a hook? A waiting client looks exactly like a hung one. A CLI wants
//! to print "waiting 38 s for api.example.com", a batch job a progress bar,
//! a service a dashboard. The `tracing` events say the same things as text;
//! an [`Observer`] receives them as data, in order, from the task that
//! lives them.
//!
//! Every method defaults to doing nothing, so an observer implements only
//! what it uses. Two observers combine as a tuple, `(a, b)`: each event goes
//! to `a`, then to `b` (so `metrics::MetricsObserver`,
//! feature `metrics`, sits beside your own). An `Arc<O>` is an observer too,
//! so you can keep a handle to read what yours collected.
//!
//! Each [`on_wait`](Observer::on_wait) is followed by exactly one
//! [`on_wait_end`](Observer::on_wait_end) for the same task, origin and
//! scope: when its time comes, or when the task's future is dropped while
//! it waits. A task waits at one limit at a time, so the number of tasks
//! waiting at a limit is the difference of the two for its origin and
//! scope, and for an origin the difference summed over its scopes.
//!
//! An event carries the origin (`scheme://host:port`), never a path, a
//! query string, a header value or an idempotency key. An event about a
//! limit (a wait, a gate, the store's local state) also carries the scope
//! whose limit it is (see [`Scope`](crate::Scope)): a GitHub resource
//! (`search`), a Discord bucket with its major parameter
//! (`bucket:channel`, or `route:METHOD_/path` before the route's first
//! answer), an IETF partition, a declared scope; `None` for the origin's
//! own limit. A scope's name is cleaned and bounded
//! ([`MAX_SCOPE_LEN`](crate::MAX_SCOPE_LEN)) and is the one
//! [`Store::scope_status`](crate::Store::scope_status) reads. With no
//! observer attached, nothing is built.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use reqwest_backpressure::observe::{Observer, Wait};
//! use reqwest_backpressure::{Policy, RetryAfterMiddleware};
//!
//! #[derive(Default)]
//! struct Waits(AtomicUsize);
//!
//! impl Observer for Waits {
//!     fn on_wait(&self, wait: &Wait<'_>) {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!         let scope = wait.scope.unwrap_or("-");
//!         eprintln!("waiting {:?} for {} {scope} ({})", wait.duration, wait.origin, wait.reason.code());
//!     }
//! }
//!
//! let middleware = RetryAfterMiddleware::new(Policy::default()).with_observer(Waits::default());
//! # drop(middleware);
//! ```
//!
//! # The limits' status
//!
//! What a limit holds is decided inside the store, not by one task, so the
//! store tells it: [`Store::origin_status`](crate::Store::origin_status)
//! answers an [`OriginStatus`](crate::origin::OriginStatus) (`None` for an
//! origin it does not know), times counted from now: `gate_closed_for()`
//! (the gate, or a spent stated quota), `reserved()` (paced slots whose
//! tasks have not sent yet), `next_slot_in()` (what a task asking now would
//! wait for), `pace()` (shown as `50 per 1.02 s`) and `quota_left()`.
//! [`Store::scope_status`](crate::Store::scope_status) answers the same for
//! one scope (the name as the events carry it), so a GitHub client sees
//! `search` spent while `core` runs. Over a shared store it is every
//! process's view. The middleware moves into the client: keep a clone of
//! the store (clones share their state) and pass it to
//! [`RetryAfterMiddleware::with_store`](crate::RetryAfterMiddleware::with_store),
//! or take `middleware.store().clone()` first.
//!
//! `cargo run --example progress` is what a CLI author copies: an
//! `indicatif` bar of requests done, tasks waiting and stopped (from an
//! observer of 20 lines), and the origin's slots, next free slot, gate and
//! pace (from `origin_status`, read on the bar's 100 ms tick):
//!
//! ```text
//!  0s [=======>                      ] 50/200 done · waiting 150 · stopped 0 · slots   0 · gate reopens in 0.8 s · unpaced
//!  2s [===============>              ] 100/200 done · waiting 100 · stopped 0 · slots 100 · next free slot in 3.4 s · gate open · pace 50 per 1.02 s
//! ```
//!
//! The other two ways to watch it: metrics (feature `metrics`,
//! `metrics::MetricsObserver`, labels bounded) and `tracing` events (the
//! crate docs' table). A test sends requests with an `Authorization`
//! header, cookies, a query token, user info in the URL and an idempotency
//! key, and checks that none of their values (nor the path) appears in any
//! `tracing` event, observer event or metric label.

use std::fmt;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::planner::HintSource;

/// Why a task waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitReason {
    /// For the server's time, or the policy's fallback, after a pushback
    /// (see [`HintSource`]).
    Retry(HintSource),
    /// At a closed gate, its origin's or its scope's (another task's
    /// pushback, or an exhausted quota), before it may ask for a slot.
    Gate,
    /// For its slot in the paced queue behind a reopened gate.
    Pace,
    /// For the origin's first answer, which another task's request is
    /// waiting for: it may state the origin's quota. Or, once it came, for
    /// the answers of the requests that waited for it (the first wave),
    /// which may meet a limit no header states.
    FirstAnswer,
}

impl WaitReason {
    /// A stable snake_case code: `retry_after`, `ratelimit`, `fallback`,
    /// `gate`, `pace` or `first_answer`.
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            WaitReason::Retry(source) => source.code(),
            WaitReason::Gate => "gate",
            WaitReason::Pace => "pace",
            WaitReason::FirstAnswer => "first_answer",
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A task starts waiting.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Wait<'a> {
    /// The origin the task waits for (`scheme://host:port`).
    pub origin: &'a str,
    /// The scope whose limit the task waits for, `None` for the origin's
    /// own limit (see the [module docs](self)).
    pub scope: Option<&'a str>,
    /// The attempt the task will send when the wait ends (1 for the first
    /// send, when it waits at the gate before it).
    pub attempt: u32,
    /// Why it waits.
    pub reason: WaitReason,
    /// How long it waits from now.
    pub duration: Duration,
    /// When the wait ends, on tokio's clock.
    pub until: Instant,
    /// When the wait ends, on the wall clock.
    pub until_wall: SystemTime,
}

/// A task's wait ends: its time came, or the task was dropped while it
/// waited. Follows each [`Wait`] exactly once.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct WaitEnd<'a> {
    /// The origin of the [`Wait`] it ends.
    pub origin: &'a str,
    /// The scope of the [`Wait`] it ends.
    pub scope: Option<&'a str>,
    /// The reason of the [`Wait`] it ends.
    pub reason: WaitReason,
    /// The task's future was dropped before the wait's time came.
    pub dropped: bool,
}

/// An attempt leaves.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Send<'a> {
    /// The origin it is sent to.
    pub origin: &'a str,
    /// 1-based number of the attempt.
    pub attempt: u32,
}

/// A task ends without the answer it wanted: a stop code
/// ([`StopReason::code`](crate::StopReason::code)) with the pushback it
/// returns, or an error code ([`Error::code`](crate::Error::code)) when it
/// sent nothing.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Stop<'a> {
    /// The origin of the task.
    pub origin: &'a str,
    /// Sends made.
    pub attempts: u32,
    /// The stable code.
    pub code: &'static str,
}

/// A limit's gate closes: its origin's, or one scope's of it (an answer
/// made it close; later answers that only move its time are not reported
/// again).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct GateClosed<'a> {
    /// The origin.
    pub origin: &'a str,
    /// The scope whose gate closed, `None` for the origin's own.
    pub scope: Option<&'a str>,
    /// How long from now it stays closed.
    pub duration: Duration,
    /// When it reopens, on the wall clock.
    pub until_wall: SystemTime,
}

/// A limit's gate reopens (its origin's, or one scope's of it): the task
/// told is its probe.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct GateReopened<'a> {
    /// The origin.
    pub origin: &'a str,
    /// The scope whose gate reopened, `None` for the origin's own.
    pub scope: Option<&'a str>,
}

/// A task's store ran one of its operations on this process's own state
/// instead of the shared one: the shared store did not answer and it fails
/// open (the Redis store's `FailMode::Open`), so what it
/// did (a key's lease, a gate or a paced slot, an answer recorded) is not
/// shared with other processes. The store also logs a `warn` event.
/// Reported when the store's count of such operations
/// ([`Store::local_fallbacks`](crate::Store::local_fallbacks)) rose during
/// the task's call; with many tasks at once, a call may be told of another
/// task's fallback beside its own (never of none when there was one).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct LocalState<'a> {
    /// The origin of the task.
    pub origin: &'a str,
    /// The scope whose limit the operation was about, `None` for the
    /// origin's own (and for a `lease`, which is no limit's).
    pub scope: Option<&'a str>,
    /// What the task asked the store for, a stable code: `lease`,
    /// `admission` or `record`.
    pub operation: &'static str,
}

/// Receives what the middleware does. Every method defaults to nothing.
///
/// Methods are called from the task's own future, synchronously: keep them
/// short (count, send on a channel), never block.
pub trait Observer: std::marker::Send + Sync + 'static {
    /// A task starts waiting (after a pushback, at a closed gate, or for a
    /// paced slot).
    fn on_wait(&self, wait: &Wait<'_>) {
        let _ = wait;
    }

    /// A wait ends (once per [`on_wait`](Self::on_wait)).
    fn on_wait_end(&self, end: &WaitEnd<'_>) {
        let _ = end;
    }

    /// An attempt leaves.
    fn on_send(&self, send: &Send<'_>) {
        let _ = send;
    }

    /// A task stops (a stop code, or an error before any send).
    fn on_stop(&self, stop: &Stop<'_>) {
        let _ = stop;
    }

    /// A limit's gate closes (an origin's, or a scope's).
    fn on_gate_closed(&self, gate: &GateClosed<'_>) {
        let _ = gate;
    }

    /// A limit's gate reopens (an origin's, or a scope's).
    fn on_gate_reopened(&self, gate: &GateReopened<'_>) {
        let _ = gate;
    }

    /// A task's store used this process's own state instead of the shared
    /// one.
    fn on_local_state(&self, local: &LocalState<'_>) {
        let _ = local;
    }
}

/// Both observers, `.0` first, then `.1`.
impl<A: Observer, B: Observer> Observer for (A, B) {
    fn on_wait(&self, wait: &Wait<'_>) {
        self.0.on_wait(wait);
        self.1.on_wait(wait);
    }

    fn on_wait_end(&self, end: &WaitEnd<'_>) {
        self.0.on_wait_end(end);
        self.1.on_wait_end(end);
    }

    fn on_send(&self, send: &Send<'_>) {
        self.0.on_send(send);
        self.1.on_send(send);
    }

    fn on_stop(&self, stop: &Stop<'_>) {
        self.0.on_stop(stop);
        self.1.on_stop(stop);
    }

    fn on_gate_closed(&self, gate: &GateClosed<'_>) {
        self.0.on_gate_closed(gate);
        self.1.on_gate_closed(gate);
    }

    fn on_gate_reopened(&self, gate: &GateReopened<'_>) {
        self.0.on_gate_reopened(gate);
        self.1.on_gate_reopened(gate);
    }

    fn on_local_state(&self, local: &LocalState<'_>) {
        self.0.on_local_state(local);
        self.1.on_local_state(local);
    }
}

/// A shared observer: keep one handle, give the middleware the other.
impl<O: Observer + ?Sized> Observer for std::sync::Arc<O> {
    fn on_wait(&self, wait: &Wait<'_>) {
        (**self).on_wait(wait);
    }

    fn on_wait_end(&self, end: &WaitEnd<'_>) {
        (**self).on_wait_end(end);
    }

    fn on_send(&self, send: &Send<'_>) {
        (**self).on_send(send);
    }

    fn on_stop(&self, stop: &Stop<'_>) {
        (**self).on_stop(stop);
    }

    fn on_gate_closed(&self, gate: &GateClosed<'_>) {
        (**self).on_gate_closed(gate);
    }

    fn on_gate_reopened(&self, gate: &GateReopened<'_>) {
        (**self).on_gate_reopened(gate);
    }

    fn on_local_state(&self, local: &LocalState<'_>) {
        (**self).on_local_state(local);
    }
}

/// The wall-clock time `d` from now (saturating at now).
pub(crate) fn wall_in(d: Duration) -> SystemTime {
    let now = crate::util::wall_now();
    now.checked_add(d).unwrap_or(now)
}
