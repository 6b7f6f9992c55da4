//! The origin gate and pacing: one answer's `Retry-After` holds the whole
//! origin; a reopened gate lets one probe through, then the queue at a pace.

use super::support::*;

#[tokio::test]
async fn gate_past_the_deadline_refuses_a_new_task_without_sending() {
    let (server, _) = serve_seq(1, vec![too_many("2"), ok()]).await;
    // max_attempts(1): the first task stops at once, but its Retry-After
    // closes the origin's gate for 2 s.
    let client = client(exact().max_attempts(1));
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(stop_code(&resp), Some("attempt_budget_exhausted"));

    let start = Instant::now();
    let before = SystemTime::now();
    let err = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_millis(500)))
        .send()
        .await
        .unwrap_err();

    assert_eq!(our_code(&err), Some("origin_gate_closed"), "{err:?}");
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );
    let retry_at = match &err {
        reqwest_middleware::Error::Middleware(e) => e
            .downcast_ref::<reqwest_backpressure::Error>()
            .and_then(reqwest_backpressure::Error::retry_at),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
    .expect("the error carries the gate's time");
    // Never before the server's time (the first answer, received before
    // `before`, + 2 s); the wall time is read after the store's clock, so
    // it may lie those few microseconds later.
    assert!(
        retry_at > before + Duration::from_secs(1)
            && retry_at <= before + Duration::from_millis(2100),
        "{retry_at:?} vs {before:?}"
    );
    server.verify().await;
}

#[tokio::test(start_paused = true)]
async fn queue_behind_a_reopened_gate_is_released_after_a_lone_probe() {
    let (client, arrivals) = offline(exact(), seq(vec![push_back(429, "1"), answer(200)]));

    let first = spawn_get(&client, URL);
    arrivals.wait_for(1).await;
    // Queued at the closed gate.
    let second = client.get(URL).send().await.unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::OK);

    let a = arrivals.all();
    assert!(
        a[1] - a[0] >= Duration::from_secs(1),
        "probe before the server's time"
    );
    // The probe goes alone; the next one at least one interval (1 s at the
    // lowest pace, nothing was admitted before) after it.
    let spacing = a[2] - a[1];
    assert!(
        spacing >= Duration::from_millis(900),
        "released {spacing:?} after the probe"
    );
    assert_eq!(arrivals.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn time_at_the_gate_counts_toward_max_total_wait() {
    let policy = exact()
        .max_wait(Duration::from_secs(2))
        .max_total_wait(Duration::from_secs(2))
        .missing_retry_after(Fallback::Stop);
    let (client, arrivals) = offline(policy, seq(vec![push_back(429, "2")]));
    // A is told to come back in 2 s, and stops on its own only later.
    let a = spawn_get(&client, URL);
    // B starts once the server has answered A (not after a guessed sleep).
    arrivals.wait_for(1).await;
    // B waits at the gate (~2 s, its whole budget), is then told 2 s
    // itself: that would exceed max_total_wait.
    let b = client.get(URL).send().await.unwrap();
    assert_eq!(stop_code(&b), Some("wait_budget_exhausted"));
    assert!(report(&b).waited() >= Duration::from_millis(1500));
    assert_eq!(report(&b).attempts(), 1);
    a.abort();
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_absurd_retry_after_closes_the_origin_for_max_wait_only() {
    let (client, arrivals) = offline(
        exact()
            .max_wait(Duration::from_secs(1))
            .max_total_wait(Duration::from_secs(2)),
        seq(vec![push_back(429, "3600"), answer(200)]),
    );
    let a = client.get(URL).send().await.unwrap();
    assert_eq!(stop_code(&a), Some("wait_budget_exhausted"));
    // The gate holds the origin for max_wait, not an hour: B waits, then
    // sends (a probe) and gets through.
    let start = tokio::time::Instant::now();
    let b = client.get(URL).send().await.unwrap();
    assert_eq!(b.status(), StatusCode::OK);
    assert_eq!(report(&b).attempts(), 1);
    assert!(
        start.elapsed() >= Duration::from_millis(800),
        "{:?}",
        start.elapsed()
    );
    assert!(start.elapsed() < Duration::from_secs(1) + MARGIN);
    assert_eq!(arrivals.len(), 2);
}
