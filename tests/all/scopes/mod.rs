//! Many limits on one origin (issue 28), each against a server that
//! follows its vendor's docs (`server/github_resources.rs`,
//! `server/discord.rs`, `server/partitions.rs`), with the default policy
//! and the vendor's preset, as a new user would: the figures the issue
//! asks for, on the server's clock, against an ideal computed from the
//! server's configuration (a function beside each server). Every test
//! prints its figures, so runs can be compared.
//!
//! Two figures are still open, and their tests ignored with the reason:
//! the GitHub crawl beside a secondary limit, and Discord's global limit
//! when the buckets together allow more than it.

mod discord;
#[cfg(feature = "reqwest-retry")]
mod github_crawl;
mod github_resources;
mod partitions;

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use reqwest::Response;
use reqwest_backpressure::{Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

use crate::common::{http_client, our_code, stop_code};
use crate::server::tap::Tap;

/// How long a run may take before its figures are printed as they stand
/// and the test fails: far beyond any figure asked for, so a slow run
/// still measures how slow.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Ours with `policy`, then `tap` (innermost: what left and came back).
fn client(policy: Policy, tap: &Tap) -> ClientWithMiddleware {
    ClientBuilder::new(http_client())
        .with(RetryAfterMiddleware::new(policy))
        .with(tap.clone())
        .build()
}

/// `GET uri + path` as task `task` (its `x-task` header).
fn get(
    client: &ClientWithMiddleware,
    uri: &str,
    path: String,
    task: u32,
) -> tokio::task::JoinHandle<reqwest_middleware::Result<Response>> {
    let (client, url) = (client.clone(), format!("{uri}{path}"));
    tokio::spawn(async move { client.get(url).header("x-task", task).send().await })
}

/// What the tasks got back: how many of each status, the stop codes of
/// the answers returned with one, and the errors by code.
#[derive(Debug, Default)]
struct Returned {
    statuses: BTreeMap<u16, usize>,
    stops: BTreeMap<&'static str, usize>,
    errors: BTreeMap<&'static str, usize>,
}

impl Returned {
    /// Answers returned with `status`.
    fn with(&self, status: u16) -> usize {
        self.statuses.get(&status).copied().unwrap_or(0)
    }

    /// Counts what one task got back.
    fn add(&mut self, result: &reqwest_middleware::Result<Response>) {
        match result {
            Ok(resp) => {
                *self.statuses.entry(resp.status().as_u16()).or_default() += 1;
                if let Some(code) = stop_code(resp) {
                    *self.stops.entry(code).or_default() += 1;
                }
            }
            Err(e) => {
                *self
                    .errors
                    .entry(our_code(e).unwrap_or("reqwest"))
                    .or_default() += 1
            }
        }
    }
}

/// Awaits every task (within [`RUN_LIMIT`]: `None` past it).
async fn returned(
    tasks: Vec<tokio::task::JoinHandle<reqwest_middleware::Result<Response>>>,
) -> Option<Returned> {
    within_limit(async {
        let mut r = Returned::default();
        for t in tasks {
            r.add(&t.await.expect("a task panicked"));
        }
        r
    })
    .await
}

/// `run` within [`RUN_LIMIT`]: `None` past it.
async fn within_limit<T>(run: impl Future<Output = T>) -> Option<T> {
    tokio::time::timeout(RUN_LIMIT, run).await.ok()
}

/// `measured / ideal`, for the figures.
fn ratio(measured: Duration, ideal: Duration) -> f64 {
    measured.as_secs_f64() / ideal.as_secs_f64().max(f64::EPSILON)
}
