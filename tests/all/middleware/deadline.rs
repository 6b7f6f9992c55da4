//! The deadline: a `Retry-After` past it stops at once, an attempt is bounded
//! by it, timeouts are trimmed to it and never widened.

use super::support::*;

#[tokio::test]
async fn retry_after_beyond_the_deadline_stops_at_once() {
    let (server, _) = serve_seq(1, vec![too_many("2"), ok()]).await;

    let start = Instant::now();
    let resp = client(exact())
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_millis(1500)))
        .send()
        .await
        .unwrap();
    let took = start.elapsed();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("deadline_exhausted"));
    assert!(took < Duration::from_secs(1), "took {took:?}");
    server.verify().await;
}

#[tokio::test]
async fn policy_default_deadline_applies_without_a_deadline_extension() {
    let (server, _) = serve_seq(1, vec![too_many("2"), ok()]).await;

    let start = Instant::now();
    let policy = exact().default_deadline(Duration::from_millis(1500));
    let resp = get_once(&server, policy).await;
    let took = start.elapsed();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("deadline_exhausted"));
    assert!(took < Duration::from_secs(1), "took {took:?}");
    server.verify().await;
}

#[tokio::test]
async fn deadline_in_the_past_sends_nothing() {
    let (server, _) = serve_seq(0, vec![ok()]).await;

    let past = tokio::time::Instant::now()
        .checked_sub(Duration::from_secs(1))
        .expect("monotonic clock older than 1 s");
    let err = client(exact())
        .get(server.uri())
        .with_extension(Deadline::at(past))
        .send()
        .await
        .unwrap_err();

    assert_eq!(our_code(&err), Some("deadline_exhausted"), "{err:?}");
    server.verify().await;
}

#[tokio::test(start_paused = true)]
async fn attempt_is_bounded_by_the_deadline_and_not_retried() {
    let (client, arrivals) = offline(
        exact(),
        seq(vec![answer(200).after(Duration::from_secs(3))]),
    );

    let start = tokio::time::Instant::now();
    let err = client
        .get(URL)
        .with_extension(Deadline::after(Duration::from_secs(1)))
        .send()
        .await
        .unwrap_err();
    let took = start.elapsed();

    // The outcome is unknown: our typed error, never a retry.
    assert_eq!(our_code(&err), Some("attempt_timed_out"), "{err:?}");
    assert!(took >= Duration::from_millis(900), "took {took:?}");
    assert!(took < Duration::from_secs(1) + MARGIN, "took {took:?}");
    assert_eq!(arrivals.len(), 1);
}

#[tokio::test]
async fn a_request_timeout_is_trimmed_to_the_deadline() {
    let (server, _) = serve_seq(1, vec![ok().set_delay(Duration::from_secs(3))]).await;

    let start = Instant::now();
    let err = client(exact())
        .get(server.uri())
        .timeout(Duration::from_secs(30))
        .with_extension(Deadline::after(Duration::from_secs(1)))
        .send()
        .await
        .unwrap_err();
    let took = start.elapsed();

    assert!(took >= Duration::from_millis(900), "took {took:?}");
    assert!(took < Duration::from_secs(1) + MARGIN, "took {took:?}");
    assert!(
        matches!(&err, reqwest_middleware::Error::Reqwest(e) if e.is_timeout())
            || our_code(&err) == Some("attempt_timed_out"),
        "{err:?}"
    );
    server.verify().await;
}

#[tokio::test]
async fn the_clients_own_timeout_is_never_widened() {
    let (server, _) = serve_seq(1, vec![ok().set_delay(Duration::from_secs(2))]).await;
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("reqwest client");
    let client = ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(exact()))
        .build();

    let start = Instant::now();
    let err = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_secs(10)))
        .send()
        .await
        .unwrap_err();
    let took = start.elapsed();

    match &err {
        reqwest_middleware::Error::Reqwest(e) => assert!(e.is_timeout(), "{e:?}"),
        other => panic!("expected the client's own timeout, got {other:?}"),
    }
    assert!(took < Duration::from_millis(300) + MARGIN, "took {took:?}");
    server.verify().await;
}

#[tokio::test]
async fn unbounded_deadline_does_not_overflow() {
    let (server, _) = serve_seq(2, vec![too_many("0"), ok()]).await;

    let resp = client(exact())
        .get(server.uri())
        .with_extension(Deadline::after(Duration::MAX))
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}
