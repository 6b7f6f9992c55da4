//! What every middleware test shares: mounting scripted answers on a
//! wiremock server (recording arrivals on the server's clock), the clients,
//! and reading the `RetryReport` or error a call got back.

pub(super) use std::sync::atomic::{AtomicUsize, Ordering};
pub(super) use std::sync::{Arc, Mutex};
pub(super) use std::time::{Duration, Instant, SystemTime};

pub(super) use http::Extensions;
pub(super) use reqwest::{Request as HttpRequest, Response, ResponseBuilderExt, StatusCode};
pub(super) use reqwest_backpressure::{
    Attempt, Deadline, Fallback, IdempotencyKey, MemoryStore, Policy, RetryAfterMiddleware,
    RetryBudget, RetryReport, Store,
};
pub(super) use reqwest_middleware::{ClientBuilder, ClientWithMiddleware, Middleware, Next};
pub(super) use wiremock::matchers::any;
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

// ------------------------------------------- without a socket (paused clock)

/// What [`Offline`] answers one request with.
#[derive(Clone, Debug)]
pub(super) struct Answer {
    status: u16,
    retry_after: Option<&'static str>,
    /// How long the "server" takes to answer (on tokio's clock).
    delay: Duration,
}

impl Answer {
    /// The answer, `delay` after the request arrived.
    pub(super) fn after(self, delay: Duration) -> Self {
        Answer { delay, ..self }
    }
}

/// A final answer (or a push-back without `Retry-After`) with this status.
pub(super) fn answer(status: u16) -> Answer {
    Answer {
        status,
        retry_after: None,
        delay: Duration::ZERO,
    }
}

/// `status` with `Retry-After: <retry_after>`.
pub(super) fn push_back(status: u16, retry_after: &'static str) -> Answer {
    Answer {
        retry_after: Some(retry_after),
        ..answer(status)
    }
}

/// A terminal middleware placed after ours: it answers the `i`-th request
/// to a path (0-based) with `script(path, i)` and never opens a socket. It
/// records each arrival in its [`Arrivals`] on tokio's clock, so a test on
/// the paused clock (`start_paused`) measures the waits exactly and never
/// sleeps for real. For what only the wire can show (arrival times taken by
/// a real server, headers on the wire, reqwest's own timeouts) the tests use
/// wiremock instead.
pub(super) struct Offline<F> {
    arrivals: Arrivals,
    script: F,
}

#[async_trait::async_trait]
impl<F> Middleware for Offline<F>
where
    F: Fn(&str, usize) -> Answer + Send + Sync + 'static,
{
    async fn handle(
        &self,
        req: HttpRequest,
        _extensions: &mut Extensions,
        _next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let key = req
            .headers()
            .get("idempotency-key")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let i = self.arrivals.push(req.url().path(), key);
        let answer = (self.script)(req.url().path(), i);
        if !answer.delay.is_zero() {
            tokio::time::sleep(answer.delay).await;
        }
        let mut builder = http::Response::builder()
            .status(answer.status)
            .url(req.url().clone());
        if let Some(value) = answer.retry_after {
            builder = builder.header("retry-after", value);
        }
        Ok(Response::from(
            builder.body(Vec::<u8>::new()).expect("a valid response"),
        ))
    }
}

/// The `i`-th answer of `steps` (the last one repeats), on every path.
pub(super) fn seq(steps: Vec<Answer>) -> impl Fn(&str, usize) -> Answer + Send + Sync + 'static {
    assert!(!steps.is_empty());
    move |_, i| steps[i.min(steps.len() - 1)].clone()
}

/// A client with `middleware` whose requests `script` answers without a
/// socket; returns the arrival log too.
pub(super) fn offline_with<S, F>(
    middleware: RetryAfterMiddleware<S>,
    script: F,
) -> (ClientWithMiddleware, Arrivals)
where
    S: Store,
    F: Fn(&str, usize) -> Answer + Send + Sync + 'static,
{
    let arrivals = Arrivals::default();
    let client = ClientBuilder::new(http_client())
        .with(middleware)
        .with(Offline {
            arrivals: arrivals.clone(),
            script,
        })
        .build();
    (client, arrivals)
}

/// The socket-less terminal alone, to end a chain of your own.
#[cfg_attr(not(feature = "reqwest-tracing"), allow(dead_code))]
pub(super) fn offline_terminal<F>(script: F) -> (Offline<F>, Arrivals)
where
    F: Fn(&str, usize) -> Answer + Send + Sync + 'static,
{
    let arrivals = Arrivals::default();
    let terminal = Offline {
        arrivals: arrivals.clone(),
        script,
    };
    (terminal, arrivals)
}

/// [`offline_with`] our middleware with `policy`.
pub(super) fn offline<F>(policy: Policy, script: F) -> (ClientWithMiddleware, Arrivals)
where
    F: Fn(&str, usize) -> Answer + Send + Sync + 'static,
{
    offline_with(RetryAfterMiddleware::new(policy), script)
}

/// The origin the offline tests call (never resolved: nothing is sent).
pub(super) const URL: &str = "http://origin.test/";
