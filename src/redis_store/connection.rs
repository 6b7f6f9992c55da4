//! How this process reaches Redis: one node through a reconnecting
//! connection manager, or a Redis Cluster through redis-rs's cluster
//! connection (which routes each command by its keys' slot, follows
//! `MOVED` and `ASK`, and refreshes the slot map when the topology
//! changes).

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::handle::unavailable;
use crate::store::StoreError;

/// The default timeout of connecting and of each round trip.
pub(super) const TIMEOUT: Duration = Duration::from_millis(500);

/// Redirections (`MOVED`, `ASK`) and retries (`TRYAGAIN`, `CLUSTERDOWN`, a
/// write refused by a node just demoted to replica) the cluster connection
/// follows within one round trip, itself bounded by `op_timeout`.
const CLUSTER_RETRIES: u32 = 6;

/// A connection to one Redis or to a Redis Cluster; commands and scripts
/// go through either alike.
#[derive(Clone)]
pub(super) enum Connection {
    /// One Redis (a primary, with or without replicas).
    Single(ConnectionManager),
    /// A Redis Cluster: each command goes to the primary of its keys' slot.
    Cluster(ClusterConnection),
}

impl Connection {
    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Connection::Cluster(_))
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A client of one Redis at `url`, and its connection manager's settings.
pub(super) fn single(url: &str) -> Result<(redis::Client, ConnectionManagerConfig), StoreError> {
    let client = redis::Client::open(url).map_err(|e| unavailable(&e))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(TIMEOUT))
        .set_response_timeout(Some(TIMEOUT))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200));
    Ok((client, config))
}

/// A client of the Redis Cluster that `seeds` belong to (any of its nodes:
/// the others are learned from them), and its connections' settings.
pub(super) fn cluster<S: AsRef<str>>(
    seeds: impl IntoIterator<Item = S>,
) -> Result<(ClusterClient, ClusterConfig), StoreError> {
    let seeds: Vec<String> = seeds.into_iter().map(|s| s.as_ref().to_owned()).collect();
    if seeds.is_empty() {
        return Err(StoreError::new("redis: no seed node given for the cluster"));
    }
    let client = ClusterClientBuilder::new(seeds)
        .connection_timeout(TIMEOUT)
        .response_timeout(TIMEOUT)
        .retries(CLUSTER_RETRIES)
        .min_retry_wait(10)
        .max_retry_wait(100)
        .build()
        .map_err(|e| unavailable(&e))?;
    let config = ClusterConfig::new()
        .set_connection_timeout(TIMEOUT)
        .set_response_timeout(TIMEOUT);
    Ok((client, config))
}
