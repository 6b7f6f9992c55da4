//! Streaming bodies: sent once, never replayed.

use super::support::*;

#[tokio::test]
async fn streaming_body_is_sent_once_and_not_replayed() {
    let (server, _) = serve_seq(1, vec![too_many("0"), ok()]).await;

    let chunks: Vec<Result<&'static str, std::io::Error>> = vec![Ok("hello, "), Ok("world")];
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(chunks));
    let resp = client(exact())
        .put(server.uri())
        .body(body)
        .send()
        .await
        .expect("sent, not refused up front");

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("body_not_replayable"));
    assert_eq!(report(&resp).attempts(), 1);
    let received = server.received_requests().await.unwrap();
    assert_eq!(received[0].body, b"hello, world");
    server.verify().await;
}

#[tokio::test]
async fn a_streaming_body_on_its_last_attempt_still_says_not_replayable() {
    let (server, _) = serve_seq(1, vec![too_many("0")]).await;
    let chunks: Vec<Result<&'static str, std::io::Error>> = vec![Ok("once")];
    let resp = client(exact().max_attempts(1))
        .put(server.uri())
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(stop_code(&resp), Some("body_not_replayable"));
    server.verify().await;
}
