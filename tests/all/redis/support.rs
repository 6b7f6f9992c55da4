//! What every Redis test shares: stores and clients over one
//! `redis-server`, reading what the store wrote, and scripted wiremock
//! servers recording arrivals on the server's clock.

pub(super) use std::collections::{BTreeMap, HashMap};
pub(super) use std::io::{BufRead, BufReader, Read, Write};
pub(super) use std::net::{TcpListener, TcpStream};
pub(super) use std::sync::atomic::{AtomicBool, Ordering};
pub(super) use std::sync::{Arc, Mutex};
pub(super) use std::time::{Duration, Instant, SystemTime};

pub(super) use reqwest_backpressure::store::{FailMode, RedisStore};
pub(super) use reqwest_backpressure::{
    Deadline, Fallback, IdempotencyKey, Policy, RetryAfterMiddleware, Store,
};
pub(super) use reqwest_middleware::ClientWithMiddleware;
pub(super) use wiremock::{MockServer, ResponseTemplate};

pub(super) use super::redis_server::{RedisServer, Workers};
pub(super) use crate::common::{admit, client_with, report, scripted};
pub(super) use crate::server::{ServerState, Shape};

/// Keys matching `pattern`, sorted.
pub(super) fn keys(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn).expect("KEYS");
    keys.sort();
    keys
}

pub(super) fn pttl(conn: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

/// Runs a test body under a hard time limit.
pub(super) async fn bounded<F: Future<Output = ()>>(limit: Duration, body: F) {
    tokio::time::timeout(limit, body)
        .await
        .unwrap_or_else(|_| panic!("test did not finish within {limit:?}"));
}

pub(super) async fn store(redis: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::connect(&redis.url())
        .await
        .expect("connect RedisStore")
        .prefix(prefix)
}

pub(super) fn client(store: RedisStore, policy: Policy) -> ClientWithMiddleware {
    client_with(RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy"))
}

pub(super) fn policy() -> Policy {
    Policy::default().jitter(Duration::ZERO)
}

/// The crate's error code of a failed call (or a description of another
/// error).
pub(super) fn code(result: &reqwest_middleware::Result<reqwest::Response>) -> String {
    match result {
        Ok(r) => format!("ok {}", r.status()),
        Err(reqwest_middleware::Error::Middleware(e)) => {
            e.downcast_ref::<reqwest_backpressure::Error>().map_or_else(
                || format!("other middleware error: {e}"),
                |e| e.code().to_owned(),
            )
        }
        Err(reqwest_middleware::Error::Reqwest(e)) => format!("reqwest error: {e}"),
    }
}

pub(super) fn retry_after(secs: u64) -> ResponseTemplate {
    ResponseTemplate::new(429).insert_header("retry-after", secs.to_string())
}

/// A script answering each path's first request with `Retry-After: 1`,
/// and every later one with `200`.
pub(super) fn retry_after_1_then_ok(_: &str, i: usize) -> ResponseTemplate {
    match i {
        0 => retry_after(1),
        _ => ResponseTemplate::new(200),
    }
}

/// A POST of `url` carrying the idempotency key `key`.
pub(super) fn post_keyed(
    client: &ClientWithMiddleware,
    url: impl reqwest::IntoUrl,
    key: &str,
) -> reqwest_middleware::RequestBuilder {
    client.post(url).with_extension(IdempotencyKey::new(key))
}

/// `http://127.0.0.1:port`, as the middleware names an origin.
pub(super) fn origin(server: &MockServer) -> String {
    let a = server.address();
    format!("http://{}:{}", a.ip(), a.port())
}

/// A withdrawal of one retry from `store`'s budget.
pub(super) async fn withdraw<S: Store>(
    store: &S,
    budget: reqwest_backpressure::RetryBudget,
) -> Result<bool, reqwest_backpressure::store::StoreError> {
    store
        .update_budget(move |b, now| b.withdraw(&budget, now.time()))
        .await
}
