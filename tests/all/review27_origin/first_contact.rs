//! Item 1: one bounded wait per first contact. The other requests to a new
//! origin wait for its first answer at most `first_contact`, once: when it
//! is late, or lost to a transport error, the whole burst goes then, not
//! one more "first contact" per wait.

use std::time::{Duration, Instant};

use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::{all_at_once, since_first};
use crate::common::{client, exact};
use crate::server::Arrivals;

#[tokio::test]
async fn a_slow_first_answer_holds_the_burst_once() {
    // 12 GETs at once to an origin that answers after 3 s: the first goes,
    // the others wait for its answer 500 ms, then all go. (Before the fix
    // they left one per 500 ms, each a new first contact: 0, 0.5, 1.0,
    // ..., 2.5 s, and the rest at 3 s.)
    let server = MockServer::start().await;
    let arrivals = Arrivals::default();
    let log = arrivals.clone();
    Mock::given(method("GET"))
        .respond_with(move |req: &wiremock::Request| {
            log.record(req);
            ResponseTemplate::new(200).set_delay(Duration::from_secs(3))
        })
        .mount(&server)
        .await;
    let client = client(exact().first_contact(Duration::from_millis(500)));
    for r in all_at_once(&client, &server.uri(), 12).await {
        assert_eq!(r.expect("answer").status(), 200);
    }
    let after = since_first(&arrivals.all());
    assert_eq!(after.len(), 12);
    for d in &after[1..] {
        // Never before the bounded wait, and all within it (generous
        // margin for a loaded box, well under the next 500 ms step).
        assert!(*d >= Duration::from_millis(450), "{after:?}");
        assert!(*d < Duration::from_millis(900), "{after:?}");
    }
}

#[tokio::test]
async fn a_first_contact_lost_to_a_transport_error_holds_the_burst_once() {
    // A dead host: every request ends in a transport error, so no answer is
    // ever recorded. 8 GETs at once end after one bounded wait (before the
    // fix: one wait each, 8 x 0.5 s).
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        format!("http://127.0.0.1:{port}/")
    };
    let client = client(exact().first_contact(Duration::from_millis(500)));
    let started = Instant::now();
    let results = all_at_once(&client, &dead, 8).await;
    let took = started.elapsed();
    for r in results {
        assert!(r.is_err(), "a dead host answered");
    }
    assert!(took < Duration::from_millis(1500), "{took:?}");
}
