//! When a 429 or 503 is retried, and when it is not: the basic retry,
//! statuses, a missing `Retry-After`.

use super::support::*;

#[tokio::test]
async fn retries_429_no_earlier_than_retry_after_seconds() {
    let (server, arrivals) = serve_seq(2, vec![too_many("1"), ok()]).await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert_retried_within(gap, Duration::from_secs(1), Duration::from_secs(1) + MARGIN);
    let r = report(&resp);
    assert_eq!(r.attempts(), 2);
    assert_eq!(r.stop_reason(), None);
    assert!(r.waited() >= Duration::from_secs(1), "{:?}", r.waited());
    server.verify().await;
}

#[tokio::test]
async fn first_try_success_carries_a_report() {
    let (server, _) = serve_seq(1, vec![ok()]).await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let r = report(&resp);
    assert_eq!(r.attempts(), 1);
    assert_eq!(r.stop_reason(), None);
    assert_eq!(r.retry_at(), None);
    assert!(r.waited() < Duration::from_millis(50), "{:?}", r.waited());
    server.verify().await;
}

#[tokio::test]
async fn first_try_success_reports_no_wait() {
    let (server, _) = serve_seq(1, vec![ok()]).await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(report(&resp).waited(), Duration::ZERO);
    server.verify().await;
}

#[tokio::test]
async fn default_jitter_never_retries_before_the_servers_time() {
    let (server, arrivals) = serve_seq(2, vec![too_many("1"), ok()]).await;

    let resp = get_once(&server, Policy::default()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    // default jitter is at most 250 ms
    assert_retried_within(
        gap,
        Duration::from_secs(1),
        Duration::from_millis(1250) + MARGIN,
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test(start_paused = true)]
async fn retries_503_with_retry_after() {
    let (client, arrivals) = offline(exact(), seq(vec![push_back(503, "1"), answer(200)]));

    let resp = client.get(URL).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert!(arrivals.first_gap() >= Duration::from_secs(1));
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test]
async fn retries_503_without_retry_after_through_the_origins_gate() {
    let (server, arrivals) = serve_seq(2, vec![status(503), ok()]).await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    // The gate held the origin for its hold of a second, not the task's
    // own fallback delay.
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_millis(990), "{gap:?}");
    assert!(gap < Duration::from_millis(1900), "{gap:?}");
    server.verify().await;
}

#[tokio::test]
async fn with_the_gate_off_a_503_without_retry_after_waits_the_fallback_delay() {
    let (server, arrivals) = serve_seq(2, vec![status(503), ok()]).await;

    let policy = exact()
        .origin_gate(false)
        .missing_retry_after(Fallback::Delay(Duration::from_millis(300)));
    let resp = get_once(&server, policy).await;

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_millis(290), "{gap:?}");
    assert!(gap < Duration::from_millis(900), "{gap:?}");
    server.verify().await;
}

#[tokio::test(start_paused = true)]
async fn retries_429_without_retry_after_after_the_fallback_delay() {
    let policy = exact().missing_retry_after(Fallback::Delay(Duration::from_secs(1)));
    let (client, arrivals) = offline(policy, seq(vec![answer(429), answer(200)]));

    let resp = client.get(URL).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert_retried_within(gap, Duration::from_secs(1), Duration::from_secs(1) + MARGIN);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test]
async fn fallback_stop_does_not_retry_429_without_retry_after() {
    let (server, _) = serve_seq(1, vec![status(429), ok()]).await;

    let policy = exact().missing_retry_after(Fallback::Stop);
    let resp = get_once(&server, policy).await;

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("missing_retry_after"));
    server.verify().await;
}

#[tokio::test]
async fn a_status_not_configured_passes_through() {
    let (server, _) = serve_seq(1, vec![status(503).insert_header("Retry-After", "0"), ok()]).await;

    let policy = exact().statuses([StatusCode::TOO_MANY_REQUESTS]);
    let resp = get_once(&server, policy).await;

    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    let r = report(&resp);
    assert_eq!(r.stop_reason(), None);
    assert_eq!(r.attempts(), 1);
    server.verify().await;
}
