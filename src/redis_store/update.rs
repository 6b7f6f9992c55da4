//! Round trips: bounded by `op_timeout`, guarded by the fail mode, refused
//! on a Redis Cluster node, and the compare-and-set loop that applies a pure
//! step to a key's state.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use super::handle::prefix_refused;
use super::outage::skipped;
use super::scripts::parse_time_and_value;
use super::{CAS_ROUNDS, FailMode, Redis, cluster_refused, millis, unavailable};

/// An update (lock wait and compare-and-set rounds) takes at most this many
/// `op_timeout`s.
pub(super) const UPDATE_ROUND_TRIPS: u32 = 4;
use crate::store::StoreError;

impl Redis {
    /// One round trip on `key`, bounded by `op_timeout`; failed at once,
    /// unsent, while Redis (on a cluster, `key`'s slot) is known away (see
    /// `outage.rs`). Refused on a Redis Cluster node: the first answer from
    /// the server (a reply or a server's error) is followed by asking it
    /// whether it is one, once.
    pub(super) async fn round_trip<T>(
        &self,
        key: &str,
        op: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        self.refuse_cluster()?;
        if self.known_away(key) {
            return Err(skipped());
        }
        self.attempt(key, op).await
    }

    /// [`round_trip`](Self::round_trip), sent even while Redis is known
    /// away: for the heartbeat, whose re-assertions must not wait for the
    /// probe (a Redis restarted empty needs the leases back within its
    /// restart grace). Its answer, or its lack of one, counts all the same.
    pub(super) async fn attempt<T>(
        &self,
        key: &str,
        op: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        self.refuse_cluster()?;
        let reply = tokio::time::timeout(self.op_timeout, op).await;
        let answered = match &reply {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => server_replied(e),
            Err(_) => false,
        };
        if answered {
            self.shared.failing_open.store(false, Ordering::Relaxed);
            self.answered(key);
        } else {
            self.not_answered(key);
        }
        if answered && self.shared.cluster.get().is_none() {
            self.check_cluster().await?;
        }
        match reply {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(unavailable(&e)),
            Err(_) => Err(StoreError::new("redis: operation timed out")),
        }
    }

    /// The refusal of every operation once the server is known to be a
    /// Redis Cluster node reached through a single-node connection, or on a
    /// cluster with a prefix carrying a brace, whatever the fail mode.
    pub(super) fn refuse_cluster(&self) -> Result<(), StoreError> {
        if self.prefix_refused {
            return Err(prefix_refused());
        }
        match self.shared.cluster.get() {
            Some(true) => Err(cluster_refused()),
            _ => Ok(()),
        }
    }

    /// Asks the server whether it is a Redis Cluster node, unless known
    /// (concurrent callers wait for one answer); refuses if it is. A
    /// server that cannot be asked now is asked again on its next answer.
    async fn check_cluster(&self) -> Result<(), StoreError> {
        let asked = self
            .shared
            .cluster
            .get_or_try_init(|| async {
                let cluster = self.ask_cluster().await?;
                #[cfg(feature = "tracing")]
                if cluster {
                    tracing::error!(
                        target: "reqwest_backpressure::redis_store",
                        "reqwest-backpressure: the server is a Redis Cluster node; every store operation fails (connect with RedisStore::connect_cluster)"
                    );
                }
                Ok::<_, StoreError>(cluster)
            })
            .await;
        match asked {
            Ok(true) => Err(cluster_refused()),
            Ok(false) | Err(_) => Ok(()),
        }
    }

    /// Whether the server says `cluster_enabled:1`. A server that refuses
    /// `INFO` (renamed, or denied by its ACL) is taken for a single Redis.
    pub(super) async fn ask_cluster(&self) -> Result<bool, StoreError> {
        let mut conn = self.conn.clone();
        let mut info = redis::cmd("INFO");
        let info = info.arg("cluster").query_async::<String>(&mut conn);
        match tokio::time::timeout(self.op_timeout, info).await {
            Ok(Ok(info)) => Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1")),
            Ok(Err(e)) if server_replied(&e) => Ok(false),
            Ok(Err(e)) => Err(unavailable(&e)),
            Err(_) => Err(StoreError::new("redis: operation timed out")),
        }
    }

    /// `op`'s answer; when Redis failed, the fail mode decides between
    /// `fallback` (local state) and the error.
    pub(super) async fn guarded<T, L>(
        &self,
        what: &'static str,
        result: Result<T, StoreError>,
        fallback: impl FnOnce() -> L,
    ) -> Result<T, StoreError>
    where
        L: Future<Output = Result<T, StoreError>>,
    {
        let err = match result {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        // A misconfiguration, not an outage: never run on local state.
        self.refuse_cluster()?;
        match self.fail_mode {
            FailMode::Closed => Err(err),
            FailMode::Open => {
                self.shared.fallbacks.fetch_add(1, Ordering::Relaxed);
                self.shared.failing_open.store(true, Ordering::Relaxed);
                #[cfg(feature = "tracing")]
                tracing::warn!(target: "reqwest_backpressure::redis_store", operation = what, error = %err, "reqwest-backpressure: redis unavailable, using local state");
                #[cfg(not(feature = "tracing"))]
                let _ = what;
                fallback().await
            }
        }
    }

    /// Whether this process runs on its local state for want of Redis
    /// (failing open, with no answer from Redis since).
    pub(super) fn failing_open(&self) -> bool {
        self.shared.failing_open.load(Ordering::Relaxed)
    }

    /// Reads `key`'s state, applies `f` at Redis's `now`, and, when `f`
    /// changed it, writes it back if nobody changed it meanwhile (else
    /// tries again on what is there now). `f` returns its output and, when
    /// the state must be written, how long to keep it. `f` is also given
    /// the instant on this process's clock at which the command that read
    /// `now` was sent: Redis's clock read `now` no earlier than then.
    pub(super) async fn update<V, T>(
        &self,
        key: &str,
        decode: fn(&str) -> Option<V>,
        encode: fn(&V) -> String,
        f: impl FnMut(&mut Option<V>, Duration, Instant) -> (T, Option<Duration>),
    ) -> Result<T, StoreError> {
        // The whole update (waiting for this process's other writer of the
        // key, and every compare-and-set round) is bounded, not only each
        // round trip: after Redis restarts, a task must never wait on the
        // store longer than a few round trips, whatever its deadline.
        let total = self.op_timeout.saturating_mul(UPDATE_ROUND_TRIPS);
        match tokio::time::timeout(total, self.update_unbounded(key, decode, encode, f)).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::new("redis: update timed out")),
        }
    }

    async fn update_unbounded<V, T>(
        &self,
        key: &str,
        decode: fn(&str) -> Option<V>,
        encode: fn(&V) -> String,
        mut f: impl FnMut(&mut Option<V>, Duration, Instant) -> (T, Option<Duration>),
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.clone();
        let mut read = self.shared.read.prepare_invoke();
        read.key(key);
        let mut sent = Instant::now();
        let reply: Vec<Value> = self.round_trip(key, read.invoke_async(&mut conn)).await?;
        let (mut now, mut current) = parse_time_and_value(&reply, 0)?;
        // Read-only answers need no lock; writes from this process go one
        // at a time, so only other processes can race them.
        let mut guard = None;
        for round in 0..CAS_ROUNDS {
            let mut state = current.as_deref().and_then(decode);
            let (out, keep) = f(&mut state, now, sent);
            let (Some(keep), Some(new)) = (keep, state.as_ref()) else {
                return Ok(out);
            };
            if guard.is_none() {
                let key_lock = self.key_lock(key);
                match Arc::clone(&key_lock).try_lock_owned() {
                    Ok(held) => guard = Some(held),
                    Err(_) => {
                        guard = Some(key_lock.lock_owned().await);
                        // Another task of ours wrote while we waited: read
                        // afresh (state and Redis's time) rather than fail
                        // the compare-and-set and back off.
                        sent = Instant::now();
                        let reply: Vec<Value> =
                            self.round_trip(key, read.invoke_async(&mut conn)).await?;
                        (now, current) = parse_time_and_value(&reply, 0)?;
                        continue;
                    }
                }
            }
            let mut cas = self.shared.cas.prepare_invoke();
            cas.key(key)
                .arg(current.as_deref().unwrap_or(""))
                .arg(encode(new))
                .arg(millis(keep));
            sent = Instant::now();
            let reply: Vec<Value> = self.round_trip(key, cas.invoke_async(&mut conn)).await?;
            if matches!(reply.first(), Some(Value::Int(1))) {
                return Ok(out);
            }
            (now, current) = parse_time_and_value(&reply, 1)?;
            // Someone else wrote (another process, or a task of ours just
            // before we took the lock): back off a little, jittered.
            let backoff = Duration::from_micros(fastrand::u64(0..=200 * u64::from(round + 1)));
            tokio::time::sleep(backoff).await;
        }
        Err(StoreError::new("redis: key too contended"))
    }
}

/// Whether `e` is an answer from the server (an error reply), not a
/// failure to reach it.
pub(super) fn server_replied(e: &redis::RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
    )
}
