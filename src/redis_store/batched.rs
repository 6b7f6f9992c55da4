//! One writer per origin key in the process: the origin operations queued
//! while it writes (admissions, answers, the counted successes) are applied
//! in order in its next read and compare-and-set.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::RedisStore;
use super::counted::{PutBack, Taken};
use super::update::UPDATE_ROUND_TRIPS;
use crate::origin::{ORIGIN_IDLE, OriginState};
use crate::store::{StoreError, lock};

impl RedisStore {
    /// Applies `f` to the origin's shared state, folding in this process's
    /// unwritten 2xx answers first (they are put back if the write fails;
    /// a write that timed out but was applied after all counts them twice,
    /// which only makes the learned pace a little faster until the next
    /// pushback cuts it). `f` is given Redis's time and how long after the
    /// call the command that read it was sent (never more than how late it
    /// is applied: Redis read its clock after that).
    ///
    /// The process has one writer per origin at a time, which applies every
    /// operation queued meanwhile in one compare-and-set: a burst of tasks
    /// costs a read and a write per batch, not two round trips each behind
    /// one another (a burst of thousands queued behind a per-task write made
    /// pushbacks land seconds late and round trips time out). `abandoned`
    /// says whether `f` still runs once its caller has gone away.
    pub(super) async fn update_origin<T: Send + 'static>(
        &self,
        origin: &str,
        force_flush: bool,
        abandoned: IfAbandoned,
        f: impl FnMut(&mut OriginState, Duration, Duration) -> (T, bool) + Send + 'static,
    ) -> Result<T, StoreError> {
        self.update_origin_key(self.origin_key(origin), force_flush, abandoned, f)
            .await
    }

    /// [`update_origin`](Self::update_origin) of an origin's Redis key.
    pub(super) async fn update_origin_key<T: Send + 'static>(
        &self,
        key: String,
        force_flush: bool,
        abandoned: IfAbandoned,
        mut f: impl FnMut(&mut OriginState, Duration, Duration) -> (T, bool) + Send + 'static,
    ) -> Result<T, StoreError> {
        let called = Instant::now();
        let out: Arc<Mutex<Option<T>>> = Arc::default();
        let slot = Arc::clone(&out);
        let op: OriginOp = Box::new(move |state, now, sent| {
            let (t, changed) = f(state, now, sent.saturating_duration_since(called));
            *lock(&slot) = Some(t);
            changed
        });
        let (done, answer) = oneshot::channel();
        let dropped = Arc::new(AtomicBool::new(false));
        let lead = {
            let mut queues = lock(&self.shared.origin_queues);
            let queue = queues.entry(key.clone()).or_default();
            queue.ops.push(Queued {
                op,
                done,
                dropped: Arc::clone(&dropped),
                force_flush,
            });
            !std::mem::replace(&mut queue.writing, true)
        };
        // Whoever goes away, the queue is written: the writer runs as its
        // own task (inline only without a runtime).
        let mut inline = None;
        if lead {
            let store = self.clone();
            let key = key.clone();
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(async move { store.write_origin(&key).await });
                }
                Err(_) => inline = Some(async move { store.write_origin(&key).await }),
            }
        }
        if let Some(write) = inline {
            write.await;
        }
        let _skip_if_dropped =
            matches!(abandoned, IfAbandoned::Skip).then(|| SkipIfDropped(&dropped));
        // The writer bounds each batch; a call waits for the batch being
        // written and its own.
        let bound = self.op_timeout.saturating_mul(2 * UPDATE_ROUND_TRIPS + 1);
        match tokio::time::timeout(bound, answer).await {
            Ok(Ok(Ok(()))) => lock(&out)
                .take()
                .ok_or_else(|| StoreError::new("redis: update not applied")),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(StoreError::new("redis: update not applied")),
            Err(_) => Err(StoreError::new("redis: update timed out")),
        }
    }

    /// Writes the operations queued for `key` until none is left.
    async fn write_origin(&self, key: &str) {
        // Should this task end mid-write (a panic, a runtime shutting
        // down), the next call starts a writer again, for its queue and
        // whatever this one left.
        let mut handover = Handover {
            store: self,
            key,
            armed: true,
        };
        loop {
            let mut batch = {
                let mut queues = lock(&self.shared.origin_queues);
                match queues.get_mut(key) {
                    Some(queue) if !queue.ops.is_empty() => std::mem::take(&mut queue.ops),
                    _ => {
                        // Under the lock: a call queuing after this starts
                        // a writer of its own.
                        queues.remove(key);
                        handover.armed = false;
                        return;
                    }
                }
            };
            let force = batch.iter().any(|q| q.force_flush);
            let result = self.apply_origin(key, force, &mut batch).await;
            for queued in batch {
                let _ = queued.done.send(result.clone());
            }
        }
    }

    /// One compare-and-set of `key` applying `batch` in order (admissions
    /// whose caller went away before are left out).
    async fn apply_origin(
        &self,
        key: &str,
        force_flush: bool,
        batch: &mut [Queued],
    ) -> Result<(), StoreError> {
        let (pending, last_success) = self.take_successes(key, force_flush);
        let mut unwritten = PutBack {
            store: self,
            what: Taken::Successes(key, last_success),
            n: pending,
        };
        let result = self
            .update(
                key,
                OriginState::decode,
                OriginState::encode,
                |s, now, sent| {
                    let fresh = s.is_none();
                    let state = s.get_or_insert_with(|| OriginState::new(now));
                    let before = *state;
                    // Counted when they were answered, up to 100 ms before
                    // this write: Redis's clock read `now` no earlier than
                    // `sent`, so `now` less the time from the last answer
                    // to `sent` is never earlier than that answer. (The
                    // time of a period's last success bounds how long the
                    // server admitted, which spreads the batches.)
                    let answered = now.saturating_sub(sent.saturating_duration_since(last_success));
                    for _ in 0..pending {
                        state.on_success(answered);
                    }
                    if pending > 0 {
                        state.touch(now.max(before.last_seen()));
                    }
                    let mut changed = false;
                    for queued in batch.iter_mut() {
                        if !queued.dropped.load(Ordering::Acquire) {
                            changed |= (queued.op)(state, now, sent);
                        }
                    }
                    let write = fresh
                        || pending > 0
                        || changed
                        || !state.differs_only_in_last_seen(&before, now);
                    ((), write.then(|| state.keep_for(now, ORIGIN_IDLE)))
                },
            )
            .await;
        if result.is_ok() {
            unwritten.n = 0;
        }
        result
    }
}

impl OriginState {
    /// Whether `self` is `before` with only `last_seen` moved, recently
    /// enough that the shared copy need not be rewritten for it.
    pub(super) fn differs_only_in_last_seen(&self, before: &OriginState, now: Duration) -> bool {
        let mut same = *before;
        same.touch(self.last_seen());
        same == *self && now.saturating_sub(before.last_seen()) < Duration::from_secs(60)
    }
}

/// An operation on an origin's state, queued for the process's writer of
/// it: applied at Redis's time, given when the command that read that time
/// was sent; whether it changed the state.
type OriginOp = Box<dyn FnMut(&mut OriginState, Duration, Instant) -> bool + Send>;

/// What becomes of a queued origin operation whose caller goes away (its
/// future dropped, or its wait timed out) before it is applied.
#[derive(Clone, Copy)]
pub(super) enum IfAbandoned {
    /// Left out: an admission would reserve a slot nobody uses.
    Skip,
    /// Applied all the same: an answer the origin gave is news for every
    /// process, whoever asked.
    Apply,
}

/// An operation waiting for its origin's writer.
pub(super) struct Queued {
    op: OriginOp,
    done: oneshot::Sender<Result<(), StoreError>>,
    /// Set when the caller of an operation to skip then went away: not
    /// applied unless it already was.
    dropped: Arc<AtomicBool>,
    /// Fold in this process's unwritten successes however recent the last
    /// write.
    force_flush: bool,
}

/// The operations queued for one origin key, and whether a writer runs.
#[derive(Default)]
pub(super) struct OriginQueue {
    ops: Vec<Queued>,
    writing: bool,
}

/// Marks an operation whose caller went away (dropped before its answer).
struct SkipIfDropped<'a>(&'a AtomicBool);

impl Drop for SkipIfDropped<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Lets the next call start a writer of `key` if the running one ends
/// without emptying its queue (after a normal end there is no queue left).
struct Handover<'a> {
    store: &'a RedisStore,
    key: &'a str,
    /// Cleared when the writer ends normally (its queue removed).
    armed: bool,
}

impl Drop for Handover<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(queue) = lock(&self.store.shared.origin_queues).get_mut(self.key) {
            queue.writing = false;
        }
    }
}
