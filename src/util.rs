//! Small helpers the layers share: time, memory bounds, locks, and work
//! left to run when nobody waits for it. Depends on nothing else in the
//! crate, so every layer may use it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Waker};
use std::time::Duration;

use tokio::time::Instant;

/// Gives memory back once a burst of entries is over: when a map holds
/// under a quarter of its capacity (and the capacity is not small), it
/// shrinks to twice its length. The hysteresis keeps this rare.
pub(crate) fn shrink_after_burst<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if map.capacity() > 64 && map.len() < map.capacity() / 4 {
        map.shrink_to(map.len() * 2);
    }
}

/// About 30 years ahead: the latest instant we ever compute.
pub(crate) fn far_future(now: Instant) -> Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}

/// `d` in whole nanoseconds, saturating (for the stores' text forms).
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Locks a mutex whose data stays consistent even if a holder panicked
/// (every update under these locks is a single assignment).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Work that runs to its end though nobody waits for it (a guard's `Drop`
/// giving something back).
pub(crate) type Detached = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Runs `work` without waiting for it: polled once here (a store that
/// answers at once is done before this returns), and, if it is not done,
/// as a task of its own on the current runtime. Without a runtime nothing
/// runs: what it would give back passes unused (a slot's time comes, a
/// lease's TTL ends).
pub(crate) fn detach(mut work: Detached) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut cx = Context::from_waker(Waker::noop());
    if work.as_mut().poll(&mut cx).is_pending() {
        // The runtime polls it again at once, with a waker of its own.
        runtime.spawn(work);
    }
}

thread_local! {
    /// Set only by a deterministic simulation (see [`crate::__sim`]): the
    /// wall-clock time of a paused tokio instant, so `SystemTime` readings
    /// follow the paused clock on this thread.
    static PAUSED_WALL: std::cell::Cell<Option<(std::time::SystemTime, Instant)>> =
        const { std::cell::Cell::new(None) };
}

/// The local wall-clock time: `SystemTime::now()`, unless a simulation on
/// this thread made it follow tokio's paused clock (test-only hook, see
/// [`crate::__sim::follow_paused_clock`]). Used wherever the crate turns
/// an HTTP-date or an epoch reset into a duration.
pub(crate) fn wall_now() -> std::time::SystemTime {
    match PAUSED_WALL.with(std::cell::Cell::get) {
        None => std::time::SystemTime::now(),
        Some((base, anchor)) => {
            let elapsed = Instant::now().saturating_duration_since(anchor);
            base.checked_add(elapsed).unwrap_or(base)
        }
    }
}

/// Makes [`wall_now`] on this thread read `base` plus the tokio time
/// elapsed since now; `None` restores `SystemTime::now()`.
pub(crate) fn set_paused_wall(base: Option<std::time::SystemTime>) {
    let anchored = base.map(|base| (base, Instant::now()));
    PAUSED_WALL.with(|wall| wall.set(anchored));
}

/// Both futures, polled together; their outputs once both are ready.
pub(crate) async fn join2<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none()
            && let std::task::Poll::Ready(v) = a.as_mut().poll(cx)
        {
            ra = Some(v);
        }
        if rb.is_none()
            && let std::task::Poll::Ready(v) = b.as_mut().poll(cx)
        {
            rb = Some(v);
        }
        match (ra.take(), rb.take()) {
            (Some(x), Some(y)) => std::task::Poll::Ready((x, y)),
            (x, y) => {
                ra = x;
                rb = y;
                std::task::Poll::Pending
            }
        }
    })
    .await
}
