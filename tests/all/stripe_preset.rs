//! `Policy::stripe()` against Stripe as Stripe documents it
//! (`server/stripe.rs`), with the test-mode rate declared as a user of
//! the preset declares it: `.quota("*", Quota::per_second(25).refilled())`.
//!
//! - The sync job of `stripe.rs` (300 keyed updates of 100 customers, 32
//!   in flight, about 7% meeting a lock): every update through, once,
//!   within a tenth of what the bucket allows.
//! - A `Stripe-Should-Retry: false` answer stops its task at once
//!   (`server_said_do_not_retry`), and holds no one else.
//! - A lock storm on one object (Stripe's own process holding it for two
//!   seconds): that object's updates wait, the others keep the full pace.
//!
//! Every count and time is the server's.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{IdempotencyKey, Policy, Quota};

use crate::common::{client, report, stop_code};
use crate::server::stripe::{StripeAnswer, StripeConfig, StripeState, customer_path};
use crate::server::vendor_loads::stripe::{IN_FLIGHT, LOCK, RATE, UPDATES, body, customers, ideal};
use crate::server::wire::JudgedServer;

/// The preset with test mode's rate, as its documentation says to declare
/// it.
fn test_mode() -> Policy {
    Policy::stripe().quota("*", Quota::per_second(RATE).refilled())
}

/// What one update ended in: its status (0: an error), stop code and
/// attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ended {
    status: u16,
    stop: Option<&'static str>,
    attempts: u32,
}

/// Runs an update of each of `customers` (keyed `update-{i}`), `IN_FLIGHT`
/// at once, against a fresh server limiting as `config` says.
async fn sync(
    policy: impl FnOnce(&str) -> Policy,
    config: StripeConfig,
    customers: &[String],
) -> (Vec<Ended>, StripeState) {
    let server = JudgedServer::start(StripeState::new(config)).await;
    let client = client(policy(&server.uri));
    let ended = futures_util::stream::iter(customers.iter().enumerate())
        .map(|(i, customer)| {
            let client = client.clone();
            let url = format!("{}{}", server.uri, customer_path(customer));
            async move {
                let sent = client
                    .post(url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(body(i))
                    .with_extension(IdempotencyKey::new(format!("update-{i}")))
                    .send()
                    .await;
                let ended = match sent {
                    Ok(r) => Ended {
                        status: r.status().as_u16(),
                        stop: stop_code(&r),
                        attempts: report(&r).attempts(),
                    },
                    Err(e) => {
                        eprintln!("update {i}: {e}");
                        Ended {
                            status: 0,
                            stop: None,
                            attempts: 0,
                        }
                    }
                };
                (i, ended)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<(usize, Ended)>>()
        .await;
    let mut ended = ended;
    ended.sort_by_key(|(i, _)| *i);
    (ended.into_iter().map(|(_, e)| e).collect(), server.finish())
}

/// One line of figures for a run.
fn figures(name: &str, ended: &[Ended], s: &StripeState) -> String {
    format!(
        "{name}: {} of {} updated, last at {:?}; {} requests: {} lock_timeout, {} rate_limit, {} refused; per second {:?}",
        ended.iter().filter(|e| e.status == 200).count(),
        ended.len(),
        s.last_update(),
        s.answers.len(),
        s.count(StripeAnswer::LockTimeout),
        s.count(StripeAnswer::RateLimited),
        s.count(StripeAnswer::Refused),
        s.per_second(),
    )
}

/// The keys of the updates the server applied, each once.
fn applied_once(s: &StripeState) -> usize {
    let mut keys: Vec<String> = s
        .arrivals
        .entries()
        .iter()
        .zip(&s.answers)
        .filter(|(_, a)| **a == StripeAnswer::Updated)
        .filter_map(|(e, _)| e.idempotency_key.clone())
        .collect();
    let all = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), all, "an update was applied twice");
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preset_updates_every_customer_once_within_a_tenth_of_ideal() {
    let (ended, server) = sync(|_| test_mode(), StripeConfig::test_mode(LOCK), &customers()).await;
    eprintln!("{}", figures("stripe()", &ended, &server));
    assert!(ended.iter().all(|e| e.status == 200), "{ended:?}");
    assert_eq!(applied_once(&server), UPDATES);
    // The raw key form: Stripe reads the header's value as the key.
    let keys = server.arrivals.idempotency_keys();
    assert!(
        keys.iter()
            .all(|k| k.as_deref().is_some_and(|k| k.starts_with("update-"))),
        "{keys:?}"
    );
    // Every request the bucket admitted counts toward the ideal.
    let sends = server.answers.len() - server.count(StripeAnswer::RateLimited);
    let best = ideal(sends, RATE);
    let last = server.last_update().expect("a last update");
    eprintln!(
        "stripe(): last update {last:?}, ideal {best:?} (x{:.2})",
        last.as_secs_f64() / best.as_secs_f64()
    );
    assert!(
        last.as_secs_f64() <= best.as_secs_f64() * 1.10,
        "last update at {last:?}, ideal {best:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_retry_false_stops_its_task_and_holds_no_one_else() {
    let config = StripeConfig {
        refused: Some("cus_bad"),
        ..StripeConfig::test_mode(LOCK)
    };
    // Every fourth update is of the refused customer.
    let jobs: Vec<String> = (0..40)
        .map(|i| {
            if i % 4 == 0 {
                "cus_bad".to_owned()
            } else {
                format!("cus_{i:03}")
            }
        })
        .collect();
    let (ended, server) = sync(|_| test_mode(), config, &jobs).await;
    eprintln!("{}", figures("refused", &ended, &server));

    for (job, end) in jobs.iter().zip(&ended) {
        if job == "cus_bad" {
            assert_eq!(end.status, 429, "{job}: {end:?}");
            assert_eq!(end.stop, Some("server_said_do_not_retry"), "{job}");
            assert_eq!(end.attempts, 1, "{job}");
        } else {
            assert_eq!((end.status, end.attempts), (200, 1), "{job}: {end:?}");
        }
    }
    assert_eq!(server.count(StripeAnswer::Refused), 10, "each sent once");
    assert_eq!(server.count(StripeAnswer::RateLimited), 0);
    // 40 requests fit the bucket's burst and a second of refill: nothing
    // held them.
    let last = server.log().last().map(|(at, _)| *at).expect("requests");
    assert!(
        last <= Duration::from_millis(1500),
        "last request at {last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_storm_on_one_object_holds_that_object_only() {
    const HOT: &str = "cus_hot";
    const BUSY: Duration = Duration::from_secs(3);
    let config = StripeConfig {
        busy: Some((HOT, BUSY)),
        ..StripeConfig::test_mode(LOCK)
    };
    // 200 updates, every fourth of the busy customer, the rest round 100
    // others (never two of one in the same second).
    let jobs: Vec<String> = (0..200)
        .map(|i| {
            if i % 4 == 0 {
                HOT.to_owned()
            } else {
                format!("cus_{:03}", i % 100)
            }
        })
        .collect();
    let (ended, server) = sync(|_| test_mode(), config, &jobs).await;
    let (plain_ended, plain) = sync(
        |uri| Policy::default().quota(uri, Quota::per_second(RATE).refilled()),
        config,
        &jobs,
    )
    .await;
    eprintln!("{}", figures("stripe(), storm", &ended, &server));
    eprintln!("{}", figures("default, storm", &plain_ended, &plain));

    let policy_attempts = 3;
    for (job, end) in jobs.iter().zip(&ended) {
        if job == HOT {
            // Through after the storm, or out of attempts: never past them.
            assert!(end.attempts <= policy_attempts, "{end:?}");
            assert!(
                end.status == 200 || end.stop == Some("attempt_budget_exhausted"),
                "{end:?}"
            );
        } else {
            assert_eq!(end.status, 200, "{job}: {end:?}");
        }
    }
    applied_once(&server);
    // The other customers' updates kept the bucket's pace: their last
    // landed within a tenth of the least time for every request the
    // bucket admitted before it.
    let log = server.log();
    let hot: Vec<bool> = server
        .arrivals
        .entries()
        .iter()
        .map(|e| e.path.ends_with(HOT))
        .collect();
    let (last_other, _) = log
        .iter()
        .zip(&hot)
        .rev()
        .find(|((_, a), hot)| *a == StripeAnswer::Updated && !**hot)
        .map(|(entry, _)| *entry)
        .expect("an update of another customer");
    let admitted_before = log
        .iter()
        .filter(|(at, a)| *at <= last_other && *a != StripeAnswer::RateLimited)
        .count();
    let best = ideal(admitted_before, RATE);
    eprintln!(
        "others' last update {last_other:?}, ideal {best:?} for {admitted_before} (x{:.2})",
        last_other.as_secs_f64() / best.as_secs_f64()
    );
    assert!(
        last_other.as_secs_f64() <= best.as_secs_f64() * 1.10,
        "others' last update at {last_other:?}, ideal {best:?}"
    );
    // The busy object's retries waited for it: at most one send of it
    // per task per hold, never a burst into the lock.
    let hot_sends = hot.iter().filter(|h| **h).count();
    assert!(hot_sends <= 50 * policy_attempts as usize, "{hot_sends}");
}

/// `Stripe-Should-Retry` as Stripe's SDKs read it, before any other rule:
/// `true` retries an error status that is no pushback otherwise (a `409`
/// while another request with the key runs), `false` never retries; with
/// neither, a `409` is returned as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_retry_true_retries_any_error_status_and_false_none() {
    use wiremock::ResponseTemplate;

    let (server, arrivals) = crate::common::scripted(|path, i| match (path, i) {
        ("/v1/customers/cus_1", 0) => {
            ResponseTemplate::new(409).insert_header("stripe-should-retry", "true")
        }
        ("/v1/customers/cus_2", 0) => {
            ResponseTemplate::new(503).insert_header("stripe-should-retry", "false")
        }
        ("/v1/customers/cus_3", 0) => ResponseTemplate::new(409),
        _ => ResponseTemplate::new(200),
    })
    .await;
    let client = client(test_mode());
    let send = |customer: &'static str| {
        client
            .post(format!("{}/v1/customers/{customer}", server.uri()))
            .with_extension(IdempotencyKey::new(format!("update-{customer}")))
            .send()
    };

    let retried = send("cus_1").await.expect("a response");
    assert_eq!(retried.status(), 200);
    assert_eq!(report(&retried).attempts(), 2);
    let refused = send("cus_2").await.expect("a response");
    assert_eq!(refused.status(), 503);
    assert_eq!(stop_code(&refused), Some("server_said_do_not_retry"));
    assert_eq!(report(&refused).attempts(), 1);
    let plain = send("cus_3").await.expect("a response");
    assert_eq!((plain.status().as_u16(), stop_code(&plain)), (409, None));
    assert_eq!(arrivals.at("/v1/customers/cus_1").len(), 2);
    assert_eq!(arrivals.at("/v1/customers/cus_2").len(), 1);
    assert_eq!(arrivals.at("/v1/customers/cus_3").len(), 1);
}
