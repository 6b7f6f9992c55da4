//! Two IETF partitions of one origin under the default `ietf()` fields:
//! `RateLimit-Policy` items with the same name and their own `pk`, each
//! partition spent at its own quota.

use std::time::Duration;

use reqwest_backpressure::Policy;

use super::{client, get, ratio, returned};
use crate::server::partitions::{Config, PartitionsState, ideal};
use crate::server::tap::Tap;
use crate::server::vendor_loads::partitions::{POLICY, SENDS, path};
use crate::server::wire::JudgedServer;

/// Both partitions' requests at once against a server that does (or
/// does not) add `Retry-After` to its `429`s; asserts the figures.
async fn both_partitions(retry_after: bool) {
    let config = Config {
        partitions: SENDS.iter().map(|&(p, _)| p).collect(),
        policy: POLICY,
        retry_after,
    };
    let server = JudgedServer::start(PartitionsState::new(config)).await;
    let tap = Tap::default();
    let client = client(Policy::default(), &tap);
    let mut task = 0;
    let mut tasks = Vec::new();
    for (p, n) in SENDS {
        for i in 0..n {
            tasks.push(get(&client, &server.uri, path(&p, i), task));
            task += 1;
        }
    }
    let back = returned(tasks).await;
    let seen = server.finish();
    let figures: Vec<_> = SENDS
        .iter()
        .enumerate()
        .map(|(i, (p, n))| {
            let took = seen.finished(i).unwrap_or(Duration::MAX);
            (p.prefix, took, ideal(p, *n), seen.count(i, 429))
        })
        .collect();
    for (prefix, took, best, limited) in &figures {
        eprintln!(
            "partitions (retry-after: {retry_after}): {prefix} last success {took:.2?}, ideal \
             {best:.2?}, {:.2}× ideal, {limited} 429s",
            ratio(*took, *best)
        );
    }
    eprintln!(
        "partitions (retry-after: {retry_after}): requests {}, premature {}; returned {back:?}",
        seen.arrivals.len(),
        seen.premature()
    );
    let back = back.expect("the run ends");
    let total: u32 = SENDS.iter().map(|s| s.1).sum();
    assert_eq!(back.with(200), total as usize, "{back:?}");
    for (prefix, took, best, _) in figures {
        assert!(
            took.as_secs_f64() <= 1.10 * best.as_secs_f64(),
            "{prefix}: took {took:?}, ideal {best:?}"
        );
    }
    assert_eq!(seen.premature(), 0);
}

#[tokio::test]
async fn two_partitions_each_at_its_own_quota() {
    both_partitions(false).await;
}

#[tokio::test]
async fn two_partitions_each_at_its_own_quota_with_retry_after() {
    both_partitions(true).await;
}
