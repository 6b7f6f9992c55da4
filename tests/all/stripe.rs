//! Stripe as Stripe documents it (`server/stripe.rs`: a token bucket of 25
//! a second in test mode, and `429` `lock_timeout` for an update of an
//! object another update holds), under the default policy with the
//! documented quota declared: `Quota::per_second(25)`.
//!
//! The workload is what a sync job does: 300 keyed updates of 100
//! customers, 32 in flight (a worker pool a little larger than a
//! second's quota, so the quota, not the pool, bounds the rate). Most
//! updates go round the customers in turn; about 7% are a second update
//! of the customer the update before it touched, and meet that update's
//! lock when both leave together. Those `429`s are isolated among
//! successes: they must not slow the declared pace down. Every count and
//! time is the server's.
//!
//! Why 100 customers and not 30: a declared window sends each second's
//! 25 at once, and a lock timeout's retry leaves a batch or two later.
//! With 30 customers taken in turn, that batch holds the same customer's
//! next update (any 25 in a row hold most of 30), the two meet, and the
//! loser's retry meets the one after: a chain of lock timeouts to the end
//! of the run, in which a task that loses three times runs out of its
//! three attempts (two of 300 did, with the pace fixed). No pace avoids
//! that; only fewer updates of a customer in flight together do.

/// `Policy::stripe()`: its figure and the variations the docs allow (a
/// module of this one, so it runs with the vendors' figure tests).
#[path = "stripe_preset.rs"]
mod preset;

use futures_util::StreamExt;
use reqwest_backpressure::{IdempotencyKey, Policy, Quota};

use crate::common::client;
use crate::server::stripe::{StripeAnswer, StripeConfig, StripeState, customer_path};
use crate::server::vendor_loads::stripe::{
    IN_FLIGHT, LOCK, RATE, UPDATES, body, customers, follow_ups, ideal,
};
use crate::server::wire::JudgedServer;

/// Runs the updates against a fresh server, with the documented quota
/// declared or not: each update's status (0: an error) and what the
/// server saw.
async fn sync(declared: bool) -> (Vec<u16>, StripeState) {
    let server = JudgedServer::start(StripeState::new(StripeConfig::test_mode(LOCK))).await;
    let mut policy = Policy::default();
    if declared {
        policy = policy.quota(&server.uri, Quota::per_second(RATE));
    }
    let client = client(policy);
    let statuses = futures_util::stream::iter(customers().into_iter().enumerate())
        .map(|(i, customer)| {
            let client = client.clone();
            let url = format!("{}{}", server.uri, customer_path(&customer));
            async move {
                let sent = client
                    .post(url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body(i))
                    .with_extension(IdempotencyKey::new(format!("update-{i}")))
                    .send()
                    .await;
                match sent {
                    Ok(r) => r.status().as_u16(),
                    Err(e) => {
                        eprintln!("update {i}: {e}");
                        0
                    }
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<u16>>()
        .await;
    (statuses, server.finish())
}

/// One line of figures for a run.
fn figures(name: &str, statuses: &[u16], s: &StripeState) -> String {
    format!(
        "{name}: {} of {UPDATES} updated, last at {:?}; {} requests: {} lock_timeout, {} rate_limit; per second {:?}",
        statuses.iter().filter(|&&c| c == 200).count(),
        s.last_update(),
        s.answers.len(),
        s.count(StripeAnswer::LockTimeout),
        s.count(StripeAnswer::RateLimited),
        s.per_second(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_quota_keeps_its_pace_through_isolated_lock_timeouts() {
    let follow = follow_ups(&customers());
    assert!((15..=30).contains(&follow), "{follow} follow-ups");
    let (declared, server) = sync(true).await;
    let (undeclared, plain) = sync(false).await;
    eprintln!("{follow} follow-ups");
    eprintln!("{}", figures("declared", &declared, &server));
    eprintln!("{}", figures("undeclared", &undeclared, &plain));

    // Every update through, each once.
    assert!(declared.iter().all(|&c| c == 200), "{declared:?}");
    assert_eq!(server.count(StripeAnswer::Updated), UPDATES);
    let mut keys: Vec<String> = server
        .arrivals
        .entries()
        .iter()
        .zip(&server.answers)
        .filter(|(_, a)| **a == StripeAnswer::Updated)
        .filter_map(|(e, _)| e.idempotency_key.clone())
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), UPDATES, "an update succeeded twice");

    // Never above the documented rate in any second of the server's.
    let per_second = server.per_second();
    assert!(per_second.iter().all(|&n| n <= 25), "{per_second:?}");
    assert_eq!(server.count(StripeAnswer::RateLimited), 0);

    // Close to what the bucket allows for the successes and the lock
    // timeouts' retries.
    let locks = server.count(StripeAnswer::LockTimeout);
    let best = ideal(UPDATES + locks, RATE);
    let last = server.last_update().expect("a last update");
    assert!(
        last.as_secs_f64() <= best.as_secs_f64() * 1.2,
        "last update at {last:?}, ideal {best:?}"
    );

    // And declaring the documented quota is never slower than not.
    let plain_last = plain.last_update().expect("a last update");
    assert!(
        last.as_secs_f64() <= plain_last.as_secs_f64() * 1.05,
        "declared {last:?}, undeclared {plain_last:?}"
    );
}
