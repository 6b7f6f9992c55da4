//! The limits: attempts, the wait per answer and in total, the retry budget;
//! invalid or absurd `Retry-After` values.

use super::support::*;

#[tokio::test]
async fn persistent_429_stops_after_max_attempts() {
    let (server, _) = serve_seq(3, vec![too_many("0")]).await;

    let resp = get_once(&server, exact().max_attempts(3)).await;

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("attempt_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 3);
    server.verify().await;
}

#[tokio::test]
async fn max_attempts_one_sends_once() {
    let (server, _) = serve_seq(1, vec![too_many("0")]).await;

    let resp = get_once(&server, exact().max_attempts(1)).await;

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("attempt_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

#[tokio::test]
async fn retry_after_over_max_wait_stops_and_keeps_the_servers_time() {
    let (server, _) = serve_seq(1, vec![too_many("3600"), ok()]).await;

    let before = SystemTime::now();
    let resp = get_once(&server, exact()).await;
    let after = SystemTime::now();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));
    let hour = Duration::from_secs(3600);
    let retry_at = report(&resp)
        .retry_at()
        .expect("retry_at kept when stopping");
    assert!(
        retry_at >= before + hour && retry_at <= after + hour,
        "retry_at {retry_at:?} not within [{:?}, {:?}]",
        before + hour,
        after + hour
    );
    server.verify().await;
}

#[tokio::test(start_paused = true)]
async fn total_wait_over_max_total_wait_stops() {
    // (the default 2 s fallback delay would exceed max_wait: invalid policy)
    let policy = exact()
        .max_wait(Duration::from_secs(1))
        .max_total_wait(Duration::from_millis(1500))
        .missing_retry_after(Fallback::Stop);
    let (client, arrivals) = offline(policy, seq(vec![push_back(429, "1")]));

    let resp = client.get(URL).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 2);
    assert!(arrivals.first_gap() >= Duration::from_secs(1));
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test]
async fn thirty_digit_retry_after_is_an_enormous_delay_not_a_panic() {
    let (server, _) = serve_seq(1, vec![too_many("123456789012345678901234567890"), ok()]).await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

#[tokio::test]
async fn invalid_retry_after_is_never_guessed_at() {
    for value in ["1.5", "soon", "-1", "1e3"] {
        let (server, _) = serve_seq(1, vec![too_many(value), ok()]).await;

        let resp = get_once(&server, exact()).await;

        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{value}");
        assert_eq!(stop_code(&resp), Some("invalid_retry_after"), "{value}");
        assert_eq!(report(&resp).retry_at(), None, "{value}");
        server.verify().await;
    }
}

#[tokio::test]
async fn two_retry_after_field_lines_are_invalid() {
    let (server, _) = serve_seq(
        1,
        vec![
            status(429)
                .append_header("Retry-After", "1")
                .append_header("Retry-After", "2"),
            ok(),
        ],
    )
    .await;

    let resp = get_once(&server, exact()).await;

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("invalid_retry_after"));
    server.verify().await;
}

#[tokio::test]
async fn empty_retry_budget_stops_fallback_retries() {
    let (server, _) = serve_seq(3, vec![status(429), ok(), status(429), ok()]).await;
    // Capacity of one retry, refilled only by 1% per first send; no gate
    // holds the retries, so each is at a delay of the policy's choosing.
    let policy = exact()
        .origin_gate(false)
        .missing_retry_after(Fallback::Delay(Duration::from_millis(100)))
        .retry_budget(RetryBudget::new(0.01, 0.0));
    let client = client(policy);

    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "the one budgeted retry");
    assert_eq!(report(&resp).attempts(), 2);

    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("retry_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

#[tokio::test]
async fn retries_held_by_the_origins_gate_do_not_spend_the_budget() {
    // The same budget of one retry, the gate on: each bare 429 closes the
    // gate and the retry waits there; none spends a token.
    let (server, _) = serve_seq(
        6,
        vec![status(429), ok(), status(429), ok(), status(429), ok()],
    )
    .await;
    let policy = exact().retry_budget(RetryBudget::new(0.01, 0.0));
    let client = client(policy);
    for _ in 0..3 {
        let resp = client.get(server.uri()).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        let r = report(&resp);
        assert_eq!((r.attempts(), r.stop_reason()), (2, None));
        assert_eq!(r.hint_source().map(|h| h.code()), Some("gate"));
    }
    server.verify().await;
}

#[tokio::test]
async fn retries_at_the_servers_time_do_not_spend_the_budget() {
    let (server, _) = serve_seq(3, vec![too_many("0"), too_many("0"), ok()]).await;
    let policy = exact().retry_budget(RetryBudget::new(0.01, 0.0));

    let resp = get_once(&server, policy).await;

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 3);
    server.verify().await;
}
