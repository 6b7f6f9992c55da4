//! A `Retry-After` the strict parser refuses (Shopify's `2.0`, under the
//! default policy) stops its own task with `invalid_retry_after`, and
//! still holds the origin for a hold of our own, as a bare `429` does, or
//! for what the value still reads as, decimal seconds (its upper bound:
//! 2.1 s), when that is longer: the other tasks do not send into the time
//! the server named.
//!
//! Fourteen reads, one every 25 ms, to a server that answers the fifth
//! request it sees `429` and every other `200`. The origin has pushed
//! back nothing before, so the hold is a whole second
//! (`tuning.rs`'s `silent_hold`). Times are the server's; the client's
//! tap tells a request already on its way when the `429` was heard (none
//! of the gate's business) from one sent after.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest_backpressure::{Policy, RetryReport};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::client;
use crate::server::Arrivals;
use crate::server::tap::{Heard, Tap};

/// Reads, one every [`EVERY`].
const READS: usize = 14;
const EVERY: Duration = Duration::from_millis(25);
/// Which arrival is answered `429` (0-based).
const THROTTLED: usize = 4;
/// The hold asserted for a bare `429`: the whole second of a first hold,
/// less a margin.
const HOLD: Duration = Duration::from_millis(950);
/// The hold asserted for `Retry-After: 2.0`: the time it names (the gate
/// holds for what it reads as, its upper bound, 2.1 s, longer than our
/// own first hold).
const NAMED: Duration = Duration::from_secs(2);

/// Answers the [`THROTTLED`]-th request `429` (with `Retry-After:
/// retry_after`, when given), every other one `200`.
struct OneThrottle {
    arrivals: Arrivals,
    seen: AtomicUsize,
    retry_after: Option<&'static str>,
}

impl Respond for OneThrottle {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.arrivals.record(request);
        if self.seen.fetch_add(1, Ordering::SeqCst) != THROTTLED {
            return ResponseTemplate::new(200);
        }
        match self.retry_after {
            Some(value) => ResponseTemplate::new(429).insert_header("retry-after", value),
            None => ResponseTemplate::new(429),
        }
    }
}

/// Runs the reads against a fresh server: each read's status, stop code
/// and attempts, by read; the server's arrivals; the client's tap.
async fn run(
    retry_after: Option<&'static str>,
) -> (Vec<(u16, Option<&'static str>, u32)>, Arrivals, Tap) {
    let arrivals = Arrivals::default();
    let server = MockServer::builder()
        .disable_request_recording()
        .start()
        .await;
    Mock::given(method("GET"))
        .respond_with(OneThrottle {
            arrivals: arrivals.clone(),
            seen: AtomicUsize::new(0),
            retry_after,
        })
        .mount(&server)
        .await;
    let tap = Tap::default();
    let client = client(Policy::default(), &tap);
    let tasks: Vec<_> = (0..READS)
        .map(|i| {
            let client = client.clone();
            let url = format!("{}/admin/api/2024-01/orders/{i}.json", server.uri());
            tokio::spawn(async move {
                tokio::time::sleep(EVERY * u32::try_from(i).unwrap_or(u32::MAX)).await;
                match client.get(url).send().await {
                    Ok(r) => {
                        let report = r.extensions().get::<RetryReport>().cloned();
                        (
                            r.status().as_u16(),
                            report
                                .as_ref()
                                .and_then(RetryReport::stop_reason)
                                .map(|s| s.code()),
                            report.map_or(0, |r| r.attempts()),
                        )
                    }
                    Err(_) => (0, None, 0),
                }
            })
        })
        .collect();
    let mut reads = Vec::new();
    for task in tasks {
        reads.push(task.await.unwrap_or((0, None, 0)));
    }
    (reads, arrivals, tap)
}

/// The arrivals of requests sent after the client heard the `429`, from
/// the `429`'s arrival, in order.
fn sent_after_the_429(arrivals: &Arrivals, tap: &Tap) -> Vec<Duration> {
    let entries = arrivals.entries();
    let Some(throttled) = entries.get(THROTTLED) else {
        return Vec::new();
    };
    let heard = tap.heard();
    let heard_at = heard.iter().find_map(|h| match h {
        Heard::Answered {
            at, status: 429, ..
        } => Some(*at),
        _ => None,
    });
    let Some(heard_at) = heard_at else {
        return Vec::new();
    };
    // Each read is one path, sent once (the default policy retries only
    // the bare `429`'s, after its hold).
    let sent_at = |path: &str| {
        heard.iter().find_map(|h| match h {
            Heard::Sent { at, path: p, .. } if p == path => Some(*at),
            _ => None,
        })
    };
    entries
        .iter()
        .filter(|e| e.path != throttled.path && e.at > throttled.at)
        .filter(|e| sent_at(&e.path).is_some_and(|sent| sent > heard_at))
        .map(|e| e.at.duration_since(throttled.at))
        .collect()
}

/// Asserts that no request sent after the `429` was heard arrived within
/// `hold` of it, and that the others all went through.
fn assert_held(
    name: &str,
    hold: Duration,
    reads: &[(u16, Option<&str>, u32)],
    arrivals: &Arrivals,
    tap: &Tap,
) {
    let after = sent_after_the_429(arrivals, tap);
    eprintln!("{name}: arrivals sent after the 429 was heard, from it: {after:?}");
    assert!(!after.is_empty(), "{name}: nobody was held");
    assert!(
        after.iter().all(|&at| at >= hold),
        "{name}: sent into the hold: {after:?}"
    );
    let through = reads.iter().filter(|(status, _, _)| *status == 200).count();
    assert!(through >= READS - 1, "{name}: {reads:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_retry_after_stops_its_task_and_holds_the_origin_as_a_bare_429_does() {
    let (reads, arrivals, tap) = run(Some("2.0")).await;
    assert_held("invalid", NAMED, &reads, &arrivals, &tap);
    // Its own task stopped at once, the 429 returned as it is.
    let stopped: Vec<_> = reads
        .iter()
        .filter(|r| r.1 == Some("invalid_retry_after"))
        .collect();
    assert_eq!(
        stopped,
        [&(429, Some("invalid_retry_after"), 1)],
        "{reads:?}"
    );

    // A bare 429 holds the same.
    let (reads, arrivals, tap) = run(None).await;
    assert_held("bare", HOLD, &reads, &arrivals, &tap);
    assert!(reads.iter().all(|r| r.0 == 200), "{reads:?}");
}
