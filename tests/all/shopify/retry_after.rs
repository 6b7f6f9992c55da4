//! Shopify's `Retry-After: 2.0` under [`Policy::shopify`]: read as the
//! server's time, at its upper bound (one unit of its last digit later),
//! never earlier; the same value under the default policy stops its task
//! with `invalid_retry_after`.
//!
//! One read to a server that answers its first request `429` with a
//! decimal `Retry-After` (scaled down: `0.5`, read as at most 0.6 s) and
//! the call-limit header, and every later one `200`. Times are the
//! server's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest_backpressure::{Policy, RetryReport};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::client;
use crate::server::Arrivals;
use crate::server::tap::Tap;

/// Answers the first request `429` with `Retry-After: retry_after`.
struct FirstThrottled {
    arrivals: Arrivals,
    seen: AtomicUsize,
    retry_after: &'static str,
}

impl Respond for FirstThrottled {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.arrivals.record(request);
        if self.seen.fetch_add(1, Ordering::SeqCst) > 0 {
            return ResponseTemplate::new(200)
                .insert_header("x-shopify-shop-api-call-limit", "2/40");
        }
        ResponseTemplate::new(429)
            .insert_header("x-shopify-shop-api-call-limit", "40/40")
            .insert_header("retry-after", self.retry_after)
    }
}

/// One read under `policy`: its status and report, and the server's
/// arrivals.
async fn read_once(policy: Policy, retry_after: &'static str) -> (u16, RetryReport, Arrivals) {
    let arrivals = Arrivals::default();
    let server = MockServer::builder()
        .disable_request_recording()
        .start()
        .await;
    Mock::given(method("GET"))
        .respond_with(FirstThrottled {
            arrivals: arrivals.clone(),
            seen: AtomicUsize::new(0),
            retry_after,
        })
        .mount(&server)
        .await;
    let client = client(policy, &Tap::default());
    let url = format!("{}/admin/api/2024-01/shop.json", server.uri());
    let response = client.get(url).send().await.expect("an answer");
    let report = *response
        .extensions()
        .get::<RetryReport>()
        .expect("a report");
    (response.status().as_u16(), report, arrivals)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preset_waits_for_the_decimal_retry_afters_upper_bound() {
    for (retry_after, bound) in [("0.5", 600), ("0.500", 501)] {
        let (status, report, arrivals) = read_once(Policy::shopify(), retry_after).await;
        assert_eq!(status, 200, "{retry_after}");
        assert_eq!(report.attempts(), 2);
        assert_eq!(report.hint_source().map(|s| s.code()), Some("retry_after"));
        let gap = arrivals.first_gap();
        assert!(
            gap >= Duration::from_millis(bound),
            "{retry_after}: the retry arrived {gap:?} after the 429"
        );
        // Within the jitter (250 ms) and a loaded machine's margin.
        assert!(gap < Duration::from_millis(bound + 600), "{gap:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_stops_on_the_same_value() {
    let (status, report, arrivals) = read_once(Policy::default(), "0.5").await;
    assert_eq!(status, 429);
    assert_eq!(report.attempts(), 1);
    assert_eq!(
        report.stop_reason().map(|s| s.code()),
        Some("invalid_retry_after")
    );
    assert_eq!(arrivals.len(), 1);
}
