//! Known quotas over real HTTP: a quota the server states (with its size)
//! or the caller declares paces the very first burst, so the server sees
//! no wave of `429`s; the first answer is waited for, briefly. Counted and
//! timed on the server's side (`tests/support/server.rs`).

use std::time::Duration;

use reqwest_backpressure::{InvalidPolicy, Policy, Quota, RetryAfterMiddleware};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::common::{client, exact};
use crate::server::{Arrivals, LimitedServer, ServerState, Shape};

/// `n` requests at once through `client`, each marked as its own task;
/// every one must end with a `200`.
async fn burst(client: &reqwest_middleware::ClientWithMiddleware, url: &str, n: u32) {
    let all =
        futures_util::future::join_all((0..n).map(|i| client.get(url).header("x-task", i).send()))
            .await;
    for r in all {
        assert_eq!(r.expect("answer").status(), 200);
    }
}

/// The most admissions the server saw in any span of `span`.
fn densest(seen: &ServerState, span: Duration) -> usize {
    let oks: Vec<Duration> = seen
        .arrivals
        .iter()
        .filter(|a| a.ok)
        .map(|a| a.at)
        .collect();
    oks.iter()
        .map(|&t| oks.iter().filter(|&&u| u >= t && u < t + span).count())
        .max()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_stated_quota_paces_the_first_burst_with_no_429() {
    // 5 a second, stated on every answer with its size (`RateLimit-Policy:
    // q=5;w=1`): the first request's answer says so before the others leave.
    let server = LimitedServer::start(Shape::RateLimitHeaders, 5, "/").await;
    burst(&client(exact()), &server.url, 15).await;
    let seen = server.finish();
    assert_eq!(seen.oks, 15);
    assert_eq!(seen.rejected, 0, "{:?}", seen.arrivals);
    // Three windows, each used from its start (the quota renews at the
    // reset, with no probe).
    let last = seen.arrivals.iter().map(|a| a.at).max().unwrap_or_default();
    assert!(last >= Duration::from_secs(2), "{last:?}");
    assert!(last < Duration::from_millis(2900), "{last:?}");
}

#[tokio::test]
async fn without_the_first_contact_the_first_burst_meets_a_wave() {
    let server = LimitedServer::start(Shape::RateLimitHeaders, 5, "/").await;
    burst(
        &client(exact().first_contact(Duration::ZERO)),
        &server.url,
        15,
    )
    .await;
    let seen = server.finish();
    assert_eq!(seen.oks, 15);
    assert!(seen.rejected >= 5, "{} 429s", seen.rejected);
}

/// `n` tasks at once against a `shape` server admitting `cap` a second,
/// with `quota` declared for its origin: no `429` at all.
async fn declared(shape: Shape, cap: u32, quota: Quota, n: u32) -> ServerState {
    let server = LimitedServer::start(shape, cap, "/").await;
    let origin = server.url.trim_end_matches('/').to_owned();
    burst(&client(exact().quota(&origin, quota)), &server.url, n).await;
    let seen = server.finish();
    assert_eq!(seen.oks, u64::from(n), "{}", shape.name());
    assert_eq!(seen.rejected, 0, "{}: {:?}", shape.name(), seen.arrivals);
    seen
}

#[tokio::test]
async fn a_declared_window_paces_every_shape_from_the_first_request() {
    for shape in [
        Shape::Window,
        Shape::SlidingLog,
        Shape::TruncatedZero,
        Shape::Bucket,
    ] {
        let seen = declared(shape, 4, Quota::per_second(4), 12).await;
        // No span of a second ever held more than the quota ...
        assert!(
            densest(&seen, Duration::from_secs(1)) <= 4,
            "{}",
            shape.name()
        );
        // ... and three batches took little more than two periods.
        let last = seen.arrivals.iter().map(|a| a.at).max().unwrap_or_default();
        assert!(last >= Duration::from_secs(2), "{}: {last:?}", shape.name());
        assert!(
            last < Duration::from_millis(2800),
            "{}: {last:?}",
            shape.name()
        );
    }
}

#[tokio::test]
async fn a_declared_bucket_sends_its_burst_then_one_an_interval() {
    let seen = declared(Shape::Gcra, 5, Quota::per_second(5).refilled(), 10).await;
    let mut at: Vec<Duration> = seen.arrivals.iter().map(|a| a.at).collect();
    at.sort();
    // The burst of 5 at once, then one every 200 ms.
    assert!(at[4] < Duration::from_millis(150), "{at:?}");
    for w in at[5..].windows(2) {
        assert!(w[1] - w[0] >= Duration::from_millis(150), "{at:?}");
    }
    assert!(at[9] >= Duration::from_millis(950), "{at:?}");
}

#[tokio::test]
async fn a_quota_declared_by_host_applies_to_the_origin() {
    let server = LimitedServer::start(Shape::Window, 3, "/").await;
    let policy = exact().quota("127.0.0.1", Quota::per_second(3));
    burst(&client(policy), &server.url, 7).await;
    let seen = server.finish();
    assert_eq!((seen.oks, seen.rejected), (7, 0));
}

#[test]
fn an_unusable_declared_quota_is_a_typed_error() {
    for policy in [
        Policy::default().quota("http://a.test", Quota::per_second(0)),
        Policy::default().quota("http://a.test", Quota::new(3, Duration::ZERO)),
        Policy::default().quota("", Quota::per_second(3)),
        Policy::default().quota("http:// bad", Quota::per_second(3)),
    ] {
        assert!(
            matches!(
                RetryAfterMiddleware::try_new(policy),
                Err(InvalidPolicy::Quota(_))
            ),
            "accepted"
        );
    }
}

#[tokio::test]
async fn the_wait_for_a_first_answer_is_bounded() {
    // The first request takes 2 s to answer; the others wait for it only
    // as long as the policy says, then go.
    let server = MockServer::start().await;
    let arrivals = Arrivals::default();
    let log = arrivals.clone();
    Mock::given(method("GET"))
        .respond_with(move |req: &wiremock::Request| {
            let first = log.record(req) == 0;
            ResponseTemplate::new(200).set_delay(if first {
                Duration::from_secs(2)
            } else {
                Duration::ZERO
            })
        })
        .mount(&server)
        .await;
    let client = client(exact().first_contact(Duration::from_millis(300)));
    let url = server.uri();
    let first = tokio::spawn({
        let client = client.clone();
        let url = url.clone();
        async move { client.get(url).send().await }
    });
    arrivals.wait_for(1).await;
    burst(&client, &url, 4).await;
    assert_eq!(first.await.expect("task").expect("answer").status(), 200);
    let at = arrivals.all();
    let after: Vec<Duration> = at[1..].iter().map(|t| *t - at[0]).collect();
    for d in &after {
        assert!(*d >= Duration::from_millis(250), "{after:?}");
        assert!(*d < Duration::from_millis(1500), "{after:?}");
    }
}

/// A server that answers after `delay` and counts the requests it is
/// answering at once, at most.
async fn slow_server(
    delay: Duration,
    headers: &'static [(&'static str, &'static str)],
) -> (MockServer, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let server = MockServer::start().await;
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (n, m) = (Arc::clone(&now), Arc::clone(&most));
    // A responder runs when the request arrives; the answer leaves `delay`
    // later: counted in flight from arrival until a timer takes it off.
    Mock::given(method("GET"))
        .respond_with(move |_: &wiremock::Request| {
            let inside = n.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(inside, Ordering::SeqCst);
            let n = Arc::clone(&n);
            std::thread::spawn(move || {
                std::thread::sleep(delay - Duration::from_millis(20));
                n.fetch_sub(1, Ordering::SeqCst);
            });
            let mut t = ResponseTemplate::new(200).set_delay(delay);
            for (k, v) in headers {
                t = t.insert_header(*k, *v);
            }
            t
        })
        .mount(&server)
        .await;
    (server, most)
}

#[tokio::test]
async fn a_declared_cap_holds_requests_in_flight_to_it() {
    use std::sync::atomic::Ordering;
    let (server, most) = slow_server(Duration::from_millis(200), &[]).await;
    let client = client(exact().max_in_flight(&server.uri(), 3));
    let started = std::time::Instant::now();
    burst(&client, &server.uri(), 12).await;
    assert!(
        most.load(Ordering::SeqCst) <= 3,
        "{} at once",
        most.load(Ordering::SeqCst)
    );
    // Four rounds of three.
    assert!(
        started.elapsed() >= Duration::from_millis(750),
        "{:?}",
        started.elapsed()
    );
    // Dropped tasks give their permits back: a later burst is not stuck.
    let dropped =
        futures_util::future::join_all((0..3).map(|_| {
            tokio::time::timeout(Duration::from_millis(50), client.get(server.uri()).send())
        }))
        .await;
    assert!(dropped.iter().all(Result::is_err));
    tokio::time::timeout(Duration::from_secs(5), burst(&client, &server.uri(), 3))
        .await
        .expect("permits came back");
}
