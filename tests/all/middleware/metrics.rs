//! `MetricsObserver` (feature `metrics`): values and labels, read from
//! metrics-util's `DebuggingRecorder` on tokio's paused clock.

use std::collections::BTreeMap;

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use reqwest_backpressure::metrics::MetricsObserver;

use super::support::*;

/// Each metric as `name{label=value,…}` (labels sorted) → its value. A
/// snapshot swaps counters and gauges to zero: the next one shows what
/// changed since.
pub(super) fn snapshot(s: &Snapshotter) -> BTreeMap<String, String> {
    s.snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let value = match value {
                DebugValue::Counter(n) => n.to_string(),
                DebugValue::Gauge(g) => g.to_string(),
                DebugValue::Histogram(h) => format!("{h:?}"),
            };
            (format!("{}{{{}}}", key.name(), labels.join(",")), value)
        })
        .collect()
}

/// Runs `f` on a paused current-thread runtime with `recorder` as the
/// thread's metrics recorder.
pub(super) fn paused_with<T>(
    recorder: &DebuggingRecorder,
    f: impl std::future::Future<Output = T>,
) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    metrics::with_local_recorder(recorder, || rt.block_on(f))
}

const A: &str = "server.address=origin.test,server.port=80,url.scheme=http";
const B: &str = "server.address=other.test,server.port=8080,url.scheme=http";
/// A's and B's labels on a metric of a limit: the origin's own (`scope=""`).
const A0: &str = "scope=,server.address=origin.test,server.port=80,url.scheme=http";
const B0: &str = "scope=,server.address=other.test,server.port=8080,url.scheme=http";

#[test]
fn resends_stops_closures_waits_and_waiting_tasks() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let (mid, end) = paused_with(&recorder, async {
        // Origin A: task a's pushback closes the gate, b waits there and
        // probes, a's retry is paced behind it (as in the observer test).
        let (client, _) = offline_with(
            RetryAfterMiddleware::new(exact()).with_observer(MetricsObserver::new()),
            |path: &str, i| match (path, i) {
                ("/a", 0) => push_back(429, "1"),
                _ => answer(200),
            },
        );
        // Origin B: one attempt only, so its pushback stops the task.
        let (once, _) = offline_with(
            RetryAfterMiddleware::new(exact().max_attempts(1))
                .with_observer(MetricsObserver::new()),
            seq(vec![push_back(503, "5")]),
        );
        let a = tokio::spawn({
            let client = client.clone();
            async move { client.get("http://origin.test/a").send().await.unwrap() }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let b = tokio::spawn({
            let client = client.clone();
            async move { client.get("http://origin.test/b").send().await.unwrap() }
        });
        let stopped = once.get("http://other.test:8080/").send().await.unwrap();
        assert_eq!(stop_code(&stopped), Some("attempt_budget_exhausted"));
        tokio::time::sleep(Duration::from_millis(400)).await;
        let mid = snapshot(&snapshotter);
        assert_eq!(a.await.unwrap().status(), 200);
        assert_eq!(b.await.unwrap().status(), 200);
        (mid, snapshot(&snapshotter))
    });
    let m = |name: &str, labels: &str| format!("{name}{{{labels}}}");
    let want_mid = BTreeMap::from([
        (m("reqwest_backpressure.gate.closures", A0), "1".to_owned()),
        (m("reqwest_backpressure.gate.closures", B0), "1".to_owned()),
        (
            m(
                "reqwest_backpressure.stops",
                &format!("error.type=attempt_budget_exhausted,{B}"),
            ),
            "1".to_owned(),
        ),
        // a (after its pushback) and b (at the gate) wait at 0.5 s.
        (m("reqwest_backpressure.tasks.waiting", A0), "2".to_owned()),
        (
            m(
                "reqwest_backpressure.wait.duration",
                &format!("reason=retry_after,{A0}"),
            ),
            "[1.0]".to_owned(),
        ),
        (
            m(
                "reqwest_backpressure.wait.duration",
                &format!("reason=gate,{A0}"),
            ),
            "[0.9]".to_owned(),
        ),
    ]);
    assert_eq!(mid, want_mid);
    let want_end = BTreeMap::from([
        (m("reqwest_backpressure.gate.closures", A0), "0".to_owned()),
        (m("reqwest_backpressure.gate.closures", B0), "0".to_owned()),
        (
            m(
                "reqwest_backpressure.stops",
                &format!("error.type=attempt_budget_exhausted,{B}"),
            ),
            "0".to_owned(),
        ),
        (m("reqwest_backpressure.resends", A), "1".to_owned()),
        // Since the last snapshot: both waits ended, a's pace wait began
        // and ended; back to zero waiting.
        (m("reqwest_backpressure.tasks.waiting", A0), "-2".to_owned()),
        (
            m(
                "reqwest_backpressure.wait.duration",
                &format!("reason=retry_after,{A0}"),
            ),
            "[]".to_owned(),
        ),
        (
            m(
                "reqwest_backpressure.wait.duration",
                &format!("reason=gate,{A0}"),
            ),
            "[]".to_owned(),
        ),
        (
            m(
                "reqwest_backpressure.wait.duration",
                &format!("reason=pace,{A0}"),
            ),
            "[1.0]".to_owned(),
        ),
    ]);
    assert_eq!(end, want_end);
}

/// A pushback in a scope: the limit's metrics carry the origin's three
/// labels as they are (the port alone in `server.port`) and the scope's
/// kind, never the id after its `:`; the task's metrics carry no scope.
#[test]
fn a_scopes_limit_is_labelled_with_its_kind() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let seen = paused_with(&recorder, async {
        let (client, _) = offline_with(
            RetryAfterMiddleware::new(exact()).with_observer(MetricsObserver::new()),
            // Each channel's first send is pushed back, its retry admitted.
            |_: &str, i| {
                if i % 2 == 0 {
                    push_back(429, "1")
                } else {
                    answer(200)
                }
            },
        );
        for channel in ["1", "2"] {
            let r = client
                .get("http://origin.test/")
                .with_extension(reqwest_backpressure::Scope::new(format!(
                    "bucket:{channel}"
                )))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        }
        snapshot(&snapshotter)
    });
    let m = |name: &str, labels: &str| format!("{name}{{{labels}}}");
    let scoped = "scope=bucket,server.address=origin.test,server.port=80,url.scheme=http";
    let want = BTreeMap::from([
        // Both channels' pushbacks, under one label set.
        (
            m("reqwest_backpressure.gate.closures", scoped),
            "2".to_owned(),
        ),
        (m("reqwest_backpressure.resends", A), "2".to_owned()),
        (
            m("reqwest_backpressure.tasks.waiting", scoped),
            "0".to_owned(),
        ),
        (
            m(
                "reqwest_backpressure.wait.duration",
                &format!("reason=retry_after,{scoped}"),
            ),
            "[1.0, 1.0]".to_owned(),
        ),
    ]);
    assert_eq!(seen, want);
}
