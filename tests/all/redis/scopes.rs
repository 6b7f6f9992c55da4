//! Scopes over Redis and Redis Cluster: where a scope's limit is kept (its
//! origin's hash tag, so its origin's slot and node, and the same idle
//! TTL), and two workers, each with its own `RedisStore` under one prefix,
//! sharing declared scope quotas: each scope at its own quota across both,
//! and one scope's pushback holding that scope alone, on the server's
//! clock.

use http::Method;
use reqwest_backpressure::origin::PacingConfig;
use reqwest_backpressure::store::Outcome;
use reqwest_backpressure::{Quota, Scope};

use super::cluster::{cluster_store, keys_on};
use super::redis_cluster::RedisCluster;
use super::support::*;
use crate::declared_scopes::most_within;

/// How long an untouched origin's key lives: five idle minutes.
const IDLE: Duration = Duration::from_secs(300);

/// Scope names a test keeps under each origin; `{x}` would move the hash
/// tag if the store wrote the name into the key as it is.
const SCOPES: [&str; 3] = ["t1", "search", "{x}"];

/// The store's key of `origin`'s own limit, or of its `scope`'s:
/// `{prefix}origin:{<sha1 origin>}`, then `:<sha1 scope>`.
fn limit_key(prefix: &str, origin: &str, scope: Option<&str>) -> String {
    let origin = sha1_smol::Sha1::from(origin).digest();
    match scope {
        None => format!("{prefix}origin:{{{origin}}}"),
        Some(s) => format!(
            "{prefix}origin:{{{origin}}}:{}",
            sha1_smol::Sha1::from(s).digest()
        ),
    }
}

/// The hash tag of a Redis key: what its first `{...}` holds.
fn hash_tag(key: &str) -> Option<&str> {
    let (_, rest) = key.split_once('{')?;
    rest.split_once('}')
        .map(|(tag, _)| tag)
        .filter(|t| !t.is_empty())
}

/// Writes a limit for `origin` and for each of [`SCOPES`] (the store's
/// key for a scope is `origin#scope`, as the middleware names it); the
/// `search` scope is held by a pushback of `hold`.
async fn write_limits(store: &RedisStore, origin: &str, hold: Duration) {
    let pacing = PacingConfig::DEFAULT;
    store
        .record(origin, pacing, Outcome::Admitted)
        .await
        .expect("record");
    for scope in SCOPES {
        let outcome = match scope {
            "search" => Outcome::Pushback {
                retry_in: Some(hold),
                hold_at_least: None,
            },
            _ => Outcome::Admitted,
        };
        store
            .record(&format!("{origin}#{scope}"), pacing, outcome)
            .await
            .expect("record");
    }
}

/// On one Redis: an origin's scopes are keys of their own, each under its
/// origin's hash tag, none naming the origin or the scope; an untouched
/// scope lives the five idle minutes its origin does, and a held one its
/// hold beyond them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scopes_key_carries_its_origins_hash_tag_and_ttl() {
    bounded(Duration::from_secs(20), async {
        let redis = RedisServer::start();
        let prefix = "rbp-scope-keys:";
        let store = store(&redis, prefix).await.fail_mode(FailMode::Closed);
        let origin = "http://scoped.test:80";
        let hold = Duration::from_secs(30);
        write_limits(&store, origin, hold).await;

        let mut conn = redis.conn();
        let found = keys(&mut conn, &format!("{prefix}*"));
        let mut expected: Vec<String> = std::iter::once(None)
            .chain(SCOPES.map(Some))
            .map(|s| limit_key(prefix, origin, s))
            .collect();
        expected.sort();
        assert_eq!(found, expected, "one key per limit");
        let tag = hash_tag(&expected[0]).expect("a hash tag");
        for key in &found {
            assert_eq!(hash_tag(key), Some(tag), "{key} out of its origin's slot");
            let named = &key[prefix.len()..];
            for name in ["scoped", "search", "t1", "x}"] {
                assert!(!named.contains(name), "{key} names {name:?}");
            }
        }
        let mut ttl = |s: Option<&str>| {
            Duration::from_millis(
                u64::try_from(pttl(&mut conn, &limit_key(prefix, origin, s))).unwrap_or(0),
            )
        };
        let margin = Duration::from_secs(5);
        for scope in [None, Some("t1"), Some("{x}")] {
            let left = ttl(scope);
            assert!(
                left > IDLE - margin && left <= IDLE,
                "{scope:?} kept for {left:?}, not the idle time"
            );
        }
        let left = ttl(Some("search"));
        assert!(
            left > hold + IDLE - margin && left <= hold + IDLE,
            "a scope held {hold:?} kept for {left:?}"
        );
    })
    .await;
}

/// On a cluster: every origin's scope keys are in its own key's slot, on
/// the node that serves it, and the origins spread over the primaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_a_cluster_an_origins_scopes_live_on_its_node() {
    bounded(Duration::from_secs(60), async {
        let cluster = RedisCluster::start();
        let prefix = "rbp-scope-slots:";
        let store = cluster_store(&cluster.seeds(), prefix)
            .await
            .fail_mode(FailMode::Closed);
        let origins: Vec<String> = (0..12).map(|i| format!("http://o{i}.test:80")).collect();
        for origin in &origins {
            write_limits(&store, origin, Duration::from_secs(30)).await;
        }
        let mut node_of: HashMap<String, u16> = HashMap::new();
        for p in cluster.primaries() {
            for key in keys_on(&cluster, p.port, &format!("{prefix}*")) {
                node_of.insert(key, p.port);
            }
        }
        assert_eq!(node_of.len(), 4 * origins.len(), "{node_of:?}");
        let mut nodes_used = std::collections::BTreeSet::new();
        for origin in &origins {
            let own = limit_key(prefix, origin, None);
            let (node, slot) = (node_of[&own], cluster.slot(&own));
            nodes_used.insert(node);
            for scope in SCOPES {
                let key = limit_key(prefix, origin, Some(scope));
                assert_eq!(cluster.slot(&key), slot, "{origin}#{scope}: another slot");
                assert_eq!(
                    node_of.get(&key),
                    Some(&node),
                    "{origin}#{scope}: not on its origin's node"
                );
            }
        }
        assert!(
            nodes_used.len() > 1,
            "12 origins on one node: {nodes_used:?}"
        );
    })
    .await;
}

/// The policy of both workers: `t1` (named by [`Scope`]) 2 a second, and
/// `t2` (GETs under `/t2`, by a rule) 4 a second, none for the origin.
fn scoped_policy(origin: &str) -> Policy {
    policy()
        .scope_quota(origin, "t1", Quota::per_second(2))
        .scope_rule(origin, Some(Method::GET), "/t2", "t2")
        .scope_quota(origin, "t2", Quota::per_second(4))
        .default_deadline(Duration::from_secs(20))
}

/// A GET of `url`, in scope `t1` when its path says so (`t2` by the rule).
fn get(
    client: &ClientWithMiddleware,
    url: String,
) -> tokio::task::JoinHandle<reqwest_middleware::Result<reqwest::Response>> {
    let mut request = client.get(&url);
    if url.contains("/t1") {
        request = request.with_extension(Scope::new("t1"));
    }
    tokio::spawn(request.send())
}

/// Two workers send 4 requests in `t1` and 8 in `t2` each, all at once:
/// across both, each scope's requests arrive a window's quota at a time
/// (`t1` 2, `t2` 4) over the three seconds its quota takes, and the two
/// scopes run side by side (one quota for both would not).
async fn workers_share_each_scopes_quota(a: RedisStore, b: RedisStore) {
    let (server, arrivals) = scripted(|_, _| ResponseTemplate::new(200)).await;
    let uri = server.uri();
    let workers = [a, b].map(|s| client(s, scoped_policy(&uri)));
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for (w, c) in workers.iter().enumerate() {
        for i in 0..4 {
            tasks.push(get(c, format!("{uri}/t1/{w}-{i}")));
        }
        for i in 0..8 {
            tasks.push(get(c, format!("{uri}/t2/{w}-{i}")));
        }
    }
    for t in tasks {
        let r = t.await.expect("task").expect("response");
        assert_eq!(r.status(), 200, "{:?}", report(&r).stop_reason());
    }
    let entries = arrivals.entries();
    let of = |p: &str| -> Vec<tokio::time::Instant> {
        entries
            .iter()
            .filter(|a| a.path.starts_with(p))
            .map(|a| a.at)
            .collect()
    };
    let (t1, t2) = (of("/t1/"), of("/t2/"));
    assert_eq!((t1.len(), t2.len()), (8, 16));
    // Half a second: a window's requests arrive together, the next
    // window's a second later, whatever the delay between admission and
    // arrival; two workers each spending the whole quota would put twice
    // as many together.
    let span = Duration::from_millis(500);
    for (name, times, quota) in [("t1", &t1, 2), ("t2", &t2, 4)] {
        let most = most_within(times, span);
        assert!(
            most <= quota,
            "{name}: {most} within {span:?} across both workers, over its {quota}"
        );
        // Four windows' worth at the shared quota: three seconds from
        // the first to the last (1.5 s at each worker's own).
        let spread = times.iter().max().copied().zip(times.iter().min().copied());
        let spread = spread.map(|(last, first)| last - first).unwrap_or_default();
        assert!(
            spread >= Duration::from_millis(2_500),
            "{name}: {} sent within {spread:?} across both workers, at {quota} a second",
            times.len()
        );
    }
    // Each scope needs about 3 s at its own quota; one shared by both
    // scopes would take 6 s at the faster one's, 12 s at the slower one's.
    let last = entries.iter().map(|a| a.at).max().expect("arrivals");
    let took = last - start;
    assert!(
        took < Duration::from_millis(5_500),
        "both scopes took {took:?}"
    );
}

/// Worker A's request in `t1` is told to come back in 2 s; worker B then
/// sends in `t2` at once, and its request in `t1` no sooner than 2 s after
/// A's was received, having waited rather than be told.
async fn a_scopes_pushback_holds_it_for_both_workers_alone(a: RedisStore, b: RedisStore) {
    let (server, arrivals) = scripted(|path, i| match (path, i) {
        ("/t1/a", 0) => retry_after(2),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let uri = server.uri();
    let a = client(a, scoped_policy(&uri));
    let b = client(b, scoped_policy(&uri));
    let first = get(&a, format!("{uri}/t1/a"));
    arrivals.wait_for(1).await;
    // A's answer reaches Redis a moment after the server sent it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = tokio::time::Instant::now();
    let t2: Vec<_> = (0..3).map(|i| get(&b, format!("{uri}/t2/b{i}"))).collect();
    let t1 = get(&b, format!("{uri}/t1/b"));
    for t in t2 {
        assert_eq!(t.await.expect("task").expect("t2").status(), 200);
    }
    let t1 = t1.await.expect("task").expect("t1");
    assert_eq!(t1.status(), 200);
    assert_eq!(report(&t1).attempts(), 1, "B's t1 was sent into the hold");
    let first = first.await.expect("task").expect("first");
    assert_eq!(
        (first.status().as_u16(), report(&first).attempts()),
        (200, 2)
    );
    let entries = arrivals.entries();
    let told = entries
        .iter()
        .find(|e| e.path == "/t1/a")
        .map(|e| e.at)
        .expect("A's first request");
    for (path, at) in entries.iter().map(|e| (e.path.as_str(), e.at)) {
        if path.starts_with("/t2/") {
            assert!(
                at - asked < Duration::from_millis(1_500),
                "{path}: held with t1 ({:?} after B asked)",
                at - asked
            );
        } else if at > told {
            assert!(
                at - told >= Duration::from_secs(2),
                "{path} sent {:?} after t1 was told 2 s",
                at - told
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_over_one_redis_share_each_scopes_quota() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let prefix = "rbp-scope-quota:";
        let closed = |s: RedisStore| s.fail_mode(FailMode::Closed);
        let a = closed(store(&redis, prefix).await);
        let b = closed(store(&redis, prefix).await);
        workers_share_each_scopes_quota(a, b).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn over_one_redis_a_scopes_pushback_holds_that_scope_alone() {
    bounded(Duration::from_secs(30), async {
        let redis = RedisServer::start();
        let prefix = "rbp-scope-hold:";
        let closed = |s: RedisStore| s.fail_mode(FailMode::Closed);
        let a = closed(store(&redis, prefix).await);
        let b = closed(store(&redis, prefix).await);
        a_scopes_pushback_holds_it_for_both_workers_alone(a, b).await;
    })
    .await;
}

/// The same two on a cluster, each worker's store seeded by another node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_over_a_cluster_share_scope_quotas_and_holds() {
    bounded(Duration::from_secs(90), async {
        let cluster = RedisCluster::start();
        let seeds = cluster.seeds();
        let pair = |prefix: &'static str| {
            let seeds = seeds.clone();
            async move {
                let a = cluster_store(&seeds[..1], prefix).await;
                let b = cluster_store(&seeds[4..5], prefix).await;
                (a.fail_mode(FailMode::Closed), b.fail_mode(FailMode::Closed))
            }
        };
        let (a, b) = pair("rbp-cluster-scope-quota:").await;
        workers_share_each_scopes_quota(a, b).await;
        let (a, b) = pair("rbp-cluster-scope-hold:").await;
        a_scopes_pushback_holds_it_for_both_workers_alone(a, b).await;
    })
    .await;
}
