//! Discord's HTTP API with `Policy::discord()`: a bot posting messages to
//! several channels while it reads guilds, under Discord's global limit.
//!
//! ```text
//! cargo run --example discord
//! ```
//!
//! Discord limits each route's bucket per channel, guild or webhook (its
//! major parameter) and states it on every answer (`X-RateLimit-Limit`,
//! `-Remaining`, `-Reset-After`, `-Bucket`); every bot is also held to 50
//! requests a second over all routes (the global limit), whose `429` says
//! `X-RateLimit-Global: true`. The preset keys each bucket with its major
//! parameter, as discord.js and twilight do, sends one request of a route
//! it has not heard from before the rest, holds each bucket until its
//! reset and the origin to the global 50 a second: the bot's messages go
//! out at every channel's pace, and the server refuses (almost) nothing.
//!
//! The API here is an embedded server on 127.0.0.1 that limits as
//! Discord's "Rate Limits" page documents (`tests/support/server/discord.rs`),
//! with the buckets' windows scaled down 4× (5 messages per 1.25 s per
//! channel; Discord: per 5 s) and the global limit as documented (50 a
//! second). Against Discord, the only change is the base URL (and your bot
//! token). The example prints what the server saw and exits non-zero if
//! it breaks the contract: a request before the time a `429` named, a
//! `429` from a bucket whose limit the server had stated, a message or
//! read that did not get its `200`, or a run far longer than the buckets
//! allow.

use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use reqwest_backpressure::{IdempotencyKey, Policy, RetryAfterMiddleware};
use reqwest_middleware::ClientBuilder;

/// The test servers (shared with the tests and the benches); this example
/// uses the Discord-like one.
#[path = "../tests/support/server.rs"]
mod server;
/// The examples' tally of outcomes and contract checks.
#[path = "vendors/verdict.rs"]
mod verdict;

use server::discord::{Config, DiscordState, Kind, ideal};
use server::vendor_loads::discord::{LIMIT, READS, WINDOW, buckets, channel, guild, routes};
use server::wire::JudgedServer;
use verdict::{Tally, Verdict, secs};

/// Channels the bot posts to.
const CHANNELS: u32 = 5;
/// Messages, round the channels: 20 a channel, four windows each.
const MESSAGES: u32 = 100;
/// Requests in flight at once. More than the buckets admit is fine: the
/// middleware holds the rest; this only bounds the sockets.
const IN_FLIGHT: usize = 64;
/// How far past its ideal the last `200` may come before the run counts
/// as broken (the tests assert 1.15×; this leaves a loaded machine room).
const SLACK: f64 = 1.25;

#[tokio::main]
async fn main() -> ExitCode {
    let discord = JudgedServer::start(DiscordState::new(Config::new(routes(WINDOW)))).await;
    // Against Discord: "https://discord.com/api/v10".
    let api = discord.uri.clone();

    // The whole setup: Discord's preset, the rest of the policy default.
    // `no_proxy` only because the server is on loopback.
    let http = match reqwest::Client::builder().no_proxy().build() {
        Ok(http) => http,
        Err(e) => {
            eprintln!("cannot build the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(Policy::discord()))
        .build();

    println!(
        "Discord: {MESSAGES} messages round {CHANNELS} channels and {READS} guild reads at once \
         (each channel and guild {LIMIT} per {} s, global 50 a second), Policy::discord()",
        WINDOW.as_secs_f64()
    );
    let messages = (0..MESSAGES).map(|i| {
        let path = format!("/channels/{}/messages", channel(i % CHANNELS));
        (i, Method::POST, path)
    });
    let reads = (0..READS).map(|i| (MESSAGES + i, Method::GET, format!("/guilds/{}", guild(i))));
    let results = futures_util::stream::iter(messages.chain(reads))
        .map(|(task, method, path)| {
            let request = client
                .request(method.clone(), format!("{api}{path}"))
                // Your token: .header("authorization", format!("Bot {token}"))
                // The embedded server's name for the task (it counts a
                // task's sends before the time it was told); Discord needs
                // none.
                .header("x-task", task);
            let request = if method == Method::POST {
                // Discord's own duplicate check: a message with a nonce and
                // `enforce_nonce` is created once. That makes a retry safe;
                // a local key tells the middleware so (it retries a POST
                // after a `429` only with a key) and sends no header, which
                // Discord would ignore.
                let nonce = format!("build-{task}");
                request
                    .header("content-type", "application/json")
                    .body(format!(
                        r#"{{"content":"build {task} passed","nonce":"{nonce}","enforce_nonce":true}}"#
                    ))
                    .with_extension(IdempotencyKey::local(nonce))
            } else {
                request
            };
            request.send()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let seen = discord.finish();

    let mut tally = Tally::default();
    for result in &results {
        tally.add(result);
    }
    let best = ideal(&buckets(CHANNELS, MESSAGES, WINDOW), seen.config.global);
    let took = seen.finished().unwrap_or(Duration::MAX);
    println!(
        "  the server saw {} requests: {} bucket 429s ({} on a bucket that had answered before), \
         {} global 429s, {} arrivals inside a global wait",
        seen.arrivals.len(),
        seen.count(Kind::User),
        seen.known_bucket_429s(),
        seen.count(Kind::Global),
        seen.in_global_wait(),
    );
    println!("  tasks got back {}", tally.line());
    println!(
        "  per second on the server's clock (global limit 50): {}",
        per_second(&seen).join(", ")
    );
    println!(
        "  first request to last 200: {}; ideal {} (every bucket and the global limit full)",
        secs(took),
        secs(best)
    );

    let total = (MESSAGES + READS) as usize;
    let mut verdict = Verdict::default();
    verdict.check(
        tally.with(200) == total,
        format!("{}/{total} got their 200", tally.with(200)),
    );
    verdict.check(
        seen.premature() == 0,
        format!(
            "{} requests before the time their 429 named",
            seen.premature()
        ),
    );
    verdict.check(
        seen.known_bucket_429s() == 0,
        format!(
            "{} 429s on a bucket whose limit the server had stated",
            seen.known_bucket_429s()
        ),
    );
    verdict.within("first request to last 200", took, best, SLACK);
    verdict.exit()
}

/// Requests the server saw in each second from its first.
fn per_second(seen: &DiscordState) -> Vec<String> {
    let Some(first) = seen.arrivals.first().map(|a| a.at) else {
        return Vec::new();
    };
    let mut counts: Vec<usize> = Vec::new();
    for a in &seen.arrivals {
        let k = usize::try_from(a.at.duration_since(first).as_secs()).unwrap_or(usize::MAX);
        if counts.len() <= k {
            counts.resize(k + 1, 0);
        }
        counts[k] += 1;
    }
    counts.iter().map(usize::to_string).collect()
}
