//! What the wire tests of every module share: scripted wiremock answers
//! recorded on the server's clock, the clients, and reading the
//! `RetryReport` or error a call got back.

use std::time::Duration;

use reqwest::Response;
use reqwest_backpressure::{Policy, RetryAfterMiddleware, RetryReport, Store};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use wiremock::matchers::any;
use wiremock::{Match, Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::server::Arrivals;

// ------------------------------------------------------------ answers

pub(crate) fn status(code: u16) -> ResponseTemplate {
    ResponseTemplate::new(code)
}

pub(crate) fn ok() -> ResponseTemplate {
    status(200)
}

pub(crate) fn too_many(retry_after: &str) -> ResponseTemplate {
    status(429).insert_header("Retry-After", retry_after)
}

/// A responder that records each arrival (on the server's clock) and
/// answers the `i`-th request to a path (0-based) with `script(path, i)`.
pub(crate) struct Scripted<F> {
    arrivals: Arrivals,
    script: F,
}

impl<F> Respond for Scripted<F>
where
    F: Fn(&str, usize) -> ResponseTemplate + Send + Sync,
{
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let i = self.arrivals.record(request);
        (self.script)(request.url.path(), i)
    }
}

/// A mock (not yet mounted) answering requests that match `matcher` with
/// `script`; returns the arrival log too.
pub(crate) fn recording<M, F>(matcher: M, script: F) -> (Mock, Arrivals)
where
    M: Match + 'static,
    F: Fn(&str, usize) -> ResponseTemplate + Send + Sync + 'static,
{
    let arrivals = Arrivals::default();
    let mock = Mock::given(matcher).respond_with(Scripted {
        arrivals: arrivals.clone(),
        script,
    });
    (mock, arrivals)
}

/// A script answering the `i`-th request with `steps[i]` (the last one
/// repeats).
pub(crate) fn steps(
    steps: Vec<ResponseTemplate>,
) -> impl Fn(&str, usize) -> ResponseTemplate + Send + Sync + 'static {
    assert!(!steps.is_empty());
    move |_, i| steps[i.min(steps.len() - 1)].clone()
}

/// A server answering each path's `i`-th request with `script(path, i)`.
pub(crate) async fn scripted<F>(script: F) -> (MockServer, Arrivals)
where
    F: Fn(&str, usize) -> ResponseTemplate + Send + Sync + 'static,
{
    let server = MockServer::start().await;
    let (mock, arrivals) = recording(any(), script);
    mock.mount(&server).await;
    (server, arrivals)
}

// ------------------------------------------------------------ clients

/// Policy without jitter: exact lower bounds.
pub(crate) fn exact() -> Policy {
    Policy::default().jitter(Duration::ZERO)
}

/// A plain reqwest client that never goes through a proxy from the env.
pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("reqwest client")
}

pub(crate) fn client(policy: Policy) -> ClientWithMiddleware {
    client_with(RetryAfterMiddleware::new(policy))
}

pub(crate) fn client_with<S: Store>(middleware: RetryAfterMiddleware<S>) -> ClientWithMiddleware {
    ClientBuilder::new(http_client()).with(middleware).build()
}

/// `n` GETs of `url` at once, each a task of its own carrying its index
/// as `x-task` (the test server's key for what each task sent).
pub(crate) fn spawn_tasks(
    client: &ClientWithMiddleware,
    url: &str,
    n: u32,
) -> Vec<tokio::task::JoinHandle<reqwest_middleware::Result<Response>>> {
    (0..n)
        .map(|i| {
            let client = client.clone();
            let url = url.to_owned();
            tokio::spawn(async move { client.get(url).header("x-task", i).send().await })
        })
        .collect()
}

// ------------------------------------------------------------ outcomes

pub(crate) fn report(resp: &Response) -> RetryReport {
    *resp
        .extensions()
        .get::<RetryReport>()
        .expect("every response carries a RetryReport")
}

pub(crate) fn stop_code(resp: &Response) -> Option<&'static str> {
    report(resp).stop_reason().map(|r| r.code())
}

/// The crate's own error, if `err` is one of ours.
pub(crate) fn our_error(err: &reqwest_middleware::Error) -> Option<&reqwest_backpressure::Error> {
    match err {
        reqwest_middleware::Error::Middleware(e) => e.downcast_ref(),
        reqwest_middleware::Error::Reqwest(_) => None,
    }
}

/// The crate's own error code, if `err` is one of ours.
pub(crate) fn our_code(err: &reqwest_middleware::Error) -> Option<&'static str> {
    our_error(err).map(reqwest_backpressure::Error::code)
}

// ------------------------------------------------------------ child processes

/// This test binary run again as a child process, running only the
/// `#[ignore]`d test `test` (a worker of a multi-process test) with `env`;
/// its stdout and stderr are read on threads, so a chatty child never
/// blocks. Returns the child and the two readers.
pub(crate) fn spawn_test_child(
    test: &str,
    env: &[(&str, String)],
) -> (
    std::process::Child,
    std::thread::JoinHandle<String>,
    std::thread::JoinHandle<String>,
) {
    use std::io::Read;
    let exe = std::env::current_exe().expect("current test binary");
    let mut child = std::process::Command::new(exe)
        .args(["--exact", test, "--ignored", "--nocapture"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn a child test process");
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = pipe.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(child.stdout.take().expect("stdout")));
    let err = read(Box::new(child.stderr.take().expect("stderr")));
    (child, out, err)
}

// ------------------------------------------------------------ store steps

/// An admission at `origin` through `store`'s primitive (the step the
/// middleware's core runs): `OriginState::admit` in one atomic update.
pub(crate) async fn admit<S: Store>(
    store: &S,
    origin: &str,
    pacing: reqwest_backpressure::origin::PacingConfig,
    latest: Duration,
) -> Result<reqwest_backpressure::origin::Admission, reqwest_backpressure::store::StoreError> {
    store
        .update_origin(origin, move |s, now| s.admit(pacing, now.time(), latest))
        .await
}
