//! The faults, applied to the primary serving the origin's state (the
//! storm's hot key), and what it held before and after.

use std::time::{Duration, Instant};

use crate::redis::redis_cluster::RedisCluster;

#[derive(Debug, Clone, Copy)]
pub(super) enum Fault {
    /// The primary killed (`SIGKILL`); returns once its replica took over.
    KillPrimary,
    /// `DEBUG SLEEP` on the primary for this long.
    Freeze(Duration),
    /// The primary's slots holding the origin and leases migrated to
    /// another primary, pausing half-way.
    Migrate,
}

impl Fault {
    pub(super) fn name(self) -> String {
        match self {
            Fault::KillPrimary => "primary killed".to_owned(),
            Fault::Freeze(d) => format!("DEBUG SLEEP {:.1} s", d.as_secs_f64()),
            Fault::Migrate => "slot migration".to_owned(),
        }
    }
}

/// The store's keys on the node on `port`: `(leases, origins)`.
fn held_on(cluster: &RedisCluster, port: u16, prefix: &str) -> (Vec<String>, Vec<String>) {
    let Ok(mut conn) = cluster.node(port).try_conn() else {
        return (Vec::new(), Vec::new());
    };
    let mut of = |what: &str| -> Vec<String> {
        redis::cmd("KEYS")
            .arg(format!("{prefix}{what}:*"))
            .query(&mut conn)
            .unwrap_or_default()
    };
    (of("lease"), of("origin"))
}

/// How many of `keys` exist on the cluster now: on a running node that
/// says it is a primary (the nodes' views of who serves what may lag a
/// failover for a moment; each node's own role does not).
fn still_there(cluster: &RedisCluster, keys: &[String]) -> usize {
    let mut primaries: Vec<redis::Connection> = cluster
        .nodes
        .iter()
        .filter(|n| n.running())
        .filter_map(|n| n.try_conn().ok())
        .filter_map(|mut c| {
            let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut c).ok()?;
            matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master").then_some(c)
        })
        .collect();
    keys.iter()
        .filter(|k| {
            primaries.iter_mut().any(|c| {
                redis::cmd("EXISTS")
                    .arg(k.as_str())
                    .query::<i64>(c)
                    .is_ok_and(|n| n == 1)
            })
        })
        .count()
}

/// The values of `keys` on the node on `port` (a replica answers with
/// `readonly`).
fn values(
    cluster: &RedisCluster,
    port: u16,
    keys: &[String],
    readonly: bool,
) -> Vec<Option<String>> {
    let Ok(mut conn) = cluster.node(port).try_conn() else {
        return Vec::new();
    };
    if readonly {
        let () = redis::cmd("READONLY").query(&mut conn).expect("READONLY");
    }
    keys.iter()
        .map(|k| redis::cmd("GET").arg(k).query(&mut conn).ok().flatten())
        .collect()
}

/// The primary serving the origin's state (the hot key of the storm).
fn victim(cluster: &RedisCluster, prefix: &str) -> u16 {
    let give_up = Instant::now() + Duration::from_secs(5);
    loop {
        for p in cluster.primaries() {
            if !held_on(cluster, p.port, prefix).1.is_empty() {
                return p.port;
            }
        }
        assert!(Instant::now() < give_up, "no origin state in the cluster");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Applies `fault` to the primary serving the origin (blocking); returns
/// what it held before and what of it was still there after (fewer when
/// tasks ended and released their leases meanwhile), as a line,
/// and whether a replica took over.
pub(super) fn apply(fault: Fault, cluster: &mut RedisCluster, prefix: &str) -> (String, bool) {
    let port = victim(cluster, prefix);
    let (leases, origins) = held_on(cluster, port, prefix);
    let mut took_over = false;
    let mut replicated = String::new();
    match fault {
        Fault::KillPrimary => {
            let replica = cluster.replica_of(port).expect("the victim's replica");
            let (leases, origins) = held_on(cluster, port, prefix);
            let before = values(cluster, port, &origins, false);
            cluster.node_mut(port).stop();
            let same = before == values(cluster, replica, &origins, true);
            // What replication had carried over when the primary died (read
            // on the replica at once, before its promotion).
            let on_replica = |keys: &[String]| -> usize {
                let Ok(mut conn) = cluster.node(replica).try_conn() else {
                    return 0;
                };
                let () = redis::cmd("READONLY").query(&mut conn).expect("READONLY");
                keys.iter()
                    .filter(|k| {
                        redis::cmd("EXISTS")
                            .arg(k.as_str())
                            .query::<i64>(&mut conn)
                            .is_ok_and(|n| n == 1)
                    })
                    .count()
            };
            replicated = format!(
                "; at the kill the primary held {} leases and {} origin keys, its replica {} and {} \
                 (the origin's state {})",
                leases.len(),
                origins.len(),
                on_replica(&leases),
                on_replica(&origins),
                if same {
                    "the same"
                } else {
                    "older: its last writes lost"
                }
            );
            cluster.wait_failover(port, Duration::from_secs(30));
            took_over = true;
        }
        Fault::Freeze(d) => {
            let mut conn = cluster.node(port).conn();
            let () = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(d.as_secs_f64())
                .query(&mut conn)
                .expect("DEBUG SLEEP");
            // A freeze past the node timeout may have made its replica
            // primary meanwhile: wait for the cluster to settle.
            std::thread::sleep(Duration::from_millis(1500));
            took_over = !cluster
                .primaries()
                .iter()
                .any(|p| p.port == port && !p.slots.is_empty());
        }
        Fault::Migrate => {
            let to = cluster
                .primaries()
                .iter()
                .map(|p| p.port)
                .find(|&p| p != port)
                .expect("another primary");
            let mut slots: Vec<u16> = origins
                .iter()
                .chain(leases.iter().take(3))
                .map(|k| cluster.slot(k))
                .collect();
            slots.sort_unstable();
            slots.dedup();
            for slot in slots {
                cluster.migrate_slot(slot, port, to, || {
                    std::thread::sleep(Duration::from_millis(150));
                });
            }
        }
    }
    let line = format!(
        "victim held {} leases and {} origin keys, after: {} and {} still there{}{replicated}",
        leases.len(),
        origins.len(),
        still_there(cluster, &leases),
        still_there(cluster, &origins),
        if took_over {
            ", a replica took over"
        } else {
            ""
        }
    );
    (line, took_over)
}
