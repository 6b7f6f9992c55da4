//! [`Redis`]: one Redis or a Redis Cluster and a key prefix, as this
//! process reaches them, and the names of the keys it keeps there.
//!
//! The key layout (the same on one Redis and on a cluster):
//!
//! - `{prefix}lease:{ab}:{sha1}`: a task key's lease, where `sha1` is the
//!   hex SHA-1 of the task key and `{ab}` its first two hex digits, a hash
//!   tag: a cluster keeps all leases of one of 256 buckets in one slot;
//! - `{prefix}freed:{ab}:{sha1}:{token}`: the two-second mark of a released
//!   lease whose re-assertion by the heartbeat may be on its way, in its
//!   lease's slot (the release writes both: one script on one
//!   Redis; on a cluster the mark, then a compare-and-delete of the lease,
//!   so that neither meets `TRYAGAIN` while the slot migrates);
//! - `{prefix}origin:{sha1}`: an origin's gate, quota and pace (one key, one
//!   slot each);
//! - `{prefix}budget`: the retry budget (one key).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Script;
use tokio::time::Instant;

use super::FailMode;
use super::connection::Connection;
use super::outage::Outages;
use super::scripts::{ACQUIRE, CAS, READ, REASSERT, RELEASE, RELEASE_ONE};
use crate::store::{MemoryStore, StoreError};
use crate::util::lock;

/// Redis itself: leases, and each update of an origin's or the budget's
/// state one compare-and-set (the [`Store`](crate::Store) a
/// [`RedisStore`](super::RedisStore) coalesces the writes of).
#[derive(Clone)]
pub(super) struct Redis {
    pub(super) conn: Connection,
    pub(super) prefix: Arc<str>,
    /// The prefix carries `{` or `}` on a cluster: it would move the keys'
    /// hash tags, and a lease and its release mark could land in two
    /// slots. Every operation is refused.
    pub(super) prefix_refused: bool,
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
    /// failing open), by Redis key, re-asserted by the heartbeat.
    pub(super) held: Mutex<HashMap<String, Held>>,
    /// Releases waiting for the task that sends them to Redis in batches
    /// (on one Redis; a cluster sends each on its own).
    pub(super) release_queue: Mutex<Vec<Release>>,
    /// Whether that task runs.
    pub(super) releasing_batches: AtomicBool,
    /// Whether the task re-asserting `held` runs.
    pub(super) heartbeat: AtomicBool,
    /// Operations run on `local` instead of Redis, failing open.
    pub(super) fallbacks: AtomicU64,
    /// Redis did not answer when this process last fell back to `local`,
    /// and has not answered since: what is only counted for Redis (a
    /// success, a deposit) is applied to `local` as well, which admits
    /// meanwhile.
    pub(super) failing_open: AtomicBool,
    /// The parts of Redis found not answering, skipped until a probe
    /// reaches them (see `outage.rs`).
    pub(super) outages: Outages,
    /// Whether the task probing them runs.
    pub(super) probing: AtomicBool,
    /// Whether a single-node connection reached a Redis Cluster node, once
    /// asked (by `connect`, or after the first answer of a lazy
    /// connection); `false` from the start on a cluster connection.
    pub(super) cluster: tokio::sync::OnceCell<bool>,
    pub(super) read: Script,
    pub(super) cas: Script,
    pub(super) acquire: Script,
    pub(super) release: Script,
    pub(super) release_one: Script,
    pub(super) reassert: Script,
}

/// A lease this process holds, as the heartbeat sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub(super) token: u64,
    /// When the lease expires (the task's deadline).
    pub(super) expires: Instant,
    /// Until when a re-assertion that listed this lease may still set it
    /// in Redis (`None`: none in flight). A release meanwhile leaves its
    /// mark, so that the re-assertion cannot set it again.
    pub(super) listed_until: Option<Instant>,
}

/// A release on its way to Redis.
#[derive(Debug, Clone)]
pub(super) struct Release {
    pub(super) redis_key: String,
    pub(super) token: u64,
    /// Whether it leaves its mark (see [`Held::listed_until`]).
    pub(super) marked: bool,
    /// When the lease expires anyway: no use sending it after.
    pub(super) expires: Instant,
}

/// What every operation fails with on a Redis Cluster node reached through
/// a single-node connection.
pub(super) fn cluster_refused() -> StoreError {
    StoreError::refused(
        "redis: the server is a Redis Cluster node (cluster_enabled:1); connect with RedisStore::connect_cluster",
    )
}

/// What every operation fails with on a cluster whose key prefix carries a
/// brace.
pub(super) fn prefix_refused() -> StoreError {
    StoreError::refused(
        "redis: on a Redis Cluster the key prefix may not contain `{` or `}` (the store places its own hash tags)",
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
    pub(super) fn new(conn: Connection, restart_grace: Duration) -> Self {
        let cluster = tokio::sync::OnceCell::new();
        if conn.is_cluster() {
            let _ = cluster.set(false);
        }
        Redis {
            conn,
            prefix: Arc::from("reqwest-backpressure:"),
            prefix_refused: false,
            fail_mode: FailMode::Open,
            op_timeout: Duration::from_millis(500),
            restart_grace,
            local: MemoryStore::new(),
            shared: Arc::new(Shared {
                key_locks: Mutex::default(),
                releasing: Mutex::default(),
                held: Mutex::default(),
                release_queue: Mutex::default(),
                releasing_batches: AtomicBool::new(false),
                heartbeat: AtomicBool::new(false),
                fallbacks: AtomicU64::new(0),
                failing_open: AtomicBool::new(false),
                outages: Outages::default(),
                probing: AtomicBool::new(false),
                cluster,
                read: Script::new(READ),
                cas: Script::new(CAS),
                acquire: Script::new(ACQUIRE),
                release: Script::new(RELEASE),
                release_one: Script::new(RELEASE_ONE),
                reassert: Script::new(REASSERT),
            }),
        }
    }

    /// Sets the prefix (refused on a cluster if it carries a brace).
    pub(super) fn set_prefix(&mut self, prefix: String) {
        self.prefix_refused = self.conn.is_cluster() && prefix.contains(['{', '}']);
        self.prefix = Arc::from(prefix);
    }

    pub(super) fn lease_key(&self, key: &str) -> String {
        // Hashed: an idempotency key may be guessable or sensitive, and the
        // task key starts with the origin. The first two hex digits are the
        // hash tag: one of 256 buckets, each one slot of a cluster.
        let hash = sha1_smol::Sha1::from(key).digest().to_string();
        let bucket = hash.get(..2).unwrap_or_default();
        format!("{}lease:{{{bucket}}}:{hash}", self.prefix)
    }

    /// The key of a limit's state: `{prefix}origin:{<hash of the origin>}`
    /// for an origin's own, with `:<hash of the scope>` after it for a
    /// scope's (`key` as [`limit_key`](crate::scope::key::limit_key)
    /// writes it). Hashed: an origin or a scope's name may be long; and
    /// the origin's hash is the hash tag, so an origin's scopes live in
    /// its slot of a cluster.
    pub(super) fn origin_key(&self, key: &str) -> String {
        let (origin, scope) = crate::scope::key::split(key);
        let origin = sha1_smol::Sha1::from(origin).digest();
        match scope {
            None => format!("{}origin:{{{origin}}}", self.prefix),
            Some(scope) => format!(
                "{}origin:{{{origin}}}:{}",
                self.prefix,
                sha1_smol::Sha1::from(scope).digest()
            ),
        }
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
