//! [`Redis`]: one Redis and a key prefix, as this process reaches them, and
//! the names of the keys it keeps there.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Script;
use redis::aio::ConnectionManager;
use tokio::time::Instant;

use super::FailMode;
use super::scripts::{ACQUIRE, CAS, READ, REASSERT, RELEASE};
use crate::store::{MemoryStore, StoreError};
use crate::util::lock;

/// Redis itself: leases, and each update of an origin's or the budget's
/// state one compare-and-set (the [`Store`](crate::Store) a
/// [`RedisStore`](super::RedisStore) coalesces the writes of).
#[derive(Clone)]
pub(super) struct Redis {
    pub(super) conn: ConnectionManager,
    pub(super) prefix: Arc<str>,
    pub(super) fail_mode: FailMode,
    pub(super) op_timeout: Duration,
    pub(super) restart_grace: Duration,
    /// This process's own leases (kept beside Redis's), and the state it
    /// uses while failing open.
    pub(super) local: MemoryStore,
    pub(super) shared: Arc<Shared>,
}

/// Per-process state behind a [`Redis`] and its clones.
pub(super) struct Shared {
    /// One write per key at a time from this process, so that a burst of
    /// tasks does not turn into a compare-and-set race among themselves.
    key_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Releases sent to Redis but maybe not applied yet: lease key →
    /// (token, when the lease expires in any case).
    pub(super) releasing: Mutex<HashMap<String, (u64, Instant)>>,
    /// The leases this process holds (granted by Redis, or locally while
    /// failing open): Redis key → (token, expiry), re-asserted by the
    /// heartbeat.
    pub(super) held: Mutex<HashMap<String, (u64, Instant)>>,
    /// Whether the task re-asserting `held` runs.
    pub(super) heartbeat: AtomicBool,
    /// Whether the server is a Redis Cluster node, once asked (by
    /// `connect`, or after the first answer of a lazy connection).
    pub(super) cluster: tokio::sync::OnceCell<bool>,
    pub(super) read: Script,
    pub(super) cas: Script,
    pub(super) acquire: Script,
    pub(super) release: Script,
    pub(super) reassert: Script,
}

/// What every operation fails with on a Redis Cluster node.
pub(super) fn cluster_refused() -> StoreError {
    StoreError::refused(
        "redis: Redis Cluster is not supported yet; connect to a single Redis (the server says cluster_enabled:1)",
    )
}

pub(super) fn unavailable(e: &redis::RedisError) -> StoreError {
    // The kind only: a Redis error's text can name the server's address.
    StoreError::new(format!("redis: {:?}", e.kind()))
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Redis {
    /// Redis over `conn`, with the default settings.
    pub(super) fn new(conn: ConnectionManager, restart_grace: Duration) -> Self {
        Redis {
            conn,
            prefix: Arc::from("reqwest-backpressure:"),
            fail_mode: FailMode::Open,
            op_timeout: Duration::from_millis(500),
            restart_grace,
            local: MemoryStore::new(),
            shared: Arc::new(Shared {
                key_locks: Mutex::default(),
                releasing: Mutex::default(),
                held: Mutex::default(),
                heartbeat: AtomicBool::new(false),
                cluster: tokio::sync::OnceCell::new(),
                read: Script::new(READ),
                cas: Script::new(CAS),
                acquire: Script::new(ACQUIRE),
                release: Script::new(RELEASE),
                reassert: Script::new(REASSERT),
            }),
        }
    }

    pub(super) fn lease_key(&self, key: &str) -> String {
        // Hashed: an idempotency key may be guessable or sensitive, and the
        // task key starts with the origin.
        format!(
            "{}lease:{}",
            self.prefix,
            sha1_smol::Sha1::from(key).digest()
        )
    }

    pub(super) fn origin_key(&self, origin: &str) -> String {
        format!(
            "{}origin:{}",
            self.prefix,
            sha1_smol::Sha1::from(origin).digest()
        )
    }

    pub(super) fn budget_key(&self) -> String {
        format!("{}budget", self.prefix)
    }

    pub(super) fn key_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = lock(&self.shared.key_locks);
        if locks.len() > 1024 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        Arc::clone(locks.entry(key.to_owned()).or_default())
    }
}
