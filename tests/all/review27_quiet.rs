//! Issue 27, over loopback: a quiet spell (one `200`), then a burst the
//! origin pushes back with a long `Retry-After`. What the quiet spell
//! admitted is no limit of the origin: the queue must drain soon after the
//! reopening, not one task per `Retry-After`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest_backpressure::{Deadline, Policy};
use tokio::time::Instant;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{client, ok, report, status};
use crate::server::lock;

/// The server's `Retry-After`, scaled down from issue 27's 30 s.
const RETRY_AFTER: Duration = Duration::from_secs(3);

/// One request as the server answered it.
#[derive(Debug, Clone, Copy)]
struct Answered {
    at: Instant,
    ok: bool,
}

/// Admits the first request; from the second on, answers `429` with
/// `Retry-After: 3` (the seconds left, rounded up) until 3 s after the
/// first `429`; then admits everything.
#[derive(Clone, Default)]
struct QuietThenHeld {
    log: Arc<Mutex<Vec<Answered>>>,
    /// Until when it holds, from its first `429`.
    held_until: Arc<Mutex<Option<Instant>>>,
}

impl Respond for QuietThenHeld {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let now = Instant::now();
        let mut log = lock(&self.log);
        let mut held_until = lock(&self.held_until);
        let until = if log.is_empty() {
            now
        } else {
            *held_until.get_or_insert(now + RETRY_AFTER)
        };
        log.push(Answered {
            at: now,
            ok: now >= until,
        });
        if now >= until {
            return ok();
        }
        let secs = (until - now).as_secs_f64().ceil();
        status(429).insert_header("Retry-After", format!("{secs}"))
    }
}

#[tokio::test]
async fn a_quiet_period_then_a_long_retry_after_drains_the_queue_soon_after_it() {
    const TASKS: usize = 60;
    let server = MockServer::start().await;
    let responder = QuietThenHeld::default();
    Mock::given(any())
        .respond_with(responder.clone())
        .mount(&server)
        .await;
    let client = client(Policy::default());
    let url = format!("{}/quiet", server.uri());
    // The quiet spell: one request, admitted.
    let first = client.get(&url).send().await.expect("answer");
    assert_eq!(first.status(), 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Then a burst: the origin pushes every request of it back for 3 s.
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let client = client.clone();
            let url = url.clone();
            tokio::spawn(async move {
                client
                    .get(url)
                    .with_extension(Deadline::after(Duration::from_secs(30)))
                    .send()
                    .await
            })
        })
        .collect();
    for t in tasks {
        let resp = t.await.expect("task").expect("answer");
        assert_eq!(
            resp.status(),
            200,
            "stopped with {:?}",
            report(&resp).stop_reason().map(|s| s.code())
        );
    }
    let log = lock(&responder.log).clone();
    let held_until = lock(&responder.held_until).expect("the burst was held");
    // Every task was pushed back once, in the burst, and none came back
    // before the server's time (it would have been pushed back again).
    let burst_end = held_until - RETRY_AFTER + Duration::from_millis(500);
    let rejected: Vec<_> = log.iter().filter(|a| !a.ok).collect();
    assert_eq!(rejected.len(), TASKS, "{log:?}");
    assert!(rejected.iter().all(|a| a.at < burst_end), "{log:?}");
    assert_eq!(log.len(), 1 + 2 * TASKS);
    // The queue left soon after the reopening: not one task per 3 s (three
    // minutes), nor the batch of one the quiet spell would teach.
    let last = log.iter().map(|a| a.at).max().expect("arrivals");
    assert!(
        last - held_until < Duration::from_secs(15),
        "the last task arrived {:?} after the reopening",
        last - held_until
    );
}
