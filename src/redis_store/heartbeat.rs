//! The heartbeat: this process re-asserts the leases it holds, so that a
//! Redis restarted empty (or flushed) has them back before its restart
//! grace ends, and leases taken locally while failing open become shared
//! once Redis answers again.

use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::scripts::parse_time_and_value;
use super::{Redis, millis};
use crate::util::lock;

/// How often the held leases are re-asserted, at most.
const EVERY: Duration = Duration::from_secs(1);
/// The shortest interval, whatever the grace.
const FLOOR: Duration = Duration::from_millis(50);
/// Leases per script call.
const CHUNK: usize = 256;
/// How long the mark of a released lease lives in Redis.
pub(super) const FREED_FOR: Duration = Duration::from_secs(2);
/// How long after a time read on Redis's clock a re-assertion may still
/// set leases; below [`FREED_FOR`].
const REASSERT_WITHIN: Duration = Duration::from_secs(1);

impl Redis {
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

    /// The keys of the held leases not expired yet (expired ones are
    /// dropped).
    fn held_now(&self) -> Vec<String> {
        let now = Instant::now();
        let mut held = lock(&self.shared.held);
        held.retain(|_, (_, expires)| *expires > now);
        held.keys().cloned().collect()
    }

    /// Sets every lease of `keys` still held that Redis lacks; a failed
    /// round trip is tried again at the next beat.
    ///
    /// A lease released while this runs must not come back. Each chunk is
    /// read from the held leases just before it is sent, so a lease
    /// released before is left out; one released after that has its
    /// release's mark in Redis before the chunk runs there (or its release
    /// runs after the chunk and deletes it). The mark lives [`FREED_FOR`],
    /// so each chunk carries a time on Redis's clock after which it sets
    /// nothing: [`REASSERT_WITHIN`] after a time Redis read before the
    /// chunk was listed, hence before any such release ran.
    async fn reassert(&self, keys: &[String]) {
        let mut conn = self.conn.clone();
        let time = redis::cmd("TIME");
        let Ok((secs, micros)) = self
            .round_trip(time.query_async::<(u64, u64)>(&mut conn))
            .await
        else {
            return;
        };
        let mut redis_now = Duration::from_secs(secs) + Duration::from_micros(micros);
        for chunk in keys.chunks(CHUNK) {
            let mut invoke = self.shared.reassert.prepare_invoke();
            invoke.arg(millis(redis_now + REASSERT_WITHIN));
            let mut any = false;
            {
                let now = Instant::now();
                let held = lock(&self.shared.held);
                for key in chunk {
                    let Some((token, expires)) = held.get(key).filter(|(_, e)| *e > now) else {
                        continue;
                    };
                    invoke
                        .key(key)
                        .key(freed_key(key, *token))
                        .arg(*token)
                        .arg(millis(*expires - now));
                    any = true;
                }
            }
            if !any {
                continue;
            }
            let reply: Result<Vec<Value>, _> =
                self.round_trip(invoke.invoke_async(&mut conn)).await;
            let Ok(reply) = reply else { return };
            let Ok((now, _)) = parse_time_and_value(&reply, 1) else {
                return;
            };
            redis_now = now;
            let lost = match reply.first() {
                Some(Value::Int(lost)) => *lost,
                _ => return,
            };
            if lost < 0 {
                // Too late to be safe: the next beat tries again.
                return;
            }
            #[cfg(feature = "tracing")]
            if lost > 0 {
                tracing::warn!(
                    target: "reqwest_backpressure::redis_store",
                    lost,
                    "reqwest-backpressure: leases this process holds are held by other tasks in Redis (taken while it could not reach Redis)"
                );
            }
        }
    }
}

/// The key marking `lease_key`'s lease of `token` released:
/// `{prefix}freed:{hash}:{token}` for `{prefix}lease:{hash}`.
pub(super) fn freed_key(lease_key: &str, token: u64) -> String {
    let (prefix, hash) = lease_key.rsplit_once("lease:").unwrap_or((lease_key, ""));
    format!("{prefix}freed:{hash}:{token}")
}
