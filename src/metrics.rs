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
//! | `reqwest_backpressure.gate.closures` | counter | origin, `scope` | times an answer closed a limit's gate (the origin's, or a scope's) |
//! | `reqwest_backpressure.wait.duration` | histogram, seconds | origin, `scope`, `reason` | each wait as planned when it starts; `reason`: `retry_after`, `ratelimit`, `fallback`, `gate`, `pace`, `first_answer` |
//! | `reqwest_backpressure.tasks.waiting` | gauge | origin, `scope` | tasks waiting now (after a pushback, at a gate, or for a paced slot) |
//! | `reqwest_backpressure.store.local` | counter | origin, `scope`, `operation` | a task's store call run on this process's own state instead of the shared one (a shared store failing open); `operation`: `lease`, `admission`, `record` |
//!
//! "origin" is three labels, OpenTelemetry's HTTP client attributes:
//! `url.scheme`, `server.address` (the host, an IPv6 address without
//! brackets) and `server.port`. `scope` says which limit of the origin a
//! limit's metric is about: `""` for the origin's own limit, else the kind
//! of the scope, its name up to its first `:` ([`scope_label`]): a GitHub
//! resource (`search`), a Discord bucket's hash (`41f9cd5d…`, without the
//! channel, guild or webhook id after the `:`), `route` for a Discord
//! route not yet answered (`route:POST_/channels/…`), an IETF partition,
//! a declared scope (name per-object scopes `kind:id`, and the label keeps
//! `kind`). Why not the scope's name? Discord's carry a channel id and a
//! route's carry its path: one label set per channel would grow without
//! bound in the exporter, though the middleware itself keeps at most
//! [`Policy::max_scopes`](crate::Policy::max_scopes) scopes per origin and
//! forgets idle ones. The observer's events and
//! [`Store::scope_status`](crate::Store::scope_status) have the full name.
//!
//! No label carries a path, a query string, a header value or an
//! idempotency key, so a label set is bounded by the origins called, times
//! the kinds of scope they have (the resources, buckets, partitions or
//! declared kinds: at most `max_scopes` at a time each), times the stop
//! codes, the six wait reasons, or the three store operations.
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
/// Counter: gate closures (label `scope`).
pub const GATE_CLOSURES: &str = "reqwest_backpressure.gate.closures";
/// Histogram, seconds: waits as planned when they start (labels `scope`,
/// `reason`).
pub const WAIT_DURATION: &str = "reqwest_backpressure.wait.duration";
/// Gauge: tasks waiting now (label `scope`).
pub const TASKS_WAITING: &str = "reqwest_backpressure.tasks.waiting";
/// Counter: store calls run on this process's own state (labels `scope`,
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
        "Times an answer closed a limit's gate (the origin's, or a scope's)."
    );
    describe_histogram!(
        WAIT_DURATION,
        Unit::Seconds,
        "Waits, as planned when they start, by scope and reason."
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

/// The `scope` label of a limit: `""` for the origin's own limit (`None`),
/// else the scope's kind, its name up to its first `:` (`_` if that is
/// empty, so no scope reads as the origin's own). Bounded where the name
/// is not: a Discord bucket keyed with its channel (`bucket:channel`), a
/// route (`route:METHOD_/path`), a declared `kind:id`.
#[must_use]
pub fn scope_label(scope: Option<&str>) -> &str {
    match scope {
        None => "",
        Some(name) => match name.split_once(':').map_or(name, |(kind, _)| kind) {
            "" => "_",
            kind => kind,
        },
    }
}

/// The origin's labels and the `scope` label of a limit's event.
fn limit_labels(origin: &str, scope: Option<&str>) -> Vec<Label> {
    let mut labels = origin_labels(origin);
    labels.push(Label::new("scope", scope_label(scope).to_owned()));
    labels
}

impl Observer for MetricsObserver {
    fn on_wait(&self, wait: &Wait<'_>) {
        let labels = limit_labels(wait.origin, wait.scope);
        gauge!(TASKS_WAITING, labels.clone()).increment(1.0);
        let mut labels = labels;
        labels.push(Label::from_static_parts("reason", wait.reason.code()));
        histogram!(WAIT_DURATION, labels).record(wait.duration.as_secs_f64());
    }

    fn on_wait_end(&self, end: &WaitEnd<'_>) {
        gauge!(TASKS_WAITING, limit_labels(end.origin, end.scope)).decrement(1.0);
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
        counter!(GATE_CLOSURES, limit_labels(gate.origin, gate.scope)).increment(1);
    }

    fn on_local_state(&self, local: &LocalState<'_>) {
        let mut labels = limit_labels(local.origin, local.scope);
        labels.push(Label::from_static_parts("operation", local.operation));
        counter!(STORE_LOCAL, labels).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::{origin_labels, scope_label};

    #[test]
    fn a_scope_label_keeps_the_kind_of_scope_not_its_ids() {
        let cases = [
            (None, ""),
            (Some("search"), "search"),
            (Some("code_search"), "code_search"),
            // Discord: a bucket with its channel, and one route of many.
            (
                Some("41f9cd5d28af77da04563bcb1d67fdfd:1234567890"),
                "41f9cd5d28af77da04563bcb1d67fdfd",
            ),
            (Some("route:POST_/channels/1234567890/messages"), "route"),
            (Some("tenant:7"), "tenant"),
            (Some("tenant-7"), "tenant-7"),
            // Never the origin's own label.
            (Some(":x"), "_"),
            (Some(""), "_"),
        ];
        for (scope, want) in cases {
            assert_eq!(scope_label(scope), want, "{scope:?}");
        }
        // Every channel's bucket is one label.
        let channels: std::collections::HashSet<_> = (0..1000)
            .map(|c| format!("abc:{c}"))
            .map(|s| scope_label(Some(&s)).to_owned())
            .collect();
        assert_eq!(channels.len(), 1);
    }

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
