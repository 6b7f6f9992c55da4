//! No wait of any kind ends after the task's deadline: a task pushed back
//! with no time, whose extra wait behind the queue would pass its deadline,
//! waits only as long as the deadline allows, and retries when the gate
//! reopens.

use std::time::{Duration, Instant, SystemTime};

use reqwest_backpressure::{Deadline, Error, MemoryStore, RetryAfterMiddleware};

use super::delayed::Delayed;
use crate::common::{client, exact, ok, report, scripted, status, stop_code};
use crate::offline::{URL, offline};

/// A bare `429` (no `Retry-After`, no rate-limit headers), then `200`s;
/// two attempts. The gate's own hold after a pushback with no time is a
/// second, and a last attempt waits a second more behind the queue: with
/// a 2 s deadline and a 0.5 s send reserve (room on a loaded box), that
/// wait is trimmed to 1.5 s, and the retry leaves then. Before, it slept
/// to 2.05 s and stopped with `deadline_exhausted` (the reviewer's case,
/// a 1.3 s deadline, is exact on the paused clock below).
#[tokio::test]
async fn a_last_attempt_behind_a_silent_gate_retries_within_its_deadline() {
    let (server, arrivals) = scripted(|_, i| if i == 0 { status(429) } else { ok() }).await;
    let policy = exact()
        .max_attempts(2)
        .send_reserve(Duration::from_millis(500));
    let client = client(policy);
    let deadline = Duration::from_secs(2);
    let start = Instant::now();
    let resp = client
        .get(server.uri())
        .with_extension(reqwest_backpressure::Deadline::after(deadline))
        .send()
        .await
        .unwrap();
    let took = start.elapsed();

    let seen = arrivals.all();
    assert_eq!(
        (resp.status().as_u16(), stop_code(&resp), seen.len()),
        (200, None, 2),
        "the retry the reopened gate allowed was not sent (after {took:?})"
    );
    assert_eq!(report(&resp).attempts(), 2);
    // Never before the gate's hold of a second (on the server's clock).
    let gap = seen[1] - seen[0];
    assert!(gap >= Duration::from_millis(1000), "retried after {gap:?}");
}

/// A bare `429`, then `200`s, on the paused clock, under `max_attempts`
/// and a deadline: the task's answer and when the retry arrived (since
/// the first send).
async fn retried_after_a_bare_429(max_attempts: u32, deadline: Duration) -> (u32, Duration) {
    let policy = exact().max_attempts(max_attempts);
    let middleware = RetryAfterMiddleware::new(policy);
    let (client, arrivals) = offline(middleware, |i| if i == 0 { 429 } else { 200 });
    let start = tokio::time::Instant::now();
    let resp = client
        .get(URL)
        .with_extension(Deadline::after(deadline))
        .send()
        .await
        .unwrap();

    assert_eq!((resp.status().as_u16(), stop_code(&resp)), (200, None));
    let seen: Vec<Duration> = arrivals.entries().iter().map(|a| a.at - start).collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    (report(&resp).attempts(), seen[1])
}

/// On the paused clock, exactly: the gate's hold is a second; the wait
/// behind the queue (50 ms for a task with attempts to spare) would end
/// past the deadline less the send reserve (1.12 s − 100 ms). The retry
/// leaves within it, at or after the gate's reopening.
#[tokio::test(start_paused = true)]
async fn no_wait_behind_the_queue_ends_past_the_deadline_less_the_reserve() {
    let deadline = Duration::from_millis(1120);
    let (_, retry) = retried_after_a_bare_429(3, deadline).await;
    let reserve = Duration::from_millis(100);
    assert!(
        retry >= Duration::from_secs(1) && retry <= deadline - reserve,
        "the retry left at {retry:?}"
    );
}

/// The reviewer's case on the paused clock: the last attempt's extra
/// second behind the queue is trimmed to what the deadline allows.
#[tokio::test(start_paused = true)]
async fn a_last_attempt_waits_behind_the_queue_only_as_the_deadline_allows() {
    let (attempts, retry) = retried_after_a_bare_429(2, Duration::from_millis(1300)).await;
    assert_eq!(attempts, 2);
    assert!(
        retry >= Duration::from_secs(1) && retry <= Duration::from_millis(1200),
        "the retry left at {retry:?}"
    );
}

/// Behind a store whose calls take a round trip (250 ms each way), a task
/// told the gate is closed for a while from the store's time (within its
/// deadline less the send reserve, as the store saw it) would wait that
/// long from the answer, a leg later: past its deadline. It stops at once
/// instead, unsent, and is told when the gate reopens (never earlier than
/// the server's time). Before, it slept to 2 s and returned
/// `deadline_exhausted` 200 ms past its 1.8 s deadline (the simulation's
/// seed 35).
#[tokio::test(start_paused = true)]
async fn a_gate_wait_that_a_round_trip_pushes_past_the_deadline_is_not_begun() {
    let store = Delayed {
        inner: MemoryStore::new(),
        delay: Duration::from_millis(250),
        budget_delay: Duration::ZERO,
    };
    let policy = exact().first_contact(Duration::ZERO);
    let middleware = RetryAfterMiddleware::try_with_store(policy, store).expect("valid policy");
    let (client, arrivals) = offline(middleware, |i| if i == 0 { 429 } else { 200 });
    let start = tokio::time::Instant::now();
    // A: admitted at 0.5 s, pushed back with no time; the gate's hold is
    // recorded at 0.75 s.
    let a = tokio::spawn(client.get(URL).send());
    arrivals.wait_for(1).await;
    // B asks at 1 s; the store sees the gate closed (at 1.25 s, for
    // 0.5 s): within B's 1.8 s deadline less the reserve from then, but
    // the answer comes at 1.5 s.
    tokio::time::sleep_until(start + Duration::from_secs(1)).await;
    let deadline = start + Duration::from_millis(1800);
    let b = client
        .get(URL)
        .with_extension(Deadline::at(deadline))
        .send();
    let b = b.await;
    let ended = tokio::time::Instant::now();
    let told = SystemTime::now();

    assert!(
        ended <= deadline,
        "B ended {:?} past its deadline",
        ended - deadline
    );
    assert_eq!(arrivals.len(), 1, "B was sent");
    let error = b.expect_err("B stopped unsent");
    let ours = match &error {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref::<Error>(),
        reqwest_middleware::Error::Reqwest(_) => None,
    };
    let ours = ours.expect("the middleware's error");
    assert_eq!(ours.code(), "origin_gate_closed");
    // Told to come back when the gate reopens (1.75 s), not before.
    let back_in = ours
        .retry_at()
        .and_then(|at| at.duration_since(told).ok())
        .unwrap_or_default();
    let reopens = start + Duration::from_millis(1750) - ended;
    assert!(back_in >= reopens, "told to come back in {back_in:?}");
    a.abort();
}
