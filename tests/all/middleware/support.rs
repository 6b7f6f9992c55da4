//! What every middleware test shares: mounting scripted answers on a
//! wiremock server (recording arrivals on the server's clock), the clients,
//! and reading the `RetryReport` or error a call got back.

pub(super) use std::sync::atomic::{AtomicUsize, Ordering};
pub(super) use std::sync::{Arc, Mutex};
pub(super) use std::time::{Duration, Instant, SystemTime};

pub(super) use http::Extensions;
pub(super) use reqwest::{Request as HttpRequest, Response, StatusCode};
pub(super) use reqwest_backpressure::{
    Attempt, Deadline, Fallback, IdempotencyKey, MemoryStore, Policy, RetryAfterMiddleware,
    RetryBudget, RetryReport, Store,
};
pub(super) use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
pub(super) use wiremock::matchers::{any, path};
pub(super) use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub(super) use crate::server::Arrivals;

/// Slack added to upper time bounds: the box may be loaded.
pub(super) const MARGIN: Duration = Duration::from_millis(1500);

/// A responder that records each arrival (on the server's clock) and
/// answers the `i`-th request (0-based) with `script(i)`.
pub(super) struct Recorder<F> {
    arrivals: Arrivals,
    hits: AtomicUsize,
    script: F,
}

impl<F> Respond for Recorder<F>
where
    F: Fn(usize) -> ResponseTemplate + Send + Sync,
{
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.arrivals.record(request);
        let i = self.hits.fetch_add(1, Ordering::SeqCst);
        (self.script)(i)
    }
}

/// Mounts `script` on every path of `server`, expecting exactly `expect`
/// requests; returns the arrival log.
pub(super) async fn mount_fn<F>(server: &MockServer, expect: u64, script: F) -> Arrivals
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
pub(super) async fn mount_seq(
    server: &MockServer,
    expect: u64,
    steps: Vec<ResponseTemplate>,
) -> Arrivals {
    assert!(!steps.is_empty());
    mount_fn(server, expect, move |i| {
        steps[i.min(steps.len() - 1)].clone()
    })
    .await
}

/// Like [`mount_seq`], but only on `at` (a path).
pub(super) async fn mount_seq_at(
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

pub(super) fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code)
}

pub(super) fn ok() -> ResponseTemplate {
    status(200)
}

pub(super) fn too_many(retry_after: &str) -> ResponseTemplate {
    status(429).insert_header("Retry-After", retry_after)
}

/// Policy without jitter: exact lower bounds.
pub(super) fn exact() -> Policy {
    Policy::default().jitter(Duration::ZERO)
}

/// A plain reqwest client that never goes through a proxy from the env.
pub(super) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

pub(super) fn client(policy: Policy) -> ClientWithMiddleware {
    client_with(RetryAfterMiddleware::new(policy))
}

pub(super) fn client_with<S: Store>(middleware: RetryAfterMiddleware<S>) -> ClientWithMiddleware {
    ClientBuilder::new(http_client()).with(middleware).build()
}

pub(super) fn report(resp: &Response) -> RetryReport {
    *resp
        .extensions()
        .get::<RetryReport>()
        .expect("every response carries a RetryReport")
}

pub(super) fn stop_code(resp: &Response) -> Option<&'static str> {
    report(resp).stop_reason().map(|r| r.code())
}

/// The crate's own error code, if `err` is one of ours.
pub(super) fn our_code(err: &reqwest_middleware::Error) -> Option<&'static str> {
    match err {
        reqwest_middleware::Error::Middleware(e) => e
            .downcast_ref::<reqwest_backpressure::Error>()
            .map(reqwest_backpressure::Error::code),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// Values of the `Idempotency-Key` header (every field line) of each
/// request the server received.
pub(super) async fn idempotency_headers(server: &MockServer) -> Vec<Vec<String>> {
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
