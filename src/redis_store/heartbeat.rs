//! The heartbeat: this process re-asserts the leases it holds, so that a
//! Redis restarted empty (or flushed) has them back before its restart
//! grace ends, and leases taken locally while failing open become shared
//! once Redis answers again.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{RedisStore, millis};
use crate::store::lock;

/// How often the held leases are re-asserted, at most.
const EVERY: Duration = Duration::from_secs(1);
/// The shortest interval, whatever the grace.
const FLOOR: Duration = Duration::from_millis(50);
/// Keys per script call.
const CHUNK: usize = 256;

impl RedisStore {
    /// Notes a lease this process holds, and starts the heartbeat unless it
    /// runs.
    pub(super) fn hold(&self, redis_key: String, token: u64, expires: Instant) {
        lock(&self.shared.held).insert(redis_key, (token, expires));
        if self.shared.heartbeat.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.shared.heartbeat.store(false, Ordering::Release);
            return;
        };
        let store = self.clone();
        handle.spawn(async move { store.beat().await });
    }

    /// Forgets a lease this process released.
    pub(super) fn unhold(&self, redis_key: &str, token: u64) {
        let mut held = lock(&self.shared.held);
        if held.get(redis_key).is_some_and(|(t, _)| *t == token) {
            held.remove(redis_key);
        }
    }

    /// Re-asserts the held leases every interval while there are any.
    async fn beat(&self) {
        let every = (self.restart_grace / 3).clamp(FLOOR, EVERY);
        loop {
            tokio::time::sleep(every).await;
            let leases = self.held_now();
            if leases.is_empty() {
                self.shared.heartbeat.store(false, Ordering::Release);
                // A lease noted meanwhile saw the heartbeat running and
                // started none: go on for it, unless another started.
                if self.held_now().is_empty() || self.shared.heartbeat.swap(true, Ordering::AcqRel)
                {
                    return;
                }
                continue;
            }
            self.reassert(&leases).await;
        }
    }

    /// The held leases not expired yet (expired ones are dropped).
    fn held_now(&self) -> Vec<(String, u64, Duration)> {
        let now = Instant::now();
        let mut held = lock(&self.shared.held);
        held.retain(|_, (_, expires)| *expires > now);
        held.iter()
            .map(|(k, (t, expires))| (k.clone(), *t, *expires - now))
            .collect()
    }

    /// Sets every lease of `leases` that Redis lacks; a failed round trip
    /// is tried again at the next beat.
    async fn reassert(&self, leases: &[(String, u64, Duration)]) {
        for chunk in leases.chunks(CHUNK) {
            let mut invoke = self.shared.reassert.prepare_invoke();
            for (key, token, ttl) in chunk {
                invoke.key(key).arg(*token).arg(millis(*ttl));
            }
            let mut conn = self.conn.clone();
            let lost: Result<i64, _> = self.round_trip(invoke.invoke_async(&mut conn)).await;
            #[cfg(feature = "tracing")]
            if let Ok(lost @ 1..) = lost {
                tracing::warn!(
                    target: "reqwest_backpressure::redis_store",
                    lost,
                    "reqwest-backpressure: leases this process holds are held by other tasks in Redis (taken while it could not reach Redis)"
                );
            }
            #[cfg(not(feature = "tracing"))]
            let _ = lost;
        }
    }
}
