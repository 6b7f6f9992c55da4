//! reqwest-tracing's span, plus OpenTelemetry's `http.request.resend_count`
//! (feature `reqwest-tracing`).

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_tracing::{
    DefaultSpanBackend, ReqwestOtelSpanBackend, default_span_name, reqwest_otel_span,
};
use tracing::Span;

use crate::extensions::Attempt;

/// The span field this backend adds (OpenTelemetry's HTTP client
/// attribute).
pub const HTTP_REQUEST_RESEND_COUNT: &str = "http.request.resend_count";

/// A [`ReqwestOtelSpanBackend`] for `reqwest_tracing::TracingMiddleware`:
/// [`DefaultSpanBackend`]'s span (same name, fields and end), plus
/// `http.request.resend_count` read from the [`Attempt`] extension,
/// recorded on resends only (OpenTelemetry: set it when the request was
/// retried).
///
/// reqwest-tracing does not record that field itself. Place
/// [`RetryAfterMiddleware`](crate::RetryAfterMiddleware) before the tracing
/// middleware, so that each attempt gets its own span:
///
/// ```
/// use reqwest_backpressure::{Policy, ResendCountSpanBackend, RetryAfterMiddleware};
/// use reqwest_tracing::TracingMiddleware;
///
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryAfterMiddleware::new(Policy::default()))
///     .with(TracingMiddleware::<ResendCountSpanBackend>::new())
///     .build();
/// # drop(client);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ResendCountSpanBackend;

impl ReqwestOtelSpanBackend for ResendCountSpanBackend {
    fn on_request_start(req: &Request, extension: &mut Extensions) -> Span {
        let name = default_span_name(req, extension);
        let span = reqwest_otel_span!(
            name = name,
            req,
            http.request.resend_count = tracing::field::Empty
        );
        if let Some(resends) = extension
            .get::<Attempt>()
            .map(Attempt::resend_count)
            .filter(|&n| n > 0)
        {
            span.record(HTTP_REQUEST_RESEND_COUNT, resends);
        }
        span
    }

    fn on_request_end(
        span: &Span,
        outcome: &reqwest_middleware::Result<Response>,
        extension: &mut Extensions,
    ) {
        DefaultSpanBackend::on_request_end(span, outcome, extension);
    }
}
