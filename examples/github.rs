//! GitHub's REST API with `Policy::github()`: a crawler reading issues
//! (the `core` resource) while a job runs searches (the `search`
//! resource), both from one client.
//!
//! ```text
//! cargo run --example github
//! ```
//!
//! GitHub limits each resource apart and states it on every answer:
//! `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (Unix epoch
//! seconds) and `-resource`; a request over its resource's quota gets `403`
//! or `429` with `remaining: 0`, and may come back at the reset. The preset
//! reads those fields, keeps each resource's quota apart (the searches
//! never hold the reads), and holds a request until its resource has room,
//! so the server refuses (almost) nothing.
//!
//! The API here is an embedded server on 127.0.0.1 that limits as GitHub's
//! "Rate limits for the REST API" page documents
//! (`tests/support/server/github_resources.rs`), with its windows scaled
//! down: core 50 requests per 2 s (GitHub: 5,000 an hour), search 10 per
//! 3 s (GitHub: 30 a minute). Against GitHub, the only change is the base
//! URL (and your token). The example prints what the server saw and exits
//! non-zero if it breaks the contract: a request before the time the
//! server named, a read or search that did not get its `200`, or a
//! resource finished far later than its quota allows.

use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{Policy, RetryAfterMiddleware};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

/// The test servers (shared with the tests and the benches); this example
/// uses the GitHub-like one.
#[path = "../tests/support/server.rs"]
mod server;
/// The examples' tally of outcomes and contract checks.
#[path = "vendors/verdict.rs"]
mod verdict;

use server::github::Answer;
use server::github_resources::{Config, Resource, ResourcesState, ideal};
use server::wire::JudgedServer;
use verdict::{Tally, Verdict, secs};

/// Core, scaled down: 50 requests per 2 s (GitHub: 5,000 an hour).
const CORE: Resource = Resource {
    name: "core",
    quota: 50,
    window: Duration::from_secs(2),
};
/// Search, scaled down: 10 per 3 s (GitHub: 30 a minute).
const SEARCH: Resource = Resource {
    name: "search",
    quota: 10,
    window: Duration::from_secs(3),
};
/// Issues read (core): three windows' worth.
const READS: u32 = 150;
/// Searches beside them: three windows' worth.
const SEARCHES: u32 = 25;
/// Requests in flight at once, per job. GitHub asks for few concurrent
/// requests (its secondary limit); the middleware holds the rest anyway.
const IN_FLIGHT: usize = 16;
/// How far past its ideal a resource may finish before the run counts as
/// broken: GitHub states resets in whole epoch seconds, so each window
/// after the first may open up to a second late for a client that never
/// sends before the reset; this bounds the rest.
const SLACK: f64 = 1.25;

#[tokio::main]
async fn main() -> ExitCode {
    let config = Config::new(vec![CORE, SEARCH]);
    let github = JudgedServer::start(ResourcesState::new(config)).await;
    // Against GitHub: "https://api.github.com".
    let api = github.uri.clone();

    // The whole setup: GitHub's preset, the rest of the policy default (3
    // attempts per request, a 120 s deadline). `no_proxy` only because the
    // server is on loopback; GitHub wants a User-Agent.
    let http = match reqwest::Client::builder()
        .no_proxy()
        .user_agent("reqwest-backpressure-example")
        .build()
    {
        Ok(http) => http,
        Err(e) => {
            eprintln!("cannot build the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(Policy::github()))
        .build();

    println!(
        "GitHub: {READS} issue reads (core: {} per {} s) and {SEARCHES} searches (search: {} per \
         {} s) at once, {IN_FLIGHT} in flight per job, Policy::github()",
        CORE.quota,
        CORE.window.as_secs(),
        SEARCH.quota,
        SEARCH.window.as_secs()
    );
    let reads = (0..READS).map(|i| (i, format!("/repos/octo-org/octo-repo/issues/{i}")));
    let searches = (0..SEARCHES).map(|i| (READS + i, format!("/search/issues?q=label:bug+{i}")));
    let (reads, searches) = tokio::join!(
        run(&client, &api, reads.collect()),
        run(&client, &api, searches.collect())
    );
    let seen = github.finish();

    let count = |resource: &str| {
        seen.arrivals
            .iter()
            .filter(|a| a.resource == resource)
            .count()
    };
    let limited = |resource: &str| {
        seen.count(resource, Answer::Primary) + seen.count(resource, Answer::Secondary)
    };
    let mut verdict = Verdict::default();
    for (resource, tally, n) in [(CORE, &reads, READS), (SEARCH, &searches, SEARCHES)] {
        let name = resource.name;
        let windows = seen.windows.get(name).cloned().unwrap_or_default();
        let per_window: Vec<String> = windows.iter().map(|w| w.used.to_string()).collect();
        println!(
            "  {name:<6}  the server saw {} requests, {} rate-limited; per window: {}; tasks got \
             back {}",
            count(name),
            limited(name),
            per_window.join(", "),
            tally.line()
        );
        verdict.check(
            tally.with(200) == n as usize,
            format!("{name}: {}/{n} got their 200", tally.with(200)),
        );
        // The least time: each window's quota at its opening, for a client
        // that knows the server's clock to the millisecond. GitHub states
        // its resets and `Date` in whole seconds: a client that never sends
        // early may open each later window up to a second late.
        let first_window = seen.first_window(name).unwrap_or_default();
        let exact = ideal(&resource, None, first_window, n);
        let late = Duration::from_secs(u64::from(n.div_ceil(resource.quota) - 1));
        let took = seen.finished(name).unwrap_or(Duration::MAX);
        println!(
            "          first request to last 200: {}; ideal {} knowing the server's clock to \
             the ms, {} in GitHub's whole seconds",
            secs(took),
            secs(exact),
            secs(exact + late)
        );
        verdict.within(
            &format!("{name}: first request to last 200 (ideal in whole seconds)"),
            took,
            exact + late,
            SLACK,
        );
    }
    println!(
        "  {} requests in all; {} sent before the time their last rate-limit answer named",
        seen.arrivals.len(),
        seen.premature()
    );
    verdict.check(
        seen.premature() == 0,
        format!("{} requests before the server's time", seen.premature()),
    );
    let last = seen.arrivals.iter().map(|a| a.at).max();
    let first = seen.arrivals.iter().map(|a| a.at).min();
    if let (Some(first), Some(last)) = (first, last) {
        println!("  all done in {} on the server's clock", secs(last - first));
    }
    verdict.exit()
}

/// Sends `GET api + path` for each `(task, path)`, [`IN_FLIGHT`] at a
/// time, and counts what came back.
async fn run(client: &ClientWithMiddleware, api: &str, paths: Vec<(u32, String)>) -> Tally {
    let results = futures_util::stream::iter(paths)
        .map(|(task, path)| {
            client
                .get(format!("{api}{path}"))
                // Your token: .bearer_auth(std::env::var("GITHUB_TOKEN")?)
                .header("accept", "application/vnd.github+json")
                .header("x-github-api-version", "2022-11-28")
                // The embedded server's name for the task (it counts a
                // task's sends before the time it was told); GitHub needs
                // none.
                .header("x-task", task)
                .send()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let mut tally = Tally::default();
    for result in &results {
        tally.add(result);
    }
    tally
}
