//! Outages: once a round trip found Redis not answering, operations skip
//! it until a probe finds it answering again.
//!
//! Why? Asking a Redis that is away costs each operation a failed connect
//! (and the connection manager's retry), or, when packets are dropped, the
//! whole `op_timeout`: a request makes several store operations, so every
//! request would slow down by that much for as long as the outage lasts.
//! Instead, the first round trip that gets no answer marks Redis (on a
//! cluster, the slot of its key) as away; from then on the operations on it
//! fail at once, so the [`FailMode`](super::FailMode) applies at once (the
//! local state, or `store_unavailable`). One task of this process probes
//! meanwhile: after [`PROBE_FIRST`], then at an interval doubled after each
//! probe that got no answer, up to [`PROBE_MAX`]. Any answer (a probe's, the
//! heartbeat's, which re-asserts the held leases whatever this says, or a
//! round trip already on its way) ends the outage: the next operations go
//! to Redis again.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Redis;
use super::connection::Connection;
use super::handle::Shared;
use super::heartbeat::hash_tag;
use super::update::server_replied;
use crate::store::StoreError;
use crate::util::lock;

/// How long after Redis was found away it is probed first.
pub(super) const PROBE_FIRST: Duration = Duration::from_millis(100);
/// The longest interval between two probes of a Redis still away.
pub(super) const PROBE_MAX: Duration = Duration::from_secs(1);

/// The part of Redis found away, by part: `0` on one Redis, a slot on a
/// cluster (its other slots may well answer).
pub(super) type Outages = Mutex<HashMap<u16, Outage>>;

/// Redis (or one slot of a cluster) found away.
#[derive(Debug, Clone)]
pub(super) struct Outage {
    /// A key of the part, for the probe to ask about (on a cluster, it is
    /// routed to the node serving the slot).
    key: String,
    /// When it is probed next.
    next_probe: Instant,
    /// The interval since the last probe.
    interval: Duration,
}

/// What an operation on a part of Redis found away fails with.
pub(super) fn skipped() -> StoreError {
    StoreError::new("redis: not answering (not asked again until a probe reaches it)")
}

impl Redis {
    /// The part of Redis that `key` lives on (see [`Outages`]).
    fn part(&self, key: &str) -> u16 {
        if self.conn.is_cluster() { slot(key) } else { 0 }
    }

    /// Whether operations on `key` skip Redis for now: it was found away,
    /// and has not answered since.
    pub(super) fn known_away(&self, key: &str) -> bool {
        let outages = lock(&self.shared.outages);
        !outages.is_empty() && outages.contains_key(&self.part(key))
    }

    /// Redis answered a round trip on `key`: the outage of its part, if
    /// any, is over.
    pub(super) fn answered(&self, key: &str) {
        let mut outages = lock(&self.shared.outages);
        if !outages.is_empty() {
            outages.remove(&self.part(key));
        }
    }

    /// A round trip on `key` got no answer: its part is away, and probed
    /// from now on (unless it is already).
    pub(super) fn not_answered(&self, key: &str) {
        let part = self.part(key);
        {
            let mut outages = lock(&self.shared.outages);
            if outages.contains_key(&part) {
                return;
            }
            outages.insert(
                part,
                Outage {
                    key: key.to_owned(),
                    next_probe: Instant::now() + PROBE_FIRST,
                    interval: PROBE_FIRST,
                },
            );
        }
        if self.shared.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            // Nothing can probe: the next operation asks Redis itself.
            lock(&self.shared.outages).clear();
            self.shared.probing.store(false, Ordering::Release);
            return;
        };
        let shared = std::sync::Arc::downgrade(&self.shared);
        handle.spawn(probe(shared, self.conn.clone(), self.op_timeout));
    }
}

/// Probes the parts found away, each when due, until none is left or the
/// store is gone (it holds no strong reference to it).
async fn probe(shared: Weak<Shared>, conn: Connection, op_timeout: Duration) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let next = lock(&shared.outages).values().map(|o| o.next_probe).min();
            match next {
                Some(next) => next,
                None => {
                    shared.probing.store(false, Ordering::Release);
                    // An outage noted meanwhile saw this task running and
                    // started none: go on for it, unless another started.
                    if lock(&shared.outages).is_empty()
                        || shared.probing.swap(true, Ordering::AcqRel)
                    {
                        return;
                    }
                    continue;
                }
            }
        };
        tokio::time::sleep_until(next).await;
        let due: Vec<(u16, String)> = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let now = Instant::now();
            lock(&shared.outages)
                .iter()
                .filter(|(_, o)| o.next_probe <= now)
                .map(|(part, o)| (*part, o.key.clone()))
                .collect()
        };
        // Every due part at once (on a cluster, each asks its own node).
        let asks: Vec<_> = due
            .into_iter()
            .map(|(part, key)| {
                let conn = conn.clone();
                tokio::spawn(async move { (part, ask(conn, &key, op_timeout).await) })
            })
            .collect();
        let mut answers = Vec::with_capacity(asks.len());
        for ask in asks {
            if let Ok(answer) = ask.await {
                answers.push(answer);
            }
        }
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let now = Instant::now();
        let mut outages = lock(&shared.outages);
        for (part, answered) in answers {
            if answered {
                outages.remove(&part);
            } else if let Some(outage) = outages.get_mut(&part) {
                outage.interval = outage.interval.saturating_mul(2).min(PROBE_MAX);
                outage.next_probe = now + outage.interval;
            }
        }
    }
}

/// Whether Redis answers a question about `key` (a reply, or an error
/// reply of the server's) within `op_timeout`.
async fn ask(mut conn: Connection, key: &str, op_timeout: Duration) -> bool {
    let mut exists = redis::cmd("EXISTS");
    exists.arg(key);
    match tokio::time::timeout(op_timeout, exists.query_async::<i64>(&mut conn)).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => server_replied(&e),
        Err(_) => false,
    }
}

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag, modulo
/// 16384.
fn slot(key: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in hash_tag(key).as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            };
        }
    }
    crc & 0x3fff
}

#[cfg(test)]
mod tests {
    use super::slot;

    /// The slots Redis's `CLUSTER KEYSLOT` gives.
    #[test]
    fn slots_are_redis_clusters() {
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("123456789"), 0x31c3);
        assert_eq!(slot("{user1000}.following"), slot("user1000"));
        assert_eq!(slot(""), 0);
    }
}
