//! The coalescing wait times out only before an update is applied: one
//! applied already, in a write that has not answered yet, waits for that
//! answer. Before, it failed, and a store failing open (Redis behind
//! `Coalesced`) applied the same admission to its own state as well.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest_backpressure::store::Coalesced;
use reqwest_backpressure::{MemoryStore, Store};

use super::delayed::Delayed;

const O: &str = "http://coalesced.test:80";

/// An update whose write reaches the store at 250 ms and answers at
/// 500 ms, with a 300 ms bound on the wait: applied once, and answered.
#[tokio::test(start_paused = true)]
async fn an_update_applied_before_the_bound_is_answered_not_failed() {
    let store = Coalesced::new(Delayed {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(250),
        budget_delay: Duration::ZERO,
    })
    .timeout(Duration::from_millis(300));
    let applied = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&applied);
    let answer = store
        .update_origin(O, move |_, _| counter.fetch_add(1, Ordering::SeqCst) + 1)
        .await;
    assert_eq!(
        (answer, applied.load(Ordering::SeqCst)),
        (Ok(1), 1),
        "an update applied was answered as failed"
    );
}

/// Bounded before the write reaches the store: not applied, and failed.
#[tokio::test(start_paused = true)]
async fn an_update_not_applied_by_the_bound_fails_and_never_is() {
    let store = Coalesced::new(Delayed {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(250),
        budget_delay: Duration::ZERO,
    })
    .timeout(Duration::from_millis(200));
    let applied = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&applied);
    let answer = store
        .update_origin(O, move |_, _| counter.fetch_add(1, Ordering::SeqCst))
        .await;
    assert!(answer.is_err(), "{answer:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(applied.load(Ordering::SeqCst), 0, "applied after failing");
}
