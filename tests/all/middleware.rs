//! The middleware over real HTTP on loopback (wiremock).
//!
//! Every assertion is about what the *server* saw (request counts, arrival
//! times taken on the server's thread, headers) or about the `RetryReport` /
//! error the caller got back. Timing uses real time: lower bounds are exact
//! (never earlier than the server allowed), upper bounds are loose.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http::Extensions;
use reqwest::{Request as HttpRequest, Response, StatusCode};
use reqwest_backpressure::{
    Attempt, Deadline, Fallback, IdempotencyKey, MemoryStore, Policy, RetryAfterMiddleware,
    RetryBudget, RetryReport, Store,
};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
use wiremock::matchers::{any, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------- helpers

/// Slack added to upper time bounds: the box may be loaded.
const MARGIN: Duration = Duration::from_millis(1500);

/// Server-side arrival times, in order.
#[derive(Clone, Default)]
struct Arrivals(Arc<Mutex<Vec<Instant>>>);

impl Arrivals {
    fn all(&self) -> Vec<Instant> {
        self.0.lock().unwrap().clone()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Time between the first and the second arrival.
    fn first_gap(&self) -> Duration {
        let a = self.all();
        assert!(
            a.len() >= 2,
            "expected at least 2 arrivals, got {}",
            a.len()
        );
        a[1] - a[0]
    }

    /// Waits (polling) until the server has seen `n` requests.
    async fn wait_for(&self, n: usize) {
        let give_up = Instant::now() + Duration::from_secs(5);
        while self.len() < n {
            assert!(Instant::now() < give_up, "server never saw {n} requests");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// A responder that records each arrival (on the server's clock) and
/// answers the `i`-th request (0-based) with `script(i)`.
struct Recorder<F> {
    arrivals: Arrivals,
    hits: AtomicUsize,
    script: F,
}

impl<F> Respond for Recorder<F>
where
    F: Fn(usize) -> ResponseTemplate + Send + Sync,
{
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        self.arrivals.0.lock().unwrap().push(Instant::now());
        let i = self.hits.fetch_add(1, Ordering::SeqCst);
        (self.script)(i)
    }
}

/// Mounts `script` on every path of `server`, expecting exactly `expect`
/// requests; returns the arrival log.
async fn mount_fn<F>(server: &MockServer, expect: u64, script: F) -> Arrivals
where
    F: Fn(usize) -> ResponseTemplate + Send + Sync + 'static,
{
    let arrivals = Arrivals::default();
    Mock::given(any())
        .respond_with(Recorder {
            arrivals: arrivals.clone(),
            hits: AtomicUsize::new(0),
            script,
        })
        .expect(expect)
        .mount(server)
        .await;
    arrivals
}

/// Mounts a fixed sequence of responses (the last one repeats).
async fn mount_seq(server: &MockServer, expect: u64, steps: Vec<ResponseTemplate>) -> Arrivals {
    assert!(!steps.is_empty());
    mount_fn(server, expect, move |i| {
        steps[i.min(steps.len() - 1)].clone()
    })
    .await
}

/// Like [`mount_seq`], but only on `at` (a path).
async fn mount_seq_at(
    server: &MockServer,
    at: &str,
    expect: u64,
    steps: Vec<ResponseTemplate>,
) -> Arrivals {
    let arrivals = Arrivals::default();
    Mock::given(path(at))
        .respond_with(Recorder {
            arrivals: arrivals.clone(),
            hits: AtomicUsize::new(0),
            script: move |i: usize| steps[i.min(steps.len() - 1)].clone(),
        })
        .expect(expect)
        .mount(server)
        .await;
    arrivals
}

fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code)
}

fn ok() -> ResponseTemplate {
    status(200)
}

fn too_many(retry_after: &str) -> ResponseTemplate {
    status(429).insert_header("Retry-After", retry_after)
}

/// Policy without jitter: exact lower bounds.
fn exact() -> Policy {
    Policy::default().jitter(Duration::ZERO)
}

/// A plain reqwest client that never goes through a proxy from the env.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

fn client(policy: Policy) -> ClientWithMiddleware {
    client_with(RetryAfterMiddleware::new(policy))
}

fn client_with<S: Store>(middleware: RetryAfterMiddleware<S>) -> ClientWithMiddleware {
    ClientBuilder::new(http_client()).with(middleware).build()
}

fn report(resp: &Response) -> RetryReport {
    *resp
        .extensions()
        .get::<RetryReport>()
        .expect("every response carries a RetryReport")
}

fn stop_code(resp: &Response) -> Option<&'static str> {
    report(resp).stop_reason().map(|r| r.code())
}

/// The crate's own error code, if `err` is one of ours.
fn our_code(err: &reqwest_middleware::Error) -> Option<&'static str> {
    match err {
        reqwest_middleware::Error::Middleware(e) => e
            .downcast_ref::<reqwest_backpressure::Error>()
            .map(reqwest_backpressure::Error::code),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// Values of the `Idempotency-Key` header (every field line) of each
/// request the server received.
async fn idempotency_headers(server: &MockServer) -> Vec<Vec<String>> {
    server
        .received_requests()
        .await
        .expect("request recording is on")
        .iter()
        .map(|r| {
            r.headers
                .get_all("idempotency-key")
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

// ------------------------------------------------ 1. the basic retry

#[tokio::test]
async fn retries_429_no_earlier_than_retry_after_seconds() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![too_many("1"), ok()]).await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    assert!(
        gap < Duration::from_secs(1) + MARGIN,
        "retried after {gap:?}"
    );
    let r = report(&resp);
    assert_eq!(r.attempts(), 2);
    assert_eq!(r.stop_reason(), None);
    assert!(r.waited() >= Duration::from_secs(1), "{:?}", r.waited());
    server.verify().await;
}

#[tokio::test]
async fn first_try_success_carries_a_report() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![ok()]).await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

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
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![ok()]).await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(report(&resp).waited(), Duration::ZERO);
    server.verify().await;
}

#[tokio::test]
async fn default_jitter_never_retries_before_the_servers_time() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![too_many("1"), ok()]).await;

    let resp = client(Policy::default())
        .get(server.uri())
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    // default jitter is at most 250 ms
    assert!(
        gap < Duration::from_millis(1250) + MARGIN,
        "retried after {gap:?}"
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

// ------------------------------------------------ 2. HTTP-date

#[tokio::test]
async fn http_date_is_measured_from_the_date_header() {
    let server = MockServer::start().await;
    let arrivals = mount_fn(&server, 2, |i| {
        if i == 0 {
            let now = SystemTime::now();
            status(429)
                .insert_header("Date", httpdate::fmt_http_date(now).as_str())
                .insert_header(
                    "Retry-After",
                    httpdate::fmt_http_date(now + Duration::from_secs(2)).as_str(),
                )
        } else {
            ok()
        }
    })
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_secs(2), "retried after {gap:?}");
    assert!(
        gap < Duration::from_secs(2) + MARGIN,
        "retried after {gap:?}"
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn http_date_with_skewed_server_clock_waits_the_servers_delta() {
    let server = MockServer::start().await;
    // The server's clock is an hour behind ours: its Retry-After date is
    // an hour in *our* past, but one second after its own Date.
    let arrivals = mount_fn(&server, 2, |i| {
        if i == 0 {
            let server_now = SystemTime::now() - Duration::from_secs(3600);
            status(429)
                .insert_header("Date", httpdate::fmt_http_date(server_now).as_str())
                .insert_header(
                    "Retry-After",
                    httpdate::fmt_http_date(server_now + Duration::from_secs(1)).as_str(),
                )
        } else {
            ok()
        }
    })
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(
        gap >= Duration::from_secs(1),
        "retried after {gap:?} (not 0)"
    );
    assert!(
        gap < Duration::from_secs(1) + MARGIN,
        "retried after {gap:?}"
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

// ------------------------------------------------ 3. statuses and missing Retry-After

#[tokio::test]
async fn retries_503_with_retry_after() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(
        &server,
        2,
        vec![status(503).insert_header("Retry-After", "1"), ok()],
    )
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert!(arrivals.first_gap() >= Duration::from_secs(1));
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn does_not_retry_503_without_retry_after() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![status(503), ok()]).await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(stop_code(&resp), Some("missing_retry_after"));
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

#[tokio::test]
async fn retries_429_without_retry_after_after_the_fallback_delay() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![status(429), ok()]).await;

    let policy = exact().missing_retry_after(Fallback::Delay(Duration::from_secs(1)));
    let resp = client(policy).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    assert!(
        gap < Duration::from_secs(1) + MARGIN,
        "retried after {gap:?}"
    );
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn fallback_stop_does_not_retry_429_without_retry_after() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![status(429), ok()]).await;

    let policy = exact().missing_retry_after(Fallback::Stop);
    let resp = client(policy).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("missing_retry_after"));
    server.verify().await;
}

#[tokio::test]
async fn a_status_not_configured_passes_through() {
    let server = MockServer::start().await;
    mount_seq(
        &server,
        1,
        vec![status(503).insert_header("Retry-After", "0"), ok()],
    )
    .await;

    let policy = exact().statuses([StatusCode::TOO_MANY_REQUESTS]);
    let resp = client(policy).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    let r = report(&resp);
    assert_eq!(r.stop_reason(), None);
    assert_eq!(r.attempts(), 1);
    server.verify().await;
}

// ------------------------------------------------ 4. non-idempotent methods and keys

#[tokio::test]
async fn post_without_key_is_not_retried() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("0"), ok()]).await;

    let resp = client(exact()).post(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("retry_not_authorized_by_contract"));
    assert_eq!(
        idempotency_headers(&server).await,
        vec![Vec::<String>::new()]
    );
    server.verify().await;
}

#[tokio::test]
async fn post_with_key_is_retried_and_every_attempt_carries_the_header() {
    let server = MockServer::start().await;
    mount_seq(&server, 3, vec![too_many("0"), too_many("0"), ok()]).await;

    let resp = client(exact())
        .post(server.uri())
        .body("order")
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 3);
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["\"order-42\"".to_owned()]; 3]
    );
    server.verify().await;
}

#[tokio::test]
async fn post_with_caller_set_header_is_retried_with_the_header_unchanged() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("0"), ok()]).await;

    let resp = client(exact())
        .post(server.uri())
        .header("Idempotency-Key", "caller-7")
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["caller-7".to_owned()]; 2]
    );
    server.verify().await;
}

#[tokio::test]
async fn extension_does_not_overwrite_a_caller_set_header() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("0"), ok()]).await;

    let resp = client(exact())
        .post(server.uri())
        .header("Idempotency-Key", "from-header")
        .with_extension(IdempotencyKey::new("from-extension"))
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["from-header".to_owned()]; 2]
    );
    server.verify().await;
}

// ------------------------------------------------ 5. attempt budget

#[tokio::test]
async fn persistent_429_stops_after_max_attempts() {
    let server = MockServer::start().await;
    mount_seq(&server, 3, vec![too_many("0")]).await;

    let resp = client(exact().max_attempts(3))
        .get(server.uri())
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("attempt_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 3);
    server.verify().await;
}

#[tokio::test]
async fn max_attempts_one_sends_once() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("0")]).await;

    let resp = client(exact().max_attempts(1))
        .get(server.uri())
        .send()
        .await
        .unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("attempt_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

// ------------------------------------------------ 6. wait budget and invalid values

#[tokio::test]
async fn retry_after_over_max_wait_stops_and_keeps_the_servers_time() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("3600"), ok()]).await;

    let before = SystemTime::now();
    let resp = client(exact()).get(server.uri()).send().await.unwrap();
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

#[tokio::test]
async fn total_wait_over_max_total_wait_stops() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![too_many("1")]).await;

    // (the default 2 s fallback delay would exceed max_wait: invalid policy)
    let policy = exact()
        .max_wait(Duration::from_secs(1))
        .max_total_wait(Duration::from_millis(1500))
        .missing_retry_after(Fallback::Stop);
    let resp = client(policy).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 2);
    assert!(arrivals.first_gap() >= Duration::from_secs(1));
    server.verify().await;
}

#[tokio::test]
async fn thirty_digit_retry_after_is_an_enormous_delay_not_a_panic() {
    let server = MockServer::start().await;
    mount_seq(
        &server,
        1,
        vec![too_many("123456789012345678901234567890"), ok()],
    )
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));
    assert_eq!(report(&resp).attempts(), 1);
    server.verify().await;
}

#[tokio::test]
async fn invalid_retry_after_is_never_guessed_at() {
    for value in ["1.5", "soon", "-1", "1e3"] {
        let server = MockServer::start().await;
        mount_seq(&server, 1, vec![too_many(value), ok()]).await;

        let resp = client(exact()).get(server.uri()).send().await.unwrap();

        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{value}");
        assert_eq!(stop_code(&resp), Some("invalid_retry_after"), "{value}");
        assert_eq!(report(&resp).retry_at(), None, "{value}");
        server.verify().await;
    }
}

#[tokio::test]
async fn two_retry_after_field_lines_are_invalid() {
    let server = MockServer::start().await;
    mount_seq(
        &server,
        1,
        vec![
            status(429)
                .append_header("Retry-After", "1")
                .append_header("Retry-After", "2"),
            ok(),
        ],
    )
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("invalid_retry_after"));
    server.verify().await;
}

#[tokio::test]
async fn http_date_in_the_past_is_retried_at_once() {
    let server = MockServer::start().await;
    let arrivals = mount_fn(&server, 2, |i| {
        if i == 0 {
            let now = SystemTime::now();
            status(429)
                .insert_header("Date", httpdate::fmt_http_date(now).as_str())
                .insert_header(
                    "Retry-After",
                    httpdate::fmt_http_date(now - Duration::from_secs(60)).as_str(),
                )
        } else {
            ok()
        }
    })
    .await;

    let resp = client(exact()).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    let gap = arrivals.first_gap();
    assert!(gap < Duration::from_millis(500), "retried after {gap:?}");
    server.verify().await;
}

// ------------------------------------------------ 7. deadline

#[tokio::test]
async fn retry_after_beyond_the_deadline_stops_at_once() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("2"), ok()]).await;

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
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("2"), ok()]).await;

    let start = Instant::now();
    let policy = exact().default_deadline(Duration::from_millis(1500));
    let resp = client(policy).get(server.uri()).send().await.unwrap();
    let took = start.elapsed();

    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(stop_code(&resp), Some("deadline_exhausted"));
    assert!(took < Duration::from_secs(1), "took {took:?}");
    server.verify().await;
}

#[tokio::test]
async fn deadline_in_the_past_sends_nothing() {
    let server = MockServer::start().await;
    mount_seq(&server, 0, vec![ok()]).await;

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

#[tokio::test]
async fn attempt_is_bounded_by_the_deadline_and_not_retried() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![ok().set_delay(Duration::from_secs(3))]).await;

    let start = Instant::now();
    let err = client(exact())
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_secs(1)))
        .send()
        .await
        .unwrap_err();
    let took = start.elapsed();

    // The outcome is unknown: our typed error, never a retry.
    assert_eq!(our_code(&err), Some("attempt_timed_out"), "{err:?}");
    assert!(took >= Duration::from_millis(900), "took {took:?}");
    assert!(took < Duration::from_secs(1) + MARGIN, "took {took:?}");
    server.verify().await;
}

#[tokio::test]
async fn a_request_timeout_is_trimmed_to_the_deadline() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![ok().set_delay(Duration::from_secs(3))]).await;

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
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![ok().set_delay(Duration::from_secs(2))]).await;
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

// ------------------------------------------------ 8. streaming body

#[tokio::test]
async fn streaming_body_is_sent_once_and_not_replayed() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("0"), ok()]).await;

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

// ------------------------------------------------ 9. one active task per key

#[tokio::test]
async fn second_send_with_an_active_key_fails_without_sending() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![too_many("1"), ok()]).await;
    let client = client(exact());

    let first = tokio::spawn({
        let client = client.clone();
        let url = server.uri();
        async move {
            client
                .post(url)
                .with_extension(IdempotencyKey::new("order-42"))
                .send()
                .await
        }
    });
    arrivals.wait_for(1).await;

    let start = Instant::now();
    let err = client
        .post(server.uri())
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(our_code(&err), Some("already_active"), "{err:?}");
    assert!(start.elapsed() < Duration::from_millis(500));
    assert!(
        !first.is_finished(),
        "the first task should still be waiting"
    );

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    // Only the first task's two attempts reached the server.
    assert_eq!(
        idempotency_headers(&server).await,
        vec![vec!["\"order-42\"".to_owned()]; 2]
    );
    server.verify().await;
}

#[tokio::test]
async fn a_different_key_is_not_refused_and_waits_for_the_origin_gate() {
    let server = MockServer::start().await;
    let waiting = mount_seq_at(&server, "/a", 2, vec![too_many("1"), ok()]).await;
    let other = mount_seq_at(&server, "/b", 1, vec![ok()]).await;
    let client = client(exact());

    let first = tokio::spawn({
        let client = client.clone();
        let url = format!("{}/a", server.uri());
        async move {
            client
                .post(url)
                .with_extension(IdempotencyKey::new("order-42"))
                .send()
                .await
        }
    });
    waiting.wait_for(1).await;

    let resp = client
        .post(format!("{}/b", server.uri()))
        .with_extension(IdempotencyKey::new("order-43"))
        .send()
        .await
        .expect("a different key is not already_active");
    assert_eq!(resp.status(), StatusCode::OK);
    // Waiting at the gate spends no attempt.
    assert_eq!(report(&resp).attempts(), 1);
    // Same origin: held until the server's time, never earlier.
    let gap = other.all()[0] - waiting.all()[0];
    assert!(gap >= Duration::from_secs(1), "sent {gap:?} after the 429");
    assert!(
        gap < Duration::from_secs(2) + MARGIN,
        "sent {gap:?} after the 429"
    );

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 2);
    server.verify().await;
}

#[tokio::test]
async fn another_origin_is_not_blocked_even_with_the_same_key() {
    let busy = MockServer::start().await;
    let free = MockServer::start().await;
    let waiting = mount_seq(&busy, 2, vec![too_many("1"), ok()]).await;
    mount_seq(&free, 1, vec![ok()]).await;
    let client = client(exact());

    let first = tokio::spawn({
        let client = client.clone();
        let url = busy.uri();
        async move {
            client
                .post(url)
                .with_extension(IdempotencyKey::new("order-42"))
                .send()
                .await
        }
    });
    waiting.wait_for(1).await;

    let start = Instant::now();
    let resp = client
        .post(free.uri())
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .expect("keys are per origin");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 1);
    assert!(
        start.elapsed() < Duration::from_millis(500),
        "{:?}",
        start.elapsed()
    );
    assert!(
        !first.is_finished(),
        "the first task should still be waiting"
    );

    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    busy.verify().await;
    free.verify().await;
}

#[tokio::test]
async fn store_holds_the_key_only_while_the_task_runs() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![too_many("1"), ok()]).await;
    let store = MemoryStore::new();
    let client = client_with(RetryAfterMiddleware::with_store(exact(), store.clone()));
    assert_eq!(store.len(), 0);

    let first = tokio::spawn({
        let client = client.clone();
        let url = server.uri();
        async move {
            client
                .post(url)
                .with_extension(IdempotencyKey::new("order-42"))
                .send()
                .await
        }
    });
    arrivals.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(store.len(), 1, "one entry while waiting on Retry-After");

    let resp = first.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(store.len(), 0, "no entry after the task ended");
    server.verify().await;
}

// ------------------------------------------------ 10. cancellation

#[tokio::test]
async fn dropping_the_future_mid_wait_frees_the_key() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 2, vec![too_many("1"), ok()]).await;
    let store = MemoryStore::new();
    let client = client_with(RetryAfterMiddleware::with_store(exact(), store.clone()));

    let send = client
        .post(server.uri())
        .with_extension(IdempotencyKey::new("order-42"))
        .send();
    let outcome = tokio::time::timeout(Duration::from_millis(400), send).await;
    assert!(outcome.is_err(), "the task should have been waiting");
    assert_eq!(arrivals.len(), 1, "cancelled mid-wait, after one attempt");
    assert_eq!(store.len(), 0, "the lease is freed on drop");

    let resp = client
        .post(server.uri())
        .with_extension(IdempotencyKey::new("order-42"))
        .send()
        .await
        .expect("not already_active");
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 1);
    // The cancelled task's Retry-After still holds its origin.
    let gap = arrivals.first_gap();
    assert!(gap >= Duration::from_secs(1), "sent {gap:?} after the 429");
    assert!(
        gap < Duration::from_secs(1) + MARGIN,
        "sent {gap:?} after the 429"
    );
    assert_eq!(store.len(), 0);
    server.verify().await;
}

// ------------------------------------------------ origin gate, pacing, retry budget

#[tokio::test]
async fn gate_past_the_deadline_refuses_a_new_task_without_sending() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("2"), ok()]).await;
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
    assert!(
        retry_at > before + Duration::from_secs(1) && retry_at <= before + Duration::from_secs(2),
        "{retry_at:?} vs {before:?}"
    );
    server.verify().await;
}

#[tokio::test]
async fn queue_behind_a_reopened_gate_is_released_after_a_lone_probe() {
    let server = MockServer::start().await;
    let arrivals = mount_seq(&server, 3, vec![too_many("1"), ok()]).await;
    let client = client(exact());

    let first = tokio::spawn({
        let client = client.clone();
        let url = server.uri();
        async move { client.get(url).send().await }
    });
    arrivals.wait_for(1).await;
    // Queued at the closed gate.
    let second = client.get(server.uri()).send().await.unwrap();
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
    server.verify().await;
}

#[tokio::test]
async fn empty_retry_budget_stops_fallback_retries() {
    let server = MockServer::start().await;
    mount_seq(&server, 3, vec![status(429), ok(), status(429), ok()]).await;
    // Capacity of one retry, refilled only by 1% per first send.
    let policy = exact()
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
async fn retries_at_the_servers_time_do_not_spend_the_budget() {
    let server = MockServer::start().await;
    mount_seq(&server, 3, vec![too_many("0"), too_many("0"), ok()]).await;
    let policy = exact().retry_budget(RetryBudget::new(0.01, 0.0));

    let resp = client(policy).get(server.uri()).send().await.unwrap();

    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(report(&resp).attempts(), 3);
    server.verify().await;
}

// ------------------------------------------------ 11. Attempt extension

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

#[tokio::test]
async fn each_attempt_carries_its_number_for_later_middleware() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("0"), ok()]).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(exact()))
        .with(AttemptRecorder(seen.clone()))
        .build();

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

// ------------------------------------------------ 12–14. errors

#[tokio::test]
async fn invalid_policy_refuses_every_request_without_sending() {
    let server = MockServer::start().await;
    mount_seq(&server, 0, vec![ok()]).await;
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
    let server = MockServer::start().await;
    mount_seq(&server, 0, vec![ok()]).await;

    let err = client(exact())
        .post(server.uri())
        .with_extension(IdempotencyKey::new("line\nbreak"))
        .send()
        .await
        .unwrap_err();

    assert_eq!(our_code(&err), Some("invalid_idempotency_key"), "{err:?}");
    server.verify().await;
}

#[tokio::test]
async fn unbounded_deadline_does_not_overflow() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("0"), ok()]).await;

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

    let seen = Arc::new(Mutex::new(Vec::new()));
    let client = ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(exact()))
        .with(AttemptRecorder(seen.clone()))
        .build();

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

#[tokio::test]
async fn a_streaming_body_on_its_last_attempt_still_says_not_replayable() {
    let server = MockServer::start().await;
    mount_seq(&server, 1, vec![too_many("0")]).await;
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

#[tokio::test]
async fn time_at_the_gate_counts_toward_max_total_wait() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("2")]).await;
    let policy = exact()
        .max_wait(Duration::from_secs(2))
        .max_total_wait(Duration::from_secs(2))
        .missing_retry_after(Fallback::Stop);
    let client = client(policy);
    // A is told to come back in 2 s, and stops on its own only later.
    let a = tokio::spawn({
        let client = client.clone();
        let url = server.uri();
        async move { client.get(url).send().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // B waits at the gate (~1.8 s of its 2 s budget), is then told 2 s
    // itself: that would exceed max_total_wait.
    let b = client.get(server.uri()).send().await.unwrap();
    assert_eq!(stop_code(&b), Some("wait_budget_exhausted"));
    assert!(report(&b).waited() >= Duration::from_millis(1500));
    assert_eq!(report(&b).attempts(), 1);
    a.abort();
}

#[tokio::test]
async fn an_absurd_retry_after_closes_the_origin_for_max_wait_only() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("3600"), ok()]).await;
    let client = client(
        exact()
            .max_wait(Duration::from_secs(1))
            .max_total_wait(Duration::from_secs(2)),
    );
    let a = client.get(server.uri()).send().await.unwrap();
    assert_eq!(stop_code(&a), Some("wait_budget_exhausted"));
    // The gate holds the origin for max_wait, not an hour: B waits, then
    // sends (a probe) and gets through.
    let start = Instant::now();
    let b = client.get(server.uri()).send().await.unwrap();
    assert_eq!(b.status(), StatusCode::OK);
    assert_eq!(report(&b).attempts(), 1);
    assert!(
        start.elapsed() >= Duration::from_millis(800),
        "{:?}",
        start.elapsed()
    );
    assert!(start.elapsed() < Duration::from_secs(1) + MARGIN);
    server.verify().await;
}

#[tokio::test]
async fn debug_output_never_shows_an_idempotency_key() {
    let server = MockServer::start().await;
    mount_seq(&server, 2, vec![too_many("1"), ok()]).await;
    let store = MemoryStore::new();
    let client = client_with(RetryAfterMiddleware::with_store(exact(), store.clone()));
    let waiting = tokio::spawn({
        let client = client.clone();
        let url = server.uri();
        async move {
            client
                .post(url)
                .with_extension(IdempotencyKey::new("sk_live_SECRET_42"))
                .send()
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(store.len(), 1);
    let shown = format!(
        "{store:?} {:?}",
        RetryAfterMiddleware::with_store(exact(), store.clone())
    );
    assert!(!shown.contains("SECRET"), "{shown}");
    assert!(!format!("{:?}", IdempotencyKey::new("sk_live_SECRET_42")).contains("SECRET"));
    assert_eq!(waiting.await.unwrap().unwrap().status(), StatusCode::OK);
}
