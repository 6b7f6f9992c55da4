//! [`RedisStore`]: key leases, origin gates, pacing and the retry budget
//! shared by many processes through Redis.
//!
//! Why Redis? Workers that each keep their own state rediscover a server's
//! limit by being rejected, one process at a time, and two workers can run
//! the same keyed operation at once. Teams that run many workers already run
//! Redis; sharing the state there gives every process one view.
//!
//! How: a lease is one `SET NX PX`, released by a compare-and-delete script
//! (releases that queue meanwhile go in one script), sent again until Redis
//! confirms it or the lease has expired. Each process re-asserts the leases
//! it holds about once a second (see [`RedisStore::restart_grace`]); a
//! release that may race a re-assertion of its lease also leaves a
//! two-second mark of the released token, so that the re-assertion cannot
//! set the released lease again.
//! Origin and budget state is read and replaced by a compare-and-set script;
//! the new state is computed in Rust by the update the core passes in, the
//! same for every store ([`OriginState`](crate::origin::OriginState),
//! [`BudgetState`](crate::budget::BudgetState)), so the Lua side holds no
//! decision logic. Every time in shared state is read on Redis's
//! clock (`TIME`, returned by the scripts), so workers never compare skewed
//! clocks; each process turns "wait this long" into its own
//! [`tokio::time::Instant`]. Every key carries a TTL (a lease: the task's
//! deadline; an origin: its gate and queue plus five idle minutes), so a
//! crashed worker leaks nothing and its lease frees itself.
//!
//! Each process also keeps its own leases (so exclusion within the process
//! holds while Redis is away). Its writes go through
//! [`Coalesced`](crate::store::Coalesced): one writer per origin, and 2xx
//! answers and budget deposits counted locally and folded into Redis at
//! most every 100 ms or with its next write to the same key: a burst of
//! successes costs a few round trips, not one per request.
//!
//! When Redis cannot answer within `op_timeout` (per round trip), the
//! [`FailMode`] decides: fail open to this process's local state (the
//! default, with a `warn` event), or fail closed with
//! [`Error::Store`](crate::Error::Store) (`store_unavailable`) before
//! anything is sent. Only the first round trip waits to find Redis away
//! (on a Redis Cluster, the first on each slot): from then on operations
//! skip it and the fail mode applies at once, as fast as the in-memory
//! store, while one background probe asks Redis again after 100 ms, then
//! at an interval doubled up to 1 s; its first answer (or the heartbeat's,
//! which re-asserts the held leases all along) ends the outage, and
//! operations go to Redis again.
//!
//! What it does not promise (a step of Redis's clock, a failover to a
//! replica), and how it runs on a Redis Cluster, is in [`RedisStore`]'s
//! docs.

mod connection;
mod fallback;
mod handle;
mod heartbeat;
mod leases;
mod outage;
mod primitive;
mod release;
mod scripts;
mod update;

use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::cluster_async::ClusterConnection;

use crate::store::{Coalesced, MemoryStore, StoreError};
use connection::Connection;
use handle::{Redis, cluster_refused, millis, unavailable};
use update::UPDATE_ROUND_TRIPS;

/// What a [`RedisStore`] does when Redis does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Go on with this process's own state (leases, gates and budget stop
    /// being shared until Redis answers again), with a `warn` event. That
    /// state learns every answer and deposit meanwhile, as the in-memory
    /// store would (they are counted for Redis as well).
    #[default]
    Open,
    /// Refuse to send: the request fails with `store_unavailable`.
    Closed,
}

const BUDGET_IDLE: Duration = Duration::from_secs(60);
/// Compare-and-set rounds before giving up on a contended key (the whole
/// update is bounded in time as well; see `update.rs`). Batched pacing
/// writes an origin's state on every admission, and four processes booking
/// slots at once met 64 failed rounds 2 to 3 times in 10,000 tasks.
const CAS_ROUNDS: u32 = 256;

/// A [`Store`](crate::Store) in Redis, shared by every process that uses the same Redis
/// and key prefix.
///
/// One Redis (a primary, with or without replicas), or a Redis Cluster
/// ([`connect_cluster`](RedisStore::connect_cluster), see
/// [below](#redis-cluster)); see [below](#what-it-does-not-promise) for
/// what the store cannot promise.
///
/// ```no_run
/// use reqwest_backpressure::{Policy, RetryAfterMiddleware};
/// use reqwest_backpressure::store::{FailMode, RedisStore};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisStore::connect("redis://127.0.0.1:6379/")
///     .await?
///     .prefix("billing-workers:")
///     .fail_mode(FailMode::Open);
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryAfterMiddleware::with_store(Policy::default(), store))
///     .build();
/// # Ok(()) }
/// ```
///
/// # What is shared
///
/// Between all processes using the same Redis and prefix:
///
/// - **Key leases**: one running task per idempotency key (per origin)
///   across every process; a second worker sending the same key gets
///   `already_active` and sends nothing.
/// - **Every limit**: an origin's gate, quota and pace, and each of its
///   scopes' (a GitHub resource, a Discord bucket, an IETF partition, a
///   declared scope): a `Retry-After` seen by one worker holds every
///   worker's requests to that limit, a stated quota is spent once, and the
///   learned pace is one pace for all. Through the store, an origin's first
///   answer is written at once and a stated quota once per window, so four
///   processes wait for one first request and spend one quota.
/// - **The retry budget**.
///
/// Writes go through [`Coalesced`](crate::store::Coalesced): each process
/// has one writer per limit; the admissions and answers that queue while it
/// writes are applied in order in its next read and compare-and-set, and an
/// answer's times (`Retry-After`, a reset) count from when it was received,
/// not from when it is written; an admission that changes nothing is a
/// read. Key names never hold a URL, a query string or an idempotency key
/// in clear. Redis must not evict keys (`maxmemory-policy noeviction`): an
/// evicted lease is a forgotten one. The scripts need Redis 5 or later.
///
/// # When Redis is away or restarts empty
///
/// Each operation times out after [`op_timeout`](RedisStore::op_timeout)
/// (500 ms). [`FailMode::Open`] (the default) goes on with this process's
/// own state, with a `warn` event and the observer's `on_local_state`;
/// [`FailMode::Closed`] refuses a request that has sent nothing yet with
/// `store_unavailable`, and a task that already holds a pushback returns
/// it with stop code `store_unavailable` (no request is sent twice because
/// of the fault; an answer already received is always returned). Only the
/// first operation waits to find Redis away (on a cluster, the first on
/// each slot); then the fail mode applies at once while one background
/// probe asks Redis again.
///
/// When Redis restarts empty (no persistence) it forgets every lease. Each
/// process re-asserts the leases it holds about once a second, and failing
/// closed no lease is given out while Redis is younger than
/// [`restart_grace`](RedisStore::restart_grace). Failing open does not
/// wait: a held key can be taken by another process for up to the
/// heartbeat's second. [`connect`](RedisStore::connect) fails when Redis is
/// unreachable at start-up; [`connect_lazy`](RedisStore::connect_lazy) does
/// not wait for it (the fail mode applies until Redis answers). A release
/// that Redis did not confirm is sent again, after 0.1 s doubling up to
/// 2 s, until it is or the lease has expired; a process that exits first
/// leaves it to its TTL (the task's deadline). What the fault runs
/// measured is in the repository's `RELIABILITY.md`.
///
/// # What it does not promise
///
/// - **Shared times follow the Redis host's clock.** A step of that clock
///   (NTP stepping it, a failover to a replica whose clock differs, a VM
///   migrated or resumed) moves every shared gate and paced slot by the
///   step: a step forward opens gates early for every process, a step back
///   holds them longer. Lease TTLs are kept on that clock too, so a step
///   forward may free a running task's key early (its holder re-asserts it
///   within about a second). A process's own retries still never leave
///   before the time it was told itself: its waits run on its own monotonic
///   clock.
/// - **A failover to a replica may lose the last writes.** Redis replicates
///   asynchronously and this store does not call `WAIT`: leases and gate,
///   pace and budget writes of the last moments before the failover may be
///   missing on the new primary. It answers, so neither [`FailMode`]
///   applies and both go on alike: a lost lease lets a second process take
///   the key and run it at once, if it asks before the holder's heartbeat
///   puts the lease back (within about a second; the holder then logs a
///   `warn` event); a lost gate lets the processes send one burst into the
///   pushback, until the next pushback closes it again; a lost budget write
///   undoes withdrawals (more retries) or deposits (fewer).
///   [`restart_grace`](RedisStore::restart_grace) (failing closed) does not
///   cover it: it counts Redis's uptime, and a replica that has been up for
///   long is past it at once. While no primary answers, the fail mode
///   applies as in any outage (a store still on a demoted primary gets
///   `READONLY` errors, which count as failures). `min-replicas-to-write`
///   with `min-replicas-max-lag` on the primary narrows the loss to about
///   that lag (a primary without enough replicas refuses writes, and the
///   fail mode applies); this store does not close it.
/// - **A single-node connection refuses a Redis Cluster node.**
///   [`connect`](RedisStore::connect) to a cluster node (`cluster_enabled:1`)
///   fails, telling you to use [`connect_cluster`](RedisStore::connect_cluster);
///   a store made by [`connect_lazy`](RedisStore::connect_lazy) or
///   [`with_connection`](RedisStore::with_connection) finds out on the
///   server's first answer, and from then on fails every operation with
///   that error, in both fail modes, with an `error` event (a single-node
///   connection does not follow `MOVED`: it would share nothing).
///
/// # Redis Cluster
///
/// [`connect_cluster`](RedisStore::connect_cluster) reaches a cluster
/// through redis-rs's cluster connection: each script runs on the primary
/// of its keys' slot, `MOVED` and `ASK` are followed (within the round
/// trip's [`op_timeout`](RedisStore::op_timeout)) and the slot map is
/// refreshed when the topology changes. Every script touches the keys of
/// one slot:
///
/// - `{prefix}lease:{ab}:{sha1}`: a lease, `sha1` the hex SHA-1 of the task
///   key and `{ab}`, its first two digits, a hash tag: leases fall in 256
///   buckets, each one slot, spread over the primaries;
/// - `{prefix}freed:{ab}:{sha1}:{token}`: a released lease's two-second
///   mark, in its lease's slot, set just before the lease is deleted when
///   a re-assertion of it may be on its way; the
///   heartbeat re-asserts the held leases one bucket per script, every
///   bucket at once, each on the clock of the node serving it;
/// - `{prefix}origin:{sha1}`: an origin's state, one key (its slot spreads
///   origins over the primaries);
/// - `{prefix}origin:{<origin hash>}:<scope hash>`: a scope's limit (a
///   GitHub resource, a Discord bucket, …), in its origin's slot, with the
///   same idle TTL;
/// - `{prefix}budget`: the retry budget, one key on one primary (every
///   process updates it: it is the one shared hot key).
///
/// What a single Redis does not promise holds per primary: each shared
/// time is read on the clock of the primary serving its key (keep the
/// nodes' clocks in step), and a failover (a replica promoted when its
/// primary dies or stops answering) may lose that primary's last writes,
/// as above, for the keys of its slots only. While a slot has no primary
/// (from a primary's death until its replica is promoted: about
/// `cluster-node-timeout` and an election), the operations on its keys
/// fail and the [`FailMode`] applies to them, with the same `warn` event;
/// the other slots go on. A slot being migrated is followed through `ASK`
/// and `MOVED`; its keys move with their TTLs. The cluster connection
/// sends a command again when its connection dropped: a compare-and-set
/// whose answer was lost with its node may be applied twice (on the
/// replica that had it and took over).
///
/// One Redis is simpler, and enough while it keeps up; a cluster spreads
/// the leases and origins over primaries, but not the budget.
#[derive(Clone)]
pub struct RedisStore {
    /// Redis itself (leases, and each update one compare-and-set), behind
    /// this process's write coalescing.
    updates: Coalesced<Redis>,
}

/// The default [`RedisStore::restart_grace`].
const RESTART_GRACE: Duration = Duration::from_secs(3);

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The connection's address may carry credentials: never printed.
        let redis = self.redis();
        f.debug_struct("RedisStore")
            .field("cluster", &redis.conn.is_cluster())
            .field("prefix", &redis.prefix)
            .field("fail_mode", &redis.fail_mode)
            .field("op_timeout", &redis.op_timeout)
            .field("restart_grace", &redis.restart_grace)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`) with a reconnecting
    /// connection manager. Connecting and each round trip time out after
    /// 500 ms by default ([`op_timeout`](Self::op_timeout)).
    ///
    /// Fails when Redis cannot be reached now, or when it is a Redis
    /// Cluster node (use [`connect_cluster`](Self::connect_cluster)); see
    /// [`connect_lazy`](Self::connect_lazy) for workers that must start
    /// while Redis is away.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let (client, config) = connection::single(url)?;
        let conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| unavailable(&e))?;
        let store = Self::with_connection(conn);
        let cluster = store.redis().ask_cluster().await?;
        if cluster {
            return Err(cluster_refused());
        }
        let _ = store.redis().shared.cluster.set(cluster);
        Ok(store)
    }

    /// Like [`connect`](Self::connect), but does not wait for Redis: the
    /// connection is made on first use and remade after failures, and until
    /// then the [`FailMode`] applies. Fails only on an invalid `url`; a
    /// Redis Cluster node is found out on its first answer, and every
    /// operation fails from then on, whatever the fail mode.
    pub async fn connect_lazy(url: &str) -> Result<Self, StoreError> {
        let (client, config) = connection::single(url)?;
        let conn =
            ConnectionManager::new_lazy_with_config(client, config).map_err(|e| unavailable(&e))?;
        Ok(Self::with_connection(conn))
    }

    /// Connects to the Redis Cluster that the `seeds` belong to
    /// (`redis://host:port` of any of its nodes; the others, and which node
    /// serves which slot, are learned from them and followed on `MOVED` and
    /// `ASK`). The settings are those of a single Redis
    /// ([`prefix`](Self::prefix), [`fail_mode`](Self::fail_mode),
    /// [`op_timeout`](Self::op_timeout),
    /// [`restart_grace`](Self::restart_grace)); on a cluster the prefix may
    /// not contain `{` or `}`. See [Redis Cluster](#redis-cluster) for the
    /// key layout and what a failover can lose.
    ///
    /// Fails when no seed can be reached now, or they are not cluster
    /// nodes; see [`connect_cluster_lazy`](Self::connect_cluster_lazy) for
    /// workers that must start while the cluster is away.
    pub async fn connect_cluster<S: AsRef<str>>(
        seeds: impl IntoIterator<Item = S>,
    ) -> Result<Self, StoreError> {
        let (client, config) = connection::cluster(seeds)?;
        let conn = client
            .get_async_connection_with_config(config)
            .await
            .map_err(|e| unavailable(&e))?;
        Ok(Self::with_cluster_connection(conn))
    }

    /// Like [`connect_cluster`](Self::connect_cluster), but does not wait
    /// for the cluster: its nodes are reached on first use, and until then
    /// the [`FailMode`] applies. Fails only on invalid `seeds`.
    pub async fn connect_cluster_lazy<S: AsRef<str>>(
        seeds: impl IntoIterator<Item = S>,
    ) -> Result<Self, StoreError> {
        let (client, config) = connection::cluster(seeds)?;
        Ok(Self::with_cluster_connection(
            client.get_pending_async_connection_with_config(config),
        ))
    }

    /// A store over an existing connection manager to one Redis. A Redis
    /// Cluster node is found out as with [`connect_lazy`](Self::connect_lazy).
    #[must_use]
    pub fn with_connection(conn: ConnectionManager) -> Self {
        Self::over(Connection::Single(conn))
    }

    /// A store over an existing Redis Cluster connection.
    #[must_use]
    pub fn with_cluster_connection(conn: ClusterConnection) -> Self {
        Self::over(Connection::Cluster(conn))
    }

    fn over(conn: Connection) -> Self {
        let redis = Redis::new(conn, RESTART_GRACE);
        let bound = Self::wait_bound(redis.op_timeout);
        RedisStore {
            updates: Coalesced::new(redis).timeout(bound),
        }
    }

    /// How long a call waits for its origin's writer: the batch being
    /// written and its own, each bounded by the update's round trips.
    fn wait_bound(op_timeout: Duration) -> Duration {
        op_timeout.saturating_mul(2 * UPDATE_ROUND_TRIPS + 1)
    }

    /// Redis itself, behind the write coalescing.
    fn redis(&self) -> &Redis {
        self.updates.inner()
    }

    /// The prefix of every key this store writes (default
    /// `reqwest-backpressure:`). Processes that should share state use the
    /// same prefix.
    ///
    /// On a Redis Cluster the prefix may not contain `{` or `}`: the store
    /// places its own hash tags, and a brace before them would move them
    /// (a lease and its release mark could land in two slots). A store
    /// given one refuses every operation, whatever its fail mode, with an
    /// `error` event.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        let redis = self.updates.inner_mut();
        redis.set_prefix(prefix.into());
        #[cfg(feature = "tracing")]
        if redis.prefix_refused {
            tracing::error!(
                target: "reqwest_backpressure::redis_store",
                "reqwest-backpressure: a key prefix with a brace on a Redis Cluster; every store operation fails"
            );
        }
        self
    }

    /// What to do when Redis does not answer (default [`FailMode::Open`]).
    #[must_use]
    pub fn fail_mode(mut self, mode: FailMode) -> Self {
        self.updates.inner_mut().fail_mode = mode;
        self
    }

    /// The longest one round trip to Redis may take before it counts as a
    /// failure (default 500 ms). After such a failure, operations skip
    /// Redis (the [`FailMode`] applies at once) until a background probe,
    /// sent after 100 ms, then at an interval doubled up to 1 s, gets an
    /// answer.
    #[must_use]
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.updates.inner_mut().op_timeout = timeout;
        RedisStore {
            updates: self.updates.timeout(Self::wait_bound(timeout)),
        }
    }

    /// How long after Redis starts no lease is given out when failing
    /// closed (default 3 s).
    ///
    /// Leases live in Redis without persistence: when Redis restarts empty,
    /// a key whose task is still running would look free to every other
    /// process. Each process re-asserts the leases it holds about once a
    /// second, so once Redis has been up this long, every running task's
    /// lease is back. Until then a store failing closed waits for the rest
    /// of the grace before taking a lease, or, if the task's deadline comes
    /// first, fails with `store_unavailable`. A store failing open does not
    /// wait (it may lose exclusion for that long; see [`FailMode::Open`]).
    /// Keep it above one second plus [`op_timeout`](Self::op_timeout); zero
    /// turns the check off. A Redis that keeps its data across restarts
    /// (`appendonly yes`) needs no grace, but the check costs it only this
    /// wait after a restart.
    #[must_use]
    pub fn restart_grace(mut self, grace: Duration) -> Self {
        self.updates.inner_mut().restart_grace = grace;
        self
    }

    /// This process's own state: its leases, and what it uses while
    /// failing open.
    #[must_use]
    #[doc(hidden)]
    pub fn local(&self) -> &MemoryStore {
        &self.redis().local
    }
}
