//! A real local Redis Cluster for the cluster tests: six `redis-server`s
//! (3 primaries, 3 replicas) with `--cluster-enabled yes` on free loopback
//! ports (their bus ports too), each in its own temp dir, joined by
//! `redis-cli --cluster create`, and killed (the dirs removed) on drop, as
//! [`RedisServer`] is. The nodes time out after one second, so a killed
//! primary's replica takes over within a few.
//!
//! Included beside `redis_server.rs` with `#[path = …] mod redis_cluster;`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::redis_server::{RedisServer, StartError, free_port};

/// A Redis Cluster of local nodes, killed on drop.
pub struct RedisCluster {
    /// The nodes, primaries first as created (a failover changes that: ask
    /// [`RedisCluster::primaries`]).
    pub nodes: Vec<RedisServer>,
}

/// One node's line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct NodeLine {
    pub id: String,
    pub port: u16,
    pub primary: bool,
    pub failed: bool,
    /// Slot ranges served (primaries), inclusive.
    pub slots: Vec<(u16, u16)>,
    /// A replica's primary (its id).
    pub replica_of: Option<String>,
}

impl RedisCluster {
    /// Three primaries and a replica of each; panics if it cannot.
    pub fn start() -> Self {
        Self::try_start(3, 1).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `primaries` primaries with `replicas` replicas each, or why not.
    pub fn try_start(primaries: usize, replicas: usize) -> Result<Self, StartError> {
        let count = primaries * (1 + replicas);
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            nodes.push(start_node()?);
        }
        let cluster = RedisCluster { nodes };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &cluster.nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        create
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null());
        let out = match create.output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StartError::Failed(
                    "redis-cli not found: install it (apt-get install -y redis-tools)".to_owned(),
                ));
            }
            Err(e) => return Err(StartError::Failed(format!("redis-cli: {e}"))),
        };
        if !out.status.success() {
            return Err(StartError::Failed(format!(
                "redis-cli --cluster create failed: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        cluster.wait_ready(primaries, replicas, Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// Waits until every node says `cluster_state:ok`, sees the others,
    /// and every primary has its replicas in sync.
    fn wait_ready(
        &self,
        primaries: usize,
        replicas: usize,
        limit: Duration,
    ) -> Result<(), StartError> {
        let give_up = Instant::now() + limit;
        loop {
            let ready = self.nodes.iter().all(|n| {
                let Ok(mut conn) = n.try_conn() else {
                    return false;
                };
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query(&mut conn)
                    .unwrap_or_default();
                let lines = nodes_of(&mut conn);
                let synced = lines.iter().filter(|l| l.primary).count() == primaries
                    && lines.len() == primaries * (1 + replicas);
                let repl: String = redis::cmd("INFO")
                    .arg("replication")
                    .query(&mut conn)
                    .unwrap_or_default();
                let in_sync = if repl.contains("role:master") {
                    repl.contains(&format!("connected_slaves:{replicas}"))
                } else {
                    repl.contains("master_link_status:up")
                };
                info.contains("cluster_state:ok") && synced && in_sync
            });
            if ready {
                return Ok(());
            }
            if Instant::now() >= give_up {
                return Err(StartError::Failed(format!(
                    "the cluster was not ready within {limit:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis://127.0.0.1:<port>/` of every node (any of them is a seed).
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The node on `port`.
    pub fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("a node of the cluster on that port")
    }

    /// The node on `port`, mutably (to stop or signal it).
    pub fn node_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .expect("a node of the cluster on that port")
    }

    /// `CLUSTER NODES` as a node still running sees it (not `avoid`).
    pub fn lines(&self, avoid: Option<u16>) -> Vec<NodeLine> {
        for node in &self.nodes {
            if Some(node.port()) == avoid || !node.running() {
                continue;
            }
            if let Ok(mut conn) = node.try_conn() {
                let lines = nodes_of(&mut conn);
                if !lines.is_empty() {
                    return lines;
                }
            }
        }
        Vec::new()
    }

    /// The primaries not failed, as a running node sees them.
    pub fn primaries(&self) -> Vec<NodeLine> {
        self.lines(None)
            .into_iter()
            .filter(|l| l.primary && !l.failed)
            .collect()
    }

    /// The port of a replica of the primary on `port`.
    pub fn replica_of(&self, port: u16) -> Option<u16> {
        let lines = self.lines(None);
        let id = lines.iter().find(|l| l.port == port)?.id.clone();
        lines
            .iter()
            .find(|l| l.replica_of.as_deref() == Some(id.as_str()))
            .map(|l| l.port)
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot(&self, key: &str) -> u16 {
        let mut conn = self.any_conn();
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut conn)
            .expect("CLUSTER KEYSLOT")
    }

    /// The port of the primary serving `key`, as a running node sees it.
    pub fn primary_of(&self, key: &str) -> u16 {
        let slot = self.slot(key);
        self.primaries()
            .iter()
            .find(|l| l.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
            .map(|l| l.port)
            .expect("a primary serving the slot")
    }

    /// A connection to some running node.
    pub fn any_conn(&self) -> redis::Connection {
        self.nodes
            .iter()
            .filter(|n| n.running())
            .find_map(|n| n.try_conn().ok())
            .expect("a running node")
    }

    /// Waits until a replica has taken over the slots of the primary on
    /// `port` (killed or frozen) and the cluster says `ok` again.
    pub fn wait_failover(&self, port: u16, limit: Duration) {
        let give_up = Instant::now() + limit;
        loop {
            let lines = self.lines(Some(port));
            let taken_over = lines
                .iter()
                .any(|l| l.primary && !l.failed && l.port != port && !l.slots.is_empty())
                && !lines
                    .iter()
                    .any(|l| l.port == port && l.primary && !l.failed);
            let ok = self.nodes.iter().filter(|n| n.port() != port).all(|n| {
                !n.running()
                    || n.try_conn().is_ok_and(|mut c| {
                        redis::cmd("CLUSTER")
                            .arg("INFO")
                            .query::<String>(&mut c)
                            .is_ok_and(|i| i.contains("cluster_state:ok"))
                    })
            });
            if taken_over && ok {
                return;
            }
            assert!(
                Instant::now() < give_up,
                "no failover of the primary on {port} within {limit:?}: {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Moves `slot` from the primary on `from` to the one on `to`, the way
    /// `redis-cli --cluster reshard` does: `IMPORTING`/`MIGRATING`, then
    /// `MIGRATE` of its keys in batches, then `SETSLOT NODE` everywhere.
    /// `between` runs after the slot is marked migrating and half of its
    /// keys moved (clients meet `ASK` then).
    pub fn migrate_slot(&self, slot: u16, from: u16, to: u16, between: impl FnOnce()) {
        let lines = self.lines(None);
        let id = |port: u16| {
            lines
                .iter()
                .find(|l| l.port == port)
                .map(|l| l.id.clone())
                .expect("node id")
        };
        let (from_id, to_id) = (id(from), id(to));
        let mut source = self.node(from).conn();
        let mut target = self.node(to).conn();
        let setslot = |conn: &mut redis::Connection, state: &str, node: &str| {
            let () = redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(node)
                .query(conn)
                .expect("CLUSTER SETSLOT");
        };
        setslot(&mut target, "IMPORTING", &from_id);
        setslot(&mut source, "MIGRATING", &to_id);
        let keys = |conn: &mut redis::Connection, n: usize| -> Vec<String> {
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(n)
                .query(conn)
                .expect("CLUSTER GETKEYSINSLOT")
        };
        let migrate = |conn: &mut redis::Connection, batch: &[String]| {
            if batch.is_empty() {
                return;
            }
            let () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(batch)
                .query(conn)
                .expect("MIGRATE");
        };
        let first = keys(&mut source, 100_000);
        migrate(&mut source, &first[..first.len() / 2]);
        between();
        loop {
            let rest = keys(&mut source, 100);
            if rest.is_empty() {
                break;
            }
            migrate(&mut source, &rest);
        }
        setslot(&mut target, "NODE", &to_id);
        setslot(&mut source, "NODE", &to_id);
        for node in self.nodes.iter().filter(|n| n.running()) {
            if let Ok(mut conn) = node.try_conn() {
                let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("NODE")
                    .arg(&to_id)
                    .query(&mut conn);
            }
        }
    }
}

/// A cluster node: a `redis-server` with cluster mode on, a bus port of its
/// own, a one-second node timeout and `DEBUG` allowed from loopback.
fn start_node() -> Result<RedisServer, StartError> {
    let mut last = None;
    for _ in 0..5 {
        let bus = free_port()
            .map_err(|e| StartError::Failed(format!("no free loopback port: {e}")))?
            .to_string();
        match RedisServer::try_start_with(&[
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-port",
            &bus,
            "--cluster-node-timeout",
            "1000",
            "--enable-debug-command",
            "local",
        ]) {
            Ok(node) => return Ok(node),
            Err(StartError::NotFound) => return Err(StartError::NotFound),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| StartError::Failed("no cluster node started".to_owned())))
}

/// `CLUSTER NODES`, parsed (empty if the node does not answer).
fn nodes_of(conn: &mut redis::Connection) -> Vec<NodeLine> {
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(conn)
        .unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let addr = fields.get(1)?;
            let port = addr
                .split(['@', ','])
                .next()?
                .rsplit(':')
                .next()?
                .parse()
                .ok()?;
            let flags = fields.get(2)?;
            let slots = fields
                .iter()
                .skip(8)
                .filter(|f| !f.starts_with('['))
                .filter_map(|f| match f.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => f.parse().ok().map(|s| (s, s)),
                })
                .collect();
            Some(NodeLine {
                id: (*fields.first()?).to_owned(),
                replica_of: fields
                    .get(3)
                    .filter(|f| **f != "-")
                    .map(|f| (*f).to_owned()),
                port,
                primary: flags.contains("master"),
                failed: flags.contains("fail") && !flags.contains("fail?"),
                slots,
            })
        })
        .collect()
}
