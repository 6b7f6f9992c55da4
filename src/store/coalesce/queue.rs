//! One writer per origin in the process: the updates queued while it
//! writes (admissions, answers, the counted successes) are applied in order
//! in its next update of the inner store.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Coalesced;
use super::counted::{PutBack, Taken};
use crate::origin::{OriginState, Outcome};
use crate::store::{Now, Store, StoreError};
use crate::util::lock;

impl<S: Store + Clone> Coalesced<S> {
    /// Applies `f` to the origin's state in the next batch of this
    /// process's one writer of it, folding in the unwritten 2xx answers
    /// first when they are due (or `force_flush`); `f`'s answer.
    ///
    /// A burst of tasks costs an update per batch, not one each behind one
    /// another (a burst of thousands queued behind a per-task write made
    /// pushbacks land seconds late and round trips time out). `abandoned`
    /// says whether `f` still runs once its caller has gone away.
    pub(super) async fn queued<T: Send + 'static>(
        &self,
        origin: &str,
        force_flush: bool,
        abandoned: IfAbandoned,
        mut f: impl FnMut(&mut OriginState, Now) -> T + Send + 'static,
    ) -> Result<T, StoreError> {
        let out: Arc<Mutex<Option<T>>> = Arc::default();
        let slot = Arc::clone(&out);
        let op: OriginOp = Box::new(move |state, now| {
            *lock(&slot) = Some(f(state, now));
        });
        let (done, answer) = oneshot::channel();
        let progress = Arc::new(Progress::default());
        let lead = {
            let mut queues = lock(&self.shared.queues);
            let queue = queues.entry(origin.to_owned()).or_default();
            queue.ops.push(Queued {
                op,
                done,
                progress: Arc::clone(&progress),
                force_flush,
                called: Instant::now(),
            });
            !std::mem::replace(&mut queue.writing, true)
        };
        // Whoever goes away, the queue is written: the writer runs as its
        // own task (inline only without a runtime).
        let mut inline = None;
        if lead {
            let store = self.clone();
            let origin = origin.to_owned();
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(async move { store.write_origin(&origin).await });
                }
                Err(_) => inline = Some(async move { store.write_origin(&origin).await }),
            }
        }
        if let Some(write) = inline {
            write.await;
        }
        let skip = matches!(abandoned, IfAbandoned::Skip);
        let _skip_if_dropped = skip.then(|| SkipIfDropped(&progress));
        let mut answer = answer;
        let answered = match self.timeout {
            Some(bound) => match tokio::time::timeout(bound, &mut answer).await {
                Ok(answered) => answered,
                // Not applied yet: left out, and the caller fails (a store
                // failing open then applies it to its own state). Applied
                // already, in a write under way: its answer is awaited (the
                // inner store bounds its write), or an admission would be
                // applied here and, failing open, there too.
                Err(_) if !skip || progress.leave() => {
                    return Err(StoreError::new("store: update timed out"));
                }
                Err(_) => answer.await,
            },
            None => answer.await,
        };
        match answered {
            Ok(Ok(())) => lock(&out)
                .take()
                .ok_or_else(|| StoreError::new("store: update not applied")),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(StoreError::new("store: update not applied")),
        }
    }

    /// Writes the updates queued for `origin` until none is left.
    async fn write_origin(&self, origin: &str) {
        // Should this task end mid-write (a panic, a runtime shutting
        // down), the next call starts a writer again, for its queue and
        // whatever this one left.
        let mut handover = Handover {
            store: self,
            origin,
            armed: true,
        };
        loop {
            let batch = {
                let mut queues = lock(&self.shared.queues);
                match queues.get_mut(origin) {
                    Some(queue) if !queue.ops.is_empty() => std::mem::take(&mut queue.ops),
                    _ => {
                        // Under the lock: a call queuing after this starts
                        // a writer of its own.
                        queues.remove(origin);
                        handover.armed = false;
                        return;
                    }
                }
            };
            let force = batch.iter().any(|q| q.force_flush);
            let (batch, result) = self.apply_origin(origin, force, batch).await;
            for queued in batch {
                let _ = queued.done.send(result.clone());
            }
        }
    }

    /// One update of `origin` applying `batch` in order (updates whose
    /// caller went away before are left out); the batch back, and how the
    /// update went.
    async fn apply_origin(
        &self,
        origin: &str,
        force_flush: bool,
        batch: Vec<Queued>,
    ) -> (Vec<Queued>, Result<(), StoreError>) {
        let (pending, last_success, pacing) = self.take_successes(origin, force_flush);
        let mut unwritten = PutBack {
            store: self,
            what: Taken::Successes(origin, last_success, pacing),
            n: pending,
            refused: false,
        };
        let batch = Arc::new(Mutex::new(batch));
        let ops = Arc::clone(&batch);
        let called = Instant::now();
        let result = self
            .inner
            .update_origin(origin, move |state, now| {
                // How long before the store read its time `at` was: the
                // store's clock read `now` no earlier than `now.late()`
                // after this update was called.
                let before = |at: Instant| now.late() + called.saturating_duration_since(at);
                // Counted when they were answered, up to 100 ms before
                // this write: `now` less the time since the last of them
                // is never earlier than that answer. (The time of a
                // period's last success bounds how long the server
                // admitted, which spreads the batches.)
                let answered = now.time().saturating_sub(before(last_success));
                // Under the pacing they were counted with: a pace they
                // raise stays within a declared quota.
                for _ in 0..pending {
                    match pacing {
                        Some(cfg) => {
                            let _ = state.observe(cfg, answered, Outcome::Admitted);
                        }
                        None => state.on_success(answered),
                    }
                }
                for queued in lock(&ops).iter_mut() {
                    if queued.progress.apply() {
                        (queued.op)(state, now.late_by(before(queued.called)));
                    }
                }
            })
            .await;
        match &result {
            Ok(()) => unwritten.n = 0,
            Err(e) => unwritten.refused = e.is_refused(),
        }
        let batch = std::mem::take(&mut *lock(&batch));
        (batch, result)
    }
}

/// An update of an origin's state, queued for the process's writer of it.
type OriginOp = Box<dyn FnMut(&mut OriginState, Now) + Send>;

/// What becomes of a queued update whose caller goes away (its future
/// dropped, or its wait timed out) before it is applied.
#[derive(Clone, Copy)]
pub(super) enum IfAbandoned {
    /// Left out: an admission would reserve a slot nobody uses.
    Skip,
    /// Applied all the same: an answer the origin gave is news for every
    /// process, whoever asked.
    Apply,
}

/// An update waiting for its origin's writer.
struct Queued {
    op: OriginOp,
    done: oneshot::Sender<Result<(), StoreError>>,
    /// Whether it was applied, or its caller (of an update to skip) went
    /// away first: then it never is.
    progress: Arc<Progress>,
    /// Fold in this process's unwritten successes however recent the last
    /// write.
    force_flush: bool,
    /// When it was queued.
    called: Instant,
}

/// The updates queued for one origin, and whether a writer runs.
#[derive(Default)]
pub(super) struct OriginQueue {
    ops: Vec<Queued>,
    writing: bool,
}

/// Where a queued update is: queued, applied (in a write that may not
/// have answered yet), or left by its caller before it was applied (it
/// never is then). Applied and left exclude each other.
#[derive(Default)]
struct Progress(AtomicU8);

impl Progress {
    const QUEUED: u8 = 0;
    const APPLIED: u8 = 1;
    const LEFT: u8 = 2;

    /// Whether the update is applied now (in every round of a write that
    /// tries again), its caller not gone before.
    fn apply(&self) -> bool {
        match self.0.compare_exchange(
            Self::QUEUED,
            Self::APPLIED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => true,
            Err(now) => now == Self::APPLIED,
        }
    }

    /// The caller leaves: whether it did before the update was applied
    /// (which it never is then).
    fn leave(&self) -> bool {
        self.0
            .compare_exchange(
                Self::QUEUED,
                Self::LEFT,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
}

/// Marks an update whose caller went away (dropped before its answer).
struct SkipIfDropped<'a>(&'a Progress);

impl Drop for SkipIfDropped<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// Lets the next call start a writer of `origin` if the running one ends
/// without emptying its queue (after a normal end there is no queue left).
struct Handover<'a, S> {
    store: &'a Coalesced<S>,
    origin: &'a str,
    /// Cleared when the writer ends normally (its queue removed).
    armed: bool,
}

impl<S> Drop for Handover<'_, S> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(queue) = lock(&self.store.shared.queues).get_mut(self.origin) {
            queue.writing = false;
        }
    }
}
