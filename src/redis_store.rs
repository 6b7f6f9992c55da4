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
//! When Redis cannot answer within `op_timeout`, the [`FailMode`] decides:
//! fail open to this process's local state (the default, with a `warn`
//! event), or fail closed with [`Error::Store`](crate::Error::Store)
//! (`store_unavailable`) before anything is sent.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Script, Value};

use crate::pacing::{Admission, BudgetState, OriginState, PacingConfig, RetryBudget};
use crate::store::{LeaseToken, MemoryStore, Outcome, Store, StoreError};

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

const ORIGIN_IDLE: Duration = Duration::from_secs(300);
const BUDGET_IDLE: Duration = Duration::from_secs(60);
/// Compare-and-set rounds before giving up on a contended key.
const CAS_ROUNDS: usize = 64;

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
    /// One update per key at a time from this process, so that a burst of
    /// tasks does not turn into a compare-and-set race among themselves.
    key_locks: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    read: Arc<Script>,
    cas: Arc<Script>,
    release: Arc<Script>,
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

impl RedisStore {
    /// Connects to `url` (`redis://host:port/db`) with a reconnecting
    /// connection manager. Connecting and each operation time out after
    /// 500 ms by default ([`op_timeout`](Self::op_timeout)).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(|e| unavailable(&e))?;
        let timeout = Duration::from_millis(500);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| unavailable(&e))?;
        Ok(Self::with_connection(conn))
    }

    /// A store over an existing connection manager.
    #[must_use]
    pub fn with_connection(conn: ConnectionManager) -> Self {
        RedisStore {
            conn,
            prefix: Arc::from("reqwest-backpressure:"),
            fail_mode: FailMode::Open,
            op_timeout: Duration::from_millis(500),
            local: MemoryStore::new(),
            key_locks: Arc::default(),
            read: Arc::new(Script::new(READ)),
            cas: Arc::new(Script::new(CAS)),
            release: Arc::new(Script::new(RELEASE)),
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

    /// The longest one Redis operation may take before it counts as a
    /// failure (default 500 ms).
    #[must_use]
    pub fn op_timeout(mut self, timeout: Duration) -> Self {
        self.op_timeout = timeout;
        self
    }

    /// The local state used while failing open.
    #[must_use]
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
        let mut locks = self
            .key_locks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if locks.len() > 1024 {
            locks.retain(|_, l| Arc::strong_count(l) > 1);
        }
        Arc::clone(locks.entry(key.to_owned()).or_default())
    }

    /// Runs `op` against Redis within `op_timeout`; on failure, fails open to
    /// `fallback` or closed.
    async fn guarded<T, F, L>(
        &self,
        what: &'static str,
        op: F,
        fallback: L,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
        L: Future<Output = Result<T, StoreError>>,
    {
        let err = match tokio::time::timeout(self.op_timeout, op).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => e,
            Err(_) => StoreError::new("redis: operation timed out"),
        };
        match self.fail_mode {
            FailMode::Closed => Err(err),
            FailMode::Open => {
                #[cfg(feature = "tracing")]
                tracing::warn!(operation = what, error = %err, "reqwest-backpressure: redis unavailable, using local state");
                #[cfg(not(feature = "tracing"))]
                let _ = what;
                fallback.await
            }
        }
    }

    /// Reads `key`'s state, applies `f` at Redis's `now`, and writes the
    /// result back if nobody changed it meanwhile (else retries). `f`
    /// returns its output and, when it changed the state, how long to keep
    /// it.
    async fn update<V, T>(
        &self,
        key: &str,
        decode: fn(&str) -> Option<V>,
        encode: fn(&V) -> String,
        mut f: impl FnMut(&mut Option<V>, Duration) -> (T, Option<Duration>),
    ) -> Result<T, StoreError> {
        let lock = self.key_lock(key);
        let _one_at_a_time = lock.lock().await;
        let mut conn = self.conn.clone();
        let reply: Vec<Value> = self
            .read
            .key(key)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| unavailable(&e))?;
        let (mut now, mut current) = parse_time_and_value(&reply, 0)?;
        for _ in 0..CAS_ROUNDS {
            let mut state = current.as_deref().and_then(decode);
            let (out, keep) = f(&mut state, now);
            let (Some(keep), Some(new)) = (keep, state.as_ref()) else {
                return Ok(out);
            };
            let ttl_ms = u64::try_from(keep.as_millis()).unwrap_or(u64::MAX).max(1);
            let reply: Vec<Value> = self
                .cas
                .key(key)
                .arg(current.as_deref().unwrap_or(""))
                .arg(encode(new))
                .arg(ttl_ms)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            if matches!(reply.first(), Some(Value::Int(1))) {
                return Ok(out);
            }
            (now, current) = parse_time_and_value(&reply, 1)?;
        }
        Err(StoreError::new("redis: key too contended"))
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
    let secs = num(reply.get(at)).ok_or_else(|| StoreError::new("redis: unexpected reply"))?;
    let micros =
        num(reply.get(at + 1)).ok_or_else(|| StoreError::new("redis: unexpected reply"))?;
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
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<Option<LeaseToken>, StoreError>> + Send {
        let redis_key = self.lease_key(key);
        let token = fastrand::u64(..);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut conn = self.conn.clone();
        async move {
            let op = async {
                let set: Option<String> = redis::cmd("SET")
                    .arg(&redis_key)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl_ms)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| unavailable(&e))?;
                Ok(set.map(|_| LeaseToken(token)))
            };
            self.guarded("acquire", op, self.local.acquire(key, ttl))
                .await
        }
    }

    fn release(&self, key: &str, token: LeaseToken) {
        self.local.release(key, token);
        // Called from `Drop`: the compare-and-delete runs as its own task.
        // Without a runtime (or if it fails) the lease's TTL frees it.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let redis_key = self.lease_key(key);
            let mut conn = self.conn.clone();
            let script = Arc::clone(&self.release);
            let timeout = self.op_timeout;
            handle.spawn(async move {
                let mut invocation = script.prepare_invoke();
                invocation.key(redis_key).arg(token.0);
                let op = invocation.invoke_async::<i64>(&mut conn);
                let _ = tokio::time::timeout(timeout, op).await;
            });
        }
    }

    fn admit(
        &self,
        origin: &str,
        pacing: PacingConfig,
        budget: &RetryBudget,
        latest: Duration,
        first: bool,
    ) -> impl Future<Output = Result<Admission, StoreError>> + Send {
        let budget = *budget;
        async move {
            let op = async {
                if first && budget.enabled {
                    self.update(
                        &self.budget_key(),
                        BudgetState::decode,
                        BudgetState::encode,
                        |s, now| {
                            s.get_or_insert_with(|| BudgetState::new(&budget, now))
                                .deposit(&budget, now);
                            ((), Some(BUDGET_IDLE))
                        },
                    )
                    .await?;
                }
                if !pacing.gate {
                    return Ok(Admission::Now);
                }
                self.update(
                    &self.origin_key(origin),
                    OriginState::decode,
                    OriginState::encode,
                    |s, now| {
                        let state = s.get_or_insert_with(|| OriginState::new(now));
                        let admission = state.admit(pacing, now, latest);
                        (admission, Some(state.keep_for(now, ORIGIN_IDLE)))
                    },
                )
                .await
            };
            self.guarded(
                "admit",
                op,
                self.local.admit(origin, pacing, &budget, latest, first),
            )
            .await
        }
    }

    async fn gate(&self, origin: &str) -> Result<Option<Duration>, StoreError> {
        let key = self.origin_key(origin);
        let op = self.update(&key, OriginState::decode, OriginState::encode, |s, now| {
            let gate = s
                .as_ref()
                .and_then(|s| s.gate_until(now))
                .map(|until| until.saturating_sub(now));
            (gate, None)
        });
        self.guarded("gate", op, self.local.gate(origin)).await
    }

    async fn record(
        &self,
        origin: &str,
        pacing: PacingConfig,
        outcome: Outcome,
    ) -> Result<(), StoreError> {
        if !pacing.gate {
            return Ok(());
        }
        let key = self.origin_key(origin);
        let op = self.update(&key, OriginState::decode, OriginState::encode, |s, now| {
            let state = s.get_or_insert_with(|| OriginState::new(now));
            state.observe(pacing, now, outcome);
            ((), Some(state.keep_for(now, ORIGIN_IDLE)))
        });
        self.guarded("record", op, self.local.record(origin, pacing, outcome))
            .await
    }

    fn withdraw_retry(
        &self,
        budget: &RetryBudget,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let budget = *budget;
        async move {
            if !budget.enabled {
                return Ok(true);
            }
            let key = self.budget_key();
            let op = self.update(&key, BudgetState::decode, BudgetState::encode, |s, now| {
                let ok = s
                    .get_or_insert_with(|| BudgetState::new(&budget, now))
                    .withdraw(&budget, now);
                (ok, Some(BUDGET_IDLE))
            });
            self.guarded("withdraw_retry", op, self.local.withdraw_retry(&budget))
                .await
        }
    }
}
