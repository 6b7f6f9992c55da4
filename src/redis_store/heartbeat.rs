//! The heartbeat: this process re-asserts the leases it holds, so that a
//! Redis restarted empty (or flushed) has them back before its restart
//! grace ends, and leases taken locally while failing open become shared
//! once Redis answers again.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::handle::Held;
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
        let held = Held {
            token,
            expires,
            listed_until: None,
        };
        lock(&self.shared.held).insert(redis_key, held);
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

    /// Forgets a lease this process released. Whether a re-assertion that
    /// listed it may still set it in Redis: its release must then leave
    /// its mark.
    pub(super) fn unhold(&self, redis_key: &str, token: u64) -> bool {
        let mut held = lock(&self.shared.held);
        let Some(lease) = held.get(redis_key).filter(|l| l.token == token).copied() else {
            return false;
        };
        held.remove(redis_key);
        lease
            .listed_until
            .is_some_and(|until| until > Instant::now())
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
            let lost = if self.conn.is_cluster() {
                self.reassert_per_slot(leases).await
            } else {
                self.reassert(&leases).await
            };
            #[cfg(feature = "tracing")]
            if lost > 0 {
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

    /// On a cluster, a script touches the keys of one slot: the leases are
    /// re-asserted per hash tag (one of 256 buckets), every bucket at once,
    /// each on the clock of the node that serves it. The leases lost to
    /// other tasks, summed.
    async fn reassert_per_slot(&self, leases: Vec<String>) -> u64 {
        let mut buckets: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for key in leases {
            buckets
                .entry(hash_tag(&key).to_owned())
                .or_default()
                .push(key);
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return 0;
        };
        let tasks: Vec<_> = buckets
            .into_values()
            .map(|keys| {
                let store = self.clone();
                handle.spawn(async move { store.reassert(&keys).await })
            })
            .collect();
        let mut lost = 0;
        for task in tasks {
            lost += task.await.unwrap_or(0);
        }
        lost
    }

    /// The keys of the held leases not expired yet (expired ones are
    /// dropped).
    fn held_now(&self) -> Vec<String> {
        let now = Instant::now();
        let mut held = lock(&self.shared.held);
        held.retain(|_, lease| lease.expires > now);
        held.keys().cloned().collect()
    }

    /// Sets every lease of `keys` still held that Redis lacks; a failed
    /// round trip is tried again at the next beat.
    ///
    /// A lease released while this runs must not come back. Each chunk is
    /// read from the held leases just before it is sent, so a lease
    /// released before is left out; one released after that, until the
    /// chunk's answer arrives, has its release's mark in Redis before the
    /// chunk runs there (or its release runs after the chunk and deletes
    /// it): each listed lease is noted as such (`listed_until`), and only
    /// such a release pays for a mark. The mark lives [`FREED_FOR`],
    /// so each chunk carries a time on Redis's clock after which it sets
    /// nothing: [`REASSERT_WITHIN`] after a time Redis read before the
    /// chunk was listed, hence before any such release ran.
    ///
    /// The time is read by a script on the first key (on a cluster, the
    /// node serving the keys' slot: its clock is the one the marks live
    /// by). Returns the number of leases found held by other tasks.
    async fn reassert(&self, keys: &[String]) -> u64 {
        let mut lost_total = 0;
        let Some(first) = keys.first() else {
            return lost_total;
        };
        let mut conn = self.conn.clone();
        let mut time = self.shared.read.prepare_invoke();
        time.key(first);
        let Ok(reply) = self
            .attempt(first, time.invoke_async::<Vec<Value>>(&mut conn))
            .await
        else {
            return lost_total;
        };
        let Ok((mut redis_now, _)) = parse_time_and_value(&reply, 0) else {
            return lost_total;
        };
        for chunk in keys.chunks(CHUNK) {
            let mut invoke = self.shared.reassert.prepare_invoke();
            invoke.arg(millis(redis_now + REASSERT_WITHIN));
            let mut listed = Vec::new();
            {
                let now = Instant::now();
                let mut held = lock(&self.shared.held);
                for key in chunk {
                    let Some(lease) = held.get_mut(key).filter(|l| l.expires > now) else {
                        continue;
                    };
                    // The chunk sets nothing once Redis's clock is past
                    // `redis_now + REASSERT_WITHIN`, read before now: a
                    // release until `FREED_FOR` from now leaves its mark.
                    lease.listed_until = Some(now + FREED_FOR);
                    invoke
                        .key(key)
                        .key(freed_key(key, lease.token))
                        .arg(lease.token)
                        .arg(millis(lease.expires - now));
                    listed.push((key, lease.token));
                }
            }
            if listed.is_empty() {
                continue;
            }
            let reply: Result<Vec<Value>, _> =
                self.attempt(first, invoke.invoke_async(&mut conn)).await;
            let Ok(reply) = reply else {
                return lost_total;
            };
            // Applied: a release from now on reaches Redis after it.
            {
                let mut held = lock(&self.shared.held);
                for (key, token) in listed {
                    if let Some(lease) = held.get_mut(key).filter(|l| l.token == token) {
                        lease.listed_until = None;
                    }
                }
            }
            let Ok((now, _)) = parse_time_and_value(&reply, 1) else {
                return lost_total;
            };
            redis_now = now;
            let lost = match reply.first() {
                Some(Value::Int(lost)) => *lost,
                _ => return lost_total,
            };
            // Below zero: too late to be safe; the next beat tries again.
            let Ok(lost) = u64::try_from(lost) else {
                return lost_total;
            };
            lost_total += lost;
        }
        lost_total
    }
}

/// The hash tag of `key` as Redis Cluster reads it: what lies between its
/// first `{` and the next `}`, or the whole key when there is none (or it
/// is empty). Keys of one tag are in one slot.
pub(super) fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The key marking `lease_key`'s lease of `token` released:
/// `{prefix}freed:{ab}:{hash}:{token}` for `{prefix}lease:{ab}:{hash}`, in
/// the same slot (the same hash tag).
pub(super) fn freed_key(lease_key: &str, token: u64) -> String {
    let (prefix, hash) = lease_key.rsplit_once("lease:").unwrap_or((lease_key, ""));
    format!("{prefix}freed:{hash}:{token}")
}
