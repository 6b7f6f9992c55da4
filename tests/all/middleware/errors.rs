//! Errors and what later middleware sees: the `Attempt` extension, refusals
//! without sending, transport errors passed through.

use super::support::*;

/// Placed after ours: records the `Attempt` each send carries.
struct AttemptRecorder(Arc<Mutex<Vec<Attempt>>>);

#[async_trait::async_trait]
impl Middleware for AttemptRecorder {
    async fn handle(
        &self,
        req: HttpRequest,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let attempt = *extensions
            .get::<Attempt>()
            .expect("every attempt carries an Attempt");
        self.0.lock().unwrap().push(attempt);
        next.run(req, extensions).await
    }
}

/// Our middleware with `exact()`, then an [`AttemptRecorder`]; returns what
/// it records.
fn client_recording_attempts() -> (ClientWithMiddleware, Arc<Mutex<Vec<Attempt>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(exact()))
        .with(AttemptRecorder(seen.clone()))
        .build();
    (client, seen)
}

#[tokio::test]
async fn each_attempt_carries_its_number_for_later_middleware() {
    let (server, _) = serve_seq(2, vec![too_many("0"), ok()]).await;
    let (client, seen) = client_recording_attempts();

    let resp = client.get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter().map(Attempt::number).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        seen.iter().map(Attempt::resend_count).collect::<Vec<_>>(),
        vec![0, 1]
    );
    server.verify().await;
}

#[tokio::test]
async fn invalid_policy_refuses_every_request_without_sending() {
    let (server, _) = serve_seq(0, vec![ok()]).await;
    let client = client(Policy::default().max_attempts(0));

    let get = client.get(server.uri()).send().await.unwrap_err();
    let post = client
        .post(server.uri())
        .with_extension(IdempotencyKey::new("k"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(our_code(&get), Some("invalid_policy"), "{get:?}");
    assert_eq!(our_code(&post), Some("invalid_policy"), "{post:?}");
    server.verify().await;
}

#[tokio::test]
async fn key_that_is_not_a_header_value_is_refused_without_sending() {
    let (server, _) = serve_seq(0, vec![ok()]).await;

    let err = client(exact())
        .post(server.uri())
        .with_extension(IdempotencyKey::new("line\nbreak"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(our_code(&err), Some("invalid_idempotency_key"), "{err:?}");
    server.verify().await;
}

#[test]
fn error_is_send_sync_static() {
    fn assert_error<E: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<reqwest_backpressure::Error>();
}

#[tokio::test]
async fn transport_error_is_returned_as_is_and_not_retried() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };

    let (client, seen) = client_recording_attempts();

    let start = Instant::now();
    let err = client
        .get(format!("http://127.0.0.1:{port}/"))
        .send()
        .await
        .unwrap_err();

    match &err {
        reqwest_middleware::Error::Reqwest(e) => assert!(e.is_connect(), "{e:?}"),
        other => panic!("expected a reqwest connect error, got {other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "sent once, never retried");
}
