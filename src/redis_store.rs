//! [`RedisStore`]: key leases, origin gates, pacing and the retry budget
//! shared by many processes through Redis.
//!
//! Why Redis? Workers that each keep their own state rediscover a server's
//! limit by being rejected, one process at a time, and two workers can run
//! the same keyed operation at once. Teams that run many workers already run
//! Redis; sharing the state there gives every process one view.
//!
//! How: a lease is one `SET NX PX` (released by a compare-and-delete script).
//! Origin and budget state is read and replaced by a compare-and-set script;
//! the new state is computed in Rust by the same pure functions the
//! in-memory store uses ([`OriginState`], [`BudgetState`]), so the Lua side
//! holds no decision logic. Every time in shared state is read on Redis's
//! clock (`TIME`, returned by the scripts), so workers never compare skewed
//! clocks; each process turns "wait this long" into its own
//! [`tokio::time::Instant`]. Every key carries a TTL (a lease: the task's
//! deadline; an origin: its gate and queue plus five idle minutes), so a
//! crashed worker leaks nothing and its lease frees itself.
//!
//! Each process also keeps its own leases (so exclusion within the process
//! holds while Redis is away), counts its 2xx answers and budget deposits
//! locally, and folds them into Redis at most every 100 ms or with its next
//! write to the same key: a burst of successes costs a few round trips, not
//! one per request.
//!
//! When Redis cannot answer within `op_timeout` (per round trip), the
//! [`FailMode`] decides: fail open to this process's local state (the
//! default, with a `warn` event), or fail closed with
//! [`Error::Store`](crate::Error::Store) (`store_unavailable`) before
//! anything is sent.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};

use crate::budget::{BudgetState, RetryBudget};
use crate::origin::ORIGIN_IDLE;
use crate::origin::{Admission, OriginState, PacingConfig};
use crate::store::{LeaseToken, MemoryStore, Outcome, Store, StoreError, lock};

/// What a [`RedisStore`] does when Redis does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailMode {
    /// Go on with this process's own state (leases, gates and budget stop
    /// being shared until Redis answers again), with a `warn` event.
    #[default]
    Open,
    /// Refuse to send: the request fails with `store_unavailable`.
    Closed,
}

const BUDGET_IDLE: Duration = Duration::from_secs(60);
/// Compare-and-set rounds before giving up on a contended key.
const CAS_ROUNDS: u32 = 64;
/// Locally counted successes and deposits are written at least this often.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// `{now_s, now_us, value}`.
const READ: &str = r"
local t = redis.call('TIME')
return {t[1], t[2], redis.call('GET', KEYS[1])}
";

/// Replaces KEYS[1] with ARGV[2] (TTL ARGV[3] ms) if it still holds ARGV[1]
/// ('' for absent). `{1, now_s, now_us}` or `{0, now_s, now_us, current}`.
const CAS: &str = r"
local cur = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
if (cur or '') == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return {1, t[1], t[2]}
end
return {0, t[1], t[2], cur}
";

/// Takes the lease KEYS[1] for token ARGV[1], TTL ARGV[2] ms; first frees it
/// if it still holds ARGV[3], this process's own lease whose release has
/// not reached Redis yet. 1 if taken, 0 if held by another task.
const ACQUIRE: &str = r"
if ARGV[3] ~= '' and redis.call('GET', KEYS[1]) == ARGV[3] then
  redis.call('DEL', KEYS[1])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
";

/// Deletes KEYS[1] if it holds ARGV[1].
const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// A [`Store`] in Redis, shared by every process that uses the same Redis
/// and key prefix.
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
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    prefix: Arc<str>,
    fail_mode: FailMode,
    op_timeout: Duration,
    local: MemoryStore,
    shared: Arc<Shared>,
}

/// Per-process state behind a [`RedisStore`] and its clones.
struct Shared {
    /// One write per key at a time from this process, so that a burst of
    /// tasks does not turn into a compare-and-set race among themselves.
    key_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Releases sent to Redis but maybe not applied yet: lease key →
    /// (token, when the lease expires in any case).
    releasing: Mutex<HashMap<String, (u64, Instant)>>,
    /// 2xx answers not yet written: origin key → (count, last write).
    successes: Mutex<HashMap<String, (u32, Instant)>>,
    /// Budget deposits not yet written, and the last write.
    deposits: Mutex<(u32, Instant)>,
    read: Script,
    cas: Script,
    acquire: Script,
    release: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The connection's address may carry credentials: never printed.
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("fail_mode", &self.fail_mode)
            .field("op_timeout", &self.op_timeout)
            .finish_non_exhaustive()
    }
}

fn unavailable(e: &redis::RedisError) -> StoreError {
    // The kind only: a Redis error's text can name the server's address.
    StoreError::new(format!("redis: {:?}", e.kind()))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`) with a reconnecting
    /// connection manager. Connecting and each round trip time out after
    /// 500 ms by default ([`op_timeout`](Self::op_timeout)).
    ///
    /// Fails when Redis cannot be reached now; see
    /// [`connect_lazy`](Self::connect_lazy) for workers that must start
    /// while Redis is away.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let (client, config) = Self::client(url)?;
        let conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| unavailable(&e))?;
        Ok(Self::with_connection(conn))
    }

    /// Like [`connect`](Self::connect), but does not wait for Redis: the
    /// connection is made on first use and remade after failures, and until
    /// then the [`FailMode`] applies. Fails only on an invalid `url`.
    pub async fn connect_lazy(url: &str) -> Result<Self, StoreError> {
        let (client, config) = Self::client(url)?;
        let conn =
            ConnectionManager::new_lazy_with_config(client, config).map_err(|e| unavailable(&e))?;
        Ok(Self::with_connection(conn))
    }

    fn client(url: &str) -> Result<(redis::Client, ConnectionManagerConfig), StoreError> {
        let client = redis::Client::open(url).map_err(|e| unavailable(&e))?;
        let timeout = Duration::from_millis(500);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        Ok((client, config))
    }

    /// A store over an existing connection manager.
    #[must_use]
    pub fn with_connection(conn: ConnectionManager) -> Self {
        let now = Instant::now();
        RedisStore {
            conn,
            prefix: Arc::from("reqwest-backpressure:"),
            fail_mode: FailMode::Open,
            op_timeout: Duration::from_millis(500),
            local: MemoryStore::new(),
            shared: Arc::new(Shared {
                key_locks: Mutex::default(),
                releasing: Mutex::default(),
                successes: Mutex::default(),
                deposits: Mutex::new((0, now)),
                read: Script::new(READ),
                cas: Script::new(CAS),
                acquire: Script::new(ACQUIRE),
                release: Script::new(RELEASE),
            }),
        }
    }

    /// The prefix of every key this store writes (default
    /// `reqwest-backpressure:`). Processes that should share state use the
    /// same prefix.
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Arc::from(prefix.into());
        self
    }

    /// What to do when Redis does not answer (default [`FailMode::Open`]).
    #[must_use]
    pub fn fail_mode(mut self, mode: FailMode) -> Self {
        self.fail_mode = mode;
        self
    }

    /// The longest one round trip to Redis may take before it counts as a
    /// failure (default 500 ms).
    #[must_use]
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = timeout;
        self
    }

    /// This process's own state: its leases, and what it uses while
    /// failing open.
    #[must_use]
    #[doc(hidden)]
    pub fn local(&self) -> &MemoryStore {
        &self.local
    }

    fn lease_key(&self, key: &str) -> String {
        // Hashed: an idempotency key may be guessable or sensitive, and the
        // task key starts with the origin.
        format!(
            "{}lease:{}",
            self.prefix,
            sha1_smol::Sha1::from(key).digest()
        )
    }

    fn origin_key(&self, origin: &str) -> String {
        format!(
            "{}origin:{}",
            self.prefix,
            sha1_smol::Sha1::from(origin).digest()
        )
    }

    fn budget_key(&self) -> String {
        format!("{}budget", self.prefix)
    }

    fn key_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = lock(&self.shared.key_locks);
        if locks.len() > 1024 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        Arc::clone(locks.entry(key.to_owned()).or_default())
    }

    /// One round trip, bounded by `op_timeout`.
    async fn round_trip<T>(
        &self,
        op: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.op_timeout, op).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(unavailable(&e)),
            Err(_) => Err(StoreError::new("redis: operation timed out")),
        }
    }

    /// `op`'s answer; when Redis failed, the fail mode decides between
    /// `fallback` (local state) and the error.
    async fn guarded<T, L>(
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
        match self.fail_mode {
            FailMode::Closed => Err(err),
            FailMode::Open => {
                #[cfg(feature = "tracing")]
                tracing::warn!(operation = what, error = %err, "reqwest-backpressure: redis unavailable, using local state");
                #[cfg(not(feature = "tracing"))]
                let _ = what;
                fallback().await
            }
        }
    }

    /// Reads `key`'s state, applies `f` at Redis's `now`, and, when `f`
    /// changed it, writes it back if nobody changed it meanwhile (else
    /// tries again on what is there now). `f` returns its output and, when
    /// the state must be written, how long to keep it.
    async fn update<V, T>(
        &self,
        key: &str,
        decode: fn(&str) -> Option<V>,
        encode: fn(&V) -> String,
        mut f: impl FnMut(&mut Option<V>, Duration) -> (T, Option<Duration>),
    ) -> Result<T, StoreError> {
        let mut conn = self.conn.clone();
        let mut read = self.shared.read.prepare_invoke();
        read.key(key);
        let reply: Vec<Value> = self.round_trip(read.invoke_async(&mut conn)).await?;
        let (mut now, mut current) = parse_time_and_value(&reply, 0)?;
        // Read-only answers need no lock; writes from this process go one
        // at a time, so only other processes can race them.
        let mut guard = None;
        for round in 0..CAS_ROUNDS {
            let mut state = current.as_deref().and_then(decode);
            let (out, keep) = f(&mut state, now);
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
                        let reply: Vec<Value> =
                            self.round_trip(read.invoke_async(&mut conn)).await?;
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
            let reply: Vec<Value> = self.round_trip(cas.invoke_async(&mut conn)).await?;
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

    /// Takes this process's unwritten 2xx count for `origin_key`; `force`
    /// takes it however recent the last write.
    fn take_successes(&self, origin_key: &str, force: bool) -> u32 {
        let mut successes = lock(&self.shared.successes);
        let Some((count, written)) = successes.get_mut(origin_key) else {
            return 0;
        };
        if !force && written.elapsed() < FLUSH_EVERY {
            return 0;
        }
        *written = Instant::now();
        std::mem::take(count)
    }

    /// Applies `f` to the origin's shared state, folding in this process's
    /// unwritten 2xx answers first (they are put back if the write fails
    /// or the caller goes away; a write that timed out but was applied
    /// after all counts them twice, which only makes the learned pace a
    /// little faster until the next pushback cuts it).
    async fn update_origin<T>(
        &self,
        origin: &str,
        force_flush: bool,
        mut f: impl FnMut(&mut OriginState, Duration) -> (T, bool),
    ) -> Result<T, StoreError> {
        let key = self.origin_key(origin);
        let pending = self.take_successes(&key, force_flush);
        let mut unwritten = PutBack {
            store: self,
            what: Unwritten::Successes(&key),
            n: pending,
        };
        let result = self
            .update(&key, OriginState::decode, OriginState::encode, |s, now| {
                let fresh = s.is_none();
                let state = s.get_or_insert_with(|| OriginState::new(now));
                let before = *state;
                for _ in 0..pending {
                    state.on_success(now);
                }
                let (out, changed) = f(state, now);
                let write = fresh
                    || pending > 0
                    || changed
                    || !state.differs_only_in_last_seen(&before, now);
                (out, write.then(|| state.keep_for(now, ORIGIN_IDLE)))
            })
            .await;
        if result.is_ok() {
            unwritten.n = 0;
        }
        result
    }

    /// Counts one 2xx answer from `origin`; the first one counted since the
    /// last write schedules a write `FLUSH_EVERY` later.
    fn count_success(&self, origin: &str) {
        let key = self.origin_key(origin);
        let first = {
            let mut successes = lock(&self.shared.successes);
            if successes.len() > 1024 {
                successes.retain(|_, (n, _)| *n > 0);
            }
            let (count, _) = successes.entry(key).or_insert_with(|| (0, Instant::now()));
            *count = count.saturating_add(1);
            *count == 1
        };
        if first && let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            let origin = origin.to_owned();
            handle.spawn(async move {
                tokio::time::sleep(FLUSH_EVERY).await;
                let _ = store.update_origin(&origin, true, |_, _| ((), false)).await;
            });
        }
    }

    /// Counts one budget deposit; the first one counted since the last
    /// write schedules a write `FLUSH_EVERY` later.
    fn count_deposit(&self, budget: &RetryBudget) {
        let first = {
            let mut deposits = lock(&self.shared.deposits);
            deposits.0 = deposits.0.saturating_add(1);
            deposits.0 == 1
        };
        if first && let Ok(handle) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            let budget = *budget;
            handle.spawn(async move {
                tokio::time::sleep(FLUSH_EVERY).await;
                let _ = store.flush_deposits(&budget, true).await;
            });
        }
    }

    /// Writes this process's unwritten budget deposits, if due.
    async fn flush_deposits(&self, budget: &RetryBudget, force: bool) -> Result<(), StoreError> {
        let n = {
            let mut deposits = lock(&self.shared.deposits);
            if deposits.0 == 0 || (!force && deposits.1.elapsed() < FLUSH_EVERY) {
                return Ok(());
            }
            deposits.1 = Instant::now();
            std::mem::take(&mut deposits.0)
        };
        let mut unwritten = PutBack {
            store: self,
            what: Unwritten::Deposits,
            n,
        };
        let key = self.budget_key();
        let result = self
            .update(&key, BudgetState::decode, BudgetState::encode, |s, now| {
                let state = BudgetState::slot(s, budget, now);
                for _ in 0..n {
                    state.deposit(budget, now);
                }
                ((), Some(BUDGET_IDLE))
            })
            .await;
        if result.is_ok() {
            unwritten.n = 0;
        }
        result
    }
}

/// What a [`PutBack`] gives back.
enum Unwritten<'a> {
    Successes(&'a str),
    Deposits,
}

/// Counts taken for a write, given back unless the write succeeded (also
/// when the caller drops the future mid-write).
struct PutBack<'a> {
    store: &'a RedisStore,
    what: Unwritten<'a>,
    n: u32,
}

impl Drop for PutBack<'_> {
    fn drop(&mut self) {
        if self.n == 0 {
            return;
        }
        match self.what {
            Unwritten::Successes(key) => {
                let mut successes = lock(&self.store.shared.successes);
                let (count, _) = successes
                    .entry(key.to_owned())
                    .or_insert_with(|| (0, Instant::now()));
                *count = count.saturating_add(self.n);
            }
            Unwritten::Deposits => {
                let mut deposits = lock(&self.store.shared.deposits);
                deposits.0 = deposits.0.saturating_add(self.n);
            }
        }
    }
}

/// A lease taken locally (and maybe in Redis) whose acquisition is not
/// settled yet: if the caller goes away meanwhile, or Redis failed and the
/// store fails closed, it is released everywhere.
struct Acquiring<'a> {
    store: &'a RedisStore,
    key: &'a str,
    token: LeaseToken,
    armed: bool,
}

impl Drop for Acquiring<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.store.release(self.key, self.token);
        }
    }
}

impl OriginState {
    /// Whether `self` is `before` with only `last_seen` moved, recently
    /// enough that the shared copy need not be rewritten for it.
    fn differs_only_in_last_seen(&self, before: &OriginState, now: Duration) -> bool {
        let mut same = *before;
        same.touch(self.last_seen());
        same == *self && now.saturating_sub(before.last_seen()) < Duration::from_secs(60)
    }
}

/// Reads `{.., now_s, now_us, value?}` starting at `at`.
fn parse_time_and_value(
    reply: &[Value],
    at: usize,
) -> Result<(Duration, Option<String>), StoreError> {
    let num = |v: Option<&Value>| -> Option<u64> {
        match v? {
            Value::Int(i) => u64::try_from(*i).ok(),
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    };
    let bad = || StoreError::new("redis: unexpected reply");
    let secs = num(reply.get(at)).ok_or_else(bad)?;
    let micros = num(reply.get(at + 1)).ok_or_else(bad)?;
    let value = match reply.get(at + 2) {
        Some(Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    };
    Ok((
        Duration::from_secs(secs) + Duration::from_micros(micros),
        value,
    ))
}

impl Store for RedisStore {
    async fn acquire(&self, key: &str, ttl: Duration) -> Result<Option<LeaseToken>, StoreError> {
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
        let mut conn = self.conn.clone();
        let mut acquire = self.shared.acquire.prepare_invoke();
        acquire
            .key(&redis_key)
            .arg(token.0)
            .arg(millis(ttl))
            .arg(stale.map_or_else(String::new, |t| t.to_string()));
        let taken: Result<i64, StoreError> = self.round_trip(acquire.invoke_async(&mut conn)).await;
        match taken {
            Ok(1) => {
                pending.armed = false;
                Ok(Some(token))
            }
            Ok(_) => {
                // Held by another task; ours is not in Redis.
                pending.armed = false;
                self.local.release(key, token);
                Ok(None)
            }
            Err(e) => {
                // Our own stale lease may still be there: try again later.
                if let Some(stale) = stale {
                    lock(&self.shared.releasing)
                        .entry(redis_key)
                        .or_insert((stale, Instant::now() + ttl));
                }
                let result = self
                    .guarded("acquire", Err(e), || std::future::ready(Ok(Some(token))))
                    .await;
                // Failing open keeps the local lease; failing closed
                // releases it, and the Redis one in case the ACQUIRE was
                // applied after we stopped waiting.
                pending.armed = result.is_err();
                result
            }
        }
    }

    fn release(&self, key: &str, token: LeaseToken) {
        let redis_key = self.lease_key(key);
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
            let expires = self.local.lease_expiry(key).unwrap_or_else(Instant::now);
            releasing.insert(redis_key.clone(), (token.0, expires));
        }
        self.local.release(key, token);
        // Called from `Drop`: the compare-and-delete runs as its own task.
        // Without a runtime (or if it fails) the lease's TTL frees it.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let mut conn = self.conn.clone();
            let shared = Arc::clone(&self.shared);
            let timeout = self.op_timeout;
            handle.spawn(async move {
                let mut release = shared.release.prepare_invoke();
                release.key(&redis_key).arg(token.0);
                let done =
                    tokio::time::timeout(timeout, release.invoke_async::<i64>(&mut conn)).await;
                if matches!(done, Ok(Ok(_))) {
                    let mut releasing = lock(&shared.releasing);
                    if releasing
                        .get(&redis_key)
                        .is_some_and(|(t, _)| *t == token.0)
                    {
                        releasing.remove(&redis_key);
                    }
                }
            });
        }
    }

    async fn admit(
        &self,
        origin: &str,
        pacing: PacingConfig,
        budget: &RetryBudget,
        latest: Duration,
        first: bool,
    ) -> Result<Admission, StoreError> {
        if first && budget.enabled {
            // Written within `FLUSH_EVERY`, or with the next withdrawal.
            self.count_deposit(budget);
        }
        if !pacing.gate {
            return Ok(Admission::Now);
        }
        let result = self
            .update_origin(origin, false, |state, now| {
                (state.admit(pacing, now, latest), false)
            })
            .await;
        self.guarded("admit", result, || {
            std::future::ready(Ok(self
                .local
                .admit_now(origin, pacing, budget, latest, first)))
        })
        .await
    }

    async fn gate(&self, origin: &str) -> Result<Option<Duration>, StoreError> {
        let key = self.origin_key(origin);
        let result = self
            .update(&key, OriginState::decode, OriginState::encode, |s, now| {
                let gate = s.as_ref().and_then(|s| s.gate_in(now));
                (gate, None)
            })
            .await;
        self.guarded("gate", result, || self.local.gate(origin))
            .await
    }

    async fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> Result<Option<Duration>, StoreError> {
        if !pacing.gate {
            return Ok(None);
        }
        if let Outcome::Admitted | Outcome::Quota { .. } = outcome {
            // Counted here; written within `FLUSH_EVERY`, or with this
            // process's next write to the origin. A stated quota is not
            // kept in Redis (a write per answer would cost a round trip per
            // success); an exhausted one (`Exhausted`) is shared all the same.
            self.count_success(origin);
            return Ok(None);
        }
        let result = self
            .update_origin(origin, true, |state, now| {
                // Any outcome but a plain success (counted above) changes
                // the gate: a pushback, or an exhausted quota.
                (state.observe(pacing, now, outcome), true)
            })
            .await;
        self.guarded("record", result, || {
            self.local.record(origin, pacing, outcome)
        })
        .await
    }

    async fn withdraw_retry(&self, budget: &RetryBudget) -> Result<bool, StoreError> {
        if !budget.enabled {
            return Ok(true);
        }
        let _ = self.flush_deposits(budget, true).await;
        let key = self.budget_key();
        let result = self
            .update(&key, BudgetState::decode, BudgetState::encode, |s, now| {
                let ok = BudgetState::slot(s, budget, now).withdraw(budget, now);
                (ok, Some(BUDGET_IDLE))
            })
            .await;
        self.guarded("withdraw_retry", result, || {
            self.local.withdraw_retry(budget)
        })
        .await
    }
}
