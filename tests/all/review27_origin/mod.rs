//! Regression tests for issue 27's origin defects (each failed before its
//! fix): the first contact's wait chained from task to task, a declared
//! quota stopped by `max_wait`, a token quota erasing the request quota of
//! the same origin, and spans too long to add. Over real HTTP on loopback
//! where the wire matters; on tokio's paused clock (a socket-less terminal,
//! `offline.rs`) where a backlog takes minutes.

use std::time::Duration;

use reqwest_middleware::ClientWithMiddleware;

mod declared;
mod first_contact;
mod spans;

/// `n` GETs of `url` at once, each a task of its own; the results in order.
async fn all_at_once(
    client: &ClientWithMiddleware,
    url: &str,
    n: usize,
) -> Vec<reqwest_middleware::Result<reqwest::Response>> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let client = client.clone();
            let url = url.to_owned();
            tokio::spawn(async move { client.get(url).header("x-task", i).send().await })
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for t in tasks {
        out.push(t.await.expect("task"));
    }
    out
}

/// Each arrival's distance from the first.
fn since_first(at: &[std::time::Instant]) -> Vec<Duration> {
    at.iter().map(|t| *t - at[0]).collect()
}
