//! Ours stacked with reqwest-retry (feature `reqwest-retry`): ours first,
//! reqwest-retry inside it with `BackpressureStrategy`. No answer is
//! retried by both, counted on the server's side (and below reqwest-retry):
//! a pushback by ours only, a `500` or a connection error by reqwest-retry
//! only; `RetryReport::attempts` counts our sends only.

use reqwest_backpressure::{BackpressureStrategy, RateLimitHeaders};
use reqwest_retry::policies::ExponentialBackoff;
use reqwest_retry::{Jitter, RetryTransientMiddleware, Retryable, RetryableStrategy};

use super::support::*;

/// reqwest-retry's backoff: `max_retries` resends, `backoff` apart (no
/// jitter), far shorter than any `Retry-After` below.
fn backoff(max_retries: u32, backoff: Duration) -> ExponentialBackoff {
    ExponentialBackoff::builder()
        .retry_bounds(backoff, backoff)
        .jitter(Jitter::None)
        .build_with_max_retries(max_retries)
}

/// Ours (outer) with `policy`, reqwest-retry (inner) with `backoff` and
/// the strategy built from the same policy, then `inner` (a counter of the
/// sends reqwest-retry makes), then the network.
fn stacked<M: Middleware>(
    policy: Policy,
    backoff: ExponentialBackoff,
    inner: M,
) -> ClientWithMiddleware {
    let strategy = BackpressureStrategy::new(&policy);
    ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(policy))
        .with(RetryTransientMiddleware::new_with_policy_and_strategy(
            backoff, strategy,
        ))
        .with(inner)
        .build()
}

/// Counts what reaches the network: each send, and whether it failed to
/// connect.
#[derive(Clone, Default)]
struct Sends(Arc<Mutex<Vec<Result<u16, bool>>>>);

impl Sends {
    fn all(&self) -> Vec<Result<u16, bool>> {
        self.0.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Middleware for Sends {
    async fn handle(
        &self,
        req: HttpRequest,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let result = next.run(req, extensions).await;
        let seen = match &result {
            Ok(r) => Ok(r.status().as_u16()),
            Err(reqwest_middleware::Error::Reqwest(e)) => Err(e.is_connect()),
            Err(_) => Err(false),
        };
        self.0.lock().unwrap().push(seen);
        result
    }
}

#[tokio::test]
async fn pushbacks_are_retried_by_ours_only() {
    let (server, seen) = serve_seq(
        3,
        vec![
            status(503).insert_header("Retry-After", "1"),
            too_many("1"),
            ok(),
        ],
    )
    .await;
    let sends = Sends::default();
    let client = stacked(
        exact(),
        backoff(3, Duration::from_millis(20)),
        sends.clone(),
    );

    let resp = client.get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let r = report(&resp);
    assert_eq!(r.attempts(), 3);
    assert_eq!(r.hint_source().map(|s| s.code()), Some("retry_after"));
    // reqwest-retry made no send of its own: three answers, three sends,
    // each a `Retry-After` after the one before.
    assert_eq!(sends.all(), vec![Ok(503), Ok(429), Ok(200)]);
    let at = seen.all();
    assert_eq!(at.len(), 3);
    for pair in at.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_secs(1), "{at:?}");
    }
    server.verify().await;
}

#[tokio::test]
async fn a_503_without_retry_after_is_left_to_ours_while_it_is_a_policy_status() {
    // Ours retries it through the origin's gate and reqwest-retry leaves it
    // alone: one send per attempt of ours, none of reqwest-retry's.
    let (server, _) = serve_seq(2, vec![status(503), ok()]).await;
    let client = stacked(
        exact(),
        backoff(3, Duration::from_millis(20)),
        Sends::default(),
    );
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;

    // Out of the policy's statuses, it is reqwest-retry's to resend.
    let (server, _) = serve_seq(2, vec![status(503), ok()]).await;
    let policy = exact().statuses([StatusCode::TOO_MANY_REQUESTS]);
    let client = stacked(
        policy,
        backoff(3, Duration::from_millis(20)),
        Sends::default(),
    );
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

#[tokio::test]
async fn a_500_is_retried_by_reqwest_retry_only() {
    let (server, _) = serve_seq(3, vec![status(500), status(500), ok()]).await;
    let sends = Sends::default();
    let client = stacked(
        exact(),
        backoff(3, Duration::from_millis(20)),
        sends.clone(),
    );

    let resp = client.get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let r = report(&resp);
    // Three sends on the wire, one attempt of ours.
    assert_eq!(r.attempts(), 1);
    assert_eq!(r.stop_reason(), None);
    assert_eq!(sends.all(), vec![Ok(500), Ok(500), Ok(200)]);
    server.verify().await;

    // One that stays: reqwest-retry's resends, then ours returns it as it
    // is (a 500 is no pushback).
    let (server, _) = serve_seq(3, vec![status(500)]).await;
    let client = stacked(
        exact(),
        backoff(2, Duration::from_millis(20)),
        Sends::default(),
    );
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 500);
    let r = report(&resp);
    assert_eq!((r.attempts(), r.stop_reason()), (1, None));
    server.verify().await;
}

#[tokio::test]
async fn a_connection_error_is_retried_by_reqwest_retry_only() {
    // A port bound but not listening refuses connections; it listens (a
    // wiremock server on it) once the first send was refused.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let sends = Sends::default();
    let client = stacked(
        exact(),
        backoff(3, Duration::from_millis(500)),
        sends.clone(),
    );
    let call = tokio::spawn(async move { client.get(format!("http://{addr}/")).send().await });
    let give_up = Instant::now() + Duration::from_secs(5);
    while sends.all().is_empty() {
        assert!(Instant::now() < give_up, "the first send never ended");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(sends.all(), vec![Err(true)], "not refused");
    let listener = socket.listen(64).unwrap().into_std().unwrap();
    let server = MockServer::builder().listener(listener).start().await;
    let seen = mount_seq(&server, 1, vec![ok()]).await;

    let resp = call.await.unwrap().unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    // Resent by reqwest-retry inside our one attempt.
    assert_eq!(report(&resp).attempts(), 1);
    assert_eq!(sends.all(), vec![Err(true), Ok(200)]);
    assert_eq!(seen.len(), 1);
    server.verify().await;
}

#[tokio::test]
async fn a_refused_connection_reqwest_retry_gives_up_on_is_passed_through() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let sends = Sends::default();
    let client = stacked(
        exact(),
        backoff(2, Duration::from_millis(10)),
        sends.clone(),
    );

    let err = client
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap_err();

    // reqwest-retry's error, not ours: ours never retries a transport error.
    assert_eq!(our_code(&err), None);
    assert_eq!(sends.all(), vec![Err(true); 3]);
    drop(socket);
}

fn answer_with(code: u16) -> reqwest_middleware::Result<Response> {
    Ok(Response::from(
        http::Response::builder()
            .status(code)
            .body(Vec::<u8>::new())
            .unwrap(),
    ))
}

#[test]
fn the_strategy_follows_the_policys_statuses() {
    let transient = |s: &BackpressureStrategy, code| {
        matches!(s.handle(&answer_with(code)), Some(Retryable::Transient))
    };
    let fatal = |s: &BackpressureStrategy, code| {
        matches!(s.handle(&answer_with(code)), Some(Retryable::Fatal))
    };
    let default = BackpressureStrategy::new(&Policy::default());
    for code in [500, 502, 504, 599] {
        assert!(transient(&default, code), "{code}");
    }
    for code in [429, 503, 400, 403, 404, 408] {
        assert!(fatal(&default, code), "{code}");
    }
    for code in [200, 204, 301, 304] {
        assert!(default.handle(&answer_with(code)).is_none(), "{code}");
    }
    // A status the policy retries, or its rate-limit headers declare.
    let custom = BackpressureStrategy::new(
        &Policy::default()
            .statuses([
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::INTERNAL_SERVER_ERROR,
            ])
            .rate_limit_headers(
                RateLimitHeaders::github().pushback_status(StatusCode::BAD_GATEWAY),
            ),
    );
    for code in [500, 502] {
        assert!(fatal(&custom, code), "{code}");
    }
    assert!(transient(&custom, 503));
    assert!(!custom.is_transient_status(StatusCode::TOO_MANY_REQUESTS));
    assert!(custom.is_transient_status(StatusCode::GATEWAY_TIMEOUT));
    // An error of a middleware after it is no connection error.
    let err: reqwest_middleware::Result<Response> = Err(reqwest_middleware::Error::middleware(
        std::io::Error::other("x"),
    ));
    assert!(matches!(default.handle(&err), Some(Retryable::Fatal)));
}
