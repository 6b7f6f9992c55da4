//! An outage over HTTP, through the middleware with its default policy: a
//! server that answers a bare `503` (no `Retry-After`, no rate-limit field)
//! to everything for a few seconds, then recovers as a leaky bucket at
//! rest. Counted on the server's side (`tests/support/server.rs`).

use std::time::Duration;

use reqwest_backpressure::Policy;

use crate::common::{client, report, spawn_tasks};
use crate::server::{LimitedServer, Shape};

#[tokio::test]
async fn every_task_rides_out_an_outage_within_its_attempts() {
    const TASKS: u32 = 80;
    let down = Duration::from_secs(3);
    let server = LimitedServer::start(Shape::Outage { down }, 20, "/outage").await;
    let client = client(Policy::default());
    let tasks = spawn_tasks(&client, &server.url, TASKS);
    for t in tasks {
        let resp = t.await.expect("task").expect("answer");
        let r = report(&resp);
        // A task that spent its last attempt probing the outage would end
        // with the 503 (`attempt_budget_exhausted`).
        assert_eq!(
            resp.status(),
            200,
            "stopped with {:?} after {} attempts",
            r.stop_reason().map(|s| s.code()),
            r.attempts()
        );
    }
    let seen = server.finish();
    assert_eq!(seen.oks, u64::from(TASKS));
    // While down the origin saw the first contact and one probe per hold
    // (1 s, then 0.2 s growing by 60%): a handful, not a retry per task.
    let while_down = seen.arrivals.iter().filter(|a| a.at < down).count();
    assert!(
        while_down <= 10,
        "{while_down} requests while down: {:?}",
        seen.arrivals
            .iter()
            .filter(|a| a.at < down)
            .map(|a| a.at.as_millis())
            .collect::<Vec<_>>()
    );
    assert!(seen.arrivals.iter().filter(|a| a.at < down).all(|a| !a.ok));
}
