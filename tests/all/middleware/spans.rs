//! With `RetryAfterMiddleware` placed before reqwest-tracing's
//! `TracingMiddleware`, every attempt gets its own span; with
//! `ResendCountSpanBackend` each resend's span carries
//! `http.request.resend_count` (reqwest-tracing's default backend does
//! not record it).

use reqwest_backpressure::ResendCountSpanBackend;
use reqwest_tracing::{DefaultSpanBackend, ReqwestOtelSpanBackend, TracingMiddleware};

use super::capture::{Capture, Seen, paused_captured};
use super::support::*;

/// The spans of one GET answered `429`, `429`, `200`.
fn spans_of_three_attempts<B>() -> Vec<Seen>
where
    B: ReqwestOtelSpanBackend + Sync + Send + 'static,
{
    let capture = Capture::default();
    paused_captured(&capture, async {
        let (terminal, arrivals) = offline_terminal(seq(vec![
            push_back(429, "1"),
            push_back(429, "1"),
            answer(200),
        ]));
        let client = ClientBuilder::new(http_client())
            .with(RetryAfterMiddleware::new(exact()))
            .with(TracingMiddleware::<B>::new())
            .with(terminal)
            .build();
        let r = client.get(URL).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(report(&r).attempts(), 3);
        assert_eq!(arrivals.len(), 3);
    });
    capture
        .spans()
        .into_iter()
        .filter(|s| s.name == "HTTP request")
        .collect()
}

#[test]
fn each_attempt_has_its_own_span_with_its_resend_count() {
    let spans = spans_of_three_attempts::<ResendCountSpanBackend>();
    let got: Vec<(Option<&str>, Option<&str>)> = spans
        .iter()
        .map(|s| {
            (
                s.field("http.request.resend_count"),
                s.field("http.response.status_code"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (None, Some("429")),
            (Some("1"), Some("429")),
            (Some("2"), Some("200")),
        ]
    );
    // Otherwise the default span, unchanged.
    for s in &spans {
        assert_eq!(s.field("http.request.method"), Some("GET"));
        assert_eq!(s.field("server.address"), Some("origin.test"));
        assert_eq!(s.field("otel.kind"), Some("client"));
    }
}

#[test]
fn the_default_backend_records_no_resend_count() {
    let spans = spans_of_three_attempts::<DefaultSpanBackend>();
    assert_eq!(spans.len(), 3, "still one span per attempt");
    assert!(
        spans
            .iter()
            .all(|s| s.field("http.request.resend_count").is_none())
    );
}
