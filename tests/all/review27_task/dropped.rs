//! A task dropped while its admission's answer is in flight gives back
//! what the admission reserved: the store applied it, nobody is left to
//! send, and the next task finds the quota whole.

use std::time::Duration;

use reqwest_backpressure::{
    Cost, Deadline, MemoryStore, Quota, RetryAfterMiddleware, RetryBudget, Store,
};

use super::delayed::Delayed;
use crate::common::{exact, stop_code};
use crate::offline::{URL, offline};

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
        budget_delay: Duration::ZERO,
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

/// A retry token withdrawn for a task dropped before the budget's answer
/// came back goes back to the budget. The gate is off, so a bare `429`
/// falls back to the policy's delay and spends a token; the budget's
/// updates take 250 ms there and 250 ms back; the task is dropped 400 ms
/// after the `429`, with the withdrawal applied and unanswered.
#[tokio::test(start_paused = true)]
async fn a_retry_token_withdrawn_for_a_dropped_task_goes_back() {
    let memory = MemoryStore::new();
    let store = Delayed {
        inner: memory.clone(),
        delay: Duration::ZERO,
        budget_delay: Duration::from_millis(250),
    };
    let policy = exact()
        .origin_gate(false)
        .retry_budget(RetryBudget::new(1.0, 0.0));
    let middleware = RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy");
    let (client, arrivals) = offline(middleware, |_| 429);
    let a = tokio::spawn(client.get(URL).send());
    // The first send's deposit is answered at 0.5 s; the 429 at once.
    arrivals.wait_for(1).await;
    let tokens = || async { memory.update_budget(|b, _| b.tokens()).await.unwrap() };
    let before = tokens().await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(arrivals.len(), 1);
    a.abort();
    assert!(
        a.await.is_err_and(|e| e.is_cancelled()),
        "the task ended first"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(tokens().await, before, "the token was not given back");
}
