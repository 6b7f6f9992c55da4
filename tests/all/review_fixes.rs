//! Regression tests for the defects found in review (each failed before its
//! fix): redirects, a policy without the gate, the cost of new origins, a
//! `retry_at` earlier than the server's time, binary idempotency keys, and
//! jitter that turned a wait within the budgets into a stop.

use std::time::{Duration, Instant, SystemTime};

use http::HeaderValue;
use reqwest_backpressure::origin::PacingConfig;
use reqwest_backpressure::planner::{Decision, Planner, Pushback, TaskState};
use reqwest_backpressure::{
    Deadline, Hint, IdempotencyKey, MemoryStore, Policy, RetryAfterMiddleware, Store,
};
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{
    client, client_with, exact, ok, our_code, our_error, recording, report, steps, stop_code,
    too_many,
};
use crate::server::Arrivals;

/// Waits until `store` holds the gate of `origin` closed.
async fn wait_for_gate(store: &MemoryStore, origin: &str) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while store.gate(origin).await.unwrap().is_none() {
        assert!(Instant::now() < give_up, "the gate never closed");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Mounts `answers` (the last one repeats) at path `at` of `server`;
/// returns the arrival log.
async fn mount(server: &MockServer, at: &str, answers: Vec<ResponseTemplate>) -> Arrivals {
    let (mock, arrivals) = recording(path(at), steps(answers));
    mock.mount(server).await;
    arrivals
}

// ------------------------------------------------------ 1. redirects ----

#[tokio::test]
async fn a_redirected_pushback_closes_the_gate_of_the_origin_that_answered() {
    let a = MockServer::start().await;
    let b = MockServer::start().await;
    let b_seen = mount(&b, "/limited", vec![too_many("2"), ok()]).await;
    let a_seen = mount(&a, "/plain", vec![ok()]).await;
    Mock::given(path("/moved"))
        .respond_with(
            ResponseTemplate::new(302).insert_header("Location", format!("{}/limited", b.uri())),
        )
        .mount(&a)
        .await;

    let client = client(exact().max_attempts(1));
    let resp = client
        .get(format!("{}/moved", a.uri()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(stop_code(&resp), Some("attempt_budget_exhausted"));

    // B's gate is closed for 2 s; A's is open.
    let (to_b, to_a) = tokio::join!(
        client.get(format!("{}/limited", b.uri())).send(),
        client.get(format!("{}/plain", a.uri())).send(),
    );
    assert_eq!(to_b.unwrap().status(), 200);
    assert_eq!(to_a.unwrap().status(), 200);
    let b_times = b_seen.all();
    assert_eq!(b_times.len(), 2);
    let gap = b_times[1] - b_times[0];
    assert!(
        gap >= Duration::from_millis(1900),
        "B was sent to {gap:?} after its 429"
    );
    let a_times = a_seen.all();
    assert!(
        a_times[0] - b_times[0] < Duration::from_millis(1500),
        "A was held by B's gate"
    );
}

// ---------------------------------------------- 2. no gate is valid ----

#[tokio::test]
async fn turning_the_gate_off_just_works() {
    let policy = Policy::default().origin_gate(false);
    assert_eq!(policy.validate(), Ok(()));
    assert!(RetryAfterMiddleware::try_new(policy.clone()).is_ok());
    let server = MockServer::start().await;
    let seen = mount(&server, "/", vec![too_many("1"), ok()]).await;
    let resp = client(policy.jitter(Duration::ZERO))
        .get(server.uri())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(report(&resp).attempts(), 2);
    let t = seen.all();
    assert!(t[1] - t[0] >= Duration::from_millis(950));
}

// ------------------------------------------------- 3. many origins ----

#[tokio::test(start_paused = true)]
async fn idle_origins_are_forgotten_and_their_memory_given_back() {
    let store = MemoryStore::new();
    let pacing = PacingConfig::DEFAULT;
    let admitted = reqwest_backpressure::store::Outcome::Admitted;
    for i in 0..5_000 {
        store
            .record(&format!("http://old-{i}:80"), pacing, admitted)
            .await
            .unwrap();
    }
    assert_eq!(store.origins(), 5_000);
    // Idle past the five minutes after which an origin is forgotten.
    tokio::time::advance(Duration::from_secs(301)).await;
    for i in 0..10_000 {
        store
            .record(&format!("http://new-{i}:80"), pacing, admitted)
            .await
            .unwrap();
    }
    // Every old origin was swept on the way; the new ones are all kept.
    assert!(
        (10_000..12_000).contains(&store.origins()),
        "{}",
        store.origins()
    );
    assert_eq!(store.origin_rate("http://old-0:80"), None);
    assert_eq!(store.origin_rate("http://new-0:80"), Some(0.0));
}

// ------------------------------------------------- 4. retry_at ------

#[tokio::test]
async fn retry_at_is_never_earlier_than_the_servers_time() {
    let server = MockServer::start().await;
    mount(&server, "/", vec![too_many("5"), ok()]).await;
    // The gate is held at most max_wait (2 s); the server said 5 s.
    let client = client(exact().max_wait(Duration::from_secs(2)));
    let before = SystemTime::now();
    let resp = client.get(server.uri()).send().await.unwrap();
    assert_eq!(stop_code(&resp), Some("wait_budget_exhausted"));

    let err = client
        .get(server.uri())
        .with_extension(Deadline::after(Duration::from_millis(500)))
        .send()
        .await
        .unwrap_err();
    let err = our_error(&err).expect("ours");
    assert_eq!(err.code(), "origin_gate_closed");
    let retry_at = err.retry_at().expect("a time");
    assert!(
        retry_at >= before + Duration::from_secs(5),
        "retry_at is {:?} after the first send, before the server's 5 s",
        retry_at.duration_since(before).unwrap_or_default()
    );
}

#[test]
fn a_refusal_reports_the_servers_time_beyond_the_capped_gate() {
    use reqwest_backpressure::origin::{Admission, OriginState};
    let cfg = PacingConfig {
        max_gate: Duration::from_secs(2),
        ..PacingConfig::DEFAULT
    };
    let mut origin = OriginState::new(Duration::ZERO);
    origin.on_pushback(cfg, Duration::ZERO, Some(Duration::from_secs(5)));
    // The gate itself opens at 2 s (one probe then finds out) ...
    assert_eq!(
        origin.gate_until(Duration::ZERO),
        Some(Duration::from_secs(2))
    );
    // ... but a task that cannot wait is told the server's 5 s.
    assert_eq!(
        origin.admit(cfg, Duration::from_secs(1), Duration::from_millis(100)),
        Admission::Refused {
            free_in: Duration::from_secs(4)
        }
    );
}

// ---------------------------------------- 5. binary idempotency keys ----

#[tokio::test]
async fn binary_idempotency_keys_are_refused_not_merged() {
    let server = MockServer::start().await;
    let seen = mount(&server, "/", vec![ok()]).await;
    let client = client(exact());
    for raw in [
        &b"k\xfe"[..],
        b"k\xff",
        b"\"k\xfe\"",
        b"",
        b"\"\"",
        b"\"a\\b\"",
    ] {
        let err = client
            .post(server.uri())
            .header(
                "idempotency-key",
                HeaderValue::from_bytes(raw).expect("a header value"),
            )
            .send()
            .await
            .unwrap_err();
        assert_eq!(our_code(&err), Some("invalid_idempotency_key"), "{raw:?}");
    }
    let err = client
        .post(server.uri())
        .with_extension(IdempotencyKey::new(""))
        .send()
        .await
        .unwrap_err();
    assert_eq!(our_code(&err), Some("invalid_idempotency_key"));
    assert!(seen.all().is_empty(), "nothing is sent with a bad key");
}

#[tokio::test]
async fn the_extension_and_the_header_name_one_key() {
    let server = MockServer::start().await;
    let seen = mount(&server, "/", vec![too_many("1"), ok()]).await;
    let client = client(exact());
    // A task keyed by the extension is running (waiting on its 429) ...
    let running = client
        .post(server.uri())
        .with_extension(IdempotencyKey::new("a\"b"))
        .send();
    let second = async {
        seen.wait_for(1).await;
        // ... so the same key sent as an sf-string header is refused,
        client
            .post(server.uri())
            .header("idempotency-key", r#""a\"b""#)
            .send()
            .await
    };
    let (first, second) = tokio::join!(running, second);
    assert_eq!(first.unwrap().status(), 200);
    assert_eq!(our_code(&second.unwrap_err()), Some("already_active"));
}

// --------------------------------------------------------- 6. jitter ----

#[test]
fn jitter_never_turns_a_wait_the_budgets_allow_into_a_stop() {
    let policy = Policy::default()
        .max_wait(Duration::from_secs(60))
        .max_total_wait(Duration::from_secs(120))
        .jitter(Duration::from_millis(250));
    let planner = Planner::new(policy).unwrap();
    let t0 = tokio::time::Instant::now();
    let wall = SystemTime::now();
    let mut task = TaskState::new(t0 + Duration::from_secs(600));
    assert!(planner.claim(&mut task, t0).is_send());
    let ask = Pushback::new(Hint::Delay(Duration::from_secs(60)), wall);
    // The server asks for max_wait twice: both fit max_total_wait exactly.
    let first = match planner.plan(&mut task, &ask, t0, u64::MAX) {
        Decision::Wait { until, .. } => until,
        Decision::Stop(r) => panic!("first ask stopped: {r}"),
    };
    assert!(first > t0 + Duration::from_secs(60), "jitter was added");
    assert!(planner.claim(&mut task, first).is_send());
    match planner.plan(&mut task, &ask, first, u64::MAX) {
        Decision::Wait { until, .. } => {
            assert!(until >= first + Duration::from_secs(60));
            // What counts toward max_total_wait stays within it; the
            // jitter already spent is all that lies beyond it, and no new
            // jitter is added past it.
            assert_eq!(task.budgeted_wait(), Duration::from_secs(120));
            assert!(
                task.waited() <= Duration::from_millis(120_250),
                "{:?}",
                task.waited()
            );
            assert_eq!(until, first + Duration::from_secs(60));
        }
        Decision::Stop(r) => panic!("second ask stopped: {r}"),
    }
}

#[tokio::test]
async fn jitter_never_turns_a_wait_the_budgets_allow_into_a_stop_over_http() {
    let server = MockServer::start().await;
    let seen = mount(&server, "/", vec![too_many("1"), too_many("1"), ok()]).await;
    let policy = Policy::default()
        .max_wait(Duration::from_secs(1))
        .max_total_wait(Duration::from_secs(2))
        .jitter(Duration::from_millis(250));
    let resp = client(policy).get(server.uri()).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{:?}", report(&resp));
    assert_eq!(report(&resp).attempts(), 3);
    let t = seen.all();
    assert!(t[1] - t[0] >= Duration::from_millis(950));
    assert!(t[2] - t[1] >= Duration::from_millis(950));
}

// ----------------------------------------------------------- 7. docs ----

#[tokio::test]
async fn the_report_counts_gate_time_before_the_first_send_and_no_retry_at_after_a_success() {
    let server = MockServer::start().await;
    mount(&server, "/", vec![too_many("1"), ok()]).await;
    let store = MemoryStore::new();
    let client = client_with(RetryAfterMiddleware::with_store(exact(), store.clone()));
    // The first task is pushed back once, then succeeds: no retry_at.
    let first = client.get(server.uri());
    let second = async {
        wait_for_gate(&store, &server.uri()).await;
        client.get(server.uri()).send().await
    };
    let (first, second) = tokio::join!(first.send(), second);
    let first = report(&first.unwrap());
    assert_eq!(first.attempts(), 2);
    assert_eq!(first.retry_at(), None);
    assert_eq!(first.stop_reason(), None);
    // The second waited at the closed gate before its only send.
    let second = report(&second.unwrap());
    assert_eq!(second.attempts(), 1);
    assert!(
        second.waited() >= Duration::from_millis(500),
        "{:?}",
        second.waited()
    );
}
