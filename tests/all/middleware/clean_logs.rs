//! Nothing a request carries leaves in a log line, an observer event or a
//! metric label: requests with an `Authorization` header, cookies, a query
//! token, user info in the URL and an idempotency key, through every
//! `tracing` event at TRACE (a real subscriber), a `Debug` of every
//! observer event, and every metric's name and labels.

use reqwest_backpressure::observe::Observer;
#[cfg(feature = "tracing")]
use reqwest_backpressure::observe::{GateClosed, GateReopened, Send, Stop, Wait, WaitEnd};

#[cfg(feature = "tracing")]
use super::capture::{Capture, paused_captured};
use super::support::*;

/// Every value the requests carry that must never leave, paths included.
const SECRETS: [&str; 8] = [
    "us3r",
    "pa55w0rd",
    "qu3ry-t0ken",
    "auth-s3cret",
    "c00kie-s3cret",
    "idem-k3y-s3cret",
    "/items",
    "/orders",
];

const BASE: &str = "http://us3r:pa55w0rd@origin.test";

fn assert_clean(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} carries {secret:?}: {text}");
    }
}

/// A `Debug` of every observer event.
#[cfg(feature = "tracing")]
#[derive(Default)]
struct DebugAll(Mutex<Vec<String>>);

#[cfg(feature = "tracing")]
impl DebugAll {
    fn push(&self, line: String) {
        self.0.lock().unwrap().push(line);
    }
}

#[cfg(feature = "tracing")]
impl Observer for DebugAll {
    fn on_wait(&self, e: &Wait<'_>) {
        self.push(format!("{e:?}"));
    }
    fn on_wait_end(&self, e: &WaitEnd<'_>) {
        self.push(format!("{e:?}"));
    }
    fn on_send(&self, e: &Send<'_>) {
        self.push(format!("{e:?}"));
    }
    fn on_stop(&self, e: &Stop<'_>) {
        self.push(format!("{e:?}"));
    }
    fn on_gate_closed(&self, e: &GateClosed<'_>) {
        self.push(format!("{e:?}"));
    }
    fn on_gate_reopened(&self, e: &GateReopened<'_>) {
        self.push(format!("{e:?}"));
    }
}

/// A GET retried once, then answered; a keyed POST pushed back until it
/// stops (`attempt_budget_exhausted`); a request refused by an invalid
/// policy. Every request carries every secret.
async fn secret_requests(observer: impl Observer) {
    let script = |path: &str, i| match (path, i) {
        ("/items", 0) | ("/orders", _) => push_back(429, "1"),
        _ => answer(200),
    };
    let (client, arrivals) = offline_with(
        RetryAfterMiddleware::new(exact().max_attempts(2)).with_observer(observer),
        script,
    );
    let send = |req: reqwest_middleware::RequestBuilder| {
        req.header("authorization", "Bearer auth-s3cret")
            .header("cookie", "session=c00kie-s3cret; theme=dark")
            .send()
    };
    let r = send(client.get(format!("{BASE}/items?token=qu3ry-t0ken")))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = send(
        client
            .post(format!("{BASE}/orders?token=qu3ry-t0ken"))
            .with_extension(IdempotencyKey::new("idem-k3y-s3cret")),
    )
    .await
    .unwrap();
    assert_eq!(stop_code(&r), Some("attempt_budget_exhausted"));
    assert_eq!(arrivals.len(), 4);

    let (refusing, _) = offline_with(RetryAfterMiddleware::new(exact().max_attempts(0)), script);
    let e = send(refusing.get(format!("{BASE}/items?token=qu3ry-t0ken")))
        .await
        .unwrap_err();
    assert_eq!(our_code(&e), Some("invalid_policy"));
}

#[cfg(feature = "tracing")]
#[test]
fn logs_and_observer_events_carry_no_secrets() {
    let capture = Capture::default();
    let observed = Arc::new(DebugAll::default());
    paused_captured(&capture, secret_requests(observed.clone()));

    let events = capture.all();
    assert!(events.len() >= 3, "{events:#?}");
    for e in &events {
        assert_clean("a tracing event", &format!("{e:?}"));
    }
    let lines = observed.0.lock().unwrap().clone();
    assert!(lines.len() >= 10, "{lines:#?}");
    for line in &lines {
        assert_clean("an observer event", line);
    }
}

/// The documented interface (the crate docs' table): each event's level,
/// target, message and field names.
#[cfg(feature = "tracing")]
#[test]
fn tracing_events_are_the_documented_ones() {
    let capture = Capture::default();
    paused_captured(&capture, secret_requests(DebugAll::default()));
    let mut seen: Vec<String> = capture
        .events()
        .iter()
        .filter(|e| e.target.starts_with("reqwest_backpressure"))
        .map(|e| {
            let names: Vec<&str> = e.fields.iter().map(|(k, _)| k.as_str()).collect();
            format!("{} {} {:?} {}", e.level, e.target, e.name, names.join(","))
        })
        .collect();
    seen.dedup();
    let retry = "origin,status,hint,source,retry_after,attempt,decision";
    assert_eq!(
        seen,
        [
            // The GET's pushback, then the POST's, then its stop.
            format!(
                "DEBUG reqwest_backpressure::task \"reqwest-backpressure: retry planned\" {retry},delay_ms,wait_ms"
            ),
            format!(
                "INFO reqwest_backpressure::task \"reqwest-backpressure: not retrying\" {retry},code"
            ),
            "ERROR reqwest_backpressure::middleware \"reqwest-backpressure: invalid policy; every request will be refused\" error".to_owned(),
        ]
    );
}

#[cfg(feature = "metrics")]
#[test]
fn metric_labels_carry_no_secrets() {
    use metrics_util::debugging::DebuggingRecorder;
    use reqwest_backpressure::metrics::MetricsObserver;

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    super::metrics::paused_with(&recorder, secret_requests(MetricsObserver::new()));
    let metrics = super::metrics::snapshot(&snapshotter);
    assert!(metrics.len() >= 4, "{metrics:#?}");
    for key in metrics.keys() {
        assert_clean("a metric", key);
    }
}
