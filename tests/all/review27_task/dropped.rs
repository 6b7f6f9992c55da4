//! A task dropped while its admission's answer is in flight gives back
//! what the admission reserved: the store applied it, nobody is left to
//! send, and the next task finds the quota whole.

use std::time::Duration;

use reqwest_backpressure::{Cost, Deadline, MemoryStore, Quota, RetryAfterMiddleware};

use super::delayed::Delayed;
use super::offline::{URL, offline};
use crate::common::{exact, stop_code};

/// The reviewer's case without Redis: a declared 100 units a minute, task
/// A (cost 60) dropped 400 ms in, after the store applied its admission
/// (at 250 ms) and before the answer came back (at 500 ms). Task B (cost
/// 60), a little later, is sent. Before, A's 60 units stayed spent for the
/// minute, and B stopped without sending.
#[tokio::test(start_paused = true)]
async fn an_admission_answered_after_its_task_was_dropped_is_given_back() {
    let store = Delayed {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(250),
    };
    let policy = exact().quota(URL, Quota::per_minute(100).units());
    let middleware = RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy");
    let (client, arrivals) = offline(middleware, |_| 200);
    let send = |client: &reqwest_middleware::ClientWithMiddleware| {
        client
            .get(URL)
            .with_extension(Cost::new(60))
            .with_extension(Deadline::after(Duration::from_secs(10)))
            .send()
    };

    let a = tokio::spawn(send(&client));
    tokio::time::sleep(Duration::from_millis(400)).await;
    a.abort();
    assert!(a.await.is_err_and(|e| e.is_cancelled()), "A ended first");
    assert!(arrivals.is_empty(), "A was sent");

    // Long enough for a give-back (an update: 0.5 s), far short of the
    // minute.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = send(&client).await.expect("B answered");
    assert_eq!(
        (b.status().as_u16(), stop_code(&b), arrivals.len()),
        (200, None, 1),
        "B was not sent: A's units were kept"
    );
}
