//! Anthropic's Messages API with `Policy::anthropic()`: a batch of
//! messages sent 64 at a time, each declaring its cost.
//!
//! ```text
//! cargo run --example anthropic
//! ```
//!
//! Anthropic limits requests, input tokens and output tokens per minute,
//! each as a bucket "continuously replenished" at its limit per minute;
//! every answer states them
//! (`anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}`),
//! each `-reset` the time its bucket is *full* again, token `remaining`
//! rounded to the nearest thousand; past a limit, `429` with
//! `retry-after`. The preset reads those buckets as refilling
//! progressively, and each message's `Cost::tokens(input, max_tokens)`
//! spends its input tokens from the input bucket and reserves its
//! `max_tokens` from the output bucket before it is sent, both reconciled
//! from the answers (the unused output comes back): the batch goes out as
//! fast as the tokens come back, and the server refuses (almost) nothing.
//!
//! The API here is an embedded server on 127.0.0.1 that limits as
//! Anthropic's "Rate limits" page documents
//! (`tests/support/server/anthropic.rs`), a minute scaled to 6 s: 1,000
//! requests, 80,000 input tokens and 16,000 output tokens per (scaled)
//! minute, the input tokens binding. Against Anthropic, the only change is
//! the base URL (and your API key). The example prints what the server saw
//! and exits non-zero if it breaks the contract: a send before the
//! `retry-after` a `429` named, a message that did not get its `200`, or
//! a batch far longer than the buckets allow.

use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{Cost, IdempotencyKey, Policy, RetryAfterMiddleware};
use reqwest_middleware::ClientBuilder;

/// The test servers (shared with the tests and the benches); this example
/// uses the Anthropic-like one.
#[path = "../tests/support/server.rs"]
mod server;
/// The examples' tally of outcomes and contract checks.
#[path = "vendors/verdict.rs"]
mod verdict;

use server::anthropic::{AnthropicConfig, AnthropicState, Message, messages};
use server::wire::JudgedServer;
use verdict::{Tally, Verdict, secs};

/// A minute, scaled down.
const MINUTE: Duration = Duration::from_secs(6);
/// Messages in the batch: input 300 to 1,500 tokens each, `max_tokens`
/// 256.
const MESSAGES: usize = 150;
/// Requests in flight at once. More than the buckets admit is fine: the
/// middleware holds the rest; this only bounds the sockets.
const IN_FLIGHT: usize = 64;
/// How far past its ideal the last `200` may come before the run counts
/// as broken (the tests assert 1.10×).
const SLACK: f64 = 1.25;

#[tokio::main]
async fn main() -> ExitCode {
    let limits = AnthropicConfig::new(MINUTE, 1_000, 80_000, 16_000);
    let anthropic = JudgedServer::start(AnthropicState::new(limits)).await;
    // Against Anthropic: "https://api.anthropic.com/v1/messages".
    let url = format!("{}{}", anthropic.uri, server::anthropic::MESSAGES);

    // The whole setup: Anthropic's preset, the rest of the policy default.
    // The limits are not configured: the answers state them. `no_proxy`
    // only because the server is on loopback.
    let http = match reqwest::Client::builder().no_proxy().build() {
        Ok(http) => http,
        Err(e) => {
            eprintln!("cannot build the HTTP client: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = ClientBuilder::new(http)
        .with(RetryAfterMiddleware::new(Policy::anthropic()))
        .build();

    let batch: Vec<Message> = messages(0x5eed_a17c, MESSAGES);
    println!(
        "Anthropic: {MESSAGES} messages ({} input tokens, max_tokens 256 each), {IN_FLIGHT} in \
         flight, against {} requests, {} input and {} output tokens per {} s (a scaled minute), \
         Policy::anthropic() with Cost::tokens on each",
        batch.iter().map(|m| m.input).sum::<u64>(),
        limits.requests,
        limits.input_tokens,
        limits.output_tokens,
        MINUTE.as_secs()
    );
    let results = futures_util::stream::iter(batch.iter().enumerate())
        .map(|(i, m)| {
            // Count the prompt's tokens with Anthropic's token-counting
            // endpoint or your own estimate, rounded up.
            let body = format!(
                r#"{{"model":"claude-sonnet-4-5","max_tokens":{},"messages":[{{"role":"user","content":"Summarise document {i}."}}]}}"#,
                m.max_tokens
            );
            client
                .post(&url)
                // Your key: .header("x-api-key", std::env::var("ANTHROPIC_API_KEY")?)
                .header("anthropic-version", "2023-06-01")
                .header("content-type", "application/json")
                // The embedded server reads what a real API counts from
                // the body (and the output it will "produce") from these,
                // and the task's name from `x-task`.
                .header("x-input-tokens", m.input)
                .header("x-max-tokens", m.max_tokens)
                .header("x-output-tokens", m.output)
                .header("x-task", i)
                .body(body)
                // What the message counts: its input tokens, spent before
                // the send, and its `max_tokens`, reserved until the answer
                // says what it produced.
                .with_extension(Cost::tokens(m.input, m.max_tokens))
                // Anthropic defines no idempotency key: a local key lets
                // the middleware retry this POST after a `429` (a `429`
                // created nothing) and sends no header.
                .with_extension(IdempotencyKey::local(format!("batch-7-message-{i}")))
                .send()
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let seen = anthropic.finish();

    let mut tally = Tally::default();
    for result in &results {
        tally.add(result);
    }
    let best = limits.ideal(&batch);
    let took = seen.span().unwrap_or(Duration::MAX);
    println!(
        "  the server saw {} requests: {} 200s, {} 429s, {} sent before the retry-after a 429 \
         named",
        seen.log.len(),
        seen.oks(),
        seen.rejected(),
        seen.premature()
    );
    println!("  tasks got back {}", tally.line());
    println!(
        "  per second on the server's clock: {}",
        per_second(&seen).join(", ")
    );
    println!(
        "  first request to last 200: {}; ideal {} (each message as soon as every bucket holds \
         what it counts)",
        secs(took),
        secs(best)
    );

    let mut verdict = Verdict::default();
    verdict.check(
        tally.with(200) == MESSAGES,
        format!("{}/{MESSAGES} messages got their 200", tally.with(200)),
    );
    verdict.check(
        seen.premature() == 0,
        format!(
            "{} sends before the retry-after a 429 named",
            seen.premature()
        ),
    );
    verdict.within("first request to last 200", took, best, SLACK);
    verdict.exit()
}

/// Requests the server saw in each second from its first.
fn per_second(seen: &AnthropicState) -> Vec<String> {
    let mut counts: Vec<usize> = Vec::new();
    for a in &seen.log {
        let k = usize::try_from(a.at.as_secs()).unwrap_or(usize::MAX);
        if counts.len() <= k {
            counts.resize(k + 1, 0);
        }
        counts[k] += 1;
    }
    counts.iter().map(usize::to_string).collect()
}
