//! Giving a lease back in Redis: a compare-and-delete, sent again until
//! Redis confirms it or the lease has expired anyway.
//!
//! On one Redis, releases queue for one task that sends whatever queued
//! meanwhile in one script: a burst of task ends costs a few round trips.
//! On a cluster, each release goes on its own (the keys of a batch would
//! span slots). A release that may race the heartbeat's re-assertion of
//! the same lease also leaves a mark of the released token.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::handle::Release;
use super::heartbeat::{FREED_FOR, freed_key};
use super::{Redis, millis};
use crate::store::LeaseToken;
use crate::util::lock;

/// Releases per script call.
const BATCH: usize = 256;
/// The pause before a release that Redis did not confirm is sent again,
/// doubled each time up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between two sends of one release.
const RETRY_MAX: Duration = Duration::from_secs(2);

impl Redis {
    /// Gives the lease of `key` back, here at once and in Redis by a task
    /// of its own (without a runtime, the lease's TTL frees it).
    pub(super) fn release_lease(&self, key: &str, token: LeaseToken) {
        let redis_key = self.lease_key(key);
        let expires = self.local.lease_expiry(key).unwrap_or_else(Instant::now);
        // Remembered until Redis confirms (or the lease has expired anyway),
        // so that this process taking the same key again at once frees it
        // first instead of finding it held. Noted before the local lease
        // goes, so that no task of ours can slip in between.
        {
            let mut releasing = lock(&self.shared.releasing);
            if releasing.len() > 1024 {
                let now = Instant::now();
                releasing.retain(|_, (_, expires)| *expires > now);
            }
            releasing.insert(redis_key.clone(), (token.0, expires));
        }
        let marked = self.unhold(&redis_key, token.0);
        self.local.release_now(key, token);
        if self.refuse_cluster().is_err() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let release = Release {
            redis_key,
            token: token.0,
            marked,
            expires,
        };
        if self.conn.is_cluster() {
            let store = self.clone();
            handle.spawn(async move { store.send_until_confirmed(release).await });
            return;
        }
        lock(&self.shared.release_queue).push(release);
        if !self.shared.releasing_batches.swap(true, Ordering::AcqRel) {
            let store = self.clone();
            handle.spawn(async move { store.send_batches().await });
        }
    }

    /// Sends the queued releases, a batch per round trip, while there are
    /// any; a batch Redis did not confirm is sent again release by release.
    async fn send_batches(&self) {
        loop {
            let batch: Vec<Release> = {
                let mut queue = lock(&self.shared.release_queue);
                let take = queue.len().min(BATCH);
                queue.drain(..take).collect()
            };
            if batch.is_empty() {
                self.shared
                    .releasing_batches
                    .store(false, Ordering::Release);
                // A release queued meanwhile saw this task running and
                // started none: go on for it, unless another started.
                if lock(&self.shared.release_queue).is_empty()
                    || self.shared.releasing_batches.swap(true, Ordering::AcqRel)
                {
                    return;
                }
                continue;
            }
            if self.send(&batch).await {
                for release in &batch {
                    self.confirmed(release);
                }
                continue;
            }
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                for release in batch {
                    let store = self.clone();
                    handle.spawn(async move {
                        store.retry(release).await;
                    });
                }
            }
        }
    }

    /// Sends `release` until Redis confirms it or its lease expires.
    async fn send_until_confirmed(&self, release: Release) {
        if self.send(std::slice::from_ref(&release)).await {
            self.confirmed(&release);
        } else {
            self.retry(release).await;
        }
    }

    /// Sends `release` again, after a pause doubled each time, until Redis
    /// confirms it or its lease expires. Sent again, it is harmless: it
    /// deletes the lease only while it holds the released token.
    async fn retry(&self, release: Release) {
        let mut pause = RETRY_FIRST;
        loop {
            let next = Instant::now() + pause;
            if next >= release.expires || self.refuse_cluster().is_err() {
                return;
            }
            tokio::time::sleep_until(next).await;
            if self.send(std::slice::from_ref(&release)).await {
                self.confirmed(&release);
                return;
            }
            pause = (pause * 2).min(RETRY_MAX);
        }
    }

    /// Forgets a release Redis confirmed.
    fn confirmed(&self, release: &Release) {
        let mut releasing = lock(&self.shared.releasing);
        if releasing
            .get(&release.redis_key)
            .is_some_and(|(t, _)| *t == release.token)
        {
            releasing.remove(&release.redis_key);
        }
    }

    /// One round trip of `releases` (one of them on a cluster). Whether
    /// Redis confirmed it.
    async fn send(&self, releases: &[Release]) -> bool {
        let mut conn = self.conn.clone();
        let sent = async {
            if let [release] = releases
                && self.conn.is_cluster()
            {
                if release.marked {
                    // Two single-key steps, the mark first: a script on
                    // both keys meets `TRYAGAIN` while their slot migrates
                    // and only one of them has moved (the mark is new);
                    // each step alone is redirected.
                    redis::cmd("SET")
                        .arg(freed_key(&release.redis_key, release.token))
                        .arg("1")
                        .arg("PX")
                        .arg(millis(FREED_FOR))
                        .query_async::<()>(&mut conn)
                        .await?;
                }
                let mut delete = self.shared.release_one.prepare_invoke();
                delete.key(&release.redis_key).arg(release.token);
                return delete.invoke_async::<i64>(&mut conn).await;
            }
            let mut invoke = self.shared.release.prepare_invoke();
            for release in releases {
                invoke
                    .key(&release.redis_key)
                    .key(freed_key(&release.redis_key, release.token))
                    .arg(release.token)
                    .arg(if release.marked { "1" } else { "0" });
            }
            invoke.arg(millis(FREED_FOR));
            invoke.invoke_async::<i64>(&mut conn).await
        };
        matches!(tokio::time::timeout(self.op_timeout, sent).await, Ok(Ok(_)))
    }
}
