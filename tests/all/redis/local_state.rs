//! Nothing runs on local state unsaid: a store failing open counts each
//! operation it runs on this process's own state, and the middleware tells
//! its observer which of a task's calls did.

use reqwest_backpressure::observe::{LocalState, Observer};

use super::support::*;

/// `on_local_state` events, by operation.
#[derive(Default)]
struct Locals(Mutex<BTreeMap<&'static str, usize>>);

impl Observer for Locals {
    fn on_local_state(&self, local: &LocalState<'_>) {
        assert!(
            local.origin.starts_with("http://127.0.0.1:"),
            "{}",
            local.origin
        );
        *self.0.lock().unwrap().entry(local.operation).or_default() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observer_is_told_of_each_call_run_on_local_state() {
    bounded(Duration::from_secs(30), async {
        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-local-state:").await;
        let locals = Arc::new(Locals::default());
        let c = client_with(
            RetryAfterMiddleware::try_with_store(policy(), s.clone())
                .expect("valid policy")
                .with_observer(Arc::clone(&locals)),
        );
        let (server, arrivals) = scripted(|p, i| match (p, i) {
            ("/down", 0) => retry_after(1),
            _ => ResponseTemplate::new(200),
        })
        .await;

        // Redis answers: nothing is local.
        let r = post_keyed(&c, format!("{}/up", server.uri()), "k-up")
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        assert_eq!(Store::local_fallbacks(&s), 0);
        assert!(locals.0.lock().unwrap().is_empty(), "told while shared");

        // Redis gone: the lease, the admission and the pushback's record
        // run locally, and each is told. (A success is counted for Redis,
        // and recorded locally too while Redis does not answer.)
        redis.stop();
        let r = post_keyed(&c, format!("{}/down", server.uri()), "k-down")
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
        let told = locals.0.lock().unwrap().clone();
        for operation in ["lease", "admission", "record"] {
            assert!(
                told.get(operation).is_some_and(|&n| n > 0),
                "{operation}: {told:?}"
            );
        }
        assert!(
            Store::local_fallbacks(&s) >= 3,
            "{}",
            Store::local_fallbacks(&s)
        );
        assert_eq!(arrivals.len(), 3);

        // Failing closed, nothing falls back and nothing is told.
        let closed = s.clone().fail_mode(FailMode::Closed);
        let before = Store::local_fallbacks(&closed);
        let quiet = Arc::new(Locals::default());
        let c = client_with(
            RetryAfterMiddleware::try_with_store(policy(), closed.clone())
                .expect("valid policy")
                .with_observer(Arc::clone(&quiet)),
        );
        let r = post_keyed(&c, format!("{}/closed", server.uri()), "k-closed")
            .send()
            .await;
        assert_eq!(code(&r), "store_unavailable");
        assert_eq!(Store::local_fallbacks(&closed), before);
        assert!(quiet.0.lock().unwrap().is_empty());
        // A store with no other state never falls back.
        assert_eq!(
            Store::local_fallbacks(&reqwest_backpressure::MemoryStore::new()),
            0
        );
    })
    .await;
}

/// `MetricsObserver` counts the same events in
/// `reqwest_backpressure.store.local`, by operation.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "current_thread")]
async fn metrics_count_calls_run_on_local_state() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    use reqwest_backpressure::metrics::{MetricsObserver, STORE_LOCAL};
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _local = metrics::set_default_local_recorder(&recorder);
    bounded(Duration::from_secs(30), async {
        let mut redis = RedisServer::start();
        let s = store(&redis, "rbp-local-metrics:").await;
        let c = client_with(
            RetryAfterMiddleware::try_with_store(policy(), s)
                .expect("valid policy")
                .with_observer(MetricsObserver::new()),
        );
        let (server, _) = scripted(|_, _| ResponseTemplate::new(200)).await;
        redis.stop();
        let r = post_keyed(&c, format!("{}/down", server.uri()), "k-down")
            .send()
            .await;
        assert_eq!(code(&r), "ok 200 OK");
    })
    .await;
    let counted: BTreeMap<String, u64> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, _)| key.key().name() == STORE_LOCAL)
        .filter_map(|(key, _, _, value)| {
            let operation = key
                .key()
                .labels()
                .find(|l| l.key() == "operation")?
                .value()
                .to_owned();
            match value {
                DebugValue::Counter(n) => Some((operation, n)),
                _ => None,
            }
        })
        .collect();
    for operation in ["lease", "admission"] {
        assert!(
            counted.get(operation).is_some_and(|&n| n > 0),
            "{operation}: {counted:?}"
        );
    }
}
