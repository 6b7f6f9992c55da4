//! Metrics through the `metrics` facade (feature `metrics`).
//!
//! Why the facade? A service already runs an exporter (Prometheus,
//! OpenTelemetry, StatsD) behind `metrics`: [`MetricsObserver`] only emits,
//! and whatever recorder is installed exports. With none installed, every
//! call is a no-op.
//!
//! | name | type | labels | meaning |
//! |---|---|---|---|
//! | `reqwest_backpressure.resends` | counter | origin | attempts sent after the first (each carries `http.request.resend_count` ≥ 1) |
//! | `reqwest_backpressure.stops` | counter | origin, `error.type` | tasks that stopped without the answer they wanted; `error.type` is the stable stop or error code |
//! | `reqwest_backpressure.gate.closures` | counter | origin | times an answer closed the origin's gate |
//! | `reqwest_backpressure.wait.duration` | histogram, seconds | origin, `reason` | each wait as planned when it starts; `reason`: `retry_after`, `ratelimit`, `fallback`, `gate`, `pace` |
//! | `reqwest_backpressure.tasks.waiting` | gauge | origin | tasks waiting now (after a pushback, at the gate, or for a paced slot) |
//! | `reqwest_backpressure.store.local` | counter | origin, `operation` | a task's store call run on this process's own state instead of the shared one (a shared store failing open); `operation`: `lease`, `admission`, `record` |
//!
//! "origin" is three labels, OpenTelemetry's HTTP client attributes:
//! `url.scheme`, `server.address` (the host, an IPv6 address without
//! brackets) and `server.port`. No label carries a path, a query string, a
//! header value or an idempotency key, so a label set is bounded by the
//! origins called (times the stop codes, the five wait reasons, or the three
//! store operations).
//! OpenTelemetry has no metric for resends or waits, so these names use
//! this crate's namespace; exporters that do not allow dots (Prometheus)
//! replace them with `_`.
//!
//! ```
//! use reqwest_backpressure::metrics::MetricsObserver;
//! use reqwest_backpressure::observe::{Observer, Stop};
//! use reqwest_backpressure::{Policy, RetryAfterMiddleware};
//!
//! struct Mine;
//! impl Observer for Mine {
//!     fn on_stop(&self, stop: &Stop<'_>) {
//!         eprintln!("{} gave up: {}", stop.origin, stop.code);
//!     }
//! }
//!
//! // Install your exporter's recorder first, then:
//! let middleware = RetryAfterMiddleware::new(Policy::default())
//!     .with_observer((MetricsObserver::new(), Mine));
//! # drop(middleware);
//! ```

use ::metrics::{Label, Unit, counter, describe_counter, describe_gauge, describe_histogram};
use ::metrics::{gauge, histogram};

use crate::observe::{GateClosed, LocalState, Observer, Send, Stop, Wait, WaitEnd};

/// Counter: attempts sent after the first.
pub const RESENDS: &str = "reqwest_backpressure.resends";
/// Counter: tasks stopped, by stop or error code (label `error.type`).
pub const STOPS: &str = "reqwest_backpressure.stops";
/// Counter: gate closures.
pub const GATE_CLOSURES: &str = "reqwest_backpressure.gate.closures";
/// Histogram, seconds: waits as planned when they start (label `reason`).
pub const WAIT_DURATION: &str = "reqwest_backpressure.wait.duration";
/// Gauge: tasks waiting now.
pub const TASKS_WAITING: &str = "reqwest_backpressure.tasks.waiting";
/// Counter: store calls run on this process's own state (label
/// `operation`).
pub const STORE_LOCAL: &str = "reqwest_backpressure.store.local";

/// An [`Observer`] that emits this crate's metrics (see the
/// [module docs](self) for the table). Combine it with your own observer
/// as a tuple: `with_observer((MetricsObserver::new(), mine))`.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct MetricsObserver;

impl MetricsObserver {
    /// The observer; also [`describe`]s the metrics to the recorder
    /// installed now.
    #[must_use]
    pub fn new() -> Self {
        describe();
        MetricsObserver
    }
}

/// Gives the installed recorder each metric's unit and description (an
/// exporter shows them as `# HELP` lines). [`MetricsObserver::new`] calls
/// it; call it again if you install the recorder later.
pub fn describe() {
    describe_counter!(RESENDS, Unit::Count, "Attempts sent after the first.");
    describe_counter!(
        STOPS,
        Unit::Count,
        "Tasks that stopped without the answer they wanted, by stop or error code."
    );
    describe_counter!(
        GATE_CLOSURES,
        Unit::Count,
        "Times an answer closed the origin's gate."
    );
    describe_histogram!(
        WAIT_DURATION,
        Unit::Seconds,
        "Waits, as planned when they start, by reason."
    );
    describe_gauge!(
        TASKS_WAITING,
        Unit::Count,
        "Tasks waiting now (after a pushback, at the gate, or for a paced slot)."
    );
    describe_counter!(
        STORE_LOCAL,
        Unit::Count,
        "Store calls run on this process's own state instead of the shared one, by operation."
    );
}

/// `url.scheme`, `server.address` and `server.port` of an origin
/// (`scheme://host:port`, as the observer's events carry it).
fn origin_labels(origin: &str) -> Vec<Label> {
    let (scheme, authority) = origin.split_once("://").unwrap_or(("", origin));
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, ""));
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    vec![
        Label::new("url.scheme", scheme.to_owned()),
        Label::new("server.address", host.to_owned()),
        Label::new("server.port", port.to_owned()),
    ]
}

impl Observer for MetricsObserver {
    fn on_wait(&self, wait: &Wait<'_>) {
        let labels = origin_labels(wait.origin);
        gauge!(TASKS_WAITING, labels.clone()).increment(1.0);
        let mut labels = labels;
        labels.push(Label::from_static_parts("reason", wait.reason.code()));
        histogram!(WAIT_DURATION, labels).record(wait.duration.as_secs_f64());
    }

    fn on_wait_end(&self, end: &WaitEnd<'_>) {
        gauge!(TASKS_WAITING, origin_labels(end.origin)).decrement(1.0);
    }

    fn on_send(&self, send: &Send<'_>) {
        if send.attempt > 1 {
            counter!(RESENDS, origin_labels(send.origin)).increment(1);
        }
    }

    fn on_stop(&self, stop: &Stop<'_>) {
        let mut labels = origin_labels(stop.origin);
        labels.push(Label::from_static_parts("error.type", stop.code));
        counter!(STOPS, labels).increment(1);
    }

    fn on_gate_closed(&self, gate: &GateClosed<'_>) {
        counter!(GATE_CLOSURES, origin_labels(gate.origin)).increment(1);
    }

    fn on_local_state(&self, local: &LocalState<'_>) {
        let mut labels = origin_labels(local.origin);
        labels.push(Label::from_static_parts("operation", local.operation));
        counter!(STORE_LOCAL, labels).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::origin_labels;

    #[test]
    fn origin_labels_follow_opentelemetry() {
        let cases = [
            ("https://example.com:443", ["https", "example.com", "443"]),
            ("http://[::1]:8080", ["http", "::1", "8080"]),
            ("http://127.0.0.1:1", ["http", "127.0.0.1", "1"]),
        ];
        for (origin, want) in cases {
            let labels = origin_labels(origin);
            let got: Vec<(&str, &str)> = labels.iter().map(|l| (l.key(), l.value())).collect();
            assert_eq!(
                got,
                vec![
                    ("url.scheme", want[0]),
                    ("server.address", want[1]),
                    ("server.port", want[2]),
                ]
            );
        }
    }
}
