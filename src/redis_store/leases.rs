//! Taking a lease in Redis: one `SET NX PX` (after this process's own
//! lease); the release is in `release.rs`.

use std::time::Duration;

use tokio::time::Instant;

use super::{FailMode, Redis, millis};
use crate::store::{LeaseToken, StoreError};
use crate::util::lock;

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
                    .round_trip(&redis_key, set.query_async::<Option<String>>(&mut conn))
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
                .round_trip(&redis_key, acquire.invoke_async::<i64>(&mut conn))
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
}
