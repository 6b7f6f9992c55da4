//! Anthropic as Anthropic documents it (`server/anthropic.rs`: buckets of
//! requests, input tokens and output tokens, continuously refilled at
//! their limit per minute; `-reset` the time a bucket is full again; token
//! `remaining` rounded to the nearest thousand), under
//! `Policy::anthropic()`. A minute is scaled to 6 s.
//!
//! The workload: 300 messages, 64 in flight, each a keyed POST with its
//! input tokens and `max_tokens` (256) as a real client knows them before
//! the send (the server reads them from headers, as the API counts them
//! from the body), and the output it will produce. Every count and time
//! is the server's; the ideal is the documented limits' best completion
//! (each message sent as soon as every bucket holds what it counts).
//!
//! These tests take 15 to 25 s each: their names start with `anthropic::`.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest_backpressure::{Cost, IdempotencyKey, Policy, Quota};

use crate::common::client;
use crate::server::anthropic::{AnthropicConfig, AnthropicState, MESSAGES, messages};
use crate::server::wire::JudgedServer;

const MINUTE: Duration = Duration::from_secs(6);
const N: usize = 300;
const IN_FLIGHT: usize = 64;

/// Tier-like limits per (scaled) minute: input tokens bind.
fn config() -> AnthropicConfig {
    AnthropicConfig::new(MINUTE, 1_000, 80_000, 16_000)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Declares {
    /// `Cost::tokens(input, max_tokens)` on each message.
    Cost,
    /// Nothing.
    Nothing,
    /// The documented request and input-token quotas on the policy.
    Quotas,
}

/// Sends the batch to a server of `c`; each task's status (0: an
/// error) and what the server counted.
async fn batch_to(c: AnthropicConfig, declares: Declares) -> (Vec<u16>, AnthropicState) {
    let server = JudgedServer::start(AnthropicState::new(c)).await;
    let mut policy = Policy::anthropic();
    if declares == Declares::Quotas {
        policy = policy
            .quota(
                &server.uri,
                Quota::new(c.requests as u32, MINUTE).refilled(),
            )
            .quota(
                &server.uri,
                Quota::new(c.input_tokens as u32, MINUTE).units().refilled(),
            );
    }
    let client = client(policy);
    let statuses = futures_util::stream::iter(messages(0x5eed_a17c, N).into_iter().enumerate())
        .map(|(i, m)| {
            let (client, url) = (client.clone(), format!("{}{MESSAGES}", server.uri));
            async move {
                let mut request = client
                    .post(url)
                    .header("x-task", i.to_string())
                    .header("x-input-tokens", m.input.to_string())
                    .header("x-max-tokens", m.max_tokens.to_string())
                    .header("x-output-tokens", m.output.to_string())
                    .body(r#"{"model":"m","max_tokens":256,"messages":[]}"#)
                    .with_extension(IdempotencyKey::new(format!("msg-{i}")));
                if declares == Declares::Cost {
                    request = request.with_extension(Cost::tokens(m.input, m.max_tokens));
                }
                match request.send().await {
                    Ok(r) => r.status().as_u16(),
                    Err(e) => {
                        eprintln!("message {i}: {e}");
                        0
                    }
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<u16>>()
        .await;
    (statuses, server.finish())
}

/// Runs the batch, prints its figures, and returns span / ideal.
async fn figure(declares: Declares) -> f64 {
    figure_of(config(), declares).await
}

/// [`figure`] against a server of `c`.
async fn figure_of(c: AnthropicConfig, declares: Declares) -> f64 {
    let ideal = c.ideal(&messages(0x5eed_a17c, N));
    let (statuses, seen) = batch_to(c, declares).await;
    let span = seen.span().unwrap_or_default();
    let ratio = span.as_secs_f64() / ideal.as_secs_f64();
    println!(
        "anthropic {declares:?}: {}/{N} ok, {} requests, {} × 429, {} early; {:.2} s, ideal {:.2} s: ×{ratio:.2}",
        statuses.iter().filter(|&&s| s == 200).count(),
        seen.log.len(),
        seen.rejected(),
        seen.premature(),
        span.as_secs_f64(),
        ideal.as_secs_f64(),
    );
    let rejected: Vec<String> = seen
        .log
        .iter()
        .filter(|a| a.status == 429)
        .map(|a| format!("{:.2}", a.at.as_secs_f64()))
        .collect();
    if !rejected.is_empty() {
        println!("  429s at (s): {}", rejected.join(" "));
    }
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert_eq!(seen.premature(), 0, "a send before the server's time");
    ratio
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_cost_declared_within_a_tenth_of_the_ideal() {
    let ratio = figure(Declares::Cost).await;
    assert!(ratio <= 1.10, "×{ratio:.2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nothing_declared_within_a_quarter_of_the_ideal() {
    let ratio = figure(Declares::Nothing).await;
    assert!(ratio <= 1.25, "×{ratio:.2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_quotas_are_never_slower_than_none() {
    let ratio = figure(Declares::Quotas).await;
    // Never slower than declaring nothing may be (its bound).
    assert!(ratio <= 1.25, "×{ratio:.2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resets_in_whole_seconds_and_exact_counts() {
    // The docs allow both: an RFC 3339 reset without a fraction (rounded
    // up here: up to a second late), and counts that happen to be exact.
    let c = AnthropicConfig {
        reset_millis: false,
        round: 1,
        ..config()
    };
    let ratio = figure_of(c, Declares::Cost).await;
    assert!(ratio <= 1.10, "×{ratio:.2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_tokens_bind() {
    // 12,000 output tokens a minute: each message needs its `max_tokens`
    // (256) free to start, and uses less (148 on average).
    let c = AnthropicConfig {
        output_tokens: 12_000,
        ..config()
    };
    let ratio = figure_of(c, Declares::Cost).await;
    assert!(ratio <= 1.10, "×{ratio:.2}");
}
