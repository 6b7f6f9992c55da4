//! Leases in Redis: one `SET NX PX` each (after this process's own lease),
//! released by a compare-and-delete, sent again until it is applied or the
//! lease has expired. A release that may race the heartbeat's re-assertion
//! of the same lease also leaves a mark of the released token.

use std::time::Duration;

use tokio::time::Instant;

use super::heartbeat::{FREED_FOR, freed_key};
use super::{FailMode, Redis, millis};
use crate::store::{LeaseToken, StoreError};
use crate::util::lock;

/// The pause before a release that Redis did not confirm is sent again,
/// doubled each time up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// The longest pause between two sends of one release.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// A lease taken locally (and maybe in Redis) whose acquisition is not
/// settled yet: if the caller goes away meanwhile, or Redis failed and the
/// store fails closed, it is released everywhere.
struct Acquiring<'a> {
    store: &'a Redis,
    key: &'a str,
    token: LeaseToken,
    armed: bool,
}

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.store.release_lease(self.key, self.token);
        }
    }
}

impl Redis {
    /// Takes the lease of `key` for `ttl`: this process's own first, then
    /// Redis's with the same token (failing open, the local one alone while
    /// Redis does not answer).
    pub(super) async fn acquire_lease(
        &self,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<LeaseToken>, StoreError> {
        self.refuse_cluster()?;
        // This process's own lease first: it keeps exclusion within the
        // process while Redis is away, and its token is the Redis value.
        let Some(token) = self.local.acquire_now(key, ttl) else {
            return Ok(None);
        };
        let mut pending = Acquiring {
            store: self,
            key,
            token,
            armed: true,
        };
        let redis_key = self.lease_key(key);
        let stale = lock(&self.shared.releasing)
            .remove(&redis_key)
            .map(|(t, _)| t);
        // Failing closed, the grace in ms (0: no check).
        let grace = match self.fail_mode {
            FailMode::Closed if !self.restart_grace.is_zero() => millis(self.restart_grace),
            _ => 0,
        };
        let give_up = Instant::now() + ttl;
        let taken: Result<i64, StoreError> = loop {
            let mut conn = self.conn.clone();
            let left = millis(give_up.saturating_duration_since(Instant::now()));
            if stale.is_none() && grace == 0 {
                // The common case: one command.
                let mut set = redis::cmd("SET");
                set.arg(&redis_key)
                    .arg(token.0)
                    .arg("NX")
                    .arg("PX")
                    .arg(left);
                break self
                    .round_trip(set.query_async::<Option<String>>(&mut conn))
                    .await
                    .map(|set| i64::from(set.is_some()));
            }
            let mut acquire = self.shared.acquire.prepare_invoke();
            acquire
                .key(&redis_key)
                .arg(token.0)
                .arg(left)
                .arg(stale.map_or_else(String::new, |t| t.to_string()))
                .arg(grace);
            match self
                .round_trip(acquire.invoke_async::<i64>(&mut conn))
                .await
            {
                // Redis started less than the restart grace ago: wait for
                // the rest of it (holders re-assert their leases meanwhile),
                // unless the task's deadline comes first.
                Ok(young @ ..0) => {
                    let wait = Duration::from_millis(young.unsigned_abs());
                    if Instant::now() + wait >= give_up {
                        break Err(StoreError::new(
                            "redis: restarted less than the restart grace ago; no lease given out yet",
                        ));
                    }
                    tokio::time::sleep(wait).await;
                }
                other => break other,
            }
        };
        match taken {
            Ok(1) => {
                pending.armed = false;
                self.hold(redis_key, token.0, give_up);
                Ok(Some(token))
            }
            Ok(_) => {
                // Held by another task; ours is not in Redis.
                pending.armed = false;
                self.local.release_now(key, token);
                Ok(None)
            }
            Err(e) => {
                // Our own stale lease may still be there: try again later.
                if let Some(stale) = stale {
                    lock(&self.shared.releasing)
                        .entry(redis_key.clone())
                        .or_insert((stale, Instant::now() + ttl));
                }
                let result = self
                    .guarded("acquire", Err(e), || std::future::ready(Ok(Some(token))))
                    .await;
                if result.is_ok() {
                    // Held locally; the heartbeat shares it once Redis
                    // answers again.
                    self.hold(redis_key, token.0, give_up);
                }
                // Failing open keeps the local lease; failing closed
                // releases it, and the Redis one in case the ACQUIRE was
                // applied after we stopped waiting.
                pending.armed = result.is_err();
                result
            }
        }
    }

    /// Gives the lease of `key` back, here at once and in Redis by a task
    /// of its own, which sends the compare-and-delete again after a failed
    /// round trip until it is applied or the lease has expired anyway
    /// (without a runtime, the lease's TTL frees it). Sent again, it is
    /// harmless: it deletes the lease only while it holds `token`.
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
        let store = self.clone();
        handle.spawn(async move {
            let mut pause = RETRY_FIRST;
            loop {
                if store.send_release(&redis_key, token.0, marked).await {
                    let mut releasing = lock(&store.shared.releasing);
                    if releasing
                        .get(&redis_key)
                        .is_some_and(|(t, _)| *t == token.0)
                    {
                        releasing.remove(&redis_key);
                    }
                    return;
                }
                // Not confirmed: Redis may not have it. Again, unless the
                // lease expires before.
                let next = Instant::now() + pause;
                if next >= expires || store.refuse_cluster().is_err() {
                    return;
                }
                tokio::time::sleep_until(next).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        });
    }

    /// One round trip of a release: a compare-and-delete of the lease,
    /// after its mark when `marked` (a re-assertion that listed it may be
    /// in flight). Whether Redis confirmed it.
    async fn send_release(&self, redis_key: &str, token: u64, marked: bool) -> bool {
        let mut conn = self.conn.clone();
        let mark = freed_key(redis_key, token);
        let release = async {
            if marked && self.conn.is_cluster() {
                // Two single-key steps, the mark first: a script on both
                // keys meets `TRYAGAIN` while their slot migrates and only
                // one of them has moved (the mark is new); each step alone
                // is redirected.
                redis::cmd("SET")
                    .arg(&mark)
                    .arg("1")
                    .arg("PX")
                    .arg(millis(FREED_FOR))
                    .query_async::<()>(&mut conn)
                    .await?;
            } else if marked {
                let mut release = self.shared.release.prepare_invoke();
                release
                    .key(redis_key)
                    .key(&mark)
                    .arg(token)
                    .arg(millis(FREED_FOR));
                return release.invoke_async::<i64>(&mut conn).await;
            }
            let mut delete = self.shared.release_one.prepare_invoke();
            delete.key(redis_key).arg(token);
            delete.invoke_async::<i64>(&mut conn).await
        };
        matches!(
            tokio::time::timeout(self.op_timeout, release).await,
            Ok(Ok(_))
        )
    }
}
