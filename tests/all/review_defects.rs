//! Regression tests for the five defects of the second review (each failed
//! before its fix), through the public surface: a counted-down stated
//! quota held an origin for its whole reset, an enormous `Retry-After`
//! closed no gate, a dropped task kept its paced slot, and each `503`
//! without `Retry-After` halved the learned pace. (The heartbeat's
//! released leases are in `redis::review`.)

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest_backpressure::observe::{GateClosed, Observer};

use reqwest_backpressure::origin::PacingConfig;
use reqwest_backpressure::store::Outcome;
use reqwest_backpressure::{Deadline, MemoryStore, RetryAfterMiddleware, RetryBudget, Store};

use crate::common::{
    client_with, exact, ok, our_code, report, scripted, status, stop_code, too_many,
};

fn pacing(max_gate: Duration) -> PacingConfig {
    PacingConfig {
        max_gate,
        ..PacingConfig::DEFAULT
    }
}

fn origin_of(uri: &str) -> String {
    let url = reqwest::Url::parse(uri).unwrap();
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap(),
        url.port_or_known_default().unwrap()
    )
}

/// A 200 stating `r` requests left in a window resetting in `t` seconds.
fn stated(r: u64, t: u64) -> wiremock::ResponseTemplate {
    ok().insert_header("RateLimit", format!("\"q\";r={r};t={t}"))
}

// ---------------------------------- 1. a counted-down quota is capped ----

/// A server that states one request left in a day's window, then none: the
/// origin is held as a gate is, for `max_wait`, then one probe goes.
#[tokio::test]
async fn a_counted_down_stated_quota_is_held_like_the_gate_then_probed() {
    let (server, seen) = scripted(|_, i| {
        if i == 0 {
            stated(1, 86_400)
        } else {
            stated(0, 86_400)
        }
    })
    .await;
    let store = MemoryStore::new();
    let policy = exact().max_wait(Duration::from_secs(2));
    let client = client_with(RetryAfterMiddleware::with_store(policy, store.clone()));
    let origin = origin_of(&server.uri());

    for _ in 0..2 {
        let resp = client.get(server.uri()).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    // The spent quota shows as a closed gate, capped at max_wait.
    let gate = store.gate(&origin).await.unwrap();
    assert!(
        gate.is_some_and(|g| g <= Duration::from_secs(2)),
        "gate after the spent quota: {gate:?}"
    );
    // A third call waits for the cap, then goes as the probe.
    let resp = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_secs(10)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let t = seen.all();
    assert_eq!(t.len(), 3);
    let gap = t[2] - t[1];
    assert!(
        gap >= Duration::from_millis(1900) && gap < Duration::from_secs(6),
        "the probe went {gap:?} after the quota was spent"
    );
}

/// A server whose stated remaining never reaches 0 in its answers (a stale
/// count), spent by admissions alone: still held for `max_wait` at most,
/// visible to `Store::gate`, then probed; never refused for the whole reset.
#[tokio::test]
async fn a_quota_spent_by_admissions_alone_is_capped_and_visible() {
    let (server, seen) = scripted(|_, _| stated(2, 86_400)).await;
    let store = MemoryStore::new();
    let policy = exact().max_wait(Duration::from_secs(2));
    let closed = GateEvents::default();
    let client = client_with(
        RetryAfterMiddleware::with_store(policy, store.clone()).with_observer(closed.clone()),
    );
    let origin = origin_of(&server.uri());
    // The first answer states 2 left; two more sends spend them.
    for _ in 0..3 {
        let resp = client.get(server.uri()).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let gate = store.gate(&origin).await.unwrap();
    assert!(
        gate.is_some_and(|g| g <= Duration::from_secs(2)),
        "gate after the quota was spent: {gate:?}"
    );
    let started = Instant::now();
    let resp = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_secs(10)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "refused: {:?}", stop_code(&resp));
    assert!(started.elapsed() < Duration::from_secs(6));
    assert_eq!(seen.all().len(), 4);
    // The observer (and so the metrics) heard of the hold, once.
    let events = closed.0.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0] <= Duration::from_secs(2));
}

/// Every gate closure an observer is told of: how long it closes.
#[derive(Clone, Default)]
struct GateEvents(Arc<Mutex<Vec<Duration>>>);

impl Observer for GateEvents {
    fn on_gate_closed(&self, gate: &GateClosed<'_>) {
        self.0.lock().unwrap().push(gate.duration);
    }
}

// ----------------------------- 4. a dropped retry gives its token back ----

/// A budget of one retry: a task granted it and dropped while it waited
/// gives it back, so the next task's retry is not refused.
#[tokio::test]
async fn a_task_dropped_while_it_waits_for_a_budgeted_retry_gives_the_token_back() {
    let (server, seen) = scripted(|_, i| if i < 2 { status(429) } else { ok() }).await;
    let policy = exact().retry_budget(RetryBudget::new(0.01, 0.0));
    let client = client_with(RetryAfterMiddleware::new(policy));
    // Its retry waits the 2 s fallback: given up on after 300 ms.
    let dropped =
        tokio::time::timeout(Duration::from_millis(300), client.get(server.uri()).send()).await;
    assert!(dropped.is_err(), "the first task ended: {dropped:?}");
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(
        stop_code(&resp),
        None,
        "the second task's retry was refused"
    );
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 2);
    assert_eq!(seen.all().len(), 3);
}

// ----------------------------- 2. an enormous Retry-After closes the gate ----

#[tokio::test]
async fn an_enormous_retry_after_closes_the_gate_for_max_wait() {
    let (server, seen) = scripted(|_, _| too_many("99999999999999999999")).await;
    let store = MemoryStore::new();
    let policy = exact().max_wait(Duration::from_secs(30));
    let client = client_with(RetryAfterMiddleware::with_store(policy, store.clone()));
    let origin = origin_of(&server.uri());
    // A store that has run for over a second: the delay then no longer
    // fits beside the store's own time (a `Duration` holds u64::MAX s).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));
    let gate = store.gate(&origin).await.unwrap();
    assert!(
        gate.is_some_and(|g| g > Duration::from_secs(25) && g <= Duration::from_secs(30)),
        "gate: {gate:?}"
    );
    // The next request meets the gate, not the server.
    let err = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_secs(1)))
        .send()
        .await
        .unwrap_err();
    assert_eq!(our_code(&err), Some("origin_gate_closed"));
    assert_eq!(seen.all().len(), 1);
}

// ------------------------------- 4. a dropped task gives its slot back ----

/// Teaches `store` a pace of about 5 requests a second for `origin`.
async fn teach_five_a_second(store: &MemoryStore, origin: &str) {
    let cfg = pacing(Duration::from_secs(60));
    for _ in 0..5 {
        store.record(origin, cfg, Outcome::Admitted).await.unwrap();
    }
    let closed = store
        .record(
            origin,
            cfg,
            Outcome::Pushback {
                retry_in: Some(Duration::from_secs(1)),
                hold_at_least: None,
            },
        )
        .await
        .unwrap();
    assert!(closed.is_some());
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

#[tokio::test]
async fn tasks_dropped_while_they_wait_for_a_paced_slot_give_it_back() {
    let (server, seen) = scripted(|_, _| ok()).await;
    let store = MemoryStore::new();
    let origin = origin_of(&server.uri());
    teach_five_a_second(&store, &origin).await;
    let client = client_with(RetryAfterMiddleware::with_store(exact(), store.clone()));
    // 100 callers give up after 100 ms: most of them were queued for a
    // slot seconds ahead.
    let calls = (0..100).map(|_| {
        let client = client.clone();
        let uri = server.uri();
        async move {
            let _ = tokio::time::timeout(Duration::from_millis(100), client.get(uri).send()).await;
        }
    });
    futures_util::future::join_all(calls).await;
    let sent = seen.all().len();
    assert!(sent < 20, "{sent} of 100 were sent within 100 ms");
    // Nothing is queued or in flight: a request with 5 s is taken in time.
    let started = Instant::now();
    let resp = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_secs(5)))
        .send()
        .await;
    let resp = match resp {
        Ok(resp) => resp,
        Err(e) => panic!("refused after the queue was dropped: {:?}", our_code(&e)),
    };
    assert_eq!(resp.status(), 200);
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "waited {:?} with nothing queued",
        started.elapsed()
    );
}

// ------------------------------ 5. one cut per period, not per answer ----

#[tokio::test]
async fn answers_without_a_time_cut_the_learned_pace_once_per_period() {
    let store = MemoryStore::new();
    let origin = "http://pace.test:80";
    let cfg = pacing(Duration::from_secs(60));
    for _ in 0..49 {
        store.record(origin, cfg, Outcome::Admitted).await.unwrap();
    }
    store
        .record(
            origin,
            cfg,
            Outcome::Pushback {
                retry_in: Some(Duration::from_secs(1)),
                hold_at_least: None,
            },
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1050)).await;
    let _ = crate::common::admit(&store, origin, cfg, Duration::from_secs(10))
        .await
        .unwrap();
    let learned = store.origin_rate(origin).unwrap();
    assert!(learned > 20.0, "learned {learned}/s");
    // Six 503s without Retry-After within one period.
    for _ in 0..6 {
        store
            .record(
                origin,
                cfg,
                Outcome::Pushback {
                    retry_in: None,
                    hold_at_least: None,
                },
            )
            .await
            .unwrap();
    }
    let after = store.origin_rate(origin).unwrap();
    assert!(
        after >= learned * 0.45,
        "six answers in one period took the pace from {learned}/s to {after}/s"
    );
}
